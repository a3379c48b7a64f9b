//! Export and import through the actors: reads of whole agents and KV namespaces from
//! the system of record, and imports that check every record first
//! ([`check_import`]: storable values, ranges, screening, ids owned by another agent),
//! embed the memories a file brings no usable vector for, write in batches (the
//! episodic actor; each batch one transaction, records already stored left as they
//! are) and put what was written and is active into the vector index.

use std::time::Duration;

use super::remember::{embedding_record, embedding_text};
use super::validate::{storable_json, storable_text};
use super::Runtime;
use crate::error::{MemoryError, MemoryResult};
use crate::kv::{KvEntry, NamespaceName};
use crate::model::{check_instant, AgentId, MemoryStatus};
use crate::transfer::{
    AgentTransfer, ImportOutcome, NamespaceTransfer, TransferCounts, TransferRecord,
};

/// Records written per transaction: large enough to amortise a commit, small enough
/// that other writers wait briefly between batches.
pub const IMPORT_BATCH: usize = 500;

/// How long a whole-agent read or one import batch may take once delivered.
const TRANSFER_ALLOWANCE: Duration = Duration::from_secs(600);

/// Every agent owning a record of any kind.
pub(super) async fn agents(rt: &Runtime) -> MemoryResult<Vec<AgentId>> {
    rt.actors().episodic.transfer_agents().await
}

/// How many records of each kind `agent` owns.
pub(super) async fn counts(rt: &Runtime, agent: &AgentId) -> MemoryResult<TransferCounts> {
    rt.actors().episodic.transfer_counts(agent).await
}

/// Everything `agent` owns.
pub(super) async fn export_agent(
    rt: &Runtime,
    agent: &AgentId,
    with_embeddings: bool,
) -> MemoryResult<AgentTransfer> {
    rt.actors()
        .episodic
        .export_agent(agent, with_embeddings, TRANSFER_ALLOWANCE)
        .await
}

/// Every KV namespace.
pub(super) async fn namespaces(rt: &Runtime) -> MemoryResult<Vec<NamespaceTransfer>> {
    rt.actors().episodic.export_namespaces().await
}

/// The entries of `namespace` (only `writer`'s when given).
pub(super) async fn kv_entries(
    rt: &Runtime,
    namespace: &NamespaceName,
    writer: Option<&AgentId>,
) -> MemoryResult<Vec<KvEntry>> {
    rt.actors()
        .episodic
        .export_kv_entries(namespace, writer, TRANSFER_ALLOWANCE)
        .await
}

/// Check records before anything is written: each must be storable on every backend
/// (no NUL character, instants in years 1–9999, values in range) and a memory must not
/// reuse the id of another agent's stored memory. Memories are screened as every write
/// is (secrets redacted or refused, injection marks recorded). Answers the failures as
/// (index in `records`, error naming the field).
pub(super) async fn check(
    rt: &Runtime,
    records: &mut [TransferRecord],
) -> MemoryResult<Vec<(usize, MemoryError)>> {
    let mut failures = Vec::new();
    for (index, record) in records.iter_mut().enumerate() {
        if let Err(error) = check_record(rt, record) {
            failures.push((index, error));
        }
    }
    let ids: Vec<_> = records
        .iter()
        .filter_map(|r| match r {
            TransferRecord::Memory(m) => Some(m.memory.id.clone()),
            _ => None,
        })
        .collect();
    let mut owners = std::collections::HashMap::new();
    for chunk in ids.chunks(IMPORT_BATCH) {
        owners.extend(rt.actors().episodic.memory_owners(chunk).await?);
    }
    for (index, record) in records.iter().enumerate() {
        if let TransferRecord::Memory(m) = record {
            match owners.get(&m.memory.id) {
                Some(owner) if *owner != m.memory.agent_id => failures.push((
                    index,
                    MemoryError {
                        field: Some("id".into()),
                        ..MemoryError::conflict(format!(
                            "memory {} is stored already and belongs to another agent; an import keeps ids, so it cannot be written",
                            m.memory.id
                        ))
                    },
                )),
                _ => {}
            }
        }
    }
    failures.sort_by_key(|(index, _)| *index);
    Ok(failures)
}

