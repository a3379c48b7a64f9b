//! The vector actor: owns the embedder, the in-process vector index (semantic,
//! procedural and experience collections, partitioned by agent) and the in-process
//! keyword index (recall's BM25, `store::keywords`). Both indexes are projections of
//! the active memories in the system of record and are rebuilt from it (read through
//! the episodic actor) whenever the actor starts, so nothing is re-embedded after a
//! restart. Everybody else uses [`VectorsHandle`].

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef};

use super::episodic::EpisodicHandle;
use super::{injected_fault, Caller, Reply};
use crate::embedding::Embedder;
use crate::error::{MemoryError, MemoryResult};
use crate::model::MemoryId;
use crate::store::keywords::{FiledNeighbours, KeywordIndex, KeywordLoad, Prepared, SessionSeed};
use crate::store::{EmbeddingRecord, KeywordQuery, VectorIndex, VectorQuery};
use crate::supervisor::InjectedFault;

/// Ref of the vector actor.
pub type VectorsRef = ActorRef<VectorsMsg>;

/// Messages of the vector actor.
pub enum VectorsMsg {
    /// Embed texts (on a blocking task); `query`: they are questions to search with.
    Embed {
        texts: Vec<String>,
        query: bool,
        reply: Reply<Vec<Vec<f32>>>,
    },
    /// BM25 hits of a question in the keyword index.
    KeywordSearch {
        query: KeywordQuery,
        reply: Reply<Option<Vec<(MemoryId, f64)>>>,
    },
    /// The seeds' session neighbours from the keyword index's session order (`None`
    /// while it loads).
    SessionNeighbours {
        seeds: Vec<SessionSeed>,
        radius: usize,
        reply: Reply<Option<Vec<(MemoryId, MemoryId)>>>,
    },
    /// Session neighbours of seeds named by id, each in the session it is filed under
    /// (`None` while the keyword index loads).
    FiledSessionNeighbours {
        ids: Vec<MemoryId>,
        radius: usize,
        reply: Reply<Option<FiledNeighbours>>,
    },
    /// Add or replace index entries.
    Upsert {
        entries: Vec<EmbeddingRecord>,
        reply: Reply<()>,
    },
    /// Remove index entries.
    Remove {
        ids: Vec<MemoryId>,
        reply: Reply<()>,
    },
    /// Nearest neighbours of `query.vector`.
    Search {
        query: VectorQuery,
        reply: Reply<Vec<(MemoryId, f32)>>,
    },
    /// Exact similarity of a query vector to given memories (recall's candidates).
    Similarity {
        vector: Vec<f32>,
        ids: Vec<MemoryId>,
        reply: Reply<Vec<(MemoryId, f32)>>,
    },
    /// Several searches with given vectors, in one blocking task (deduplication of a batch).
    SearchMany {
        queries: Vec<VectorQuery>,
        reply: Reply<Vec<Vec<(MemoryId, f32)>>>,
    },
    /// Rebuild the index from the system of record.
    Rebuild { reply: Reply<usize> },
    /// Embed with `embedder` from now on and rebuild the index from the store, which
    /// now holds its vectors (the end of a re-embedding, under the exclusive gate).
    Switch {
        embedder: Arc<dyn Embedder>,
        reply: Reply<usize>,
    },
    /// Embed the small requests collected since the first of them arrived.
    FlushBatch,
    /// A micro-batch finished: what waited for the embedder goes now.
    BatchDone,
    /// What the index holds.
    Status { reply: Reply<IndexStatus> },
    /// Test hook: fail the actor as if its state were broken.
    InjectFault,
}

impl From<InjectedFault> for VectorsMsg {
    fn from(_: InjectedFault) -> Self {
        VectorsMsg::InjectFault
    }
}

/// A snapshot of the index for `/health`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexStatus {
    /// Index backend name.
    pub backend: String,
    /// Embedding model id.
    pub model: String,
    /// Vector length.
    pub dimension: usize,
    /// Vectors indexed.
    pub vectors: usize,
    /// Memories in the keyword index.
    pub keyword_memories: usize,
}

