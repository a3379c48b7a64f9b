//! The `mnemos` binary: the service (`serve`) and a CLI over the same runtime. This
//! file is the command line (clap) and its dispatch; each group of commands is a module
//! of `cli/`.
//!
//! CLI commands other than `serve`, `keys`, `audit`, `backup` and `restore` open the
//! data directory in-process (it is locked, so they refuse to run beside a server on
//! the same directory). They log warnings only, unless `-v`.

mod cli;

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use cli::{admin, kv, memories, projects, sessions, transfer};
use cli::{operator, print, user_error};
use mnemos::app::{shutdown_signal, Application, Services};
use mnemos::auth::Caller;
use mnemos::config::Settings;
use mnemos::contract::wire::{ForgetBody, HistoryBody, ListParams, RememberBody};

/// The binary's allocator. glibc's arenas keep the memory a long-running server frees
/// (index growth, sleep cycles, the rebuild after a restart); mimalloc returns it, which
/// took `mnemos bench`'s peak RSS at 100,000 memories from 380–388 to 345–369 MiB with
/// recall and writes no slower (docs/measurements-2026-12.md, "2026-12-07"). Library
/// users pick their own.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    /// Log at info (`serve` and `mcp` always do; other commands log warnings only).
    #[arg(short, long, global = true)]
    verbose: bool,
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
        /// Recall as of a time (RFC 3339, a date or a period): what the memories said then.
        #[arg(long)]
        as_of: Option<String>,
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
        /// A query: memories holding every word of it (or, with --min-score, those
        /// recall scores at or above it).
        #[arg(long)]
        query: Option<String>,
        /// With --query: match by recall's score (0..1) instead of by every word.
        #[arg(long, requires = "query")]
        min_score: Option<f64>,
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
    /// Change a memory's content, importance, tags, type or title (its previous state
    /// stays in its history).
    Edit(memories::EditArgs),
    /// Archive (or with --delete, delete) memories by age, importance, status and type;
    /// --dry-run lists what would go.
    Prune(memories::PruneArgs),
    /// Delete a session (--agent A --session S), an agent (--agent A) or every agent
    /// (--all) from every store; asks for confirmation on a terminal (--yes skips it).
    Clear(memories::ClearArgs),
    /// Session logs: list, show, post, compact.
    Sessions {
        #[command(subcommand)]
        action: sessions::SessionsAction,
    },
    /// Projects: list, show, put.
    Projects {
        #[command(subcommand)]
        action: projects::ProjectsAction,
    },
    /// KV namespaces: namespaces, get, put, delete, list.
    Kv {
        #[command(subcommand)]
        action: kv::KvAction,
    },
    /// Export as JSONL (one agent, a tenant, or everything): memories with their
    /// versions, edges, sessions with their messages, projects, runs, KV namespaces.
    Export(transfer::ExportArgs),
    /// Import a JSONL export: ids are kept, what is stored already is left alone (a
    /// second import changes nothing), every line is checked first.
    Import(transfer::ImportArgs),
    /// Snapshot the SQLite store into FILE (consistent, works while a server runs).
    Backup {
        /// The backup file to create.
        file: PathBuf,
    },
    /// Put a backup in place of the data directory's database (the server must be stopped).
    Restore {
        /// The backup file.
        file: PathBuf,
        /// Replace a database that is there (it is kept beside as mnemos.db.replaced-<time>).
        #[arg(long)]
        force: bool,
    },
    /// Archive idle sessions now (summaries tagged archive_summary; working memory cleared).
    Archive,
    /// Rebuild projections from SQL: the external ones (`graph.backend = "falkordb"`, …)
    /// and the in-process vector index.
    Reindex {
        /// Only this projection (`vectors`, `entities`, `falkordb`, `qdrant`, `neo4j`); default every one.
        #[arg(long, conflicts_with = "reembed")]
        projection: Option<String>,
        /// Re-embed every memory with the configured embedding model and switch to it
        /// (after [embedding] changed; resumable). Beside a running server use
        /// POST /v1/admin/reembed instead.
        #[arg(long)]
        reembed: bool,
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
    /// Embedding models: distil a static table from a sentence-transformers model, time a model.
    Embedder {
        #[command(subcommand)]
        action: EmbedderAction,
    },
}

