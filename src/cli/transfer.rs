//! `mnemos export`, `import`, `backup`, `restore`: moving a store's data. Export and
//! import speak the JSONL format of `mnemos::contract::transfer` (the same as
//! `GET /v1/export` and `POST /v1/import`); backup and restore copy a whole SQLite
//! database (PostgreSQL has pg_dump and pg_restore).

use std::io::Write;
use std::path::{Path, PathBuf};

use mnemos::app::Services;
use mnemos::auth::Caller;
use mnemos::config::Settings;
use mnemos::contract::transfer::{self, ImportParams, ImportReport};
use mnemos_actors::transfer::TransferCounts;
use serde::Serialize;
use sqlx::Connection;

use super::{print, progress, user_error};

/// `mnemos export`'s flags.
#[derive(clap::Args)]
pub(crate) struct ExportArgs {
    /// Only this agent (and the KV entries it wrote).
    #[arg(long)]
    agent: Option<String>,
    /// Only this tenant's agents and KV namespaces (with --agent: the agent's tenant).
    #[arg(long)]
    tenant: Option<String>,
    /// Include each memory's stored vector and the model that made it (an import into a
    /// store with that model reuses them instead of embedding again).
    #[arg(long)]
    with_embeddings: bool,
    /// Write to this file (default: standard output).
    #[arg(long, short)]
    output: Option<PathBuf>,
}

/// `mnemos import`'s flags.
#[derive(clap::Args)]
pub(crate) struct ImportArgs {
    /// The export file (`-`: standard input).
    file: PathBuf,
    /// Skip invalid lines and report them, instead of refusing the whole import.
    #[arg(long)]
    skip_invalid: bool,
    /// Check every line and report, writing nothing.
    #[arg(long)]
    dry_run: bool,
}