/// The embedder in use. A re-embedding swaps it; the supervisor's copy of the
/// arguments shares it, so a restarted actor embeds with the current one.
#[derive(Clone)]
pub struct EmbedderSlot(Arc<std::sync::RwLock<Arc<dyn Embedder>>>);

impl EmbedderSlot {
    /// A slot holding `embedder`.
    pub fn new(embedder: Arc<dyn Embedder>) -> Self {
        Self(Arc::new(std::sync::RwLock::new(embedder)))
    }
    /// The embedder in use now.
    pub fn current(&self) -> Arc<dyn Embedder> {
        match self.0.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
    /// Use `embedder` from now on.
    fn replace(&self, embedder: Arc<dyn Embedder>) {
        match self.0.write() {
            Ok(mut guard) => *guard = embedder,
            Err(poisoned) => *poisoned.into_inner() = embedder,
        }
    }
}

/// Start-up arguments (kept by the supervisor and reused on restart).
#[derive(Clone)]
pub struct VectorsArgs {
    /// The embedding model (swapped by a re-embedding).
    pub embedder: EmbedderSlot,
    /// The index (survives actor restarts; rebuilt on start).
    pub index: Arc<dyn VectorIndex>,
    /// The keyword index (survives actor restarts; rebuilt with the vector index).
    pub keywords: Arc<KeywordIndex>,
    /// The system of record, where embeddings are stored durably.
    pub episodic: EpisodicHandle,
    /// Embedding jobs run at once.
    pub embed_concurrency: usize,
    /// Most texts waiting or being embedded before a request is refused with `rate_limited`.
    pub max_queued_texts: usize,
    /// How long a small request that finds the embedder busy waits for others to share
    /// its batch (zero: never).
    pub micro_batch: std::time::Duration,
}

/// Requests of at most this many texts are micro-batched; larger ones are batches already.
const MICRO_BATCH_REQUEST: usize = 4;

/// A collected micro-batch is embedded at once when it reaches this many texts.
const MICRO_BATCH_TEXTS: usize = 32;

/// A small embedding request waiting for its micro-batch.
struct PendingEmbed {
    /// Its texts.
    texts: Vec<String>,
    /// Whether they are questions (a model's query prompt applies).
    query: bool,
    /// Where its vectors go.
    reply: Reply<Vec<Vec<f32>>>,
}

/// Small requests collected for one embedding call.
#[derive(Default)]
struct MicroBatch {
    /// Requests waiting, in arrival order.
    pending: Vec<PendingEmbed>,
    /// Their texts in all.
    texts: usize,
}

/// The actor's state.
pub struct VectorsState {
    /// The embedding model (shared with the arguments, swapped by `Switch`).
    embedder: EmbedderSlot,
    /// The index.
    index: Arc<dyn VectorIndex>,
    /// The keyword index, kept in step with the vector index.
    keywords: Arc<KeywordIndex>,
    /// The system of record, read by rebuilds.
    episodic: EpisodicHandle,
    /// Bounds the embedding work in flight.
    queue: Arc<EmbedQueue>,
    /// Small requests waiting to be embedded together.
    batch: MicroBatch,
    /// How long the first of them waits for company.
    micro_batch: std::time::Duration,
    /// Micro-batches being embedded: while none is, a small request goes at once (it
    /// would wait for nobody), and requests that arrive meanwhile share the next call.
    batches_in_flight: usize,
}

impl VectorsState {
    /// Rebuild both indexes from the system of record for the embedder in use.
    async fn rebuild(&self) -> MemoryResult<usize> {
        let dimension = self.embedder.current().dimension();
        rebuild_index(
            &self.episodic,
            self.index.as_ref(),
            &self.keywords,
            dimension,
        )
        .await
    }
}

/// The vector actor.
#[derive(Clone)]
pub struct VectorsActor;

/// The embedder's queue: at most `permits` embedding jobs run at once (so a burst of
/// batches does not oversubscribe the CPU), and at most `max_queued` texts wait or run;
/// a request beyond that is refused with `rate_limited` rather than left to time out.
struct EmbedQueue {
    /// One permit per embedding job allowed to run at once.
    permits: tokio::sync::Semaphore,
    /// Texts accepted and not yet embedded.
    queued: std::sync::atomic::AtomicUsize,
    /// Most texts accepted at once (`embedding.max_queued_texts`).
    max_queued: usize,
}

impl EmbedQueue {
    /// Accept `count` more texts, or say how many are already waiting. A request larger
    /// than the whole queue is accepted when nothing else waits (it cannot fit otherwise).
    fn admit(&self, count: usize) -> Result<(), usize> {
        use std::sync::atomic::Ordering;
        let mut current = self.queued.load(Ordering::Acquire);
        loop {
            if current > 0 && current + count > self.max_queued {
                return Err(current);
            }
            match self.queued.compare_exchange(
                current,
                current + count,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok(()),
                Err(now) => current = now,
            }
        }
    }
    /// `count` accepted texts are done (embedded or failed).
    fn done(&self, count: usize) {
        self.queued
            .fetch_sub(count, std::sync::atomic::Ordering::AcqRel);
    }

