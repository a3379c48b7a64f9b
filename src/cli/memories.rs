//! `remember`, `recall`, `list`, `forget`, `history`, `edit`, `prune`, `clear`: the
//! memory commands over the contract's tools and resources.

use mnemos::auth::Caller;
use mnemos::contract::wire::{
    AgentParam, ForgetBody, ForgetResponse, HistoryBody, HistoryResponse, ListParams, ListResponse,
    MemoryView, PatchBody, RecallBody, RecallResponse, RememberBody, RememberResponse,
};
use mnemos::contract::{memories, tools};
use mnemos_actors::Runtime;

use super::{memory_line, print, user_error};

/// `mnemos remember`: the `remember` tool.
pub(crate) async fn remember(
    runtime: &Runtime,
    caller: &Caller,
    body: RememberBody,
    json: bool,
) -> anyhow::Result<()> {
    let response = tools::remember(runtime, caller, body)
        .await
        .map_err(user_error)?;
    print(json, &response, |r: &RememberResponse| {
        format!(
            "remembered {} as {} ({})",
            r.memory.id, r.routing.memory_type, r.routing.reason
        )
    });
    Ok(())
}

/// `mnemos recall`: the `recall` tool with a result limit.
pub(crate) async fn recall(
    runtime: &Runtime,
    caller: &Caller,
    agent_id: String,
    query: String,
    limit: usize,
    as_of: Option<String>,
    json: bool,
) -> anyhow::Result<()> {
    let body = RecallBody {
        agent_id: Some(agent_id),
        query,
        types: None,
        limit: Some(limit),
        time_query: None,
        now: None,
        session_id: None,
        tags: None,
        include_shared: None,
        project_id: None,
        debug: None,
        min_score: None,
        as_of,
    };
    let response = tools::recall(runtime, caller, body)
        .await
        .map_err(user_error)?;
    print(json, &response, |r: &RecallResponse| {
        let mut out: Vec<String> = r
            .results
            .iter()
            .map(|h| {
                format!(
                    "{:.3}  {}  ({})",
                    h.score,
                    memory_line(&h.memory),
                    h.matched_by.join("+")
                )
            })
            .collect();
        for fact in r.facts.iter().flatten() {
            out.push(format!(
                "held: {} {} {} (from {}{})",
                fact.subject,
                fact.attribute,
                fact.value,
                fact.valid_from.format("%Y-%m-%d"),
                fact.valid_to
                    .map(|to| format!(" to {}", to.format("%Y-%m-%d")))
                    .unwrap_or_default()
            ));
        }
        out.push(format!(
            "{} results in {:.2} ms",
            r.results.len(),
            r.took_ms
        ));
        out.join("\n")
    });
    Ok(())
}

/// `mnemos list`: one page of `GET /v1/memories`.
pub(crate) async fn list(
    runtime: &Runtime,
    caller: &Caller,
    params: ListParams,
    json: bool,
) -> anyhow::Result<()> {
    let response = memories::list_memories(runtime, caller, params)
        .await
        .map_err(user_error)?;
    print(json, &response, |r: &ListResponse| {
        let mut out: Vec<String> = r.memories.iter().map(memory_line).collect();
        if let Some(next) = &r.next_cursor {
            out.push(format!("more: --cursor {next}"));
        }
        out.join("\n")
    });
    Ok(())
}

/// `mnemos forget`: the `forget` tool (by id, or the first 10 memories a query names), each with why.
pub(crate) async fn forget(
    runtime: &Runtime,
    caller: &Caller,
    body: ForgetBody,
    json: bool,
) -> anyhow::Result<()> {
    let response = tools::forget(runtime, caller, body)
        .await
        .map_err(user_error)?;
    // As a JSON value the keys print sorted, as this command always printed them.
    let value = serde_json::to_value(&response)?;
    print(json, &value, |_| {
        let r: &ForgetResponse = &response;
        let verb = if r.dry_run { "would forget" } else { "forgot" };
        let mut lines = vec![format!("{verb} {} memories", r.forgotten.len())];
        for found in &r.matches {
            lines.push(format!(
                "{}  {}\n    {}",
                found.id, found.content, found.why
            ));
        }
        lines.join("\n")
    });
    Ok(())
}