// What `mnemos embedder` does.
#[derive(Subcommand)]
enum EmbedderAction {
    /// Distil a static embedding table (the default embedder's kind) from a
    /// sentence-transformers BERT model directory.
    Distill(cli::embedder::DistillArgs),
    /// Time a local sentence-transformers model: texts per second in batches and the
    /// latency of one query (what `embedding.threads` buys).
    Speed(cli::embedder::SpeedArgs),
}

// What `mnemos keys` does.
#[derive(Subcommand)]
pub(crate) enum KeysAction {
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

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let mut settings = Settings::load(cli.config_dir.as_deref(), cli.config.as_deref())?;
    if let Some(dir) = &cli.data_dir {
        settings.data_dir = dir.clone();
    }
    let serving = matches!(cli.command, Command::Serve | Command::Mcp { .. });
    if !serving && !cli.verbose {
        // A CLI command says what it did on stdout; the runtime's start-up lines are noise.
        settings.log.level = "warn".into();
    } else if cli.verbose && settings.log.level == "warn" {
        settings.log.level = "info".into();
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
        Command::Embedder {
            action: EmbedderAction::Distill(args),
        } => cli::embedder::distill(args, json)?,
        Command::Embedder {
            action: EmbedderAction::Speed(args),
        } => cli::embedder::speed(args, json)?,
        Command::Keys { action } => admin::keys(&settings, &caller, action, json).await?,
        Command::Audit { limit } => admin::audit(&settings, &caller, limit, json).await?,
        Command::Backup { file } => transfer::backup(&settings, &file, json).await?,
        Command::Restore { file, force } => {
            transfer::restore(&settings, &file, force, json).await?
        }
        Command::Migrate => {
            let services = Services::open_for_command(&settings).await?;
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
        Command::Reindex { reembed: true, .. } => {
            let services = Services::open_for_reembed(&settings).await?;
            let result = admin::reembed(&services, &caller, &settings, json).await;
            services.close().await?;
            result?;
        }
        command => {
            let services = Services::open_for_command(&settings).await?;
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
            memories::remember(runtime, caller, body, json).await
        }
        Command::Recall {
            agent,
            limit,
            as_of,
            query,
        } => memories::recall(runtime, caller, agent, query, limit, as_of, json).await,
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
            memories::list(runtime, caller, params, json).await
        }
        Command::Forget {
            agent,
            id,
            query,
            min_score,
            dry_run,
        } => {
            if id.is_none() && query.is_none() {
                anyhow::bail!("give --id or --query");
            }
            let body = ForgetBody {
                agent_id: Some(agent),
                id,
                query,
                min_score,
                limit: None,
                dry_run: Some(dry_run),
            };
            memories::forget(runtime, caller, body, json).await
        }
        Command::History { id, agent } => {
            let body = HistoryBody {
                id,
                agent_id: agent,
            };
            memories::history(runtime, caller, body, json).await
        }
        Command::Consolidate { agent, all } => {
            let agent = agent.filter(|_| !all);
            admin::consolidate(services, caller, agent, json).await
        }
        Command::Edit(args) => memories::edit(runtime, caller, args, json).await,
        Command::Prune(args) => memories::prune(runtime, caller, args, json).await,
        Command::Clear(args) => memories::clear(services, caller, args, json).await,
        Command::Sessions { action } => sessions::run(runtime, caller, action, json).await,
        Command::Projects { action } => projects::run(runtime, caller, action, json).await,
        Command::Kv { action } => kv::run(runtime, caller, action, json).await,
        Command::Export(args) => transfer::export(services, caller, args, json).await,
        Command::Import(args) => transfer::import(services, caller, args, json).await,
        Command::Archive => admin::archive(runtime, caller, json).await,
        Command::Erase { agent, tenant } => {
            admin::erase(services, caller, agent, tenant, json).await
        }
        Command::Reindex { projection, .. } => admin::reindex(runtime, projection, json).await,
        Command::Doctor { repair } => admin::doctor(services, repair, json).await,
        Command::Serve
        | Command::Mcp { .. }
        | Command::Migrate
        | Command::Keys { .. }
        | Command::Audit { .. }
        | Command::Backup { .. }
        | Command::Restore { .. }
        | Command::Bench(_)
        | Command::Embedder { .. }
        | Command::Eval { .. } => {
            anyhow::bail!("handled before opening the data directory")
        }
    }
}