/// One record's checks (see [`check`]).
fn check_record(rt: &Runtime, record: &mut TransferRecord) -> MemoryResult<()> {
    let unit = |field: &str, value: f32| -> MemoryResult<()> {
        if (0.0..=1.0).contains(&value) {
            Ok(())
        } else {
            Err(MemoryError::invalid(
                field,
                format!("{field} must be between 0 and 1"),
            ))
        }
    };
    match record {
        TransferRecord::Memory(m) => {
            let memory = &mut m.memory;
            if memory.content.trim().is_empty() {
                return Err(MemoryError::invalid("content", "content must not be empty"));
            }
            storable_text("content", &memory.content)?;
            if let Some(title) = &memory.title {
                storable_text("title", title)?;
            }
            for tag in &memory.tags {
                storable_text("tags", tag)?;
            }
            storable_json("metadata", &memory.metadata)?;
            if !memory.metadata.is_object() {
                return Err(MemoryError::invalid(
                    "metadata",
                    "metadata must be a JSON object",
                ));
            }
            if let Some(source) = &memory.source {
                storable_text("source.path", &source.path)?;
                storable_text("source.hash", &source.hash)?;
            }
            for (field, at) in [
                ("occurred_at", memory.occurred_at),
                ("created_at", memory.created_at),
                ("updated_at", memory.updated_at),
                ("last_accessed_at", memory.last_accessed_at),
            ] {
                check_instant(field, at)?;
            }
            unit("importance", memory.importance)?;
            unit("consolidation_level", memory.consolidation_level)?;
            if let Some(arousal) = memory.arousal {
                unit("arousal", arousal)?;
            }
            if let Some(valence) = memory.valence {
                if !(-1.0..=1.0).contains(&valence) {
                    return Err(MemoryError::invalid(
                        "valence",
                        "valence must be between -1 and 1",
                    ));
                }
            }
            if memory.version == 0 {
                return Err(MemoryError::invalid("version", "version starts at 1"));
            }
            super::memories::rescreen(&rt.inner.config.screening, memory)?;
            for (position, version) in m.versions.iter_mut().enumerate() {
                let field = |name: &str| format!("versions[{position}].{name}");
                storable_text(&field("content"), &version.content)?;
                storable_text(&field("reason"), &version.reason)?;
                for tag in &version.tags {
                    storable_text(&field("tags"), tag)?;
                }
                check_instant(&field("archived_at"), version.archived_at)?;
                unit(&field("importance"), version.importance)?;
                if version.version >= m.memory.version {
                    return Err(MemoryError::invalid(
                        field("version"),
                        format!(
                            "a past version must be below the memory's version {}",
                            m.memory.version
                        ),
                    ));
                }
                // Secrets leave archived versions too (injection marks matter only
                // for what reaches a context: the current version).
                let _ = crate::policy::screening::screen(
                    &rt.inner.config.screening,
                    &mut version.content,
                    None,
                )
                .map_err(|kinds| {
                    MemoryError::invalid(
                        field("content"),
                        format!("the text holds a secret ({})", kinds.join(", ")),
                    )
                })?;
            }
            if let Some(vector) = &m.embedding {
                if vector.iter().any(|x| !x.is_finite()) {
                    return Err(MemoryError::invalid(
                        "embedding.vector",
                        "every number of a vector must be finite",
                    ));
                }
            }
        }
        TransferRecord::Edge(edge) => {
            storable_text("relation", &edge.relation)?;
            unit("weight", edge.weight)?;
            check_instant("created_at", edge.created_at)?;
        }
        TransferRecord::Session(session) => {
            if session.log.is_none() && !session.messages.is_empty() {
                return Err(MemoryError::invalid(
                    "log",
                    "a session with messages needs its log state",
                ));
            }
            for (position, message) in session.messages.iter().enumerate() {
                storable_text(&format!("messages[{position}].content"), &message.content)?;
                check_instant(&format!("messages[{position}].at"), message.at)?;
            }
            if let Some(log) = &session.log {
                if let Some(summary) = &log.summary {
                    storable_text("summary", summary)?;
                }
                check_instant("created_at", log.created_at)?;
                check_instant("last_message_at", log.last_message_at)?;
                if let Some(at) = log.summarized_at {
                    check_instant("summarized_at", at)?;
                }
                if let Some(last) = session.messages.last() {
                    if last.seq > log.last_seq {
                        return Err(MemoryError::invalid(
                            "last_seq",
                            format!(
                                "last_seq {} is below the last message's seq {}",
                                log.last_seq, last.seq
                            ),
                        ));
                    }
                }
            }
            if let Some(archive) = &session.archive {
                check_instant("archive.archived_through", archive.archived_through)?;
            }
        }
        TransferRecord::Project(project) => {
            storable_text("name", &project.project.name)?;
            check_instant("created_at", project.project.created_at)?;
            check_instant("updated_at", project.project.updated_at)?;
        }
        TransferRecord::Run(run) => {
            storable_text("trigger", &run.trigger)?;
            storable_json("report", &run.report)?;
            check_instant("started_at", run.started_at)?;
            check_instant("finished_at", run.finished_at)?;
        }
        TransferRecord::Namespace(namespace) => {
            let limit = rt.inner.config.kv.max_entries_limit as u64;
            if namespace.max_entries == 0 || namespace.max_entries > limit {
                return Err(MemoryError::invalid(
                    "max_entries",
                    format!(
                        "max_entries must be between 1 and {limit} (namespaces.max_entries_limit)"
                    ),
                ));
            }
            check_instant("created_at", namespace.created_at)?;
            check_instant("updated_at", namespace.updated_at)?;
        }
        TransferRecord::EntityMerge(found) => {
            let merge = &found.merge;
            for (field, text) in [
                ("id", &merge.id),
                ("alias", &merge.alias),
                ("name", &merge.name),
            ] {
                if text.trim().is_empty() || text.len() > 200 {
                    return Err(MemoryError::invalid(
                        field,
                        format!("{field} must hold 1 to 200 bytes"),
                    ));
                }
                storable_text(field, text)?;
            }
            if merge.alias == merge.name {
                return Err(MemoryError::invalid(
                    "alias",
                    "a merge joins two different keys",
                ));
            }
            if !matches!(merge.origin.as_str(), "user" | "stated") {
                return Err(MemoryError::invalid(
                    "origin",
                    "origin must be user or stated",
                ));
            }
            check_instant("created_at", merge.created_at)?;
            if let Some(at) = merge.undone_at {
                check_instant("undone_at", at)?;
            }
        }
        TransferRecord::KvEntry(entry) => {
            storable_text("key", &entry.key)?;
            storable_json("value", &entry.value)?;
            for tag in &entry.tags {
                storable_text("tags", tag)?;
            }
            check_instant("created_at", entry.created_at)?;
            check_instant("updated_at", entry.updated_at)?;
            if let Some(at) = entry.expires_at {
                check_instant("expires_at", at)?;
            }
        }
    }
    Ok(())
}

