//! Logging set-up (tracing), to stderr so stdout stays clean for `--json` output.

use tracing_subscriber::EnvFilter;

use crate::config::LogSettings;

/// Install the global subscriber; `RUST_LOG` overrides `log.level`.
pub fn init(settings: &LogSettings) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(&settings.level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = if settings.format == "json" {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}
