//! The consolidator/archiver actor: carries out the sleep cycle and archival.
//!
//! A sleep-cycle pass for one agent ([`consolidate_agent`]) reflects (stats), takes the
//! candidates (active episodic/affective memories with consolidation_level < 1),
//! clusters them ([`crate::policy::clustering`]), asks inner thought to abstract each
//! cluster into a semantic or procedural memory, commits each cluster in its own
//! transaction (derived memory + `derived_from` edges + sources raised to level 1),
//! then applies the rule decisions for the rest (forget → `archived`, promote →
//! semantic, keep) and purges memories forgotten longer than `purge_after_days` ago.
//! Archival ([`archive_idle_sessions`]) summarises sessions idle for `idle_hours` and
//! clears their working memory. Both are idempotent and both write a run record.
//!
//! Scheduled firings ([`run_scheduled`]) first claim a lease in the system of record,
//! so that with several processes on one database each firing runs exactly once.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use ractor::{Actor, ActorProcessingErr, ActorRef};

use super::episodic::EpisodicHandle;
use super::graph::GraphHandle;
use super::vectors::VectorsHandle;
use super::working::WorkingHandle;
use super::{injected_fault, Caller, Reply};
use crate::clock::Clock;
use crate::embedding::dot;
use crate::error::{ErrorCode, MemoryResult};
use crate::model::{
    apply_patch, version_of, AgentId, Association, ConsolidationRun, Memory, MemoryId, MemoryPatch,
    MemoryStatus, MemoryType, MemoryVersion,
};
use crate::policy::clustering::{centroid, cluster_within_groups, ClusterItem, ClusterParams};
use crate::policy::consolidation::{decide, is_candidate, Decision, ForgetPolicy, PromotePolicy};
use crate::policy::retention::RetentionPolicy;
use crate::policy::stats::agent_stats;
use crate::store::{ConsolidationCommit, EmbeddingRecord, SessionArchive, StoredMemory};
use crate::supervisor::InjectedFault;
use crate::thought::{ClusterDigest, DigestMember, InnerThought, SessionDigest};

mod profiles;

use profiles::refresh_profiles;

/// Ref of the consolidator actor.
pub type ConsolidatorRef = ActorRef<ConsolidatorMsg>;

/// The tag of archive summaries (sessions and compactions).
pub const ARCHIVE_SUMMARY_TAG: &str = "archive_summary";

/// A scheduled job of BackgroundCognition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScheduledJob {
    /// The sleep cycle (consolidation of every agent).
    SleepCycle,
    /// Archival of idle sessions.
    Archival,
}

impl ScheduledJob {
    /// Lease and log name of the job.
    pub fn name(self) -> &'static str {
        match self {
            ScheduledJob::SleepCycle => "sleep_cycle",
            ScheduledJob::Archival => "archival",
        }
    }
}

/// Messages of the consolidator actor.
pub enum ConsolidatorMsg {
    /// Consolidate one agent now (no lease: each cluster's transaction guards races).
    Consolidate {
        /// Whose memories.
        agent: AgentId,
        /// Who asked (`api`, `cli`, ...), recorded in the run.
        trigger: String,
        /// The run record.
        reply: Reply<ConsolidationRun>,
    },
    /// Archive idle sessions now.
    Archive {
        /// Who asked, recorded in the run.
        trigger: String,
        /// The run record.
        reply: Reply<ConsolidationRun>,
    },
    /// A scheduled firing: claim its lease, then run the job (sent by BackgroundCognition).
    Scheduled {
        /// Which job.
        job: ScheduledJob,
        /// The firing's scheduled instant (the lease slot shared by every process).
        slot: DateTime<Utc>,
        /// Runs recorded, or None when another process claimed the firing (tests listen here).
        reply: Option<Reply<Option<Vec<ConsolidationRun>>>>,
    },
    /// Test hook: fail the actor as if its state were broken.
    InjectFault,
}

impl From<InjectedFault> for ConsolidatorMsg {
    fn from(_: InjectedFault) -> Self {
        ConsolidatorMsg::InjectFault
    }
}

/// The typed handle of the consolidator actor (retries while it restarts).
#[derive(Clone)]
pub struct ConsolidatorHandle(pub(crate) Caller<ConsolidatorMsg>);

/// How long a sleep-cycle request may run (a large agent, or an LLM, takes minutes).
const SLEEP_ANSWER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3600);

impl ConsolidatorHandle {
    /// One sleep-cycle pass for `agent` now.
    pub async fn consolidate(
        &self,
        agent: &AgentId,
        trigger: &str,
    ) -> MemoryResult<ConsolidationRun> {
        self.0
            .ask_within(Some(SLEEP_ANSWER_TIMEOUT), |reply| {
                ConsolidatorMsg::Consolidate {
                    agent: agent.clone(),
                    trigger: trigger.into(),
                    reply,
                }
            })
            .await
    }
    /// Archival of idle sessions now.
    pub async fn archive(&self, trigger: &str) -> MemoryResult<ConsolidationRun> {
        self.0
            .ask_within(Some(SLEEP_ANSWER_TIMEOUT), |reply| {
                ConsolidatorMsg::Archive {
                    trigger: trigger.into(),
                    reply,
                }
            })
            .await
    }
    /// One scheduled firing now, as the scheduler would (claiming its lease).
    pub async fn run_scheduled(
        &self,
        job: ScheduledJob,
        slot: DateTime<Utc>,
    ) -> MemoryResult<Option<Vec<ConsolidationRun>>> {
        self.0
            .ask_within(Some(SLEEP_ANSWER_TIMEOUT), |reply| {
                ConsolidatorMsg::Scheduled {
                    job,
                    slot,
                    reply: Some(reply),
                }
            })
            .await
    }
    /// Hand a scheduled firing to the running consolidator without waiting; false when
    /// it is restarting (the firing is skipped; the next one covers it).
    pub fn fire(&self, job: ScheduledJob, slot: DateTime<Utc>) -> bool {
        self.0.cast(ConsolidatorMsg::Scheduled {
            job,
            slot,
            reply: None,
        })
    }
}

/// Lease settings for scheduled firings.
#[derive(Debug, Clone)]
pub struct LeaseSettings {
    /// This process's holder id (host, pid and a random part).
    pub holder: String,
    /// How long a claim lasts without renewal; renewed after every agent.
    pub ttl: Duration,
}

/// Start-up arguments (kept by the supervisor and reused on restart).
#[derive(Clone)]
pub struct ConsolidatorArgs {
    /// The system of record (memories, run log, leases).
    pub episodic: EpisodicHandle,
    /// The embedder and vector index, so new knowledge is recallable and forgotten
    /// memories leave at once.
    pub vectors: VectorsHandle,
    /// The association graph, which receives `derived_from` edges.
    pub graph: GraphHandle,
    /// Working-memory windows to clear on archival.
    pub working: WorkingHandle,
    /// True when the system of record writes a cluster's edges in the cluster's own
    /// transaction (SQL store, SQL graph); otherwise they are written to the graph after.
    pub edges_in_store: bool,
    /// Abstracts clusters and summarises sessions.
    pub thought: Arc<dyn InnerThought>,
    /// Time source.
    pub clock: Arc<dyn Clock>,
    /// Retention curve.
    pub retention: RetentionPolicy,
    /// Forgetting thresholds.
    pub forget: ForgetPolicy,
    /// Promotion thresholds.
    pub promote: PromotePolicy,
    /// Clustering parameters.
    pub clustering: ClusterParams,
    /// Days an archived-by-forgetting memory is kept before it is deleted (0: never purge).
    pub purge_after_days: i64,
    /// Hours without activity after which a session is archived.
    pub idle_hours: i64,
    /// The entity index (a projection, read only here): the entities and facts the
    /// sleep cycle writes profiles from. None: no profiles.
    pub entities: Option<Arc<dyn crate::store::entities::EntityIndex>>,
    /// Memories an entity must be named in before it gets a profile (0: never).
    pub profile_min_mentions: u64,
    /// Lease of scheduled firings.
    pub lease: LeaseSettings,
}

/// The actor's state: its arguments (it keeps no other state between runs).
pub struct ConsolidatorState {
    /// Handles, clock, models and policies.
    args: ConsolidatorArgs,
}

/// The consolidator actor.
#[derive(Clone)]
pub struct ConsolidatorActor;

