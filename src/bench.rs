//! `mnemos bench`: synthetic load through the runtime (no HTTP), reporting batch and
//! single remember throughput, recall latency percentiles, ready time after a restart
//! with the data in place, and peak RSS; then the cost of API keys over HTTP, keys on
//! and off side by side.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use mnemos_actors::model::AgentId;
use mnemos_actors::runtime::{RecallInput, RememberInput};
use mnemos_actors::Runtime;
use serde::Serialize;

use crate::app::Services;
use crate::config::Settings;

/// Options of `mnemos bench`.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Memories loaded through remember_batch.
    #[arg(long, default_value_t = 100_000)]
    pub memories: usize,
    /// Agents the memories are spread over.
    #[arg(long, default_value_t = 100)]
    pub agents: usize,
    /// Memories per remember_batch call.
    #[arg(long, default_value_t = 1000)]
    pub batch_size: usize,
    /// Single remember calls timed after the load.
    #[arg(long, default_value_t = 2000)]
    pub single: usize,
    /// Recall queries timed.
    #[arg(long, default_value_t = 2000)]
    pub queries: usize,
    /// Directory for the benchmark's data (default: a fresh directory under the system temp dir).
    #[arg(long)]
    pub bench_dir: Option<PathBuf>,
    /// Keep the benchmark's data directory afterwards.
    #[arg(long)]
    pub keep: bool,
}

/// Measured figures.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// Memories loaded.
    pub memories: usize,
    /// Agents.
    pub agents: usize,
    /// Embedding model.
    pub embedder: String,
    /// remember_batch throughput, memories per second.
    pub batch_per_second: f64,
    /// Single remember throughput (sequential), per second.
    pub single_per_second: f64,
    /// Single remember latency p50, ms.
    pub single_p50_ms: f64,
    /// Single remember latency p99, ms.
    pub single_p99_ms: f64,
    /// Recall latency p50, ms.
    pub recall_p50_ms: f64,
    /// Recall latency p95, ms.
    pub recall_p95_ms: f64,
    /// Recall latency p99, ms.
    pub recall_p99_ms: f64,
    /// Mean time per recall stage (stages overlap: vector, keyword and time run in parallel), ms.
    pub recall_stage_mean_ms: BTreeMap<String, f64>,
    /// Time to reopen the data directory and serve (index rebuilt from stored vectors), ms.
    pub ready_after_restart_ms: f64,
    /// One sleep cycle over every agent (provider `none`), seconds.
    pub sleep_cycle_seconds: f64,
    /// Candidates the sleep cycle examined.
    pub sleep_cycle_processed: u64,
    /// Candidates it consolidated into knowledge.
    pub sleep_cycle_consolidated: u64,
    /// Single remembers made one after another while a second sleep cycle ran (over a
    /// tenth of the load again, for a tenth as many new agents, once the projections
    /// caught up with it): how long a write waits behind the cycle's work.
    pub during_sleep: DuringSleepFigures,
    /// Peak resident set size of the process, MiB.
    pub peak_rss_mib: f64,
    /// Memory phase by phase, in run order: where the peak happens.
    pub memory_by_phase: Vec<PhaseMemory>,
    /// Backends the run used (store, working memory, graph projection).
    pub backends: String,
    /// Projection lag (age of the oldest unapplied outbox entry) sampled every 50 writes
    /// under the single-remember load, p95 in ms (None without external projections).
    pub projection_lag_p95_ms: Option<f64>,
    /// Time for the projections to apply everything after the batch load, seconds.
    pub projection_drain_seconds: Option<f64>,
    /// Entity, fact and alias extraction per memory (what the entity index runs on each
    /// write after it is durable), over the hand-labelled sentences of agent traffic:
    /// p50 and p99 in µs.
    pub extraction_p50_us: f64,
    /// See `extraction_p50_us`.
    pub extraction_p99_us: f64,
    /// The cost of API keys, measured over HTTP on two servers side by side.
    pub auth: AuthFigures,
    /// What the web console's pages cost the server on this store.
    pub console: ConsoleFigures,
}

/// The process's memory over one phase of the run (see [`BenchReport::memory_by_phase`]).
#[derive(Debug, Clone, Serialize)]
pub struct PhaseMemory {
    /// Which phase.
    pub phase: &'static str,
    /// Peak RSS during the phase (the kernel's high-water mark, reset as it began), MiB.
    pub peak_rss_mib: f64,
    /// RSS as it ended, MiB.
    pub rss_mib: f64,
}

/// Reads the process's memory at phase boundaries (Linux; zeros elsewhere).
struct MemoryMeter {
    /// Finished phases.
    phases: Vec<PhaseMemory>,
}

