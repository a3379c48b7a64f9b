//! The `mnemos` binary: the service (`serve`) and a CLI over the same runtime.
//!
//! CLI commands other than `serve` open the data directory in-process (it is locked,
//! so they refuse to run beside a server on the same directory).

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use mnemos::app::{shutdown_signal, Application, Services};
use mnemos::auth::{Caller, Surface};
use mnemos::config::Settings;
use mnemos::contract::keys::{AdminListParams, CreateKeyBody, CreatedKeyResponse, KeysResponse};
use mnemos::contract::wire::{
    AgentBody, ForgetBody, ForgetResponse, HistoryBody, HistoryResponse, ListParams, ListResponse,
    MemoryView, RecallBody, RecallResponse, RememberBody, RememberResponse, RunView,
};
use mnemos::contract::{memories, tools};
use mnemos_actors::model::TenantId;
use mnemos_actors::Runtime;
use serde::Serialize;

// The command line (clap reads the `///` texts below as help, so they are the help).
#[derive(Parser)]
#[command(
    name = "mnemos",
    version,
    about = "A cognitive memory runtime for AI agents"
)]
struct Cli {
    /// Extra TOML file layered over config/default.toml and config/$MNEMOS_ENV.toml.
    #[arg(long, global = true, env = "MNEMOS_CONFIG")]
    config: Option<PathBuf>,
    /// Directory holding <MNEMOS_ENV>.toml overlays (default ./config).
    #[arg(long, global = true)]
    config_dir: Option<PathBuf>,
    /// Override data_dir.
    #[arg(long, global = true)]
    data_dir: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// Act in this tenant (the CLI is its operator); default: the tenant `default`.
    #[arg(long = "as-tenant", global = true)]
    as_tenant: Option<String>,
    // What to do.
    #[command(subcommand)]
    command: Command,
}

