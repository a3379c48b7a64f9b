//! Observability set-up: logging (tracing, to stderr so stdout stays clean for `--json`
//! output and MCP over stdio), the CLI's progress bars (stderr, only on a terminal) and
//! the process-wide Prometheus recorder behind `/metrics`.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tracing_subscriber::EnvFilter;

use crate::config::LogSettings;

/// Install the global subscriber; `RUST_LOG` overrides `log.level`.
pub fn init(settings: &LogSettings) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(&settings.level));
    use std::io::IsTerminal;
    // Colours only for a person at a terminal, never in files, pipes or MCP clients' logs.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let _ = if settings.format == "json" {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}

/// A progress bar of `total` steps on stderr, or a hidden one when stderr is not a
/// terminal (pipes, files and `--json` consumers see no drawing).
pub fn progress(total: u64, what: &str) -> indicatif::ProgressBar {
    if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(total);
    bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{msg:>12} [{bar:30}] {pos}/{len} ({per_sec}, {eta})",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(what.to_string());
    bar
}

/// A spinner on stderr saying `what`, or a hidden one when stderr is not a terminal.
pub fn spinner(what: &str) -> indicatif::ProgressBar {
    if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar.set_message(what.to_string());
    bar
}

/// The process-wide Prometheus recorder (a recorder can be installed once per process).
pub fn metrics_handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets(&[
                    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                    10.0,
                ])
                .expect("static buckets are valid")
                .build_recorder();
            let handle = recorder.handle();
            // Another recorder may already be installed (e.g. by an embedding program); then we render an empty one.
            let _ = metrics::set_global_recorder(recorder);
            handle
        })
        .clone()
}

/// One sample of a metric that belongs to one server rather than to the process: the
/// process's recorder is shared by every runtime in it (a program embedding two, the
/// integration tests), so a value one server sets there another would overwrite.
/// `/metrics` renders these from the server's own state on each request instead.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerSample {
    /// Metric name (`mnemos_mcp_sessions`).
    pub name: &'static str,
    /// Prometheus type: `gauge` or `counter`.
    pub kind: &'static str,
    /// Label pairs, in order.
    pub labels: Vec<(&'static str, String)>,
    /// The value.
    pub value: f64,
}

impl ServerSample {
    /// A gauge sample.
    pub fn gauge(name: &'static str, labels: Vec<(&'static str, String)>, value: f64) -> Self {
        Self {
            name,
            kind: "gauge",
            labels,
            value,
        }
    }

    /// A counter sample.
    pub fn counter(name: &'static str, labels: Vec<(&'static str, String)>, value: f64) -> Self {
        Self {
            name,
            kind: "counter",
            labels,
            value,
        }
    }
}

/// `samples` in the Prometheus text format, each metric's samples together under one
/// `# TYPE` line (in the order each name first appears), label values escaped.
pub fn render_server_samples(samples: &[ServerSample]) -> String {
    let mut names: Vec<&'static str> = Vec::new();
    for sample in samples {
        if !names.contains(&sample.name) {
            names.push(sample.name);
        }
    }
    let mut out = String::new();
    for name in names {
        let mut family = samples.iter().filter(|s| s.name == name).peekable();
        let Some(first) = family.peek() else {
            continue;
        };
        out.push_str(&format!("# TYPE {name} {}\n", first.kind));
        for sample in family {
            out.push_str(name);
            if !sample.labels.is_empty() {
                let labels: Vec<String> = sample
                    .labels
                    .iter()
                    .map(|(key, value)| format!("{key}=\"{}\"", escape_label(value)))
                    .collect();
                out.push_str(&format!("{{{}}}", labels.join(",")));
            }
            out.push_str(&format!(" {}\n", sample.value));
        }
    }
    out
}

/// A label value as the text format needs it: backslash, quote and newline escaped.
fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_samples_are_grouped_by_name_typed_once_and_escaped() {
        let samples = [
            ServerSample::gauge("mnemos_mcp_sessions", vec![], 3.0),
            ServerSample::counter(
                "mnemos_entity_naming_total",
                vec![("outcome", "ok".into())],
                2.0,
            ),
            ServerSample::gauge(
                "mnemos_actor_restarts",
                vec![("actor", "a\"b\\c\nd".into())],
                0.5,
            ),
            ServerSample::counter(
                "mnemos_entity_naming_total",
                vec![("outcome", "timeout".into())],
                0.0,
            ),
        ];
        assert_eq!(
            render_server_samples(&samples),
            "# TYPE mnemos_mcp_sessions gauge\n\
             mnemos_mcp_sessions 3\n\
             # TYPE mnemos_entity_naming_total counter\n\
             mnemos_entity_naming_total{outcome=\"ok\"} 2\n\
             mnemos_entity_naming_total{outcome=\"timeout\"} 0\n\
             # TYPE mnemos_actor_restarts gauge\n\
             mnemos_actor_restarts{actor=\"a\\\"b\\\\c\\nd\"} 0.5\n"
        );
        assert_eq!(render_server_samples(&[]), "");
    }
}