impl MemoryMeter {
    /// Start metering: the high-water mark restarts now.
    fn start() -> Self {
        reset_peak_rss();
        Self { phases: Vec::new() }
    }

    /// Close `phase`: read its peak and the memory now, then restart the high-water mark.
    fn phase(&mut self, phase: &'static str) {
        self.phases.push(PhaseMemory {
            phase,
            peak_rss_mib: peak_rss_mib(),
            rss_mib: status_mib("VmRSS:"),
        });
        reset_peak_rss();
    }

    /// The highest phase peak (the whole run's peak RSS).
    fn peak_mib(&self) -> f64 {
        self.phases
            .iter()
            .map(|p| p.peak_rss_mib)
            .fold(peak_rss_mib(), f64::max)
    }
}

/// Restart the kernel's RSS high-water mark (`VmHWM`) of this process.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Remembering while the sleep cycle runs (see [`BenchReport::during_sleep`]).
#[derive(Debug, Clone, Serialize)]
pub struct DuringSleepFigures {
    /// Memories loaded for the second cycle, and the new agents they belong to.
    pub loaded: usize,
    /// See `loaded`.
    pub agents: usize,
    /// The second cycle's wall time with the remembers beside it, seconds.
    pub cycle_seconds: f64,
    /// Candidates it consolidated.
    pub consolidated: u64,
    /// Remembers made while it ran.
    pub remembers: usize,
    /// Their latency p50, ms.
    pub remember_p50_ms: f64,
    /// Their latency p99, ms.
    pub remember_p99_ms: f64,
    /// The slowest, ms.
    pub remember_max_ms: f64,
}

/// Server-side time of the console's reads (the contract functions its routes call),
/// each asked for every agent in turn.
#[derive(Debug, Clone, Serialize)]
pub struct ConsoleFigures {
    /// Requests per figure.
    pub samples: usize,
    /// The memories page's first screen (the agent list, then the first 50 memories with
    /// the total), p50 ms.
    pub first_screen_p50_ms: f64,
    /// The same, p95 ms.
    pub first_screen_p95_ms: f64,
    /// A full-text filter (one word) with the total, p50 ms.
    pub full_text_p50_ms: f64,
    /// The same, p95 ms.
    pub full_text_p95_ms: f64,
    /// A type and time-range filter with the total, p50 ms.
    pub filtered_p50_ms: f64,
    /// The same, p95 ms.
    pub filtered_p95_ms: f64,
}

/// Recall and remember over HTTP with `auth.mode = "keys"` and `"none"`, requests
/// interleaved one by one so both see the same machine; and the identity check alone.
#[derive(Debug, Clone, Serialize)]
pub struct AuthFigures {
    /// Requests per phase and mode.
    pub requests: usize,
    /// Recall p50 with keys, ms.
    pub recall_p50_ms_keys: f64,
    /// Recall p50 without keys, ms.
    pub recall_p50_ms_none: f64,
    /// Remember p50 with keys, ms.
    pub remember_p50_ms_keys: f64,
    /// Remember p50 without keys, ms.
    pub remember_p50_ms_none: f64,
    /// `Authenticator::authenticate` of a verified (cached) key, p50, µs.
    pub authenticate_p50_us: f64,
    /// The same, p99, µs.
    pub authenticate_p99_us: f64,
}

/// Deterministic xorshift generator (the benchmark must be repeatable).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// A vocabulary of pronounceable words with a Zipf-like draw, to make realistic text.
struct TextGenerator {
    /// Words, most frequent first.
    words: Vec<String>,
    /// Random source.
    rng: Rng,
}