/// What happened to one cluster, for the run report.
#[derive(Debug, serde::Serialize)]
struct ClusterOutcome {
    /// The derived memory (None when the commit was skipped).
    derived_id: Option<String>,
    /// Its type.
    memory_type: &'static str,
    /// Source ids.
    sources: Vec<String>,
    /// Inner-thought provider that wrote it.
    provider: &'static str,
    /// Why the configured provider was not used, if it was not.
    fallback: Option<String>,
    /// Why the cluster was skipped, if it was.
    skipped: Option<String>,
}

/// What the clusters of one run made, for the run record.
#[derive(Default)]
struct ClusterTally {
    /// Sources of clusters that committed (a skipped cluster's members get rule decisions).
    clustered: HashSet<MemoryId>,
    /// One outcome per cluster.
    outcomes: Vec<ClusterOutcome>,
    /// Sources raised to consolidation level 1.
    consolidated: u32,
    /// Semantic memories made.
    new_semantic: u32,
    /// Procedural memories made.
    new_procedural: u32,
    /// LLM tokens spent.
    tokens: u64,
    /// Clusters whose abstraction fell back to the rules.
    fallbacks: u32,
}

/// What the per-candidate rule decisions did.
#[derive(Default)]
struct DecisionTally {
    /// Count per decision name.
    decisions: BTreeMap<&'static str, u32>,
    /// Memories archived by forgetting.
    forgotten: Vec<MemoryId>,
    /// Memories promoted to semantic.
    promoted: Vec<MemoryId>,
    /// Why each forgotten or promoted memory was (`{id, action, reason}`), for the run log.
    log: Vec<serde_json::Value>,
}

fn is_race(error: &crate::error::MemoryError) -> bool {
    error.code == ErrorCode::Conflict || error.code == ErrorCode::NotFound
}

/// The next state of a memory whose knowledge now lives in an abstraction.
fn consolidated(memory: &Memory, now: DateTime<Utc>) -> Memory {
    let mut next = memory.clone();
    next.consolidation_level = 1.0;
    next.version = memory.version + 1;
    next.updated_at = now;
    next
}