    /// Nothing is waiting or being embedded (a large request, which skips the
    /// micro-batch, counts here too).
    fn is_idle(&self) -> bool {
        self.queued.load(std::sync::atomic::Ordering::Acquire) == 0
    }
}

/// Embed on blocking threads; a large batch of a cheap embedder is split across cores.
/// Each part waits for a permit of `queue` first.
async fn embed_on_blocking_threads(
    embedder: Arc<dyn Embedder>,
    texts: Vec<String>,
    query: bool,
    queue: Arc<EmbedQueue>,
) -> MemoryResult<Vec<Vec<f32>>> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = if embedder.parallel_batches() && texts.len() >= 128 {
        texts.len().div_ceil(workers)
    } else {
        texts.len().max(1)
    };
    let mut tasks = Vec::new();
    for part in texts.chunks(chunk) {
        let part = part.to_vec();
        let embedder = embedder.clone();
        let queue = queue.clone();
        tasks.push(tokio::spawn(async move {
            let _permit = queue
                .permits
                .acquire()
                .await
                .map_err(|_| MemoryError::internal("the embedding queue was closed"))?;
            tokio::task::spawn_blocking(move || {
                let refs: Vec<&str> = part.iter().map(String::as_str).collect();
                if query {
                    embedder.embed_queries(&refs)
                } else {
                    embedder.embed_batch(&refs)
                }
            })
            .await
            .map_err(|e| MemoryError::internal(format!("embedding task failed: {e}")))?
        }));
    }
    let mut vectors = Vec::with_capacity(texts.len());
    for task in tasks {
        let part = task
            .await
            .map_err(|e| MemoryError::internal(format!("embedding task failed: {e}")))??;
        vectors.extend(part);
    }
    Ok(vectors)
}

/// Embed `texts` through `queue`, or refuse them when it is full.
async fn embed_queued(
    embedder: Arc<dyn Embedder>,
    texts: Vec<String>,
    query: bool,
    queue: Arc<EmbedQueue>,
) -> MemoryResult<Vec<Vec<f32>>> {
    let count = texts.len();
    if let Err(waiting) = queue.admit(count) {
        return Err(MemoryError::new(
            crate::error::ErrorCode::RateLimited,
            format!(
                "the embedder is saturated: {waiting} texts are waiting \
                 (embedding.max_queued_texts is {}); retry in a few seconds",
                queue.max_queued
            ),
        ));
    }
    let result = embed_on_blocking_threads(embedder, texts, query, queue.clone()).await;
    queue.done(count);
    result
}

/// Embed the collected requests in one call per kind (stored texts, questions) and
/// answer each with its own vectors, in order; a failure goes to each of them.
async fn embed_micro_batch(
    embedder: Arc<dyn Embedder>,
    pending: Vec<PendingEmbed>,
    queue: Arc<EmbedQueue>,
) {
    let (questions, texts): (Vec<PendingEmbed>, Vec<PendingEmbed>) =
        pending.into_iter().partition(|p| p.query);
    for (group, query) in [(texts, false), (questions, true)] {
        if group.is_empty() {
            continue;
        }
        let all: Vec<String> = group.iter().flat_map(|p| p.texts.iter().cloned()).collect();
        let total = all.len();
        match embed_queued(embedder.clone(), all, query, queue.clone()).await {
            Ok(vectors) if vectors.len() == total => {
                let mut vectors = vectors.into_iter();
                for request in group {
                    let own: Vec<Vec<f32>> = vectors.by_ref().take(request.texts.len()).collect();
                    let _ = request.reply.send(Ok(own));
                }
            }
            Ok(vectors) => {
                let error = MemoryError::internal(format!(
                    "the embedder returned {} vectors for {total} texts",
                    vectors.len()
                ));
                for request in group {
                    let _ = request.reply.send(Err(error.clone()));
                }
            }
            Err(error) => {
                for request in group {
                    let _ = request.reply.send(Err(error.clone()));
                }
            }
        }
    }
}