/// `mnemos history`: the `memory_history` tool.
pub(crate) async fn history(
    runtime: &Runtime,
    caller: &Caller,
    body: HistoryBody,
    json: bool,
) -> anyhow::Result<()> {
    let response = tools::memory_history(runtime, caller, body)
        .await
        .map_err(user_error)?;
    print(json, &response, |r: &HistoryResponse| {
        if r.versions.is_empty() {
            return "no earlier versions".to_string();
        }
        r.versions
            .iter()
            .map(|v| {
                format!(
                    "v{}  {}  {:<16} {}",
                    v.version,
                    v.archived_at.format("%Y-%m-%d %H:%M"),
                    v.reason,
                    v.content
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    });
    Ok(())
}

/// `mnemos edit`'s flags: what to change in a memory.
#[derive(clap::Args)]
pub(crate) struct EditArgs {
    /// The memory id.
    id: String,
    /// Owner.
    #[arg(long)]
    agent: String,
    /// New content (the memory is embedded again).
    #[arg(long)]
    content: Option<String>,
    /// New importance 0..1.
    #[arg(long)]
    importance: Option<f32>,
    /// New tags, comma-separated (replacing the old ones; an empty value clears them).
    #[arg(long, value_delimiter = ',')]
    tags: Option<Vec<String>>,
    /// New type (working, episodic, affective, semantic, procedural).
    #[arg(long = "type")]
    memory_type: Option<String>,
    /// New title.
    #[arg(long)]
    title: Option<String>,
}

/// `mnemos edit`: `PATCH /v1/memories/{id}` (the previous state stays in its history).
pub(crate) async fn edit(
    runtime: &Runtime,
    caller: &Caller,
    args: EditArgs,
    json: bool,
) -> anyhow::Result<()> {
    let body = PatchBody {
        content: args.content,
        title: args.title.map(Some),
        importance: args.importance,
        tags: args
            .tags
            .map(|tags| tags.into_iter().filter(|t| !t.is_empty()).collect()),
        status: None,
        shared: None,
        metadata: None,
        memory_type: args.memory_type,
    };
    let owner = AgentParam {
        agent_id: Some(args.agent),
    };
    let memory = memories::patch_memory(runtime, caller, args.id, owner, body)
        .await
        .map_err(user_error)?;
    print(json, &memory, |m: &MemoryView| {
        format!("edited (now version {}): {}", m.version, memory_line(m))
    });
    Ok(())
}

/// `mnemos prune`'s flags: whose memories, which, and what to do with them.
#[derive(clap::Args)]
pub(crate) struct PruneArgs {
    /// Only this agent's memories.
    #[arg(long, required_unless_present = "all", conflicts_with = "all")]
    agent: Option<String>,
    /// Every agent of the tenant.
    #[arg(long)]
    all: bool,
    /// Stored longer ago than this: `90d`, `12h`, `2w` (days by default).
    #[arg(long)]
    older_than: Option<String>,
    /// Importance below this (0..1).
    #[arg(long)]
    importance_below: Option<f32>,
    /// Only memories in this status (active, superseded, stale, archived).
    #[arg(long)]
    status: Option<String>,
    /// Only memories of this type.
    #[arg(long = "type")]
    memory_type: Option<String>,
    /// Delete them (with versions, embeddings and edges) instead of archiving them.
    #[arg(long)]
    delete: bool,
    /// Only list what would go.
    #[arg(long)]
    dry_run: bool,
}

/// `90d`, `12h`, `2w`, `30m` or a bare number of days as a duration; the error names
/// `--older-than`.
fn age(raw: &str) -> anyhow::Result<chrono::Duration> {
    let raw = raw.trim();
    let (number, unit) = raw
        .find(|c: char| !c.is_ascii_digit())
        .map_or((raw, "d"), |at| raw.split_at(at));
    let n: i64 = number.parse().map_err(|_| {
        anyhow::anyhow!(
            "invalid_argument (--older-than): {raw:?} is not an age such as 90d, 12h or 2w"
        )
    })?;
    Ok(match unit {
        "m" => chrono::Duration::minutes(n),
        "h" => chrono::Duration::hours(n),
        "d" => chrono::Duration::days(n),
        "w" => chrono::Duration::weeks(n),
        _ => {
            anyhow::bail!("invalid_argument (--older-than): unit {unit:?} is not one of m, h, d, w")
        }
    })
}

/// `mnemos prune`: archive (or delete) memories by age, importance, status and type.
pub(crate) async fn prune(
    runtime: &Runtime,
    caller: &Caller,
    args: PruneArgs,
    json: bool,
) -> anyhow::Result<()> {
    use mnemos::contract::lifecycle::{self, PruneAction, PruneCriteria, PruneReport};
    let criteria = PruneCriteria {
        older_than: args.older_than.as_deref().map(age).transpose()?,
        importance_below: args.importance_below,
        status: mnemos::contract::parse::memory_status("status", args.status.as_deref())
            .map_err(user_error)?,
        memory_type: mnemos::contract::parse::memory_type("type", args.memory_type.as_deref())
            .map_err(user_error)?,
    };
    let action = if args.delete {
        PruneAction::Delete
    } else {
        PruneAction::Archive
    };
    let agent = args.agent.filter(|_| !args.all);
    let report = lifecycle::prune(
        runtime,
        caller,
        agent.as_deref(),
        &criteria,
        action,
        args.dry_run,
    )
    .await
    .map_err(user_error)?;
    print(json, &report, |r: &PruneReport| {
        let verb = match (r.dry_run, r.action) {
            (true, PruneAction::Archive) => "would archive",
            (true, PruneAction::Delete) => "would delete",
            (false, PruneAction::Archive) => "archived",
            (false, PruneAction::Delete) => "deleted",
        };
        let mut out: Vec<String> = Vec::new();
        for agent in &r.agents {
            out.push(format!(
                "{verb} {} memories of {}",
                agent.memories.len(),
                agent.agent_id
            ));
            if r.dry_run {
                out.extend(agent.memories.iter().map(|id| format!("  {id}")));
            }
        }
        if out.is_empty() {
            out.push("nothing to prune".to_string());
        }
        out.join("\n")
    });
    Ok(())
}

/// `mnemos clear`'s flags: a session of an agent, an agent, or every agent.
#[derive(clap::Args)]
pub(crate) struct ClearArgs {
    /// The agent to clear (with --session: whose session).
    #[arg(long, required_unless_present = "all", conflicts_with = "all")]
    agent: Option<String>,
    /// Only this session of the agent: its memories, messages and working memory.
    #[arg(long, requires = "agent")]
    session: Option<String>,
    /// Every agent (of every tenant; with --as-tenant, of that tenant).
    #[arg(long)]
    all: bool,
    /// Do not ask for confirmation.
    #[arg(long)]
    yes: bool,
}

/// `mnemos clear`: delete a session, an agent (as `erase`), or everything.
pub(crate) async fn clear(
    services: &mnemos::app::Services,
    caller: &Caller,
    args: ClearArgs,
    json: bool,
) -> anyhow::Result<()> {
    use mnemos::contract::lifecycle::{self, ClearedSession};
    let runtime = &services.runtime;
    match (args.agent, args.session, args.all) {
        (Some(agent), Some(session), _) => {
            super::confirm(
                &format!("Delete session {session} of {agent} with its memories and messages"),
                args.yes,
            )?;
            let cleared = lifecycle::clear_session(runtime, caller, &agent, &session)
                .await
                .map_err(user_error)?;
            print(json, &cleared, |c: &ClearedSession| {
                format!(
                    "cleared session {} of {}: {} memories, {} messages",
                    c.session_id, c.agent_id, c.memories, c.messages
                )
            });
        }
        (Some(agent), None, _) => {
            super::confirm(&format!("Erase agent {agent} from every store"), args.yes)?;
            super::admin::erase(services, caller, Some(agent), None, json).await?;
        }
        (None, _, true) => {
            super::confirm("Erase every agent from every store", args.yes)?;
            let keys = services.record().keys();
            let erased = lifecycle::clear_everything(runtime, keys.as_ref(), caller)
                .await
                .map_err(user_error)?;
            print(json, &erased, |all| {
                let mut lines: Vec<String> = all.iter().map(super::admin::erase_summary).collect();
                lines.push(format!("{} agent(s) erased", all.len()));
                lines.join("\n")
            });
        }
        (None, _, false) => anyhow::bail!("name what to clear: --agent A [--session S], or --all"),
    }
    Ok(())
}