// The subcommands; each one's `///` is its help line.
#[derive(Subcommand)]
enum Command {
    /// Run the HTTP service.
    Serve,
    /// Serve MCP (Model Context Protocol) over stdin/stdout, for MCP clients that launch
    /// the server themselves. Logs go to stderr; stops when stdin closes.
    Mcp {
        /// The agent a tool call that names no agent_id acts as.
        #[arg(long)]
        agent: Option<String>,
    },
    /// Store a memory.
    Remember {
        /// Owner.
        #[arg(long)]
        agent: String,
        /// Memory type (working, episodic, affective, semantic, procedural).
        #[arg(long = "type")]
        memory_type: Option<String>,
        /// Importance 0..1.
        #[arg(long)]
        importance: Option<f32>,
        /// Comma-separated tags.
        #[arg(long, value_delimiter = ',')]
        tags: Vec<String>,
        /// Session id.
        #[arg(long)]
        session: Option<String>,
        /// The content.
        content: String,
    },
    /// Recall memories for a query.
    Recall {
        /// Owner.
        #[arg(long)]
        agent: String,
        /// Results wanted.
        #[arg(long, default_value_t = 10)]
        limit: usize,
        /// The query.
        query: String,
    },
    /// Browse memories, newest first.
    List {
        /// Owner.
        #[arg(long)]
        agent: String,
        /// Only this type.
        #[arg(long = "type")]
        memory_type: Option<String>,
        /// Only this status.
        #[arg(long)]
        status: Option<String>,
        /// Page size.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Cursor from a previous page.
        #[arg(long)]
        cursor: Option<String>,
    },
    /// Forget (archive) a memory by id, or memories matching a query.
    Forget {
        /// Owner.
        #[arg(long)]
        agent: String,
        /// A memory id.
        #[arg(long, conflicts_with = "query", required_unless_present = "query")]
        id: Option<String>,
        /// A keyword query.
        #[arg(long)]
        query: Option<String>,
        /// Only show what would be forgotten.
        #[arg(long)]
        dry_run: bool,
    },
    /// Version history of a memory.
    History {
        /// The memory id.
        id: String,
        /// Owner (checked when given).
        #[arg(long)]
        agent: Option<String>,
    },
    /// Run a sleep-cycle pass now: one agent, or every agent with --all.
    Consolidate {
        /// Owner.
        #[arg(long, required_unless_present = "all", conflicts_with = "all")]
        agent: Option<String>,
        /// Every agent that has memories.
        #[arg(long)]
        all: bool,
    },
    /// Archive idle sessions now (summaries tagged archive_summary; working memory cleared).
    Archive,
    /// Rebuild projections from SQL: the external ones (`graph.backend = "falkordb"`, …)
    /// and the in-process vector index.
    Reindex {
        /// Only this projection (`falkordb`, `vectors`); default every one.
        #[arg(long)]
        projection: Option<String>,
    },
    /// Apply database migrations and report the store's state.
    Migrate,
    /// Find the rows reads skip because a column cannot be decoded (an instant outside
    /// the years 1 to 9999 written by an older version, malformed JSON), and with
    /// --repair rewrite them (instants to the nearest one stored, JSON to empty).
    Doctor {
        /// Rewrite what is found (default: only report it).
        #[arg(long)]
        repair: bool,
    },
    /// Erase an agent (or with --tenant and no --agent, every agent of a tenant) from
    /// every store; prints what each store removed. Stop the server first (it holds the
    /// data directory), or use DELETE /v1/agents/{agent} on it.
    Erase {
        /// The agent to erase.
        #[arg(long)]
        agent: Option<String>,
        /// Erase every agent of this tenant and revoke its keys.
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Manage API keys (they work while a server runs on the same store).
    Keys {
        #[command(subcommand)]
        action: KeysAction,
    },
    /// The audit log: key changes, erasures, admin actions, authorization failures.
    Audit {
        /// Most entries.
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// Load synthetic memories and measure throughput, latency, restart time and memory.
    Bench(mnemos::bench::BenchArgs),
    /// Evaluate retrieval quality on a benchmark.
    Eval {
        #[command(subcommand)]
        suite: EvalSuite,
    },
}

// What `mnemos keys` does.
#[derive(Subcommand)]
enum KeysAction {
    /// Create a key and print it (the only time it is shown).
    Create {
        /// The tenant it acts in.
        #[arg(long, default_value = "default")]
        tenant: String,
        /// The one agent it acts as, or '*' for every agent of the tenant.
        #[arg(long)]
        agent: String,
        /// What it may do: read, write, admin (comma-separated).
        #[arg(long, value_delimiter = ',', default_value = "read,write")]
        scope: Vec<String>,
        /// What it is for.
        #[arg(long)]
        name: Option<String>,
        /// Days until it stops working (default: never).
        #[arg(long)]
        expires_in_days: Option<u32>,
    },
    /// List keys (never their secrets).
    List {
        /// Only this tenant's.
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Revoke a key by id: it stops working within seconds.
    Revoke {
        /// The key's id (the middle part of mnm_<id>_<secret>).
        id: String,
    },
}

// The benchmarks `mnemos eval` knows.
#[derive(Subcommand)]
enum EvalSuite {
    /// LoCoMo retrieval protocol (see shared/bench/README.md).
    Locomo(mnemos::eval::LocomoArgs),
}

/// Print `value` as pretty JSON with `--json`, else as the text `text` makes of it.
fn print<T: Serialize>(json: bool, value: &T, text: impl FnOnce(&T) -> String) {
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
fn memory_line(m: &MemoryView) -> String {
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
fn flag_of(field: String) -> String {
    match field.as_str() {
        "type" => "--type".to_string(),
        "status" => "--status".to_string(),
        _ => field,
    }
}

/// A contract error as the CLI prints it: code, the flag at fault, the message.
fn user_error(e: mnemos_actors::MemoryError) -> anyhow::Error {
    match e.field.map(flag_of) {
        Some(field) => anyhow::anyhow!("{} ({}): {}", e.code.as_str(), field, e.message),
        None => anyhow::anyhow!("{}: {}", e.code.as_str(), e.message),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let mut settings = Settings::load(cli.config_dir.as_deref(), cli.config.as_deref())?;
    if let Some(dir) = &cli.data_dir {
        settings.data_dir = dir.clone();
    }
    mnemos::telemetry::init(&settings.log);
    let json = cli.json;
    let caller = operator(cli.as_tenant.as_deref())?;
    match cli.command {
        Command::Serve => {
            let app = Application::build(settings).await?;
            app.run_until(shutdown_signal()).await?;
        }
        Command::Mcp { agent } => {
            let services = Services::open(&settings).await?;
            let roots = mnemos::context::ProjectRoots::new(settings.server.project_roots.clone());
            let served =
                mnemos::mcp::serve_stdio(services.runtime.clone(), roots, agent, shutdown_signal())
                    .await;
            services.close().await?;
            served?;
        }
        Command::Bench(args) => mnemos::bench::run(&settings, args).await?,
        Command::Eval {
            suite: EvalSuite::Locomo(args),
        } => mnemos::eval::run_locomo(&settings, args, json).await?,
        Command::Keys { action } => keys(&settings, &caller, action, json).await?,
        Command::Audit { limit } => audit(&settings, &caller, limit, json).await?,
        Command::Migrate => {
            let services = Services::open(&settings).await?;
            let count = services.runtime.count().await.map_err(user_error)?;
            let applied = match settings.storage.backend.as_str() {
                "postgres" => mnemos::store::postgres::MIGRATOR.iter().count(),
                _ => mnemos::store::sqlite::MIGRATOR.iter().count(),
            };
            print(
                json,
                &serde_json::json!({"data_dir": settings.data_dir, "migrations": applied, "memories": count}),
                |_| {
                    format!(
                        "{}: schema up to date ({applied} migrations), {count} memories",
                        settings.data_dir.display()
                    )
                },
            );
            services.close().await?;
        }
        command => {
            let services = Services::open(&settings).await?;
            let result = run_command(&services, &caller, command, json).await;
            services.close().await?;
            result?;
        }
    }
    Ok(())
}

/// Run one of the commands that work on an opened data directory.
async fn run_command(
    services: &Services,
    caller: &Caller,
    command: Command,
    json: bool,
) -> anyhow::Result<()> {
    let runtime = &services.runtime;
    match command {
        Command::Remember {
            agent,
            memory_type,
            importance,
            tags,
            session,
            content,
        } => {
            let body = RememberBody {
                agent_id: Some(agent),
                content,
                memory_type,
                title: None,
                importance,
                tags: Some(tags),
                session_id: session,
                project_id: None,
                occurred_at: None,
                shared: None,
                metadata: None,
                source: None,
                valence: None,
                arousal: None,
            };
            remember(runtime, caller, body, json).await
        }
        Command::Recall {
            agent,
            limit,
            query,
        } => recall(runtime, caller, agent, query, limit, json).await,
        Command::List {
            agent,
            memory_type,
            status,
            limit,
            cursor,
        } => {
            let params = ListParams {
                agent_id: Some(agent),
                memory_type,
                status,
                tag: None,
                limit: Some(limit),
                cursor,
                ..ListParams::default()
            };
            list(runtime, caller, params, json).await
        }
        Command::Forget {
            agent,
            id,
            query,
            dry_run,
        } => {
            if id.is_none() && query.is_none() {
                anyhow::bail!("give --id or --query");
            }
            let body = ForgetBody {
                agent_id: Some(agent),
                id,
                query,
                limit: None,
                dry_run: Some(dry_run),
            };
            forget(runtime, caller, body, json).await
        }
        Command::History { id, agent } => {
            let body = HistoryBody {
                id,
                agent_id: agent,
            };
            history(runtime, caller, body, json).await
        }
        Command::Consolidate { agent, all } => {
            let agent = agent.filter(|_| !all);
            consolidate(services, caller, agent, json).await
        }
        Command::Archive => archive(runtime, caller, json).await,
        Command::Erase { agent, tenant } => erase(services, caller, agent, tenant, json).await,
        Command::Reindex { projection } => reindex(runtime, projection, json).await,
        Command::Doctor { repair } => doctor(services, repair, json).await,
        Command::Serve
        | Command::Mcp { .. }
        | Command::Migrate
        | Command::Keys { .. }
        | Command::Audit { .. }
        | Command::Bench(_)
        | Command::Eval { .. } => {
            anyhow::bail!("handled before opening the data directory")
        }
    }
}

/// `mnemos erase --agent A | --tenant T`.
async fn erase(
    services: &Services,
    caller: &Caller,
    agent: Option<String>,
    tenant: Option<String>,
    json: bool,
) -> anyhow::Result<()> {
    let keys = services.record().keys();
    match (agent, tenant) {
        (Some(agent), tenant) => {
            // --tenant names the agent's tenant (as `--as-tenant` does).
            let mut caller = caller.clone();
            if let Some(raw) = tenant {
                let tenant = TenantId::parse(&raw).map_err(user_error)?;
                caller.tenant = Caller::tenant_of(&tenant);
            }
            let erased = mnemos::contract::erase::erase_agent(
                &services.runtime,
                keys.as_ref(),
                &caller,
                &agent,
            )
            .await
            .map_err(user_error)?;
            print(
                json,
                &erased,
                |e: &mnemos::contract::erase::EraseResponse| erase_summary(e),
            );
        }
        (None, Some(tenant)) => {
            let erased = mnemos::contract::erase::erase_tenant(
                &services.runtime,
                keys.as_ref(),
                caller,
                &tenant,
            )
            .await
            .map_err(user_error)?;
            print(
                json,
                &erased,
                |t: &mnemos::contract::erase::TenantEraseResponse| {
                    let mut lines: Vec<String> = t.agents.iter().map(erase_summary).collect();
                    lines.push(format!(
                        "tenant {}: {} agent(s) erased, {} key(s) revoked",
                        t.tenant,
                        t.agents.len(),
                        t.keys_revoked
                    ));
                    lines.join("\n")
                },
            );
        }
        (None, None) => {
            anyhow::bail!("name what to erase: --agent AGENT (and --tenant), or --tenant TENANT")
        }
    }
    Ok(())
}

/// One line per store of an agent's erasure.
fn erase_summary(e: &mnemos::contract::erase::EraseResponse) -> String {
    let r = &e.system_of_record;
    format!(
        "erased {}/{}: system of record: {} memories, {} versions, {} embeddings, {} edges, \
         {} sessions ({} messages), {} projects, {} runs, {} KV entries; vector index: {}; \
         working memory: {} items; projection deletes queued: {}",
        e.tenant,
        e.agent_id,
        r.memories,
        r.versions,
        r.embeddings,
        r.edges,
        r.sessions,
        r.session_messages,
        r.projects,
        r.runs,
        r.kv_entries,
        e.vector_index,
        e.working_memory,
        e.projection_deletes_queued
    )
}

/// `mnemos doctor [--repair]`: report (and repair) the rows reads skip.
async fn doctor(services: &Services, repair: bool, json: bool) -> anyhow::Result<()> {
    let record = services.record();
    if !repair {
        let found = record.find_unreadable().await.map_err(user_error)?;
        if json {
            println!("{}", serde_json::to_string_pretty(&found)?);
        } else if found.is_empty() {
            println!("every row reads back; nothing to repair");
        } else {
            for row in &found {
                println!("{} {}: {}", row.table, row.id, row.error);
            }
            println!(
                "{} unreadable value(s); `mnemos doctor --repair` rewrites them",
                found.len()
            );
        }
        return Ok(());
    }
    let repaired = record
        .repair_unreadable(services.runtime.now())
        .await
        .map_err(user_error)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&repaired)?);
    } else {
        for r in &repaired {
            println!(
                "{} {} {}: {:?} -> {}",
                r.table, r.id, r.column, r.was, r.now
            );
        }
        println!("{} value(s) repaired", repaired.len());
    }
    Ok(())
}

/// `mnemos remember`: the `remember` tool.
async fn remember(
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
async fn recall(
    runtime: &Runtime,
    caller: &Caller,
    agent_id: String,
    query: String,
    limit: usize,
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
async fn list(
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

/// `mnemos forget`: the `forget` tool (by id, or the first 10 matches of a query).
async fn forget(
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
        format!(
            "{verb} {} memories{}{}",
            r.forgotten.len(),
            if r.forgotten.is_empty() { "" } else { ": " },
            r.forgotten.join(", ")
        )
    });
    Ok(())
}

/// `mnemos history`: the `memory_history` tool.
async fn history(
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

/// `mnemos consolidate`: the `consolidate` tool for one agent, or every agent with memories.
async fn consolidate(
    services: &Services,
    caller: &Caller,
    agent_id: Option<String>,
    json: bool,
) -> anyhow::Result<()> {
    let tenant = caller.tenant.as_ref().map(|t| t.as_str());
    let agents: Vec<String> = match agent_id {
        Some(agent_id) => vec![agent_id],
        None => services
            .store
            .agents()
            .await
            .map_err(user_error)?
            .into_iter()
            .filter(|a| a.tenant() == tenant)
            .map(|a| a.local().to_string())
            .collect(),
    };
    let mut runs = Vec::new();
    for agent_id in agents {
        let body = AgentBody {
            agent_id: Some(agent_id),
        };
        let run = tools::consolidate(&services.runtime, caller, body, "cli")
            .await
            .map_err(user_error)?;
        runs.push(run);
    }
    print(json, &runs, |runs: &Vec<RunView>| {
        runs.iter()
            .map(|r| {
                format!(
                    "sleep cycle {} for {}: {} candidates, {} consolidated into {} semantic + {} procedural, {} forgotten",
                    r.id,
                    r.agent_id.as_deref().unwrap_or("-"),
                    r.processed,
                    r.consolidated,
                    r.new_semantic,
                    r.new_procedural,
                    r.forgotten
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    });
    Ok(())
}

/// `mnemos archive`: archive idle sessions now.
async fn archive(runtime: &Runtime, caller: &Caller, json: bool) -> anyhow::Result<()> {
    let run = memories::archive(runtime, caller, "cli")
        .await
        .map_err(user_error)?;
    print(json, &run, |r: &RunView| {
        format!(
            "archival {}: {} idle sessions summarised",
            r.id, r.processed
        )
    });
    Ok(())
}

/// `mnemos reindex`: rebuild the vector index and/or the external projections from SQL.
async fn reindex(runtime: &Runtime, projection: Option<String>, json: bool) -> anyhow::Result<()> {
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    let mut done: Vec<(String, u64)> = Vec::new();
    if projection.as_deref().is_none_or(|p| p == "vectors") {
        bar.set_message("rebuilding the vector index from stored embeddings…");
        let vectors = runtime.reindex().await.map_err(user_error)?;
        done.push(("vectors".into(), vectors as u64));
    }
    if projection.as_deref() != Some("vectors") {
        bar.set_message("rebuilding external projections from SQL…");
        done.extend(
            runtime
                .rebuild_projections(projection.clone())
                .await
                .map_err(user_error)?,
        );
    }
    bar.finish_and_clear();
    let report: Vec<serde_json::Value> = done
        .iter()
        .map(|(name, n)| serde_json::json!({"projection": name, "covered": n}))
        .collect();
    print(json, &report, |r: &Vec<serde_json::Value>| {
        r.iter()
            .map(|p| {
                format!(
                    "{}: rebuilt ({})",
                    p["projection"].as_str().unwrap_or(""),
                    p["covered"]
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    });
    Ok(())
}

/// The CLI's caller: the operator, in `--as-tenant` when given.
fn operator(tenant: Option<&str>) -> anyhow::Result<Caller> {
    let mut caller = Caller::operator(Surface::Cli);
    if let Some(raw) = tenant {
        let tenant = TenantId::parse(raw).map_err(user_error)?;
        caller.tenant = Caller::tenant_of(&tenant);
    }
    Ok(caller)
}

/// `mnemos keys create|list|revoke`: on the system of record alone (no runtime and no
/// data-directory lock), so it works beside a running server.
async fn keys(
    settings: &Settings,
    caller: &Caller,
    action: KeysAction,
    json: bool,
) -> anyhow::Result<()> {
    let record = mnemos::store::SystemOfRecord::open(settings)
        .await
        .map_err(user_error)?;
    let store = record.keys();
    let now = chrono::Utc::now();
    let result = match action {
        KeysAction::Create {
            tenant,
            agent,
            scope,
            name,
            expires_in_days,
        } => {
            let body = CreateKeyBody {
                name,
                tenant: Some(tenant),
                agent,
                scopes: scope,
                expires_at: expires_in_days
                    .map(|days| now + chrono::Duration::days(i64::from(days))),
            };
            mnemos::contract::keys::create_key(store.as_ref(), caller, body, now)
                .await
                .map(|created| {
                    print(json, &created, |c: &CreatedKeyResponse| {
                        format!(
                            "{}\n\nkey {} for tenant {}, agent {}, scopes {}{}.\n\
                             This is the only time the key is shown: keep it now.",
                            c.secret,
                            c.key.id,
                            c.key.tenant,
                            c.key.agent,
                            c.key.scopes.join(","),
                            c.key
                                .expires_at
                                .map(|at| format!(", expires {at}"))
                                .unwrap_or_default()
                        )
                    })
                })
        }
        KeysAction::List { tenant } => {
            let params = AdminListParams {
                tenant,
                limit: None,
            };
            mnemos::contract::keys::list_keys(store.as_ref(), caller, params, now)
                .await
                .map(|listed| {
                    print(json, &listed, |l: &KeysResponse| {
                        if l.keys.is_empty() {
                            return "no keys; `mnemos keys create` makes one".to_string();
                        }
                        l.keys
                            .iter()
                            .map(|k| {
                                format!(
                                    "{}  {:<8} {:<12} {:<12} {:<16} used {}  {}",
                                    k.id,
                                    k.status,
                                    k.tenant,
                                    k.agent,
                                    k.scopes.join(","),
                                    k.last_used_at
                                        .map(|at| at.format("%Y-%m-%d %H:%M").to_string())
                                        .unwrap_or_else(|| "never".into()),
                                    k.name
                                )
                            })
                            .collect::<Vec<_>>()
                            .join("\n")
                    })
                })
        }
        KeysAction::Revoke { id } => {
            mnemos::contract::keys::revoke_key(store.as_ref(), caller, &id, now)
                .await
                .map(|revoked| print(json, &revoked, |r| format!("revoked key {}", r.revoked)))
        }
    };
    record.close().await;
    result.map_err(user_error)
}

/// `mnemos audit`: the latest audit entries.
async fn audit(
    settings: &Settings,
    caller: &Caller,
    limit: usize,
    json: bool,
) -> anyhow::Result<()> {
    let record = mnemos::store::SystemOfRecord::open(settings)
        .await
        .map_err(user_error)?;
    let params = AdminListParams {
        tenant: None,
        limit: Some(limit),
    };
    let result = mnemos::contract::keys::audit_log(record.keys().as_ref(), caller, params).await;
    record.close().await;
    let log = result.map_err(user_error)?;
    print(json, &log, |l| {
        l.entries
            .iter()
            .map(|e| {
                format!(
                    "{}  {:<14} {:<14} {} {}",
                    e.at.format("%Y-%m-%d %H:%M:%S"),
                    e.action,
                    e.actor,
                    e.target.as_deref().unwrap_or("-"),
                    e.detail
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    });
    Ok(())
}