impl TextGenerator {
    fn new(seed: u64) -> Self {
        let syllables = [
            "ka", "lo", "mi", "ra", "ten", "sor", "vi", "pel", "dan", "ru", "mos", "the", "ne",
            "qua", "zi", "bor",
        ];
        let mut rng = Rng(seed.max(1));
        let words = (0..4000)
            .map(|_| {
                (0..1 + rng.below(3))
                    .map(|_| syllables[rng.below(syllables.len())])
                    .collect::<String>()
            })
            .collect();
        Self { words, rng }
    }
    fn word(&mut self) -> &str {
        // Squaring a uniform draw skews toward the front: frequent words recur, rare ones are rare.
        let u = self.rng.below(10_000) as f64 / 10_000.0;
        let index = ((u * u) * self.words.len() as f64) as usize;
        &self.words[index.min(self.words.len() - 1)]
    }
    fn sentence(&mut self, min: usize, max: usize) -> String {
        let count = min + self.rng.below(max - min + 1);
        (0..count)
            .map(|_| self.word().to_string())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// Peak RSS from /proc (0 where unavailable).
pub fn peak_rss_mib() -> f64 {
    status_mib("VmHWM:")
}

/// One kB figure of /proc/self/status, in MiB (0 where unavailable).
fn status_mib(field: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with(field)).map(str::to_string))
        .and_then(|l| {
            l.split_whitespace()
                .nth(1)
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn bar(len: usize, label: &str) -> ProgressBar {
    let bar = ProgressBar::new(len as u64);
    bar.set_style(
        ProgressStyle::with_template("{msg:>10} [{bar:40}] {pos}/{len} ({per_sec}, eta {eta})")
            .expect("static template")
            .progress_chars("=> "),
    );
    bar.set_message(label.to_string());
    bar
}

/// Run the benchmark and print its table.
pub async fn run(settings: &Settings, args: BenchArgs) -> anyhow::Result<()> {
    let report = measure(settings, &args).await?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    println!();
    println!("| figure | value |");
    println!("|---|---|");
    println!(
        "| memories / agents | {} / {} |",
        report.memories, report.agents
    );
    println!("| embedder | {} |", report.embedder);
    println!(
        "| remember_batch throughput | {:.0} memories/s |",
        report.batch_per_second
    );
    println!(
        "| single remember | {:.0} /s (p50 {:.2} ms, p99 {:.2} ms) |",
        report.single_per_second, report.single_p50_ms, report.single_p99_ms
    );
    println!(
        "| recall latency p50 / p95 / p99 | {:.2} / {:.2} / {:.2} ms |",
        report.recall_p50_ms, report.recall_p95_ms, report.recall_p99_ms
    );
    println!(
        "| ready after restart | {:.0} ms |",
        report.ready_after_restart_ms
    );
    println!(
        "| sleep cycle, all agents | {:.2} s ({} candidates, {} consolidated) |",
        report.sleep_cycle_seconds, report.sleep_cycle_processed, report.sleep_cycle_consolidated
    );
    let during = &report.during_sleep;
    println!(
        "| single remember while a sleep cycle runs ({} memories of {} new agents consolidated beside it, {:.2} s) p50 / p99 / max | {:.2} / {:.2} / {:.2} ms ({} remembers) |",
        during.loaded,
        during.agents,
        during.cycle_seconds,
        during.remember_p50_ms,
        during.remember_p99_ms,
        during.remember_max_ms,
        during.remembers
    );
    println!("| peak RSS | {:.0} MiB |", report.peak_rss_mib);
    for phase in &report.memory_by_phase {
        println!(
            "| RSS over {}: peak / at its end | {:.0} / {:.0} MiB |",
            phase.phase, phase.peak_rss_mib, phase.rss_mib
        );
    }
    println!("| backends | {} |", report.backends);
    let auth = &report.auth;
    println!(
        "| recall p50 over HTTP (two fresh servers of {} memories each), keys / no keys | {:.2} / {:.2} ms |",
        auth.requests, auth.recall_p50_ms_keys, auth.recall_p50_ms_none
    );
    println!(
        "| remember p50 over HTTP, keys / no keys | {:.2} / {:.2} ms |",
        auth.remember_p50_ms_keys, auth.remember_p50_ms_none
    );
    println!(
        "| key check (cached) p50 / p99 | {:.1} / {:.1} µs |",
        auth.authenticate_p50_us, auth.authenticate_p99_us
    );
    let console = &report.console;
    println!(
        "| console first screen (agents + 50 memories + total) p50 / p95 | {:.2} / {:.2} ms |",
        console.first_screen_p50_ms, console.first_screen_p95_ms
    );
    println!(
        "| console full-text filter with total p50 / p95 | {:.2} / {:.2} ms |",
        console.full_text_p50_ms, console.full_text_p95_ms
    );
    println!(
        "| console type + time filter with total p50 / p95 | {:.2} / {:.2} ms |",
        console.filtered_p50_ms, console.filtered_p95_ms
    );
    println!(
        "| entity, fact and alias extraction per memory p50 / p99 (after the write, in the projector) | {:.1} / {:.1} µs |",
        report.extraction_p50_us, report.extraction_p99_us
    );
    if let (Some(lag), Some(drain)) = (
        report.projection_lag_p95_ms,
        report.projection_drain_seconds,
    ) {
        println!("| projection lag p95 under single writes | {lag:.0} ms |");
        println!("| projection drain after the batch load | {drain:.1} s |");
    }
    Ok(())
}

/// Run the benchmark and return its figures.
pub async fn measure(settings: &Settings, args: &BenchArgs) -> anyhow::Result<BenchReport> {
    anyhow::ensure!(
        args.agents > 0 && args.batch_size > 0 && args.queries > 0,
        "agents, batch-size and queries must be positive"
    );
    let dir = args.bench_dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("mnemos-bench-{}", uuid::Uuid::now_v7()))
    });
    let mut settings = settings.clone();
    settings.data_dir = dir.clone();
    settings.cognition.enabled = false;
    settings.limits.max_batch = settings.limits.max_batch.max(args.batch_size);
    let result = measure_in(&settings, args).await;
    if !args.keep {
        let _ = std::fs::remove_dir_all(&dir);
    }
    result
}