/// Run many searches on blocking threads, split across cores when there are many.
async fn search_on_blocking_threads(
    index: Arc<dyn VectorIndex>,
    queries: Vec<VectorQuery>,
) -> MemoryResult<Vec<Vec<(MemoryId, f32)>>> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = if queries.len() >= 64 {
        queries.len().div_ceil(workers)
    } else {
        queries.len().max(1)
    };
    let mut tasks = Vec::new();
    for part in queries.chunks(chunk) {
        let part = part.to_vec();
        let index = index.clone();
        tasks.push(tokio::task::spawn_blocking(move || {
            part.iter().map(|q| index.search(q)).collect::<Vec<_>>()
        }));
    }
    let mut results = Vec::with_capacity(queries.len());
    for task in tasks {
        results.extend(
            task.await
                .map_err(|e| MemoryError::internal(format!("vector search task failed: {e}")))?,
        );
    }
    Ok(results)
}

/// The keyword postings of `page`, prepared on blocking threads, one part per core. The
/// work starts at once (before the returned future is awaited).
fn prepare_keywords(
    page: Arc<Vec<EmbeddingRecord>>,
) -> impl std::future::Future<Output = MemoryResult<Vec<Prepared>>> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = page.len().div_ceil(workers).max(1);
    let mut tasks = Vec::new();
    for start in (0..page.len()).step_by(chunk) {
        let page = page.clone();
        tasks.push(tokio::task::spawn_blocking(move || {
            let end = (start + chunk).min(page.len());
            page[start..end]
                .iter()
                .map(Prepared::of)
                .collect::<Vec<_>>()
        }));
    }
    async move {
        let mut prepared = Vec::new();
        for task in tasks {
            prepared.extend(
                task.await.map_err(|e| {
                    MemoryError::internal(format!("keyword index task failed: {e}"))
                })?,
            );
        }
        Ok(prepared)
    }
}

/// Rebuild `index` from every active embedding in `store` (returns the number indexed),
/// then start reloading `keywords` in the background ([`load_keywords`]).
pub async fn rebuild_index(
    episodic: &EpisodicHandle,
    index: &dyn VectorIndex,
    keywords: &Arc<KeywordIndex>,
    dimension: usize,
) -> MemoryResult<usize> {
    index.clear();
    let mut after: Option<MemoryId> = None;
    let mut total = 0;
    loop {
        let page = episodic.embeddings_page(after.as_ref(), 4096).await?;
        let Some(last) = page.last() else { break };
        after = Some(last.id.clone());
        if let Some(bad) = page.iter().find(|r| r.vector.len() != dimension) {
            return Err(MemoryError::invalid(
                "embedding.provider",
                format!("stored vector of memory {} has {} dimensions but the embedder makes {dimension}", bad.id, bad.vector.len()),
            ));
        }
        total += page.len();
        index.upsert(&page);
    }
    // Only after the vectors are back (a failed rebuild leaves the keyword index as it
    // was), and before the keyword pages are read: every change from now on is journaled.
    // Nothing changed in between, since upserts wait in the mailbox behind this rebuild.
    let load = keywords.begin_load();
    tokio::spawn(load_keywords(episodic.clone(), keywords.clone(), load));
    Ok(total)
}

