//! The CLI's commands, one module per group, each calling the contract layer
//! (`mnemos::contract`) as REST does; what they share is here: output (`--json` or
//! text), errors naming the flag at fault, the operator caller, confirmation,
//! progress bars (on stderr, only when it is a terminal).

pub(crate) mod admin;
pub(crate) mod embedder;
pub(crate) mod kv;
pub(crate) mod memories;
pub(crate) mod projects;
pub(crate) mod sessions;
pub(crate) mod transfer;

use std::io::IsTerminal;

use mnemos::auth::{Caller, Surface};
use mnemos::contract::wire::MemoryView;
use mnemos_actors::model::TenantId;
use serde::Serialize;

/// Print `value` as pretty JSON with `--json`, else as the text `text` makes of it.
pub(crate) fn print<T: Serialize>(json: bool, value: &T, text: impl FnOnce(&T) -> String) {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(value).unwrap_or_default()
        );
    } else {
        println!("{}", text(value));
    }
}

/// One memory as a line of text output: id, type, status, time, content, tags.
pub(crate) fn memory_line(m: &MemoryView) -> String {
    let tags = if m.tags.is_empty() {
        String::new()
    } else {
        format!(" [{}]", m.tags.join(", "))
    };
    format!(
        "{}  {:<10} {:<9} {}  {}{}",
        m.id,
        m.memory_type,
        m.status,
        m.occurred_at.format("%Y-%m-%d %H:%M"),
        m.content,
        tags
    )
}

/// The CLI flag that carries a wire field, so an error names what the user typed.
pub(crate) fn flag_of(field: String) -> String {
    match field.as_str() {
        "type" => "--type".to_string(),
        "status" => "--status".to_string(),
        _ => field,
    }
}

/// A contract error as the CLI prints it: code, the flag at fault, the message.
pub(crate) fn user_error(e: mnemos_actors::MemoryError) -> anyhow::Error {
    match e.field.map(flag_of) {
        Some(field) => anyhow::anyhow!("{} ({}): {}", e.code.as_str(), field, e.message),
        None => anyhow::anyhow!("{}: {}", e.code.as_str(), e.message),
    }
}

/// The CLI's caller: the operator, in `--as-tenant` when given.
pub(crate) fn operator(tenant: Option<&str>) -> anyhow::Result<Caller> {
    let mut caller = Caller::operator(Surface::Cli);
    if let Some(raw) = tenant {
        let tenant = TenantId::parse(raw).map_err(user_error)?;
        caller.tenant = Caller::tenant_of(&tenant);
    }
    Ok(caller)
}

pub(crate) use mnemos::telemetry::{progress, spinner};

/// Ask the person at the terminal to confirm `what` (they type `yes`); without a
/// terminal, refuse and say to pass `--yes`.
pub(crate) fn confirm(what: &str, yes: bool) -> anyhow::Result<()> {
    if yes {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        anyhow::bail!("{what}: this cannot be undone; pass --yes to confirm without a terminal");
    }
    use std::io::Write;
    eprint!("{what}. This cannot be undone. Type yes to go on: ");
    std::io::stderr().flush()?;
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer)?;
    if answer.trim() != "yes" {
        anyhow::bail!("not confirmed; nothing was changed");
    }
    Ok(())
}
