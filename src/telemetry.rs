//! Logging set-up (tracing), to stderr so stdout stays clean for `--json` output.

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