/// Counts as text: `12 memories, 3 edges, …` (kinds with none left out).
fn counts_text(c: &TransferCounts) -> String {
    let parts: Vec<String> = [
        (c.memories, "memories"),
        (c.edges, "edges"),
        (c.sessions, "sessions"),
        (c.projects, "projects"),
        (c.runs, "runs"),
        (c.namespaces, "KV namespaces"),
        (c.kv_entries, "KV entries"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{n} {what}"))
    .collect();
    if parts.is_empty() {
        "nothing".to_string()
    } else {
        parts.join(", ")
    }
}

/// What an export wrote.
#[derive(Serialize)]
struct ExportSummary {
    /// Where it went.
    output: String,
    /// Records by kind.
    counts: TransferCounts,
}

/// `mnemos export`: stream the export to the file (or stdout), with a progress bar on
/// a terminal. The summary goes to stdout only when the export went to a file.
pub(crate) async fn export(
    services: &Services,
    caller: &Caller,
    args: ExportArgs,
    json: bool,
) -> anyhow::Result<()> {
    let runtime = services.runtime.clone();
    let scope = transfer::export_scope(caller, args.agent.as_deref(), args.tenant.as_deref(), true)
        .map_err(user_error)?;
    let plan = transfer::plan_export(
        &runtime,
        &scope,
        args.with_embeddings,
        runtime.store_backend(),
    )
    .await
    .map_err(user_error)?;
    let bar = progress(plan.expected(), "exporting");
    let (sink, mut lines) = tokio::sync::mpsc::channel::<Vec<u8>>(256);
    let writer = tokio::spawn(async move { transfer::write_export(&runtime, plan, sink).await });
    let mut out: Box<dyn Write + Send> = match &args.output {
        Some(path) => {
            mnemos::data_dir::create_private_file(path)
                .map_err(|e| anyhow::anyhow!("--output: cannot create {}: {e}", path.display()))?;
            let file = std::fs::OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(path)
                .map_err(|e| anyhow::anyhow!("--output: cannot open {}: {e}", path.display()))?;
            Box::new(std::io::BufWriter::new(file))
        }
        None => Box::new(std::io::BufWriter::new(std::io::stdout())),
    };
    let mut first = true;
    while let Some(line) = lines.recv().await {
        out.write_all(&line)?;
        if !first {
            bar.inc(1);
        }
        first = false;
    }
    out.flush()?;
    drop(out);
    let counts = writer
        .await
        .map_err(|e| anyhow::anyhow!("the export stopped: {e}"))?
        .map_err(user_error)?;
    bar.finish_and_clear();
    match &args.output {
        Some(path) => {
            let summary = ExportSummary {
                output: path.display().to_string(),
                counts,
            };
            print(json, &summary, |s| {
                format!("exported {} to {}", counts_text(&s.counts), s.output)
            });
        }
        None => eprintln!("exported {}", counts_text(&counts)),
    }
    Ok(())
}

/// `mnemos import`: check every line, then write (with a progress bar on a terminal).
pub(crate) async fn import(
    services: &Services,
    caller: &Caller,
    args: ImportArgs,
    json: bool,
) -> anyhow::Result<()> {
    let text = if args.file.as_os_str() == "-" {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)?;
        text
    } else {
        std::fs::read_to_string(&args.file)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", args.file.display()))?
    };
    let params = ImportParams {
        skip_invalid: Some(args.skip_invalid),
        dry_run: Some(args.dry_run),
    };
    let bar = progress(0, "importing");
    let tick = {
        let bar = bar.clone();
        move |done: u64, total: u64| {
            bar.set_length(total);
            bar.set_position(done);
        }
    };
    let report = transfer::import(&services.runtime, caller, &text, &params, &tick)
        .await
        .map_err(user_error)?;
    bar.finish_and_clear();
    print(json, &report, |r: &ImportReport| {
        let mut out = vec![format!(
            "{} {} (from {} {}): written {}; already stored {}",
            if r.dry_run { "checked" } else { "imported" },
            args.file.display(),
            r.source_backend,
            r.source_version,
            counts_text(&r.written),
            counts_text(&r.unchanged),
        )];
        if r.orphaned.total() > 0 {
            out.push(format!(
                "not attached (their memories or namespace are not stored): {}",
                counts_text(&r.orphaned)
            ));
        }
        if r.re_embedded + r.embeddings_reused > 0 {
            out.push(format!(
                "vectors: {} reused from the file, {} embedded again",
                r.embeddings_reused, r.re_embedded
            ));
        }
        if !r.skipped.is_empty() {
            out.push(format!("skipped {} invalid line(s):", r.skipped.len()));
            out.extend(r.skipped.iter().map(|p| {
                format!(
                    "  line {}{}{}: {}",
                    p.line,
                    p.kind
                        .as_deref()
                        .map(|k| format!(" ({k})"))
                        .unwrap_or_default(),
                    p.field
                        .as_deref()
                        .map(|f| format!(" field {f}"))
                        .unwrap_or_default(),
                    p.message
                )
            }));
        }
        out.join("\n")
    });
    Ok(())
}

/// What a backup or a restore did.
#[derive(Serialize)]
struct CopySummary {
    /// The backup file.
    file: String,
    /// The database it was taken from or restored into.
    database: String,
    /// Memories it holds.
    memories: i64,
    /// Its size in bytes.
    bytes: u64,
}

/// Refuse a PostgreSQL store: its tools are pg_dump and pg_restore.
fn sqlite_only(settings: &Settings, command: &str) -> anyhow::Result<()> {
    if settings.storage.backend == "postgres" {
        anyhow::bail!(
            "storage.backend is postgres: `mnemos {command}` copies a SQLite database; use \
             pg_dump --format=custom (and pg_restore) on storage.url instead (see README, Backends)"
        );
    }
    Ok(())
}

/// Open a SQLite file read-only, waiting for a writer's lock rather than failing.
async fn open_read_only(path: &Path) -> anyhow::Result<sqlx::SqliteConnection> {
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(path)
        .read_only(true)
        .busy_timeout(std::time::Duration::from_secs(30));
    sqlx::SqliteConnection::connect_with(&options)
        .await
        .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", path.display()))
}

/// Check that `path` is a sound mnemos database; answers how many memories it holds.
async fn verify(path: &Path) -> anyhow::Result<i64> {
    let mut conn = open_read_only(path).await?;
    let (check,): (String,) = sqlx::query_as("PRAGMA quick_check")
        .fetch_one(&mut conn)
        .await
        .map_err(|e| anyhow::anyhow!("{} is not a SQLite database: {e}", path.display()))?;
    if check != "ok" {
        anyhow::bail!("{} fails SQLite's integrity check: {check}", path.display());
    }
    let (memories,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM memories")
        .fetch_one(&mut conn)
        .await
        .map_err(|e| anyhow::anyhow!("{} is not a mnemos database: {e}", path.display()))?;
    conn.close().await.ok();
    Ok(memories)
}

/// `mnemos backup FILE`: a consistent snapshot of the SQLite store by `VACUUM INTO`,
/// on a read-only connection of its own: it takes no data-directory lock, so it works
/// while a server runs and writes (the snapshot is one read transaction).
pub(crate) async fn backup(settings: &Settings, file: &Path, json: bool) -> anyhow::Result<()> {
    sqlite_only(settings, "backup")?;
    let database = settings.sqlite_path();
    if !database.exists() {
        anyhow::bail!(
            "no database at {} (data_dir, storage.path): nothing to back up",
            database.display()
        );
    }
    if std::fs::metadata(file).is_ok_and(|m| m.len() > 0) {
        anyhow::bail!(
            "{} exists already; name a new file (a backup never overwrites one)",
            file.display()
        );
    }
    mnemos::data_dir::create_private_file(file)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", file.display()))?;
    let target = file
        .to_str()
        .ok_or_else(|| anyhow::anyhow!("{} is not a UTF-8 path", file.display()))?;
    let spinner = super::spinner("backing up…");
    let mut conn = open_read_only(&database).await?;
    let copied = sqlx::query("VACUUM INTO $1")
        .bind(target)
        .execute(&mut conn)
        .await;
    conn.close().await.ok();
    if let Err(error) = copied {
        let _ = std::fs::remove_file(file);
        anyhow::bail!("backup of {} failed: {error}", database.display());
    }
    let memories = verify(file).await?;
    spinner.finish_and_clear();
    let summary = CopySummary {
        file: file.display().to_string(),
        database: database.display().to_string(),
        memories,
        bytes: std::fs::metadata(file).map(|m| m.len()).unwrap_or(0),
    };
    print(json, &summary, |s| {
        format!(
            "backed up {} to {} ({} memories, {} bytes)",
            s.database, s.file, s.memories, s.bytes
        )
    });
    Ok(())
}

/// `mnemos restore FILE`: put a backup in place of the data directory's database. The
/// directory must be stopped (its lock is taken, so a running server refuses it); a
/// database there already is kept beside it (`mnemos.db.replaced-<time>`) and replaced
/// only with `--force`.
pub(crate) async fn restore(
    settings: &Settings,
    file: &Path,
    force: bool,
    json: bool,
) -> anyhow::Result<()> {
    sqlite_only(settings, "restore")?;
    let _lock = mnemos::data_dir::DataDirLock::acquire(&settings.data_dir)
        .map_err(|e| anyhow::anyhow!("restore needs a stopped data directory: {e}"))?;
    let memories = verify(file).await?;
    let database = settings.sqlite_path();
    let held = std::fs::metadata(&database).is_ok_and(|m| m.len() > 0);
    if held && !force {
        anyhow::bail!(
            "{} holds a database already; pass --force to replace it (it is kept beside as {}.replaced-<time>)",
            database.display(),
            database.display()
        );
    }
    let staged = database.with_extension("db.restoring");
    let _ = std::fs::remove_file(&staged);
    mnemos::data_dir::create_private_file(&staged)?;
    std::fs::copy(file, &staged)
        .map_err(|e| anyhow::anyhow!("cannot copy {}: {e}", file.display()))?;
    std::fs::File::open(&staged)?.sync_all()?;
    if held {
        let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
        let aside = PathBuf::from(format!("{}.replaced-{stamp}", database.display()));
        std::fs::rename(&database, &aside)?;
        for suffix in ["-wal", "-shm"] {
            let side = PathBuf::from(format!("{}{suffix}", database.display()));
            if side.exists() {
                std::fs::rename(&side, format!("{}{suffix}", aside.display()))?;
            }
        }
    }
    std::fs::rename(&staged, &database)?;
    // Open it once as the server will: migrations of a newer mnemos apply now.
    let store = mnemos::store::sqlite::SqliteStore::open(&database)
        .await
        .map_err(user_error)?;
    store.close().await;
    let summary = CopySummary {
        file: file.display().to_string(),
        database: database.display().to_string(),
        memories,
        bytes: std::fs::metadata(&database).map(|m| m.len()).unwrap_or(0),
    };
    print(json, &summary, |s| {
        format!(
            "restored {} into {} ({} memories); start the server on it",
            s.file, s.database, s.memories
        )
    });
    Ok(())
}