/// Load the keyword index from the system of record beside the running service (recall
/// asks the SQL store until it is done), then install it with the changes made meanwhile.
/// A failed load starts over after a pause (doubling to 30 s) unless a newer one began.
async fn load_keywords(
    episodic: EpisodicHandle,
    keywords: Arc<KeywordIndex>,
    mut load: KeywordLoad,
) {
    let mut pause = std::time::Duration::from_secs(1);
    loop {
        let started = std::time::Instant::now();
        match read_keywords(&episodic, &mut load).await {
            Ok(total) => {
                if keywords.finish_load(load) {
                    tracing::info!(
                        memories = total,
                        took_ms = started.elapsed().as_millis() as u64,
                        "keyword index loaded"
                    );
                }
                return;
            }
            Err(error) => {
                if !keywords.is_latest(&load) {
                    return;
                }
                tracing::warn!(
                    %error,
                    retry_in_ms = pause.as_millis() as u64,
                    "keyword index load failed; recall searches words in SQL meanwhile"
                );
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(std::time::Duration::from_secs(30));
                if !keywords.is_latest(&load) {
                    return;
                }
                load = keywords.begin_load();
            }
        }
    }
}

/// Read every active memory's postings into `load`, page by page; answers how many.
async fn read_keywords(episodic: &EpisodicHandle, load: &mut KeywordLoad) -> MemoryResult<usize> {
    let mut after: Option<MemoryId> = None;
    let mut total = 0usize;
    loop {
        let page = episodic.embeddings_page(after.as_ref(), 4096).await?;
        let Some(last) = page.last() else {
            return Ok(total);
        };
        after = Some(last.id.clone());
        total += page.len();
        load.insert(prepare_keywords(Arc::new(page)).await?);
    }
}

impl Actor for VectorsActor {
    type Msg = VectorsMsg;
    type State = VectorsState;
    type Arguments = VectorsArgs;

    async fn pre_start(
        &self,
        _myself: VectorsRef,
        args: VectorsArgs,
    ) -> Result<VectorsState, ActorProcessingErr> {
        let embedder = args.embedder.current();
        args.episodic
            .check_embedding_model(embedder.model_id(), embedder.dimension())
            .await?;
        let started = std::time::Instant::now();
        let count = rebuild_index(
            &args.episodic,
            args.index.as_ref(),
            &args.keywords,
            embedder.dimension(),
        )
        .await?;
        tracing::info!(
            vectors = count,
            took_ms = started.elapsed().as_millis() as u64,
            "vector index loaded"
        );
        Ok(VectorsState {
            embedder: args.embedder,
            index: args.index,
            keywords: args.keywords,
            episodic: args.episodic,
            queue: Arc::new(EmbedQueue {
                permits: tokio::sync::Semaphore::new(args.embed_concurrency.max(1)),
                queued: std::sync::atomic::AtomicUsize::new(0),
                max_queued: args.max_queued_texts.max(1),
            }),
            batch: MicroBatch::default(),
            micro_batch: args.micro_batch,
            batches_in_flight: 0,
        })
    }