/// Figures of the single-remember phase.
struct SingleFigures {
    /// Latency of each call, ms.
    latencies: Vec<f64>,
    /// Wall time of the whole phase.
    elapsed: Duration,
    /// Projection lag sampled every 50 writes, ms.
    lag_samples: Vec<f64>,
}

/// Figures of the recall phase.
struct RecallFigures {
    /// Latency of each recall, ms.
    latencies: Vec<f64>,
    /// Mean time per recall stage, ms.
    stage_mean_ms: BTreeMap<String, f64>,
}

/// Figures of the restart and sleep-cycle phase.
struct RestartFigures {
    /// Time to reopen the data directory and serve.
    ready: Duration,
    /// One sleep cycle over every agent.
    sleep_cycle: Duration,
    /// Candidates the sleep cycle examined.
    processed: u64,
    /// Candidates it consolidated.
    consolidated: u64,
    /// Remembering while a second cycle runs.
    during_sleep: DuringSleepFigures,
}

/// A runtime error as the benchmark reports it.
fn failed(error: mnemos_actors::MemoryError) -> anyhow::Error {
    anyhow::anyhow!(error.message)
}

async fn measure_in(settings: &Settings, args: &BenchArgs) -> anyhow::Result<BenchReport> {
    let services = Services::open_for_command(settings).await?;
    let runtime = services.runtime.clone();
    let existing = runtime.count().await.map_err(failed)?;
    anyhow::ensure!(
        existing == 0,
        "the benchmark needs an empty store, and {} holds {existing} memories \
         (for PostgreSQL, point storage.url at a fresh database)",
        settings.storage.backend
    );
    let agents = bench_agents("bench-agent", args.agents)?;
    let mut text = TextGenerator::new(42);
    let mut meter = MemoryMeter::start();
    meter.phase("open");

    let batch_time = load_batches(&runtime, &agents, &mut text, args).await?;
    meter.phase("batch load");
    let has_projections = !runtime
        .projection_status()
        .await
        .unwrap_or_default()
        .is_empty();
    let projection_drain_seconds = if has_projections {
        Some(drain_projections(&runtime).await?)
    } else {
        None
    };
    let mut single = single_remembers(&runtime, &agents, &mut text, args, has_projections).await?;
    meter.phase("single remembers");
    let mut recall = recalls(&runtime, &agents, &mut text, args).await?;
    meter.phase("recalls");
    let console = console_reads(&runtime, &agents, &mut text, args.queries.clamp(1, 200)).await?;
    let embedder = services.embedder_model().await;
    services.close().await?;
    drop(runtime);
    meter.phase("console reads, close");
    let restart = restart_and_sleep(settings, args, &mut meter).await?;
    let auth = auth_overhead(settings, args.queries.min(1000)).await?;
    meter.phase("HTTP servers");
    let extraction = extraction_cost();

    single.lag_samples.sort_by(f64::total_cmp);
    single.latencies.sort_by(f64::total_cmp);
    recall.latencies.sort_by(f64::total_cmp);
    Ok(BenchReport {
        memories: args.memories,
        agents: args.agents,
        embedder,
        batch_per_second: args.memories as f64 / batch_time.as_secs_f64().max(1e-9),
        single_per_second: args.single as f64 / single.elapsed.as_secs_f64().max(1e-9),
        single_p50_ms: percentile(&single.latencies, 50.0),
        single_p99_ms: percentile(&single.latencies, 99.0),
        recall_p50_ms: percentile(&recall.latencies, 50.0),
        recall_p95_ms: percentile(&recall.latencies, 95.0),
        recall_p99_ms: percentile(&recall.latencies, 99.0),
        recall_stage_mean_ms: recall.stage_mean_ms,
        ready_after_restart_ms: restart.ready.as_secs_f64() * 1000.0,
        sleep_cycle_seconds: restart.sleep_cycle.as_secs_f64(),
        sleep_cycle_processed: restart.processed,
        sleep_cycle_consolidated: restart.consolidated,
        during_sleep: restart.during_sleep,
        peak_rss_mib: meter.peak_mib(),
        memory_by_phase: meter.phases,
        backends: format!(
            "store {}, working {}, graph {}",
            settings.storage.backend, settings.working.backend, settings.graph.backend
        ),
        projection_lag_p95_ms: has_projections.then(|| percentile(&single.lag_samples, 95.0)),
        // Measured after the load, so nothing else runs beside it.
        projection_drain_seconds,
        extraction_p50_us: extraction.0,
        extraction_p99_us: extraction.1,
        auth,
        console,
    })
}

