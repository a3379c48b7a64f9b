//! mnemos as a library: spawn the runtime in-process on the embedded (in-memory)
//! stores and talk to its actors by message through the typed `Runtime` handle; no
//! HTTP, no files. Remembers a few experiences, recalls, runs one sleep cycle and
//! reads the run log, then shares state between two nodes through a KV namespace.
//!
//! Run it with `cargo run --example library`; `cargo test --workspace` runs it too.

use mnemos_actors::kv::NamespaceName;
use mnemos_actors::model::{AgentId, MemoryType};
use mnemos_actors::policy::clustering::ClusterParams;
use mnemos_actors::runtime::{
    KvPutInput, RecallInput, RememberInput, RuntimeConfig, RuntimeParts, SleepSettings,
};
use mnemos_actors::{MemoryResult, Runtime};

/// What the example observed, so its test can check it.
#[derive(Debug)]
pub struct Observed {
    /// The top recalled memory's text.
    pub top_recalled: String,
    /// Semantic or procedural memories the sleep cycle created.
    pub new_knowledge: u32,
    /// Runs in the run log afterwards.
    pub runs_logged: usize,
    /// The KV entry one node read after another wrote it.
    pub shared_value: serde_json::Value,
    /// Keys the bounded namespace evicted.
    pub evicted: Vec<String>,
}

/// The whole walk-through.
pub async fn run() -> MemoryResult<Observed> {
    let config = RuntimeConfig {
        sleep: SleepSettings {
            // The built-in hashing embedder scores paraphrases lower than a sentence model.
            clustering: ClusterParams {
                threshold: 0.6,
                ..ClusterParams::default()
            },
            ..SleepSettings::default()
        },
        ..RuntimeConfig::default()
    };
    let runtime = Runtime::start(RuntimeParts::in_memory(), config).await?;
    let agent = AgentId::parse("example-agent")?;

    for text in [
        "I drank a flat white coffee at the Blue Bottle cafe this morning",
        "Had a flat white coffee at Blue Bottle cafe again today",
        "Morning flat white coffee at the Blue Bottle cafe, as usual",
        "Staging runs on port 5433",
    ] {
        let stored = runtime
            .remember(
                &agent,
                RememberInput {
                    content: text.to_string(),
                    ..Default::default()
                },
            )
            .await?;
        println!(
            "remembered {} as {} ({})",
            stored.memory.id,
            stored.memory.memory_type.as_str(),
            stored.routing.reason
        );
    }

    let recalled = runtime
        .recall(RecallInput::new(
            agent.clone(),
            "which port does staging use?".to_string(),
        ))
        .await?;
    let top = recalled
        .hits
        .first()
        .map(|hit| hit.memory.content.clone())
        .unwrap_or_default();
    println!("recall: {top:?} in {:.2} ms", recalled.took_ms);

    // One sleep-cycle pass now (the scheduler would do this every 30 minutes).
    let run = runtime.consolidate(&agent, "example").await?;
    println!(
        "sleep cycle: {} candidates, {} consolidated into {} semantic + {} procedural",
        run.processed, run.consolidated, run.new_semantic, run.new_procedural
    );
    let knowledge = runtime
        .recall(RecallInput {
            types: vec![MemoryType::Semantic],
            ..RecallInput::new(agent.clone(), "coffee".to_string())
        })
        .await?;
    if let Some(hit) = knowledge.hits.first() {
        println!("knowledge: {}", hit.memory.content);
    }

    let runs = runtime.runs(Some(&agent), 10).await?;

    // Two nodes of an orchestrator share a KV namespace by naming it; it keeps at most 2 keys.
    let planner = AgentId::parse("planner")?;
    let worker = AgentId::parse("worker")?;
    let board = NamespaceName::parse("board")?;
    runtime.kv_configure(&board, 2).await?;
    let mut evicted = Vec::new();
    for (key, goal) in [
        ("task:1", "write docs"),
        ("task:2", "fix bug"),
        ("task:3", "ship"),
    ] {
        let put = runtime
            .kv_put(
                &planner,
                &board,
                key,
                KvPutInput {
                    value: serde_json::json!({ "goal": goal }),
                    tags: vec!["open".into()],
                    ttl_seconds: None,
                },
            )
            .await?;
        evicted.extend(put.evicted);
    }
    let shared = runtime.kv_get(&board, "task:3").await?;
    println!(
        "kv: {} read {} written by {}; evicted {evicted:?}",
        worker, shared.key, shared.written_by
    );
    runtime.shutdown().await?;
    Ok(Observed {
        top_recalled: top,
        new_knowledge: run.new_semantic + run.new_procedural,
        runs_logged: runs.len(),
        shared_value: shared.value,
        evicted,
    })
}

#[tokio::main]
async fn main() -> MemoryResult<()> {
    run().await.map(|_| ())
}

#[cfg(test)]
mod tests {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_library_example_runs() {
        let observed = super::run().await.expect("the example runs");
        assert!(observed.top_recalled.contains("5433"), "{observed:?}");
        assert_eq!(observed.new_knowledge, 1, "{observed:?}");
        assert_eq!(observed.runs_logged, 1);
        assert_eq!(observed.shared_value["goal"], "ship");
        assert_eq!(observed.evicted, vec!["task:1".to_string()]);
    }
}