    #[tracing::instrument(name = "vectors", skip_all)]
    async fn handle(
        &self,
        myself: VectorsRef,
        message: VectorsMsg,
        state: &mut VectorsState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            VectorsMsg::Embed {
                texts,
                query,
                reply,
            } => {
                let embedder = state.embedder.current();
                let collect = !state.micro_batch.is_zero()
                    && embedder.batching_pays()
                    && !texts.is_empty()
                    && texts.len() <= MICRO_BATCH_REQUEST;
                if !collect {
                    let queue = state.queue.clone();
                    tokio::spawn(async move {
                        let _ = reply.send(embed_queued(embedder, texts, query, queue).await);
                    });
                    return Ok(());
                }
                // An idle embedder would make a lone request wait for nobody: it goes
                // at once, and what arrives while it is embedded collects behind it.
                let idle = state.batch.pending.is_empty()
                    && state.batches_in_flight == 0
                    && state.queue.is_idle();
                if state.batch.pending.is_empty() && !idle {
                    // The first request waits at most the window for others.
                    myself.send_after(state.micro_batch, || VectorsMsg::FlushBatch);
                }
                state.batch.texts += texts.len();
                state.batch.pending.push(PendingEmbed {
                    texts,
                    query,
                    reply,
                });
                if idle || state.batch.texts >= MICRO_BATCH_TEXTS {
                    flush_micro_batch(&myself, state);
                }
            }
            VectorsMsg::FlushBatch => flush_micro_batch(&myself, state),
            VectorsMsg::BatchDone => {
                state.batches_in_flight = state.batches_in_flight.saturating_sub(1);
                flush_micro_batch(&myself, state);
            }
            VectorsMsg::Search { query, reply } => {
                let index = state.index.clone();
                tokio::spawn(async move {
                    let result = tokio::task::spawn_blocking(move || index.search(&query))
                        .await
                        .map_err(|e| {
                            MemoryError::internal(format!("vector search task failed: {e}"))
                        });
                    let _ = reply.send(result);
                });
            }
            VectorsMsg::Similarity { vector, ids, reply } => {
                let _ = reply.send(Ok(state.index.similarity(&vector, &ids)));
            }
            VectorsMsg::SearchMany { queries, reply } => {
                let index = state.index.clone();
                tokio::spawn(async move {
                    let _ = reply.send(search_on_blocking_threads(index, queries).await);
                });
            }
            VectorsMsg::KeywordSearch { query, reply } => {
                // Fractions of a millisecond under a shared lock: no blocking thread needed,
                // but off the mailbox so projections do not wait behind searches.
                let keywords = state.keywords.clone();
                tokio::spawn(async move {
                    let _ = reply.send(Ok(keywords.search(&query)));
                });
            }
            VectorsMsg::SessionNeighbours {
                seeds,
                radius,
                reply,
            } => {
                // A few ordered-set lookups: answered in the mailbox's turn, like Similarity.
                let _ = reply.send(Ok(state.keywords.session_neighbours(&seeds, radius)));
            }
            VectorsMsg::FiledSessionNeighbours { ids, radius, reply } => {
                let _ = reply.send(Ok(state.keywords.filed_session_neighbours(&ids, radius)));
            }
            VectorsMsg::Upsert { entries, reply } => {
                state.index.upsert(&entries);
                state.keywords.upsert(&entries);
                let _ = reply.send(Ok(()));
            }
            VectorsMsg::Remove { ids, reply } => {
                state.index.remove(&ids);
                state.keywords.remove(&ids);
                let _ = reply.send(Ok(()));
            }
            VectorsMsg::Rebuild { reply } => {
                let _ = reply.send(state.rebuild().await);
            }
            VectorsMsg::Switch { embedder, reply } => {
                state.embedder.replace(embedder);
                let _ = reply.send(state.rebuild().await);
            }
            VectorsMsg::Status { reply } => {
                let embedder = state.embedder.current();
                let _ = reply.send(Ok(IndexStatus {
                    backend: state.index.backend_name().to_string(),
                    model: embedder.model_id().to_string(),
                    dimension: embedder.dimension(),
                    vectors: state.index.len(),
                    keyword_memories: state.keywords.len(),
                }));
            }
            VectorsMsg::InjectFault => return Err(injected_fault("vectors")),
        }
        Ok(())
    }
}

/// Embed what the micro-batch collected (nothing when it is empty: a full batch went
/// before its timer fired, or nothing waited); `BatchDone` follows.
fn flush_micro_batch(myself: &VectorsRef, state: &mut VectorsState) {
    let batch = std::mem::take(&mut state.batch);
    if batch.pending.is_empty() {
        return;
    }
    let (embedder, queue) = (state.embedder.current(), state.queue.clone());
    state.batches_in_flight += 1;
    let done = BatchDoneOnDrop(myself.clone());
    tokio::spawn(async move {
        embed_micro_batch(embedder, batch.pending, queue).await;
        drop(done);
    });
}

/// Tells the actor a micro-batch is over when dropped, even by a task that panicked,
/// so a failure never leaves later requests waiting out the window. (After a restart
/// the old actor is gone and the new one starts with nothing in flight.)
struct BatchDoneOnDrop(VectorsRef);

impl Drop for BatchDoneOnDrop {
    fn drop(&mut self) {
        let _ = self.0.cast(VectorsMsg::BatchDone);
    }
}

/// Held (shared) by everything that embeds and then stores or searches, and
/// exclusively by the switch at the end of a re-embedding: nobody can embed with one
/// model and store or search among the vectors of the other.
pub type VectorGuard = tokio::sync::OwnedRwLockReadGuard<()>;