/// The hand-labelled sentences of agent traffic the entity rules are measured on.
const EXTRACTION_SAMPLE: &str = concat!(
    include_str!("../actors/src/policy/entities_sample.jsonl"),
    include_str!("../actors/src/policy/entities_heldout.jsonl")
);

/// Time entity, fact and alias extraction of each sample sentence (20 rounds): p50
/// and p99 per memory in µs.
fn extraction_cost() -> (f64, f64) {
    let texts: Vec<String> = EXTRACTION_SAMPLE
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|v| v["text"].as_str().map(str::to_string))
        .collect();
    let known = std::collections::HashSet::new();
    let mut samples = Vec::with_capacity(texts.len() * 20);
    for _ in 0..20 {
        for text in &texts {
            let started = Instant::now();
            let mentions = mnemos_actors::policy::entities::extract(text, &known);
            let facts = mnemos_actors::policy::facts::extract_facts(text, &mentions, None);
            let aliases = mnemos_actors::policy::aliases::stated_aliases(text, &mentions);
            std::hint::black_box((facts, aliases));
            samples.push(started.elapsed().as_secs_f64() * 1e6);
        }
    }
    samples.sort_by(f64::total_cmp);
    (percentile(&samples, 50.0), percentile(&samples, 99.0))
}

/// The console's reads, as its routes make them, `samples` of each over the agents.
async fn console_reads(
    runtime: &Runtime,
    agents: &[AgentId],
    text: &mut TextGenerator,
    samples: usize,
) -> anyhow::Result<ConsoleFigures> {
    use crate::contract::wire::ListParams;
    let caller = crate::auth::Caller::operator(crate::auth::Surface::Rest);
    let failed_api = |e: mnemos_actors::MemoryError| failed(e);
    let page = |agent: &AgentId, change: &dyn Fn(&mut ListParams)| {
        let mut params = ListParams {
            agent_id: Some(agent.local().to_string()),
            limit: Some(50),
            with_total: Some(true),
            ..ListParams::default()
        };
        change(&mut params);
        params
    };
    let (mut first, mut full_text, mut filtered) = (Vec::new(), Vec::new(), Vec::new());
    for n in 0..samples {
        let agent = &agents[n % agents.len()];
        let started = Instant::now();
        crate::contract::browse::agents(runtime, &caller)
            .await
            .map_err(failed_api)?;
        crate::contract::memories::list_memories(runtime, &caller, page(agent, &|_| {}))
            .await
            .map_err(failed_api)?;
        first.push(started.elapsed().as_secs_f64() * 1000.0);

        let word = text.sentence(1, 1);
        let word = word.trim_end_matches('.').to_string();
        let started = Instant::now();
        crate::contract::memories::list_memories(
            runtime,
            &caller,
            page(agent, &|p| p.q = Some(word.clone())),
        )
        .await
        .map_err(failed_api)?;
        full_text.push(started.elapsed().as_secs_f64() * 1000.0);

        let now = chrono::Utc::now();
        let started = Instant::now();
        crate::contract::memories::list_memories(
            runtime,
            &caller,
            page(agent, &|p| {
                p.memory_type = Some("episodic".into());
                p.occurred_after = Some(now - chrono::Duration::days(30));
                p.occurred_before = Some(now);
            }),
        )
        .await
        .map_err(failed_api)?;
        filtered.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    for figures in [&mut first, &mut full_text, &mut filtered] {
        figures.sort_by(f64::total_cmp);
    }
    Ok(ConsoleFigures {
        samples,
        first_screen_p50_ms: percentile(&first, 50.0),
        first_screen_p95_ms: percentile(&first, 95.0),
        full_text_p50_ms: percentile(&full_text, 50.0),
        full_text_p95_ms: percentile(&full_text, 95.0),
        filtered_p50_ms: percentile(&filtered, 50.0),
        filtered_p95_ms: percentile(&filtered, 95.0),
    })
}

/// Two servers on fresh data directories beside the benchmark's, one with keys, one
/// without; the same requests to each, interleaved.
async fn auth_overhead(settings: &Settings, requests: usize) -> anyhow::Result<AuthFigures> {
    use crate::auth::keys::{generate, hash_secret, ApiKey, Authenticator};
    let root = settings.data_dir.join("auth-bench");
    let mut servers = Vec::new();
    let mut secret = None;
    for mode in ["keys", "none"] {
        let mut s = settings.clone();
        s.data_dir = root.join(mode);
        s.server.bind = "127.0.0.1:0".into();
        s.auth.mode = mode.into();
        s.auth.requests_per_window = 0;
        s.auth.writes_per_window = 0;
        // On the embedded backends: what is measured is the identity layer, not a server.
        s.storage.backend = "sqlite".into();
        s.storage.path = String::new();
        s.graph.backend = "sql".into();
        s.vectors.backend = "embedded".into();
        s.working.backend = "memory".into();
        std::fs::create_dir_all(&s.data_dir)?;
        if mode == "keys" {
            let record = crate::store::SystemOfRecord::open(&s)
                .await
                .map_err(failed)?;
            let (id, raw, shown) = generate();
            record
                .keys()
                .create_key(&ApiKey {
                    id,
                    name: "bench".into(),
                    tenant: mnemos_actors::model::TenantId::parse("bench").map_err(failed)?,
                    agent: Some(AgentId::parse("bencher").map_err(failed)?),
                    scopes: vec![crate::auth::Scope::Read, crate::auth::Scope::Write],
                    secret_hash: hash_secret(&raw),
                    created_at: chrono::Utc::now(),
                    last_used_at: None,
                    expires_at: None,
                    revoked_at: None,
                })
                .await
                .map_err(failed)?;
            // The identity check alone, on a cached key.
            let authenticator = Authenticator::new(record.keys(), s.auth.rate_limits());
            let header = format!("Bearer {shown}");
            let mut micros = Vec::with_capacity(10_000);
            for _ in 0..10_000 {
                let started = Instant::now();
                authenticator
                    .authenticate(
                        Some(&header),
                        crate::auth::Surface::Rest,
                        chrono::Utc::now(),
                    )
                    .await
                    .map_err(failed)?;
                micros.push(started.elapsed().as_secs_f64() * 1e6);
            }
            micros.sort_by(f64::total_cmp);
            secret = Some((shown, micros));
            record.close().await;
        }
        let app = crate::app::Application::build(s).await?;
        let address = format!("http://{}", app.local_addr());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(app.run_until(async move {
            let _ = rx.await;
        }));
        servers.push((address, tx, task));
    }
    let (shown, micros) = secret.expect("the keys server was set up");
    let client = reqwest::Client::new();
    let mut text = TextGenerator::new(7);
    let mut latencies: [Vec<f64>; 4] = Default::default();
    for phase in ["remember", "recall"] {
        for n in 0..requests {
            for (which, (address, _, _)) in servers.iter().enumerate() {
                let content = text.sentence(6, 14);
                let (path, body) = match phase {
                    "remember" => (
                        "/tools/remember",
                        serde_json::json!({"agent_id": "bencher", "content": content}),
                    ),
                    _ => (
                        "/tools/recall",
                        serde_json::json!({"agent_id": "bencher", "query": content, "limit": 5}),
                    ),
                };
                let mut request = client.post(format!("{address}{path}")).json(&body);
                if which == 0 {
                    request = request.bearer_auth(&shown);
                }
                let started = Instant::now();
                let response = request.send().await?;
                anyhow::ensure!(
                    response.status().is_success(),
                    "{phase} {n} answered {}",
                    response.status()
                );
                let _ = response.bytes().await?;
                let slot = usize::from(phase == "recall") * 2 + which;
                latencies[slot].push(started.elapsed().as_secs_f64() * 1000.0);
            }
        }
    }
    for (_, tx, task) in servers {
        let _ = tx.send(());
        task.await??;
    }
    let _ = std::fs::remove_dir_all(&root);
    for l in latencies.iter_mut() {
        l.sort_by(f64::total_cmp);
    }
    Ok(AuthFigures {
        requests,
        remember_p50_ms_keys: percentile(&latencies[0], 50.0),
        remember_p50_ms_none: percentile(&latencies[1], 50.0),
        recall_p50_ms_keys: percentile(&latencies[2], 50.0),
        recall_p50_ms_none: percentile(&latencies[3], 50.0),
        authenticate_p50_us: percentile(&micros, 50.0),
        authenticate_p99_us: percentile(&micros, 99.0),
    })
}

/// Load `args.memories` memories through remember_batch, agent by agent; the time spent
/// inside the calls.
async fn load_batches(
    runtime: &Runtime,
    agents: &[AgentId],
    text: &mut TextGenerator,
    args: &BenchArgs,
) -> anyhow::Result<Duration> {
    let base = chrono::Utc::now() - chrono::Duration::days(365);
    let progress = bar(args.memories, "batch");
    let mut loaded = 0usize;
    let mut batch_time = Duration::ZERO;
    while loaded < args.memories {
        let agent = &agents[(loaded / args.batch_size) % agents.len()];
        let size = args.batch_size.min(args.memories - loaded);
        let inputs: Vec<RememberInput> = (0..size)
            .map(|i| RememberInput {
                content: text.sentence(8, 45),
                tags: vec![format!("topic-{}", (loaded + i) % 20)],
                occurred_at: Some(base + chrono::Duration::minutes((loaded + i) as i64)),
                session_id: mnemos_actors::model::SessionId::parse(&format!(
                    "s{}",
                    (loaded + i) / 50
                ))
                .ok(),
                ..Default::default()
            })
            .collect();
        let started = Instant::now();
        runtime
            .remember_batch(agent, inputs)
            .await
            .map_err(failed)?;
        batch_time += started.elapsed();
        loaded += size;
        progress.set_position(loaded as u64);
    }
    progress.finish();
    Ok(batch_time)
}

/// Wait until every projection has applied the whole outbox; the seconds it took.
pub(crate) async fn drain_projections(runtime: &Runtime) -> anyhow::Result<f64> {
    let drain_started = Instant::now();
    loop {
        let status = runtime.projection_status().await.unwrap_or_default();
        if status.iter().all(|p| p.lag_entries == 0 && p.state == "up") {
            return Ok(drain_started.elapsed().as_secs_f64());
        }
        if drain_started.elapsed() > Duration::from_secs(600) {
            anyhow::bail!("projections did not catch up within 10 minutes: {status:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Time `args.single` sequential remember calls, sampling projection lag every 50.
async fn single_remembers(
    runtime: &Runtime,
    agents: &[AgentId],
    text: &mut TextGenerator,
    args: &BenchArgs,
    has_projections: bool,
) -> anyhow::Result<SingleFigures> {
    let progress = bar(args.single, "single");
    let mut lag_samples: Vec<f64> = Vec::new();
    let mut latencies = Vec::with_capacity(args.single);
    let single_started = Instant::now();
    for n in 0..args.single {
        let input = RememberInput {
            content: text.sentence(8, 45),
            ..Default::default()
        };
        let started = Instant::now();
        runtime
            .remember(&agents[n % agents.len()], input)
            .await
            .map_err(failed)?;
        latencies.push(started.elapsed().as_secs_f64() * 1000.0);
        if has_projections && n % 50 == 49 {
            if let Ok(status) = runtime.projection_status().await {
                lag_samples.extend(status.iter().map(|p| p.lag_seconds * 1000.0));
            }
        }
        progress.inc(1);
    }
    let elapsed = single_started.elapsed();
    progress.finish();
    Ok(SingleFigures {
        latencies,
        elapsed,
        lag_samples,
    })
}

/// Time `args.queries` recalls and sum each stage's time.
async fn recalls(
    runtime: &Runtime,
    agents: &[AgentId],
    text: &mut TextGenerator,
    args: &BenchArgs,
) -> anyhow::Result<RecallFigures> {
    let progress = bar(args.queries, "recall");
    let mut latencies = Vec::with_capacity(args.queries);
    let mut stage_totals: BTreeMap<&'static str, f64> = Default::default();
    for n in 0..args.queries {
        let query = text.sentence(3, 8);
        let started = Instant::now();
        let outcome = runtime
            .recall(RecallInput {
                limit: Some(10),
                ..RecallInput::new(agents[n % agents.len()].clone(), query)
            })
            .await
            .map_err(failed)?;
        latencies.push(started.elapsed().as_secs_f64() * 1000.0);
        for (stage, ms) in outcome.timings_ms {
            *stage_totals.entry(stage).or_insert(0.0) += ms;
        }
        progress.inc(1);
    }
    progress.finish();
    let stage_mean_ms = stage_totals
        .into_iter()
        .map(|(k, v)| (k.to_string(), v / args.queries as f64))
        .collect();
    Ok(RecallFigures {
        latencies,
        stage_mean_ms,
    })
}

/// Reopen the data directory (the index is rebuilt from stored vectors), check every
/// vector came back, and run one full sleep cycle as the scheduler runs it (lease included).
async fn restart_and_sleep(
    settings: &Settings,
    args: &BenchArgs,
    meter: &mut MemoryMeter,
) -> anyhow::Result<RestartFigures> {
    let started = Instant::now();
    let reopened = Services::open_for_command(settings).await?;
    let ready = started.elapsed();
    meter.phase("restart");
    let indexed = reopened
        .runtime
        .health()
        .await
        .index
        .map(|i| i.vectors)
        .unwrap_or(0);
    // Near-duplicate texts are merged on write (the default embedder finds more of the
    // generator's templates alike than the builtin one), so every stored memory counts.
    let stored = reopened.runtime.count().await.unwrap_or(0) as usize;
    anyhow::ensure!(
        indexed >= stored.min(args.memories),
        "after restart only {indexed} of {stored} stored vectors were indexed"
    );
    let started = Instant::now();
    let runs = reopened
        .runtime
        .run_scheduled(
            mnemos_actors::actors::consolidator::ScheduledJob::SleepCycle,
            chrono::Utc::now(),
        )
        .await
        .map_err(failed)?
        .unwrap_or_default();
    let sleep_cycle = started.elapsed();
    meter.phase("sleep cycle");
    let processed = runs.iter().map(|r| u64::from(r.processed)).sum();
    let consolidated = runs.iter().map(|r| u64::from(r.consolidated)).sum();
    // The runs' reports (every cluster's outcome: about 8 MB at 100,000 memories) are
    // the benchmark's, not the service's: they are not kept through the next phases.
    drop(runs);
    let during_sleep = remember_during_sleep(&reopened.runtime, args, meter).await?;
    reopened.close().await?;
    Ok(RestartFigures {
        ready,
        sleep_cycle,
        processed,
        consolidated,
        during_sleep,
    })
}

/// Load a tenth of the benchmark's memories again for a tenth as many new agents, then
/// let the projections catch up, run a sleep cycle and, until it ends, remember one
/// memory after another for the first agents, timing each: what a write waits behind
/// the cycle's work. The first cycle was timed alone, so its figure keeps its meaning.
async fn remember_during_sleep(
    runtime: &Runtime,
    args: &BenchArgs,
    meter: &mut MemoryMeter,
) -> anyhow::Result<DuringSleepFigures> {
    let mut text = TextGenerator::new(4242);
    let fresh = BenchArgs {
        memories: (args.memories / 10).max(1),
        agents: (args.agents / 10).max(1),
        ..args.clone()
    };
    let new_agents = bench_agents("bench-fresh", fresh.agents)?;
    load_batches(runtime, &new_agents, &mut text, &fresh).await?;
    // The projections (the entity index among them) catch up with the load first, so
    // what the remembers wait behind is the cycle, not the load's aftermath.
    if !runtime
        .projection_status()
        .await
        .unwrap_or_default()
        .is_empty()
    {
        drain_projections(runtime).await?;
    }
    meter.phase("second load");
    let writers = bench_agents("bench-agent", args.agents.max(1))?;
    let started = Instant::now();
    let cycle = tokio::spawn({
        let runtime = runtime.clone();
        async move {
            runtime
                .run_scheduled(
                    mnemos_actors::actors::consolidator::ScheduledJob::SleepCycle,
                    chrono::Utc::now(),
                )
                .await
        }
    });
    let mut latencies = Vec::new();
    while !cycle.is_finished() {
        let input = RememberInput {
            content: text.sentence(8, 45),
            ..Default::default()
        };
        let call = Instant::now();
        runtime
            .remember(&writers[latencies.len() % writers.len()], input)
            .await
            .map_err(failed)?;
        latencies.push(call.elapsed().as_secs_f64() * 1000.0);
    }
    let runs = cycle
        .await?
        .map_err(failed)?
        .ok_or_else(|| anyhow::anyhow!("the second sleep cycle was skipped: its lease was held"))?;
    let cycle_seconds = started.elapsed().as_secs_f64();
    meter.phase("second sleep cycle with remembers");
    latencies.sort_by(f64::total_cmp);
    Ok(DuringSleepFigures {
        loaded: fresh.memories,
        agents: fresh.agents,
        cycle_seconds,
        consolidated: runs.iter().map(|r| u64::from(r.consolidated)).sum(),
        remembers: latencies.len(),
        remember_p50_ms: percentile(&latencies, 50.0),
        remember_p99_ms: percentile(&latencies, 99.0),
        remember_max_ms: latencies.last().copied().unwrap_or(0.0),
    })
}

/// `count` agent ids named `prefix-0`, `prefix-1`, …
fn bench_agents(prefix: &str, count: usize) -> anyhow::Result<Vec<AgentId>> {
    (0..count)
        .map(|n| AgentId::parse(&format!("{prefix}-{n}")).map_err(failed))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_pick_ranks() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&values, 50.0), 51.0);
        assert_eq!(percentile(&values, 99.0), 99.0);
        assert_eq!(percentile(&[], 50.0), 0.0);
    }

    #[test]
    fn generated_text_is_deterministic_and_bounded() {
        let mut a = TextGenerator::new(7);
        let mut b = TextGenerator::new(7);
        let s = a.sentence(8, 12);
        assert_eq!(s, b.sentence(8, 12));
        let words = s.split(' ').count();
        assert!((8..=12).contains(&words));
    }
}