/// Write checked records (see the module doc): memories without a vector are embedded
/// first (in [`IMPORT_BATCH`]es), each batch is one transaction, and the active
/// memories written enter the vector index. Answers what happened to each record.
pub(super) async fn import(
    rt: &Runtime,
    mut records: Vec<TransferRecord>,
) -> MemoryResult<Vec<ImportOutcome>> {
    let actors = rt.actors();
    let mut outcomes = Vec::with_capacity(records.len());
    for batch in records.chunks_mut(IMPORT_BATCH) {
        // One model from the dimension check until the batch is stored and indexed.
        let _model_gate = actors.vectors.hold().await;
        let dimension = actors
            .vectors
            .status()
            .await
            .map(|s| s.dimension)
            .unwrap_or(0);
        // Memories stored already are left as they are: nothing to embed for them.
        let ids: Vec<_> = batch
            .iter()
            .filter_map(|r| match r {
                TransferRecord::Memory(m) => Some(m.memory.id.clone()),
                _ => None,
            })
            .collect();
        let stored: std::collections::HashSet<_> = actors
            .episodic
            .memory_owners(&ids)
            .await?
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        let missing: Vec<usize> = batch
            .iter()
            .enumerate()
            .filter_map(|(i, r)| match r {
                TransferRecord::Memory(m)
                    if !stored.contains(&m.memory.id)
                        && m.embedding
                            .as_ref()
                            .is_none_or(|v| dimension != 0 && v.len() != dimension) =>
                {
                    Some(i)
                }
                _ => None,
            })
            .collect();
        if !missing.is_empty() {
            let texts: Vec<String> = missing
                .iter()
                .filter_map(|&i| match &batch[i] {
                    TransferRecord::Memory(m) => Some(embedding_text(&m.memory)),
                    _ => None,
                })
                .collect();
            let vectors = actors.vectors.embed(&texts).await?;
            for (&i, vector) in missing.iter().zip(vectors) {
                if let TransferRecord::Memory(m) = &mut batch[i] {
                    m.embedding = Some(vector);
                }
            }
        }
        let written = actors
            .episodic
            .import_records(batch, TRANSFER_ALLOWANCE)
            .await?;
        let indexed: Vec<_> = batch
            .iter()
            .zip(&written)
            .filter_map(|(record, outcome)| match (record, outcome) {
                (TransferRecord::Memory(m), ImportOutcome::Written)
                    if m.memory.status == MemoryStatus::Active =>
                {
                    m.embedding
                        .clone()
                        .map(|vector| embedding_record(&m.memory, vector))
                }
                _ => None,
            })
            .collect();
        actors.vectors.project(&indexed, &[]).await;
        // Merges written change what the agent's memories name: the entity index
        // reads again what names their aliases (the memories of this import are read
        // as they arrive, with every merge committed before them or in their batch).
        let mut merged: std::collections::BTreeMap<&crate::model::AgentId, Vec<String>> =
            Default::default();
        for (record, outcome) in batch.iter().zip(&written) {
            if let (TransferRecord::EntityMerge(m), ImportOutcome::Written) = (record, outcome) {
                merged
                    .entry(&m.agent_id)
                    .or_default()
                    .push(m.merge.alias.clone());
            }
        }
        if let Some(index) = rt.inner.entities.as_deref() {
            for (agent, aliases) in merged {
                index.merges_imported(agent, &aliases).await?;
            }
        }
        outcomes.extend(written);
    }
    Ok(outcomes)
}