/// The typed handle of the vector actor (retries while it restarts).
#[derive(Clone)]
pub struct VectorsHandle {
    /// Finds the running vector actor.
    pub(crate) caller: Caller<VectorsMsg>,
    /// The model gate (see [`VectorGuard`]), shared by every clone of the handle.
    pub(crate) gate: Arc<tokio::sync::RwLock<()>>,
    /// Time allowed per text on top of the call timeout before an embedding is given up
    /// (a guard against a hung embedder; real work is never cut short by a fixed bound).
    pub(crate) time_per_text: std::time::Duration,
    /// A remote embedder's worst case for one request (see `EmbedSettings`), allowed
    /// per `request_texts` texts on top of the rest.
    pub(crate) request_allowance: std::time::Duration,
    /// Texts per request of a remote embedder.
    pub(crate) request_texts: usize,
}

impl VectorsHandle {
    /// Hold the model gate while embedding and then storing or searching: the model
    /// cannot change in between.
    pub async fn hold(&self) -> VectorGuard {
        self.gate.clone().read_owned().await
    }
    /// Take the model gate exclusively (the switch of a re-embedding): waits for every
    /// holder to finish and keeps new ones waiting until dropped.
    pub async fn exclusive(&self) -> tokio::sync::OwnedRwLockWriteGuard<()> {
        self.gate.clone().write_owned().await
    }
    /// Embed with `embedder` from now on; the index is rebuilt from the store's
    /// `memories` vectors (call with the gate held exclusively, after the store switched
    /// its vectors). The rebuild grows with the store, so the answer may take the call
    /// timeout twenty times over plus [`super::episodic::SWITCH_TIME_PER_MEMORY`] per memory.
    pub async fn switch(&self, embedder: Arc<dyn Embedder>, memories: u64) -> MemoryResult<usize> {
        let allowance = self.caller.call_timeout() * 20
            + super::episodic::SWITCH_TIME_PER_MEMORY
                .saturating_mul(u32::try_from(memories).unwrap_or(u32::MAX));
        self.caller
            .ask_within(Some(allowance), |reply| VectorsMsg::Switch {
                embedder: embedder.clone(),
                reply,
            })
            .await
    }
    /// Embed texts (on blocking threads), in order. Waits as long as the work takes:
    /// the call timeout plus `time_per_text` for each text, plus a remote embedder's
    /// worst case for each of its requests.
    pub async fn embed(&self, texts: &[String]) -> MemoryResult<Vec<Vec<f32>>> {
        self.embed_as(texts, false).await
    }
    /// Embed questions to search with (a model's query prompt applies).
    pub async fn embed_queries(&self, texts: &[String]) -> MemoryResult<Vec<Vec<f32>>> {
        self.embed_as(texts, true).await
    }
    async fn embed_as(&self, texts: &[String], query: bool) -> MemoryResult<Vec<Vec<f32>>> {
        let count = u32::try_from(texts.len()).unwrap_or(u32::MAX);
        let requests =
            u32::try_from(texts.len().div_ceil(self.request_texts.max(1))).unwrap_or(u32::MAX);
        let allowance = self.caller.call_timeout()
            + self.time_per_text.saturating_mul(count)
            + self.request_allowance.saturating_mul(requests);
        self.caller
            .ask_within(Some(allowance), |reply| VectorsMsg::Embed {
                texts: texts.to_vec(),
                query,
                reply,
            })
            .await
    }
    /// Embed one text.
    pub async fn embed_one(&self, text: &str) -> MemoryResult<Vec<f32>> {
        self.embed(&[text.to_string()])
            .await?
            .pop()
            .ok_or_else(|| MemoryError::internal("the embedder returned no vector"))
    }
    /// Add or replace index entries.
    pub async fn upsert(&self, entries: &[EmbeddingRecord]) -> MemoryResult<()> {
        self.caller
            .ask(|reply| VectorsMsg::Upsert {
                entries: entries.to_vec(),
                reply,
            })
            .await
    }
    /// Remove index entries.
    pub async fn remove(&self, ids: &[MemoryId]) -> MemoryResult<()> {
        self.caller
            .ask(|reply| VectorsMsg::Remove {
                ids: ids.to_vec(),
                reply,
            })
            .await
    }
    /// Best effort: keep the index in step with a committed change; a miss is repaired
    /// when the actor restarts, since the index is rebuilt from the system of record.
    pub async fn project(&self, upsert: &[EmbeddingRecord], remove: &[MemoryId]) {
        if !remove.is_empty() {
            if let Err(error) = self.remove(remove).await {
                tracing::warn!(%error, "vector index removal deferred to the next rebuild");
            }
        }
        if !upsert.is_empty() {
            if let Err(error) = self.upsert(upsert).await {
                tracing::warn!(%error, "vector index update deferred to the next rebuild");
            }
        }
    }
    /// (seed, neighbour) pairs of the seeds' session neighbours within `radius` (as the
    /// SQL store's `session_neighbours_of` answers them), from the in-process session
    /// order; `None` while the keyword index loads (ask the SQL store then).
    pub async fn session_neighbours(
        &self,
        seeds: &[crate::model::Memory],
        radius: usize,
    ) -> MemoryResult<Option<Vec<(MemoryId, MemoryId)>>> {
        let seeds: Vec<SessionSeed> = seeds.iter().filter_map(SessionSeed::of).collect();
        if seeds.is_empty() || radius == 0 {
            return Ok(Some(Vec::new()));
        }
        self.caller
            .ask(|reply| VectorsMsg::SessionNeighbours {
                seeds: seeds.clone(),
                radius,
                reply,
            })
            .await
    }
    /// Session neighbours of seeds named by id alone, with the session each is filed
    /// under (`KeywordIndex::filed_session_neighbours`); `None` while the keyword index
    /// loads.
    pub async fn filed_session_neighbours(
        &self,
        ids: &[MemoryId],
        radius: usize,
    ) -> MemoryResult<Option<FiledNeighbours>> {
        self.caller
            .ask(|reply| VectorsMsg::FiledSessionNeighbours {
                ids: ids.to_vec(),
                radius,
                reply,
            })
            .await
    }
    /// Nearest neighbours of `query.vector` in the embedded index.
    pub async fn search(&self, query: &VectorQuery) -> MemoryResult<Vec<(MemoryId, f32)>> {
        self.caller
            .ask(|reply| VectorsMsg::Search {
                query: query.clone(),
                reply,
            })
            .await
    }
    /// BM25 hits of `query` from the in-process keyword index (the SQL stores' own
    /// scores, without a round trip to them); `None` while the index is loading.
    pub async fn keyword_search(
        &self,
        query: &KeywordQuery,
    ) -> MemoryResult<Option<Vec<(MemoryId, f64)>>> {
        self.caller
            .ask(|reply| VectorsMsg::KeywordSearch {
                query: query.clone(),
                reply,
            })
            .await
    }
    /// Several searches with given vectors, in one blocking task.
    pub async fn search_many(
        &self,
        queries: &[VectorQuery],
    ) -> MemoryResult<Vec<Vec<(MemoryId, f32)>>> {
        if queries.is_empty() {
            return Ok(Vec::new());
        }
        self.caller
            .ask(|reply| VectorsMsg::SearchMany {
                queries: queries.to_vec(),
                reply,
            })
            .await
    }
    /// Exact similarity of `vector` to each of `ids` that is indexed.
    pub async fn similarity(
        &self,
        vector: &[f32],
        ids: &[MemoryId],
    ) -> MemoryResult<Vec<(MemoryId, f32)>> {
        self.caller
            .ask(|reply| VectorsMsg::Similarity {
                vector: vector.to_vec(),
                ids: ids.to_vec(),
                reply,
            })
            .await
    }
    /// Rebuild the index from the system of record; answers the vectors indexed.
    pub async fn rebuild(&self) -> MemoryResult<usize> {
        self.caller.ask(|reply| VectorsMsg::Rebuild { reply }).await
    }
    /// What the index holds (None when the actor is down or slow).
    pub async fn status(&self) -> Option<IndexStatus> {
        self.caller
            .try_ask(std::time::Duration::from_secs(2), |reply| {
                VectorsMsg::Status { reply }
            })
            .await
    }
}
