-- mnemos system of record (SQLite). Never edit a landed migration: add a new one.

CREATE TABLE memories (
    id                  TEXT PRIMARY KEY NOT NULL,
    agent_id            TEXT NOT NULL,
    memory_type         TEXT NOT NULL,
    content             TEXT NOT NULL,
    title               TEXT,
    importance          REAL NOT NULL,
    tags                TEXT NOT NULL DEFAULT '[]',   -- JSON array of strings
    session_id          TEXT,
    occurred_at         TEXT NOT NULL,                -- RFC 3339, UTC, fixed width
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL,
    last_accessed_at    TEXT NOT NULL,
    access_count        INTEGER NOT NULL DEFAULT 0,
    consolidation_level REAL NOT NULL DEFAULT 0,
    valence             REAL,
    arousal             REAL,
    status              TEXT NOT NULL,
    shared              INTEGER NOT NULL DEFAULT 0,
    metadata            TEXT NOT NULL DEFAULT '{}',   -- JSON object
    source_path         TEXT,
    source_hash         TEXT,
    version             INTEGER NOT NULL DEFAULT 1,
    content_hash        TEXT NOT NULL DEFAULT ''   -- normalised content hash, for exact deduplication
);
CREATE INDEX memories_by_agent ON memories (agent_id, id);
CREATE INDEX memories_by_agent_status ON memories (agent_id, status, memory_type);
CREATE INDEX memories_by_session ON memories (agent_id, session_id, id);
CREATE INDEX memories_shared ON memories (shared) WHERE shared = 1;
CREATE INDEX memories_by_content_hash ON memories (agent_id, content_hash) WHERE status = 'active';

-- Embeddings live beside the memory so the vector index can be rebuilt without re-embedding.
CREATE TABLE memory_embeddings (
    memory_id TEXT PRIMARY KEY NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    vector    BLOB NOT NULL                            -- little-endian f32
);

CREATE TABLE memory_versions (
    memory_id   TEXT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    version     INTEGER NOT NULL,
    content     TEXT NOT NULL,
    importance  REAL NOT NULL,
    tags        TEXT NOT NULL,
    status      TEXT NOT NULL,
    archived_at TEXT NOT NULL,
    reason      TEXT NOT NULL,
    PRIMARY KEY (memory_id, version)
);

CREATE TABLE associations (
    agent_id   TEXT NOT NULL,
    from_id    TEXT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    to_id      TEXT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    relation   TEXT NOT NULL,
    weight     REAL NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (from_id, to_id, relation)
);
CREATE INDEX associations_to ON associations (to_id);

CREATE TABLE consolidation_runs (
    id             TEXT PRIMARY KEY NOT NULL,
    agent_id       TEXT,
    trigger        TEXT NOT NULL,
    started_at     TEXT NOT NULL,
    finished_at    TEXT NOT NULL,
    processed      INTEGER NOT NULL,
    consolidated   INTEGER NOT NULL,
    forgotten      INTEGER NOT NULL,
    new_semantic   INTEGER NOT NULL,
    new_procedural INTEGER NOT NULL,
    report         TEXT NOT NULL
);
CREATE INDEX consolidation_runs_by_agent ON consolidation_runs (agent_id, started_at);

CREATE TABLE store_meta (
    key   TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
);

-- Keyword index over active memories. The store writes `terms` itself: every search
-- term of the title and content prefixed with a short hash of the agent ("a" + 8 hex
-- digits), plus a "sharedpol" copy for shared memories. Posting lists are therefore
-- per agent: a search reads only its own agent's (and the shared pool's) postings,
-- and BM25's idf is computed within the agent's own memories.
CREATE VIRTUAL TABLE memories_fts USING fts5 (
    terms,
    tokenize = 'unicode61 remove_diacritics 2'
);

CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
    DELETE FROM memories_fts WHERE rowid = OLD.rowid;
END;