/// A new active memory written by the sleep cycle itself (an abstraction or a session
/// summary): level 1, so it is never a sleep-cycle candidate, and not shared.
fn product_of_consolidation(
    agent: &AgentId,
    memory_type: MemoryType,
    content: String,
    occurred_at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Memory {
    Memory {
        id: MemoryId::generate(),
        agent_id: agent.clone(),
        memory_type,
        content,
        title: None,
        importance: 0.5,
        tags: Vec::new(),
        session_id: None,
        project_id: None,
        occurred_at,
        created_at: now,
        updated_at: now,
        last_accessed_at: now,
        access_count: 0,
        consolidation_level: 1.0,
        valence: None,
        arousal: None,
        status: MemoryStatus::Active,
        shared: false,
        metadata: serde_json::json!({}),
        source: None,
        version: 1,
    }
}

/// The index entry of a memory with `vector`.
fn index_entry(memory: &Memory, vector: Vec<f32>) -> EmbeddingRecord {
    EmbeddingRecord::of(memory, vector)
}

/// One sleep-cycle pass for one agent. Tests, the CLI and `POST /tools/consolidate` call it directly.
pub async fn consolidate_agent(
    args: &ConsolidatorArgs,
    agent: &AgentId,
    trigger: &str,
) -> MemoryResult<ConsolidationRun> {
    let started_at = args.clock.now();
    let memories = args.episodic.agent_memories(agent).await?;
    let stats = agent_stats(&memories, &args.retention, started_at);
    let mut candidates: Vec<&Memory> = memories.iter().filter(|m| is_candidate(m)).collect();
    candidates.sort_by(|a, b| a.id.cmp(&b.id));
    let ids: Vec<MemoryId> = candidates.iter().map(|m| m.id.clone()).collect();
    let embeddings: HashMap<MemoryId, Vec<f32>> = args
        .episodic
        .embeddings_of(&ids)
        .await?
        .into_iter()
        .collect();
    // Only candidates with a stored embedding can be clustered (all of them, normally).
    let clusterable: Vec<&Memory> = candidates
        .iter()
        .copied()
        .filter(|m| embeddings.contains_key(&m.id))
        .collect();
    let clusters = plan_clusters(args, agent, &clusterable, &embeddings).await?;
    let mut tally = ClusterTally::default();
    let mut pending = Vec::new();
    let mut batch_started = started_at;
    for members in &clusters {
        let sources: Vec<&Memory> = members.iter().map(|&i| clusterable[i]).collect();
        if pending.is_empty() {
            batch_started = args.clock.now();
        }
        pending.push(abstract_cluster(args, agent, &sources, &embeddings, &mut tally).await);
        // A slow inner thought (an LLM) commits sooner: a crash loses little of its work.
        if pending.len() == CLUSTERS_PER_COMMIT
            || args.clock.now() - batch_started >= BATCH_THINKING_TIME
        {
            commit_clusters(args, std::mem::take(&mut pending), &mut tally).await?;
        }
    }
    commit_clusters(args, pending, &mut tally).await?;
    let decided =
        apply_decisions(args, &candidates, &embeddings, &tally.clustered, started_at).await?;
    let purged = purge_forgotten(args, agent, started_at).await?;
    let profiles = refresh_profiles(args, agent, &memories).await?;
    let run = ConsolidationRun {
        id: uuid::Uuid::now_v7().to_string(),
        agent_id: Some(agent.clone()),
        trigger: trigger.to_string(),
        started_at,
        finished_at: args.clock.now(),
        processed: candidates.len() as u32,
        consolidated: tally.consolidated,
        forgotten: decided.forgotten.len() as u32,
        new_semantic: tally.new_semantic,
        new_procedural: tally.new_procedural,
        report: serde_json::json!({
            "stats": stats,
            "clusters": tally.outcomes,
            "decisions": decided.decisions,
            "decision_log": decision_log(&decided.log, &purged, args.purge_after_days),
            "forgotten_ids": decided.forgotten,
            "promoted_ids": decided.promoted,
            "purged_ids": purged,
            "profiles": profiles,
            "inner_thought": {
                "provider": args.thought.provider_name(),
                "fallbacks": tally.fallbacks,
                "tokens": tally.tokens,
            },
            "clustering": {
                "threshold": args.clustering.threshold,
                "min_size": args.clustering.min_size,
                "max_size": args.clustering.max_size,
            },
        }),
    };
    args.episodic.record_run(&run).await?;
    tracing::info!(
        agent = %agent,
        processed = run.processed,
        clusters = clusters.len(),
        consolidated = run.consolidated,
        forgotten = run.forgotten,
        promoted = decided.promoted.len(),
        purged = purged.len(),
        trigger,
        "sleep cycle finished for agent"
    );
    Ok(run)
}

/// The clusters among `clusterable` (indexes into it): their embeddings, tags, times
/// and the association edges between them ([`cluster_within_groups`]); a cluster never
/// mixes projects, so its abstraction lands in its members' project and an isolated
/// project's knowledge is never abstracted into a memory visible elsewhere.
async fn plan_clusters(
    args: &ConsolidatorArgs,
    agent: &AgentId,
    clusterable: &[&Memory],
    embeddings: &HashMap<MemoryId, Vec<f32>>,
) -> MemoryResult<Vec<Vec<usize>>> {
    let position: HashMap<&MemoryId, usize> = clusterable
        .iter()
        .enumerate()
        .map(|(i, m)| (&m.id, i))
        .collect();
    let mut edge_pairs: HashSet<(usize, usize)> = HashSet::new();
    if !clusterable.is_empty() {
        let seeds: Vec<MemoryId> = clusterable.iter().map(|m| m.id.clone()).collect();
        for edge in args
            .graph
            .around(agent, &seeds, 1, seeds.len() * 8 + 64)
            .await?
        {
            if let (Some(&a), Some(&b)) = (position.get(&edge.from_id), position.get(&edge.to_id)) {
                edge_pairs.insert((a, b));
            }
        }
    }
    let items: Vec<ClusterItem> = clusterable
        .iter()
        .map(|m| ClusterItem {
            embedding: &embeddings[&m.id],
            tags: &m.tags,
            occurred_at: m.occurred_at,
        })
        .collect();
    let projects: Vec<Option<&crate::projects::ProjectId>> =
        clusterable.iter().map(|m| m.project_id.as_ref()).collect();
    Ok(cluster_within_groups(
        &items,
        &edge_pairs,
        &args.clustering,
        &projects,
    ))
}

/// Clusters committed per transaction of a run: one round of embedding, one store
/// transaction and one index update for this many, instead of one each per cluster.
const CLUSTERS_PER_COMMIT: usize = 64;

/// Inner-thought time after which a batch is committed however few clusters it holds.
const BATCH_THINKING_TIME: Duration = Duration::seconds(2);

/// One cluster abstracted and waiting for its commit.
struct PendingCluster {
    /// The abstraction (its embedding is computed with its batch's).
    derived: Memory,
    /// `derived_from` edges to the sources.
    edges: Vec<Association>,
    /// Each source's next state and the version it replaces.
    sources: Vec<(Memory, MemoryVersion)>,
    /// The run report's line for it (completed by the commit).
    outcome: ClusterOutcome,
}

/// Abstract one cluster: the derived memory, its `derived_from` edges and the sources
/// raised to level 1, ready for [`commit_clusters`].
async fn abstract_cluster(
    args: &ConsolidatorArgs,
    agent: &AgentId,
    sources: &[&Memory],
    embeddings: &HashMap<MemoryId, Vec<f32>>,
    tally: &mut ClusterTally,
) -> PendingCluster {
    let vectors: Vec<&[f32]> = sources
        .iter()
        .map(|m| embeddings[&m.id].as_slice())
        .collect();
    let center = centroid(&vectors);
    let digest = ClusterDigest {
        agent_id: agent.clone(),
        members: sources
            .iter()
            .zip(&vectors)
            .map(|(m, v)| DigestMember {
                content: m.content.clone(),
                tags: m.tags.clone(),
                occurred_at: m.occurred_at,
                centrality: dot(v, &center),
                importance: m.importance,
            })
            .collect(),
    };
    let thought = args.thought.abstract_cluster(&digest).await;
    tally.tokens += thought.tokens;
    if thought.fallback.is_some() {
        tally.fallbacks += 1;
    }
    let abstraction = thought.value;
    let memory_type = match abstraction.memory_type {
        MemoryType::Procedural => MemoryType::Procedural,
        _ => MemoryType::Semantic,
    };
    let now = args.clock.now();
    let source_ids: Vec<String> = sources.iter().map(|m| m.id.to_string()).collect();
    let derived = Memory {
        title: Some(abstraction.title.clone()),
        importance: abstraction.importance.clamp(0.0, 1.0),
        tags: abstraction.tags.clone(),
        project_id: sources[0].project_id.clone(),
        metadata: serde_json::json!({
            "derived_from": source_ids,
            "inner_thought": thought.provider,
            crate::model::PROVENANCE_KEY: { "surface": "sleep_cycle" },
        }),
        ..product_of_consolidation(
            agent,
            memory_type,
            abstraction.content.clone(),
            sources.iter().map(|m| m.occurred_at).max().unwrap_or(now),
            now,
        )
    };
    let edges: Vec<Association> = sources
        .iter()
        .map(|m| Association {
            agent_id: agent.clone(),
            from_id: derived.id.clone(),
            to_id: m.id.clone(),
            relation: "derived_from".into(),
            weight: 1.0,
            created_at: now,
        })
        .collect();
    PendingCluster {
        derived,
        edges,
        sources: sources
            .iter()
            .map(|m| (consolidated(m, now), version_of(m, "consolidate", now)))
            .collect(),
        outcome: ClusterOutcome {
            derived_id: None,
            memory_type: memory_type.as_str(),
            sources: source_ids,
            provider: thought.provider,
            fallback: thought.fallback.clone(),
            skipped: None,
        },
    }
}

/// Commit abstracted clusters: their abstractions embedded in one batch, then all of
/// them in one transaction. When a source changed while inner thought ran, that
/// transaction writes nothing and each cluster is committed in its own: the raced one
/// is skipped (left for the next run), the others land.
async fn commit_clusters(
    args: &ConsolidatorArgs,
    pending: Vec<PendingCluster>,
    tally: &mut ClusterTally,
) -> MemoryResult<()> {
    if pending.is_empty() {
        return Ok(());
    }
    // One model from embedding until the knowledge is stored and indexed.
    let _model_gate = args.vectors.hold().await;
    let texts: Vec<String> = pending.iter().map(|p| p.derived.content.clone()).collect();
    let embeddings = args.vectors.embed(&texts).await?;
    if embeddings.len() != pending.len() {
        return Err(crate::error::MemoryError::internal(format!(
            "the embedder returned {} vectors for {} texts",
            embeddings.len(),
            pending.len()
        )));
    }
    let commits: Vec<ConsolidationCommit> = pending
        .iter()
        .zip(&embeddings)
        .map(|(p, embedding)| ConsolidationCommit {
            derived: StoredMemory::new(p.derived.clone(), embedding.clone()),
            edges: p.edges.clone(),
            sources: p.sources.clone(),
        })
        .collect();
    let mut skipped: Vec<Option<String>> = vec![None; commits.len()];
    match args.episodic.commit_consolidation(&commits).await {
        Ok(()) => {}
        Err(error) if is_race(&error) => {
            for (commit, skip) in commits.iter().zip(&mut skipped) {
                match args
                    .episodic
                    .commit_consolidation(std::slice::from_ref(commit))
                    .await
                {
                    Ok(()) => {}
                    Err(error) if is_race(&error) => *skip = Some(error.message),
                    Err(error) => return Err(error),
                }
            }
        }
        Err(error) => return Err(error),
    }
    let mut entries = Vec::with_capacity(commits.len());
    for ((p, embedding), skip) in pending.into_iter().zip(embeddings).zip(skipped) {
        let mut outcome = p.outcome;
        if skip.is_some() {
            outcome.skipped = skip;
            tally.outcomes.push(outcome);
            continue;
        }
        if !args.edges_in_store {
            for edge in &p.edges {
                args.graph.upsert(edge).await?;
            }
        }
        tally.consolidated += p.sources.len() as u32;
        match p.derived.memory_type {
            MemoryType::Procedural => tally.new_procedural += 1,
            _ => tally.new_semantic += 1,
        }
        tally
            .clustered
            .extend(p.sources.iter().map(|(m, _)| m.id.clone()));
        outcome.derived_id = Some(p.derived.id.to_string());
        tally.outcomes.push(outcome);
        entries.push(index_entry(&p.derived, embedding));
    }
    args.vectors.project(&entries, &[]).await;
    Ok(())
}

/// The rule decision for every candidate not consolidated: forget (archive), promote
/// (to semantic) or keep. A memory changed since it was read is left for the next run.
async fn apply_decisions(
    args: &ConsolidatorArgs,
    candidates: &[&Memory],
    embeddings: &HashMap<MemoryId, Vec<f32>>,
    clustered: &HashSet<MemoryId>,
    started_at: DateTime<Utc>,
) -> MemoryResult<DecisionTally> {
    let mut tally = DecisionTally::default();
    for memory in candidates {
        let now = args.clock.now();
        let decision = decide(
            memory,
            clustered.contains(&memory.id),
            &args.retention,
            &args.forget,
            &args.promote,
            started_at,
        );
        *tally.decisions.entry(decision.as_str()).or_default() += 1;
        let (next, reason) = match decision {
            Decision::Consolidate | Decision::Keep => continue,
            Decision::Forget => {
                let patch = MemoryPatch {
                    status: Some(MemoryStatus::Archived),
                    ..Default::default()
                };
                (apply_patch(memory, &patch, now), "forget_decay")
            }
            Decision::Promote => {
                let patch = MemoryPatch {
                    memory_type: Some(MemoryType::Semantic),
                    ..Default::default()
                };
                let mut next = apply_patch(memory, &patch, now);
                next.consolidation_level = 1.0;
                (next, "promote")
            }
        };
        match args
            .episodic
            .update(&next, &version_of(memory, reason, now), None)
            .await
        {
            Ok(()) if decision == Decision::Forget => {
                args.vectors
                    .project(&[], std::slice::from_ref(&memory.id))
                    .await;
                tally.forgotten.push(memory.id.clone());
                tally.log.push(logged(args, memory, decision, started_at));
            }
            Ok(()) => {
                if let Some(vector) = embeddings.get(&memory.id) {
                    args.vectors
                        .project(&[index_entry(&next, vector.clone())], &[])
                        .await;
                }
                tally.promoted.push(memory.id.clone());
                tally.log.push(logged(args, memory, decision, started_at));
            }
            // Changed since we read it (recalled, patched): leave it for the next run.
            Err(error) if is_race(&error) => {}
            Err(error) => return Err(error),
        }
    }
    Ok(tally)
}

/// Every entry of the run log's `decision_log`: the rules' decisions, then the purges.
fn decision_log(
    decided: &[serde_json::Value],
    purged: &[MemoryId],
    purge_after_days: i64,
) -> Vec<serde_json::Value> {
    decided
        .iter()
        .cloned()
        .chain(purged.iter().map(|id| {
            serde_json::json!({
                "id": id,
                "action": "purge",
                "reason": format!("forgotten more than {purge_after_days} days ago (cognition.purge_after_days): deleted from every store"),
            })
        }))
        .collect()
}

/// The run log's entry for a memory the rules changed: its id, the action and why.
fn logged(
    args: &ConsolidatorArgs,
    memory: &Memory,
    decision: Decision,
    at: DateTime<Utc>,
) -> serde_json::Value {
    let reason = crate::policy::consolidation::explain(
        decision,
        memory,
        &args.retention,
        &args.forget,
        &args.promote,
        at,
    );
    serde_json::json!({"id": memory.id, "action": decision.as_str(), "reason": reason})
}

/// Delete what was forgotten longer than `purge_after_days` ago, from every store.
async fn purge_forgotten(
    args: &ConsolidatorArgs,
    agent: &AgentId,
    started_at: DateTime<Utc>,
) -> MemoryResult<Vec<MemoryId>> {
    if args.purge_after_days <= 0 {
        return Ok(Vec::new());
    }
    let cutoff = started_at - Duration::days(args.purge_after_days);
    let purged = args.episodic.purge_forgotten(agent, cutoff).await?;
    if !purged.is_empty() {
        args.vectors.project(&[], &purged).await;
        if !args.edges_in_store {
            for id in &purged {
                args.graph.remove_memory(id).await?;
            }
        }
    }
    Ok(purged)
}

/// One archival step: summarise every session idle for `idle_hours` that has no summary
/// covering its activity, clear its working memory, and drop expired windows.
pub async fn archive_idle_sessions(
    args: &ConsolidatorArgs,
    trigger: &str,
) -> MemoryResult<ConsolidationRun> {
    let started_at = args.clock.now();
    let idle_before = started_at - Duration::hours(args.idle_hours);
    let mut archived = Vec::new();
    let (mut tokens, mut fallbacks) = (0u64, 0u32);
    // Bounded per run; what is left is taken by the next run.
    for idle in args.episodic.idle_sessions(idle_before, 10_000).await? {
        let Some(done) = archive_session(args, &idle).await? else {
            continue;
        };
        tokens += done.tokens;
        fallbacks += u32::from(done.fell_back);
        archived.push(done.report);
    }
    let expired = args.working.sweep().await?;
    let run = ConsolidationRun {
        id: uuid::Uuid::now_v7().to_string(),
        agent_id: None,
        trigger: trigger.to_string(),
        started_at,
        finished_at: args.clock.now(),
        processed: archived.len() as u32,
        consolidated: 0,
        forgotten: 0,
        new_semantic: 0,
        new_procedural: 0,
        report: serde_json::json!({
            "job": "archival",
            "archived_sessions": archived,
            "expired_windows_cleared": expired,
            "idle_hours": args.idle_hours,
            "inner_thought": {
                "provider": args.thought.provider_name(),
                "fallbacks": fallbacks,
                "tokens": tokens,
            },
        }),
    };
    args.episodic.record_run(&run).await?;
    tracing::info!(
        sessions = run.processed,
        expired,
        trigger,
        "archival finished"
    );
    Ok(run)
}

/// What archiving one session did.
struct ArchivedSession {
    /// The run report's entry for it.
    report: serde_json::Value,
    /// LLM tokens spent on its summary.
    tokens: u64,
    /// The summary fell back to the rules.
    fell_back: bool,
}

/// Summarise one idle session, commit the summary with the session's archive mark,
/// index it and clear the session's working window. None when another run got there first.
async fn archive_session(
    args: &ConsolidatorArgs,
    idle: &crate::store::IdleSession,
) -> MemoryResult<Option<ArchivedSession>> {
    let mut memories: Vec<Memory> = args
        .episodic
        .session_memories(&idle.agent_id, &idle.session_id)
        .await?
        .into_iter()
        .filter(|m| !m.tags.iter().any(|t| t == ARCHIVE_SUMMARY_TAG))
        .filter(|m| m.status != MemoryStatus::Archived)
        .collect();
    memories.sort_by(|a, b| a.occurred_at.cmp(&b.occurred_at).then(a.id.cmp(&b.id)));
    let digest = SessionDigest {
        agent_id: idle.agent_id.clone(),
        session_id: idle.session_id.clone(),
        items: memories
            .iter()
            .map(|m| (m.occurred_at, m.content.clone()))
            .collect(),
    };
    let thought = args.thought.summarize_session(&digest).await;
    let now = args.clock.now();
    let summary = Memory {
        title: Some(format!("Summary of session {}", idle.session_id.as_str())),
        importance: memories.iter().map(|m| m.importance).fold(0.5f32, f32::max),
        tags: vec![ARCHIVE_SUMMARY_TAG.to_string()],
        session_id: Some(idle.session_id.clone()),
        // The session's project (the first one found: a session belongs to one project).
        project_id: memories.iter().find_map(|m| m.project_id.clone()),
        metadata: serde_json::json!({
            "session_span": { "from": idle.first_at, "to": idle.last_at },
            "memories": memories.len(),
            "inner_thought": thought.provider,
            crate::model::PROVENANCE_KEY: { "surface": "archival", "session_id": idle.session_id.as_str() },
        }),
        ..product_of_consolidation(
            &idle.agent_id,
            MemoryType::Episodic,
            thought.value,
            idle.last_at,
            now,
        )
    };
    let model_gate = args.vectors.hold().await;
    let embedding = args.vectors.embed_one(&summary.content).await?;
    let written = args
        .episodic
        .commit_session_archive(&SessionArchive {
            summary: StoredMemory::new(summary.clone(), embedding.clone()),
            agent_id: idle.agent_id.clone(),
            session_id: idle.session_id.clone(),
            archived_through: idle.last_activity,
        })
        .await?;
    if !written {
        return Ok(None);
    }
    args.vectors
        .project(&[index_entry(&summary, embedding)], &[])
        .await;
    drop(model_gate);
    let cleared = args.working.clear(&idle.agent_id, &idle.session_id).await?;
    Ok(Some(ArchivedSession {
        report: serde_json::json!({
            "agent_id": idle.agent_id,
            "session_id": idle.session_id,
            "summary_id": summary.id,
            "from": idle.first_at,
            "to": idle.last_at,
            "memories": memories.len(),
            "working_items_cleared": cleared,
        }),
        tokens: thought.tokens,
        fell_back: thought.fallback.is_some(),
    }))
}

/// One scheduled firing: claim the lease for `slot`, run the job, release. Returns None
/// when another process claimed this firing, or when the firing waited longer than the
/// lease's time to live (firings that queued up behind a long run are coalesced), or
/// the runs recorded.
pub async fn run_scheduled(
    args: &ConsolidatorArgs,
    job: ScheduledJob,
    slot: DateTime<Utc>,
) -> MemoryResult<Option<Vec<ConsolidationRun>>> {
    let holder = &args.lease.holder;
    let now = args.clock.now();
    // Firings that queued up behind a long run are coalesced: the next one covers them.
    if now - slot > args.lease.ttl {
        tracing::warn!(job = job.name(), %slot, "firing is older than the lease; skipped (the next firing covers it)");
        return Ok(None);
    }
    if !args
        .episodic
        .try_acquire_lease(job.name(), holder, slot, now + args.lease.ttl, now)
        .await?
    {
        tracing::info!(job = job.name(), %slot, "firing claimed by another process; skipped");
        return Ok(None);
    }
    let trigger = format!(
        "schedule:{}@{} by {holder}",
        job.name(),
        slot.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    );
    let result = match job {
        ScheduledJob::Archival => archive_idle_sessions(args, &trigger)
            .await
            .map(|run| vec![run]),
        ScheduledJob::SleepCycle => sleep_cycle(args, job, &trigger).await,
    };
    let released = args
        .episodic
        .release_lease(job.name(), holder, args.clock.now())
        .await;
    let runs = result?;
    released?;
    Ok(Some(runs))
}

/// Consolidate every agent under the held lease, renewing it after each agent; stops
/// early when the lease was lost (the next firing carries on).
async fn sleep_cycle(
    args: &ConsolidatorArgs,
    job: ScheduledJob,
    trigger: &str,
) -> MemoryResult<Vec<ConsolidationRun>> {
    let holder = &args.lease.holder;
    let mut runs = Vec::new();
    for agent in args.episodic.agents().await? {
        runs.push(consolidate_agent(args, &agent, trigger).await?);
        let until = args.clock.now() + args.lease.ttl;
        if !args.episodic.renew_lease(job.name(), holder, until).await? {
            tracing::warn!(
                job = job.name(),
                "lease lost mid-run; stopping (the next firing carries on)"
            );
            break;
        }
    }
    Ok(runs)
}

fn send<T>(reply: Option<Reply<T>>, result: MemoryResult<T>, what: &str) {
    match reply {
        Some(reply) => {
            let _ = reply.send(result);
        }
        None => {
            if let Err(error) = result {
                tracing::warn!(%error, "{what} failed");
            }
        }
    }
}

impl Actor for ConsolidatorActor {
    type Msg = ConsolidatorMsg;
    type State = ConsolidatorState;
    type Arguments = ConsolidatorArgs;

    async fn pre_start(
        &self,
        _myself: ConsolidatorRef,
        args: ConsolidatorArgs,
    ) -> Result<ConsolidatorState, ActorProcessingErr> {
        Ok(ConsolidatorState { args })
    }

    #[tracing::instrument(name = "consolidator", skip_all)]
    async fn handle(
        &self,
        _myself: ConsolidatorRef,
        message: ConsolidatorMsg,
        state: &mut ConsolidatorState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            ConsolidatorMsg::Consolidate {
                agent,
                trigger,
                reply,
            } => {
                let _ = reply.send(consolidate_agent(&state.args, &agent, &trigger).await);
            }
            ConsolidatorMsg::Archive { trigger, reply } => {
                let _ = reply.send(archive_idle_sessions(&state.args, &trigger).await);
            }
            ConsolidatorMsg::Scheduled { job, slot, reply } => {
                let result = run_scheduled(&state.args, job, slot).await;
                send(reply, result, job.name());
            }
            ConsolidatorMsg::InjectFault => return Err(injected_fault("consolidator")),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::embedding::{BuiltinEmbedder, Embedder};
    use crate::model::SessionId;
    use crate::store::memory::{
        FlatVectorIndex, InMemoryGraphStore, InMemoryMemoryStore, InMemoryWorkingStore,
    };
    use crate::store::{
        GraphStore, MemoryStore, VectorIndex, VectorQuery, WorkingItem, WorkingStore,
    };
    use crate::testing::memory_fixture;
    use crate::thought::RuleThought;
    use async_trait::async_trait;
    use chrono::TimeZone;

    /// A runtime on in-memory stores (the actors the consolidator talks to), with the
    /// stores kept at hand for the assertions.
    struct Fixture {
        args: ConsolidatorArgs,
        clock: Arc<ManualClock>,
        /// The in-memory system of record behind `sor`.
        store: Arc<InMemoryMemoryStore>,
        /// The system of record the runtime was given (maybe a wrapper of `store`).
        sor: Arc<dyn MemoryStore>,
        index: Arc<FlatVectorIndex>,
        graph: Arc<InMemoryGraphStore>,
        working: Arc<InMemoryWorkingStore>,
        embedder: BuiltinEmbedder,
        agent: AgentId,
        /// Keeps the actors running.
        _runtime: crate::runtime::Runtime,
    }

    async fn fixture_with(sor: Arc<dyn MemoryStore>, inner: Arc<InMemoryMemoryStore>) -> Fixture {
        let clock = Arc::new(ManualClock::new(
            Utc.with_ymd_and_hms(2026, 5, 1, 12, 0, 0).unwrap(),
        ));
        let index = Arc::new(FlatVectorIndex::new());
        let graph = Arc::new(InMemoryGraphStore::new());
        let working = Arc::new(InMemoryWorkingStore::new(32, 3600));
        let parts = crate::runtime::RuntimeParts {
            memories: sor.clone(),
            vectors: index.clone(),
            graph: graph.clone(),
            working: working.clone(),
            clock: clock.clone(),
            thought: Arc::new(RuleThought),
            ..crate::runtime::RuntimeParts::in_memory()
        };
        let config = crate::runtime::RuntimeConfig {
            sleep: crate::runtime::SleepSettings {
                clustering: ClusterParams {
                    threshold: 0.6,
                    ..ClusterParams::default()
                },
                purge_after_days: 30,
                idle_hours: 24,
                holder: "process-a".into(),
                lease_ttl: Duration::minutes(10),
                ..Default::default()
            },
            ..Default::default()
        };
        let runtime = crate::runtime::Runtime::start(parts, config).await.unwrap();
        Fixture {
            args: runtime.consolidator_args(),
            clock,
            store: inner,
            sor,
            index,
            graph,
            working,
            embedder: BuiltinEmbedder::new(256),
            agent: AgentId::parse("agent-1").unwrap(),
            _runtime: runtime,
        }
    }

    async fn fixture() -> Fixture {
        let store = Arc::new(InMemoryMemoryStore::new());
        fixture_with(store.clone(), store).await
    }

    async fn remember(f: &Fixture, text: &str, at: DateTime<Utc>, session: Option<&str>) -> Memory {
        let mut memory = memory_fixture(f.agent.as_str(), text, at);
        memory.session_id = session.map(|s| SessionId::parse(s).unwrap());
        let embedding = f.embedder.embed(text).unwrap();
        f.sor
            .insert(&[StoredMemory::new(memory.clone(), embedding.clone())])
            .await
            .unwrap();
        f.index.upsert(&[EmbeddingRecord::of(&memory, embedding)]);
        memory
    }

    async fn seed_clusters(f: &Fixture) -> (Vec<Memory>, Vec<Memory>, Memory) {
        let now = f.clock.now();
        let mut coffee = Vec::new();
        for text in [
            "I drank a flat white coffee at the Blue Bottle cafe this morning",
            "Had a flat white coffee at Blue Bottle cafe again today",
            "Morning flat white coffee at the Blue Bottle cafe, as usual",
        ] {
            coffee.push(remember(f, text, now - Duration::hours(3), None).await);
        }
        let mut deploys = Vec::new();
        for text in [
            "Deploy the api service: first run cargo build --release, then restart the api service",
            "Deploy the api service again: run cargo build --release, then restart the api service",
            "To deploy the api service run cargo build --release and then restart the api service",
        ] {
            deploys.push(remember(f, text, now - Duration::hours(2), None).await);
        }
        let loner = remember(f, "The dentist appointment moved to Thursday", now, None).await;
        (coffee, deploys, loner)
    }

    #[tokio::test]
    async fn a_cluster_never_mixes_projects_and_its_abstraction_stays_in_its_project() {
        let f = fixture().await;
        let now = f.clock.now();
        let vault = crate::projects::ProjectId::parse("vault").unwrap();
        let texts = [
            "I drank a flat white coffee at the Blue Bottle cafe this morning",
            "Had a flat white coffee at Blue Bottle cafe again today",
            "Morning flat white coffee at the Blue Bottle cafe, as usual",
            "Another flat white coffee at the Blue Bottle cafe before work",
        ];
        let mut in_vault = Vec::new();
        for (i, text) in texts.iter().enumerate() {
            let memory = remember(&f, text, now - Duration::hours(3), None).await;
            // Three in the project, one outside it: only the three may form a cluster.
            if i < 3 {
                let mut next = memory.clone();
                next.project_id = Some(vault.clone());
                next.version += 1;
                f.sor
                    .update(&next, &version_of(&memory, "test", now), None)
                    .await
                    .unwrap();
                in_vault.push(next.id.clone());
            }
        }
        let run = consolidate_agent(&f.args, &f.agent, "test").await.unwrap();
        assert_eq!(run.consolidated, 3, "{}", run.report);
        let all = f.store.agent_memories(&f.agent).await.unwrap();
        let derived = all
            .iter()
            .find(|m| m.memory_type == MemoryType::Semantic)
            .expect("the project's cluster was abstracted");
        assert_eq!(derived.project_id.as_ref(), Some(&vault));
        for memory in &all {
            let consolidated = memory.consolidation_level >= 1.0 && memory.id != derived.id;
            assert_eq!(consolidated, in_vault.contains(&memory.id), "{memory:?}");
        }
    }

    #[tokio::test]
    async fn clusters_become_knowledge_linked_to_their_sources_and_a_second_run_changes_nothing() {
        let f = fixture().await;
        let (coffee, deploys, loner) = seed_clusters(&f).await;
        let run = consolidate_agent(&f.args, &f.agent, "test").await.unwrap();
        assert_eq!(run.processed, 7);
        assert_eq!(run.consolidated, 6, "{}", run.report);
        assert_eq!(
            (run.new_semantic, run.new_procedural),
            (1, 1),
            "{}",
            run.report
        );
        let all = f.store.agent_memories(&f.agent).await.unwrap();
        let procedural = all
            .iter()
            .find(|m| m.memory_type == MemoryType::Procedural)
            .expect("a procedure was abstracted");
        assert!(
            procedural.content.contains("cargo build --release"),
            "{}",
            procedural.content
        );
        let semantic = all
            .iter()
            .find(|m| m.memory_type == MemoryType::Semantic)
            .unwrap();
        assert!(
            semantic.content.contains("Blue Bottle"),
            "{}",
            semantic.content
        );
        // Sources: raised to level 1 with a version entry, still active and recallable.
        for source in coffee.iter().chain(&deploys) {
            let now = f.store.get(&source.id).await.unwrap().unwrap();
            assert_eq!(now.consolidation_level, 1.0);
            assert_eq!(now.status, MemoryStatus::Active);
            assert_eq!(
                f.store.history(&source.id).await.unwrap()[0].reason,
                "consolidate"
            );
        }
        assert_eq!(
            f.store
                .get(&loner.id)
                .await
                .unwrap()
                .unwrap()
                .consolidation_level,
            0.0
        );
        // derived_from edges point from the abstraction to each source.
        let edges = f
            .graph
            .edges_around(&f.agent, std::slice::from_ref(&semantic.id), 1, 100)
            .await
            .unwrap();
        let mut targets: Vec<&MemoryId> = edges.iter().map(|e| &e.to_id).collect();
        targets.sort();
        let mut expected: Vec<&MemoryId> = coffee.iter().map(|m| &m.id).collect();
        expected.sort();
        assert_eq!(targets, expected);
        assert!(edges.iter().all(|e| e.relation == "derived_from"));
        // The abstraction is in the vector index.
        let hits = f.index.search(&VectorQuery {
            agent_id: f.agent.clone(),
            include_shared: false,
            types: vec![MemoryType::Semantic],
            vector: f.embedder.embed("flat white coffee Blue Bottle").unwrap(),
            limit: 5,
        });
        assert_eq!(hits.first().map(|h| &h.0), Some(&semantic.id));

        let before = f.store.agent_memories(&f.agent).await.unwrap();
        let again = consolidate_agent(&f.args, &f.agent, "test").await.unwrap();
        assert_eq!(
            (
                again.consolidated,
                again.forgotten,
                again.new_semantic,
                again.new_procedural
            ),
            (0, 0, 0, 0)
        );
        assert_eq!(f.store.agent_memories(&f.agent).await.unwrap(), before);
    }

    /// The in-memory store, failing its `n`-th consolidation commit as a crash would,
    /// or (with `race`) changing a source of the last cluster of its first commit just
    /// before applying it, as a user's patch during inner thought would.
    struct CrashingStore {
        inner: Arc<InMemoryMemoryStore>,
        commits_left: std::sync::atomic::AtomicI32,
        race: std::sync::atomic::AtomicBool,
    }

    #[async_trait]
    impl MemoryStore for CrashingStore {
        fn backend_name(&self) -> &'static str {
            "crashing"
        }
        async fn commit_consolidation(&self, commits: &[ConsolidationCommit]) -> MemoryResult<()> {
            if self
                .commits_left
                .fetch_sub(1, std::sync::atomic::Ordering::SeqCst)
                <= 0
            {
                return Err(crate::error::MemoryError::unavailable(
                    "the process died here",
                ));
            }
            if self.race.swap(false, std::sync::atomic::Ordering::SeqCst) {
                let raced = &commits.last().expect("a commit").sources[0].0.id;
                let current = self.inner.get(raced).await?.expect("the source");
                let mut patched = current.clone();
                patched.content.push_str(" (edited)");
                patched.version += 1;
                self.inner
                    .update(&patched, &version_of(&current, "update", Utc::now()), None)
                    .await?;
            }
            self.inner.commit_consolidation(commits).await
        }
        async fn check_embedding_model(
            &self,
            model_id: &str,
            dimension: usize,
        ) -> MemoryResult<()> {
            self.inner.check_embedding_model(model_id, dimension).await
        }
        async fn insert(&self, records: &[StoredMemory]) -> MemoryResult<()> {
            self.inner.insert(records).await
        }
        async fn get(&self, id: &MemoryId) -> MemoryResult<Option<Memory>> {
            self.inner.get(id).await
        }
        async fn find_by_content_hash(
            &self,
            agent: &AgentId,
            hashes: &[String],
        ) -> MemoryResult<Vec<(String, Memory)>> {
            self.inner.find_by_content_hash(agent, hashes).await
        }
        async fn session_neighbours(
            &self,
            memory: &Memory,
            radius: usize,
        ) -> MemoryResult<Vec<MemoryId>> {
            self.inner.session_neighbours(memory, radius).await
        }
        async fn get_many(&self, ids: &[MemoryId]) -> MemoryResult<Vec<Memory>> {
            self.inner.get_many(ids).await
        }
        async fn list(&self, query: &crate::store::ListQuery) -> MemoryResult<Vec<Memory>> {
            self.inner.list(query).await
        }
        async fn count_listed(&self, query: &crate::store::ListQuery) -> MemoryResult<u64> {
            self.inner.count_listed(query).await
        }
        async fn update(
            &self,
            next: &Memory,
            previous: &crate::model::MemoryVersion,
            embedding: Option<&[f32]>,
        ) -> MemoryResult<()> {
            self.inner.update(next, previous, embedding).await
        }
        async fn delete(&self, id: &MemoryId) -> MemoryResult<bool> {
            self.inner.delete(id).await
        }
        async fn history(&self, id: &MemoryId) -> MemoryResult<Vec<crate::model::MemoryVersion>> {
            self.inner.history(id).await
        }
        async fn keyword_search(
            &self,
            query: &crate::store::KeywordQuery,
        ) -> MemoryResult<Vec<(MemoryId, f64)>> {
            self.inner.keyword_search(query).await
        }
        async fn touch(&self, ids: &[MemoryId], at: DateTime<Utc>) -> MemoryResult<()> {
            self.inner.touch(ids, at).await
        }
        async fn agent_memories(&self, agent: &AgentId) -> MemoryResult<Vec<Memory>> {
            self.inner.agent_memories(agent).await
        }
        async fn agents(&self) -> MemoryResult<Vec<AgentId>> {
            self.inner.agents().await
        }
        async fn agent_summaries(&self) -> MemoryResult<Vec<crate::model::AgentSummary>> {
            self.inner.agent_summaries().await
        }
        async fn agent_sessions(
            &self,
            agent: &AgentId,
            limit: usize,
        ) -> MemoryResult<Vec<crate::model::SessionRecord>> {
            self.inner.agent_sessions(agent, limit).await
        }
        async fn embedding(&self, id: &MemoryId) -> MemoryResult<Option<Vec<f32>>> {
            self.inner.embedding(id).await
        }
        async fn embeddings_page(
            &self,
            after: Option<&MemoryId>,
            limit: usize,
        ) -> MemoryResult<Vec<EmbeddingRecord>> {
            self.inner.embeddings_page(after, limit).await
        }
        async fn count(&self) -> MemoryResult<u64> {
            self.inner.count().await
        }
        async fn meta(&self, key: &str) -> MemoryResult<Option<String>> {
            self.inner.meta(key).await
        }
        async fn set_meta(&self, key: &str, value: Option<&str>) -> MemoryResult<()> {
            self.inner.set_meta(key, value).await
        }
        async fn reembed_page(
            &self,
            after: Option<&MemoryId>,
            limit: usize,
        ) -> MemoryResult<Vec<crate::store::ReembedRow>> {
            self.inner.reembed_page(after, limit).await
        }
        async fn put_next_embeddings(
            &self,
            rows: &[crate::store::NextEmbedding],
        ) -> MemoryResult<()> {
            self.inner.put_next_embeddings(rows).await
        }
        async fn reembed_counts(&self) -> MemoryResult<crate::store::ReembedCounts> {
            self.inner.reembed_counts().await
        }
        async fn switch_embeddings(&self, model: &str, spec: &str) -> MemoryResult<u64> {
            self.inner.switch_embeddings(model, spec).await
        }
        async fn clear_next_embeddings(&self) -> MemoryResult<()> {
            self.inner.clear_next_embeddings().await
        }
        async fn record_run(&self, run: &ConsolidationRun) -> MemoryResult<()> {
            self.inner.record_run(run).await
        }
        async fn runs(
            &self,
            agent: Option<&AgentId>,
            limit: usize,
        ) -> MemoryResult<Vec<ConsolidationRun>> {
            self.inner.runs(agent, limit).await
        }
        async fn embeddings_of(&self, ids: &[MemoryId]) -> MemoryResult<Vec<(MemoryId, Vec<f32>)>> {
            self.inner.embeddings_of(ids).await
        }
        async fn purge_forgotten(
            &self,
            agent: &AgentId,
            archived_before: DateTime<Utc>,
        ) -> MemoryResult<Vec<MemoryId>> {
            self.inner.purge_forgotten(agent, archived_before).await
        }
        async fn erase_agent(&self, agent: &AgentId) -> MemoryResult<crate::store::ErasedRecords> {
            self.inner.erase_agent(agent).await
        }
        async fn idle_sessions(
            &self,
            idle_before: DateTime<Utc>,
            limit: usize,
        ) -> MemoryResult<Vec<crate::store::IdleSession>> {
            self.inner.idle_sessions(idle_before, limit).await
        }
        async fn session_memories(
            &self,
            agent: &AgentId,
            session: &SessionId,
        ) -> MemoryResult<Vec<Memory>> {
            self.inner.session_memories(agent, session).await
        }
        async fn commit_session_archive(&self, archive: &SessionArchive) -> MemoryResult<bool> {
            self.inner.commit_session_archive(archive).await
        }
        async fn append_session_message(
            &self,
            agent: &AgentId,
            session: &SessionId,
            role: crate::model::MessageRole,
            content: &str,
            tokens: u32,
            at: DateTime<Utc>,
        ) -> MemoryResult<crate::model::SessionMessage> {
            self.inner
                .append_session_message(agent, session, role, content, tokens, at)
                .await
        }
        async fn session_record(
            &self,
            agent: &AgentId,
            session: &SessionId,
        ) -> MemoryResult<Option<crate::model::SessionRecord>> {
            self.inner.session_record(agent, session).await
        }
        async fn session_messages_after(
            &self,
            agent: &AgentId,
            session: &SessionId,
            after: u64,
        ) -> MemoryResult<Vec<crate::model::SessionMessage>> {
            self.inner
                .session_messages_after(agent, session, after)
                .await
        }
        async fn commit_session_compaction(
            &self,
            compaction: &crate::store::SessionCompaction,
        ) -> MemoryResult<bool> {
            self.inner.commit_session_compaction(compaction).await
        }
        async fn try_acquire_lease(
            &self,
            job: &str,
            holder: &str,
            slot: DateTime<Utc>,
            expires_at: DateTime<Utc>,
            now: DateTime<Utc>,
        ) -> MemoryResult<bool> {
            self.inner
                .try_acquire_lease(job, holder, slot, expires_at, now)
                .await
        }
        async fn renew_lease(
            &self,
            job: &str,
            holder: &str,
            expires_at: DateTime<Utc>,
        ) -> MemoryResult<bool> {
            self.inner.renew_lease(job, holder, expires_at).await
        }
        async fn release_lease(
            &self,
            job: &str,
            holder: &str,
            now: DateTime<Utc>,
        ) -> MemoryResult<()> {
            self.inner.release_lease(job, holder, now).await
        }
        async fn flush(&self) -> MemoryResult<()> {
            self.inner.flush().await
        }
    }

    #[tokio::test]
    async fn a_run_that_dies_at_its_commit_leaves_no_cluster_half_done_and_the_next_run_carries_on()
    {
        let inner = Arc::new(InMemoryMemoryStore::new());
        let crashing = Arc::new(CrashingStore {
            inner: inner.clone(),
            commits_left: std::sync::atomic::AtomicI32::new(0),
            race: false.into(),
        });
        let f = fixture_with(crashing, inner.clone()).await;
        seed_clusters(&f).await;
        let before = inner.agent_memories(&f.agent).await.unwrap();
        let error = consolidate_agent(&f.args, &f.agent, "test")
            .await
            .unwrap_err();
        assert!(error.message.contains("died"), "{}", error.message);
        let after_crash = inner.agent_memories(&f.agent).await.unwrap();
        assert_eq!(after_crash, before, "nothing of the batch landed");

        // The restarted process has a healthy store.
        let healthy = fixture_with(inner.clone(), inner.clone()).await;
        let run = consolidate_agent(&healthy.args, &f.agent, "test")
            .await
            .unwrap();
        assert_eq!(
            run.new_semantic + run.new_procedural,
            2,
            "both clusters are done next time"
        );
        let done = inner.agent_memories(&f.agent).await.unwrap();
        assert_eq!(
            done.iter()
                .filter(|m| m.metadata.get("derived_from").is_some())
                .count(),
            2
        );
    }

    /// The rules, taking three seconds of the manual clock per abstraction (an LLM's pace).
    struct SlowThought(Arc<ManualClock>);

    #[async_trait]
    impl InnerThought for SlowThought {
        fn provider_name(&self) -> &'static str {
            "slow"
        }
        async fn abstract_cluster(
            &self,
            cluster: &ClusterDigest,
        ) -> crate::thought::Thought<crate::thought::Abstraction> {
            self.0.advance(Duration::seconds(3));
            RuleThought.abstract_cluster(cluster).await
        }
        async fn summarize_session(
            &self,
            session: &SessionDigest,
        ) -> crate::thought::Thought<String> {
            RuleThought.summarize_session(session).await
        }
    }

    #[tokio::test]
    async fn a_slow_inner_thought_commits_each_cluster_as_it_goes_so_a_crash_keeps_the_first() {
        let inner = Arc::new(InMemoryMemoryStore::new());
        let crashing = Arc::new(CrashingStore {
            inner: inner.clone(),
            commits_left: std::sync::atomic::AtomicI32::new(1),
            race: false.into(),
        });
        let mut f = fixture_with(crashing, inner.clone()).await;
        f.args.thought = Arc::new(SlowThought(f.clock.clone()));
        seed_clusters(&f).await;
        let error = consolidate_agent(&f.args, &f.agent, "test")
            .await
            .unwrap_err();
        assert!(error.message.contains("died"), "{}", error.message);
        let after_crash = inner.agent_memories(&f.agent).await.unwrap();
        let derived: Vec<&Memory> = after_crash
            .iter()
            .filter(|m| m.metadata.get("derived_from").is_some())
            .collect();
        assert_eq!(derived.len(), 1, "the first cluster landed on its own");
        let sources: Vec<String> =
            serde_json::from_value(derived[0].metadata["derived_from"].clone()).unwrap();
        let raised: Vec<&Memory> = after_crash
            .iter()
            .filter(|m| m.memory_type == MemoryType::Episodic && m.consolidation_level == 1.0)
            .collect();
        assert_eq!(raised.len(), sources.len(), "nothing of the second cluster");
        assert!(raised.iter().all(|m| sources.contains(&m.id.to_string())));
    }

    #[tokio::test]
    async fn a_source_changed_during_thought_skips_its_cluster_and_the_others_of_the_batch_land() {
        let inner = Arc::new(InMemoryMemoryStore::new());
        let racing = Arc::new(CrashingStore {
            inner: inner.clone(),
            commits_left: std::sync::atomic::AtomicI32::new(i32::MAX),
            race: true.into(),
        });
        let f = fixture_with(racing, inner.clone()).await;
        seed_clusters(&f).await;
        let run = consolidate_agent(&f.args, &f.agent, "test").await.unwrap();
        assert_eq!(run.new_semantic + run.new_procedural, 1, "{:#}", run.report);
        let clusters = run.report["clusters"].as_array().unwrap();
        assert_eq!(clusters.len(), 2);
        let landed = &clusters[0];
        let raced = &clusters[1];
        assert!(landed["derived_id"].is_string(), "{landed}");
        assert!(landed["skipped"].is_null(), "{landed}");
        assert!(raced["derived_id"].is_null(), "{raced}");
        assert!(
            raced["skipped"].as_str().unwrap().contains("changed"),
            "{raced}"
        );
        // The raced cluster's sources are untouched by the sleep cycle (one is the
        // user's edit), so the next run takes them up again.
        let memories = inner.agent_memories(&f.agent).await.unwrap();
        for (cluster, level) in [(raced, 0.0), (landed, 1.0)] {
            for id in cluster["sources"].as_array().unwrap() {
                let source = memories
                    .iter()
                    .find(|m| m.id.as_str() == id.as_str().unwrap())
                    .unwrap();
                assert_eq!(source.consolidation_level, level, "{source:?}");
            }
        }
    }

    #[tokio::test]
    async fn faded_memories_are_archived_then_purged_after_the_grace_period() {
        let f = fixture().await;
        let long_ago = f.clock.now() - Duration::days(400);
        let mut faded = memory_fixture(
            f.agent.as_str(),
            "a forgettable remark about the weather",
            long_ago,
        );
        faded.importance = 0.1;
        let embedding = f.embedder.embed(&faded.content).unwrap();
        f.store
            .insert(&[StoredMemory::new(faded.clone(), embedding)])
            .await
            .unwrap();
        let mut star = memory_fixture(
            f.agent.as_str(),
            "Our wedding anniversary is on June 3rd",
            long_ago,
        );
        star.importance = 0.9;
        star.access_count = 5;
        let embedding = f.embedder.embed(&star.content).unwrap();
        f.store
            .insert(&[StoredMemory::new(star.clone(), embedding)])
            .await
            .unwrap();

        let run = consolidate_agent(&f.args, &f.agent, "test").await.unwrap();
        assert_eq!(run.forgotten, 1);
        assert_eq!(run.report["decisions"]["promote"], 1);
        // The run log says why each was forgotten or promoted.
        let log = run.report["decision_log"].as_array().unwrap();
        let action_of = |id: &MemoryId| {
            log.iter()
                .find(|entry| entry["id"] == id.as_str())
                .map(|entry| {
                    (
                        entry["action"].clone(),
                        entry["reason"].as_str().unwrap().to_string(),
                    )
                })
                .unwrap()
        };
        let (action, reason) = action_of(&faded.id);
        assert_eq!(action, "forget");
        assert!(reason.starts_with("faded: retention"), "{reason}");
        let (action, reason) = action_of(&star.id);
        assert_eq!(action, "promote");
        assert!(reason.starts_with("important and used"), "{reason}");
        let archived = f.store.get(&faded.id).await.unwrap().unwrap();
        assert_eq!(archived.status, MemoryStatus::Archived);
        let promoted = f.store.get(&star.id).await.unwrap().unwrap();
        assert_eq!(promoted.memory_type, MemoryType::Semantic);
        assert_eq!(
            f.store.history(&star.id).await.unwrap()[0].reason,
            "promote"
        );

        // Within the grace period it is kept; after it, purged.
        f.clock.advance(Duration::days(29));
        let run = consolidate_agent(&f.args, &f.agent, "test").await.unwrap();
        assert_eq!(run.report["purged_ids"].as_array().unwrap().len(), 0);
        f.clock.advance(Duration::days(2));
        let run = consolidate_agent(&f.args, &f.agent, "test").await.unwrap();
        assert_eq!(run.report["purged_ids"], serde_json::json!([faded.id]));
        assert!(f.store.get(&faded.id).await.unwrap().is_none());
        assert!(f.store.get(&star.id).await.unwrap().is_some());
    }

    #[tokio::test]
    async fn idle_sessions_are_summarised_once_and_their_working_memory_cleared() {
        let f = fixture().await;
        let start = f.clock.now() - Duration::hours(30);
        let session = SessionId::parse("s-1").unwrap();
        let first = remember(
            &f,
            "We planned the Lisbon offsite for September",
            start,
            Some("s-1"),
        )
        .await;
        remember(
            &f,
            "Booked the venue near Alfama for the offsite",
            start + Duration::minutes(5),
            Some("s-1"),
        )
        .await;
        f.working
            .push(
                &f.agent,
                &session,
                WorkingItem {
                    memory_id: first.id.clone(),
                    content: first.content.clone(),
                    at: f.clock.now(),
                },
                f.clock.now(),
            )
            .await
            .unwrap();
        // A busy session (activity 1 hour ago) is left alone.
        let mut recent = memory_fixture(
            f.agent.as_str(),
            "still talking",
            f.clock.now() - Duration::hours(1),
        );
        recent.session_id = Some(SessionId::parse("s-2").unwrap());
        f.store
            .insert(&[StoredMemory::new(
                recent,
                f.embedder.embed("still talking").unwrap(),
            )])
            .await
            .unwrap();

        let run = archive_idle_sessions(&f.args, "test").await.unwrap();
        assert_eq!(run.processed, 1, "{}", run.report);
        let summaries: Vec<Memory> = f
            .store
            .session_memories(&f.agent, &session)
            .await
            .unwrap()
            .into_iter()
            .filter(|m| m.tags.contains(&ARCHIVE_SUMMARY_TAG.to_string()))
            .collect();
        assert_eq!(summaries.len(), 1);
        assert!(
            summaries[0].content.contains("Lisbon"),
            "{}",
            summaries[0].content
        );
        assert_eq!(
            summaries[0].metadata["session_span"]["from"],
            serde_json::json!(start)
        );
        assert!(f
            .working
            .window(&f.agent, &session, f.clock.now())
            .await
            .unwrap()
            .is_empty());

        let again = archive_idle_sessions(&f.args, "test").await.unwrap();
        assert_eq!(again.processed, 0, "idempotent: {}", again.report);
        // New activity after the summary makes the session archivable again once idle.
        f.clock.advance(Duration::hours(1));
        remember(
            &f,
            "One more note about the offsite",
            f.clock.now(),
            Some("s-1"),
        )
        .await;
        assert_eq!(
            archive_idle_sessions(&f.args, "test")
                .await
                .unwrap()
                .processed,
            0
        );
        f.clock.advance(Duration::hours(25));
        // (s-2 has gone idle by now too.)
        assert_eq!(
            archive_idle_sessions(&f.args, "test")
                .await
                .unwrap()
                .processed,
            2
        );
    }

    #[tokio::test]
    async fn each_firing_runs_in_exactly_one_process() {
        let f = fixture().await;
        seed_clusters(&f).await;
        let mut other = f.args.clone();
        other.lease.holder = "process-b".into();
        let slot = f.clock.now();
        let (a, b) = tokio::join!(
            run_scheduled(&f.args, ScheduledJob::SleepCycle, slot),
            run_scheduled(&other, ScheduledJob::SleepCycle, slot)
        );
        let (a, b) = (a.unwrap(), b.unwrap());
        assert!(
            a.is_some() != b.is_some(),
            "exactly one process ran the firing"
        );
        // The same slot never runs again, in either process.
        assert!(run_scheduled(&f.args, ScheduledJob::SleepCycle, slot)
            .await
            .unwrap()
            .is_none());
        assert!(run_scheduled(&other, ScheduledJob::SleepCycle, slot)
            .await
            .unwrap()
            .is_none());
        // The next firing runs (in whichever process claims it first).
        let next = slot + Duration::minutes(30);
        f.clock.advance(Duration::minutes(30));
        let runs = run_scheduled(&other, ScheduledJob::SleepCycle, next)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(runs.len(), 1);
        assert!(runs[0].trigger.starts_with("schedule:sleep_cycle@"));
        // A firing that waited longer than the lease's time to live is coalesced away.
        f.clock.advance(Duration::minutes(20));
        assert!(run_scheduled(
            &f.args,
            ScheduledJob::SleepCycle,
            next + Duration::minutes(1)
        )
        .await
        .unwrap()
        .is_none());
        // A live claim by another holder blocks a later slot until it expires.
        let store = &f.sor;
        let now = f.clock.now();
        assert!(store
            .try_acquire_lease(
                "archival",
                "process-b",
                now,
                now + Duration::minutes(10),
                now
            )
            .await
            .unwrap());
        assert!(!store
            .try_acquire_lease(
                "archival",
                "process-a",
                now + Duration::seconds(1),
                now + Duration::minutes(10),
                now
            )
            .await
            .unwrap());
        let later = now + Duration::minutes(11);
        assert!(store
            .try_acquire_lease(
                "archival",
                "process-a",
                later,
                later + Duration::minutes(10),
                later
            )
            .await
            .unwrap());
    }
}
