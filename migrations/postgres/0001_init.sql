-- mnemos system of record (PostgreSQL). Never edit a landed migration: add a new one.
-- Mirrors migrations/sqlite (0001_init, 0002_sleep_cycle) with native types. Keys are
-- COLLATE "C" so ids, agents and sessions sort by bytes, exactly as in SQLite.

CREATE TABLE memories (
    id                  text COLLATE "C" PRIMARY KEY,
    agent_id            text COLLATE "C" NOT NULL,
    memory_type         text NOT NULL,
    content             text NOT NULL,
    title               text,
    importance          real NOT NULL,
    tags                jsonb NOT NULL DEFAULT '[]',   -- array of strings
    session_id          text COLLATE "C",
    occurred_at         timestamptz NOT NULL,
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL,
    last_accessed_at    timestamptz NOT NULL,
    access_count        bigint NOT NULL DEFAULT 0,
    consolidation_level real NOT NULL DEFAULT 0,
    valence             real,
    arousal             real,
    status              text NOT NULL,
    shared              boolean NOT NULL DEFAULT false,
    metadata            jsonb NOT NULL DEFAULT '{}',
    source_path         text,
    source_hash         text,
    version             bigint NOT NULL DEFAULT 1,
    content_hash        text NOT NULL DEFAULT ''       -- normalised content hash, for exact deduplication
);
CREATE INDEX memories_by_agent ON memories (agent_id, id);
CREATE INDEX memories_by_agent_status ON memories (agent_id, status, memory_type);
CREATE INDEX memories_by_session ON memories (agent_id, session_id, id);
CREATE INDEX memories_shared ON memories (shared) WHERE shared;
CREATE INDEX memories_by_content_hash ON memories (agent_id, content_hash) WHERE status = 'active';
CREATE INDEX memories_by_occurrence ON memories (agent_id, occurred_at);
-- Purging looks for archived memories by age.
CREATE INDEX memories_archived ON memories (agent_id, updated_at) WHERE status = 'archived';

-- Embeddings live beside the memory so the vector index can be rebuilt without re-embedding.
CREATE TABLE memory_embeddings (
    memory_id text COLLATE "C" PRIMARY KEY REFERENCES memories (id) ON DELETE CASCADE,
    vector    real[] NOT NULL
);

CREATE TABLE memory_versions (
    memory_id   text COLLATE "C" NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    version     bigint NOT NULL,
    content     text NOT NULL,
    importance  real NOT NULL,
    tags        jsonb NOT NULL,
    status      text NOT NULL,
    archived_at timestamptz NOT NULL,
    reason      text NOT NULL,
    PRIMARY KEY (memory_id, version)
);

CREATE TABLE associations (
    agent_id   text COLLATE "C" NOT NULL,
    from_id    text COLLATE "C" NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    to_id      text COLLATE "C" NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    relation   text COLLATE "C" NOT NULL,
    weight     real NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (from_id, to_id, relation)
);
CREATE INDEX associations_to ON associations (to_id);

CREATE TABLE consolidation_runs (
    id             text COLLATE "C" PRIMARY KEY,
    agent_id       text COLLATE "C",
    trigger        text NOT NULL,
    started_at     timestamptz NOT NULL,
    finished_at    timestamptz NOT NULL,
    processed      bigint NOT NULL,
    consolidated   bigint NOT NULL,
    forgotten      bigint NOT NULL,
    new_semantic   bigint NOT NULL,
    new_procedural bigint NOT NULL,
    report         jsonb NOT NULL
);
CREATE INDEX consolidation_runs_by_agent ON consolidation_runs (agent_id, started_at);

CREATE TABLE store_meta (
    key   text PRIMARY KEY,
    value text NOT NULL
);

-- Keyword index over active memories, the same postings SQLite's FTS5 table holds:
-- every search term of the title and content prefixed with a short hash of the agent
-- ("a" + 8 hex digits), plus a "sharedpol" copy for shared memories. `terms` holds the
-- distinct terms (GIN: which memories match), `tf` each term's count in the memory,
-- `length` the number of terms with repeats (BM25's document length). The store ranks
-- with FTS5's BM25 (k1 = 1.2, b = 0.75) over these numbers, so both backends agree.
CREATE TABLE memory_search (
    memory_id text COLLATE "C" PRIMARY KEY REFERENCES memories (id) ON DELETE CASCADE,
    terms     tsvector NOT NULL,
    tf        jsonb NOT NULL,
    length    integer NOT NULL
);
CREATE INDEX memory_search_terms ON memory_search USING gin (terms);

-- BM25's collection statistics (rows and total length of memory_search), kept exact by
-- a trigger. Every writer of memory_search holds the store's write lock, so this one
-- row is never contended.
CREATE TABLE keyword_stats (
    id     smallint PRIMARY KEY CHECK (id = 1),
    docs   bigint NOT NULL,
    tokens bigint NOT NULL
);
INSERT INTO keyword_stats (id, docs, tokens) VALUES (1, 0, 0);

CREATE FUNCTION memory_search_stats() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        UPDATE keyword_stats SET docs = docs + 1, tokens = tokens + NEW.length WHERE id = 1;
        RETURN NEW;
    ELSIF TG_OP = 'DELETE' THEN
        UPDATE keyword_stats SET docs = docs - 1, tokens = tokens - OLD.length WHERE id = 1;
        RETURN OLD;
    ELSE
        UPDATE keyword_stats SET tokens = tokens - OLD.length + NEW.length WHERE id = 1;
        RETURN NEW;
    END IF;
END
$$;

CREATE TRIGGER memory_search_stats AFTER INSERT OR UPDATE OR DELETE ON memory_search
    FOR EACH ROW EXECUTE FUNCTION memory_search_stats();

-- One row per archived session: activity up to `archived_through` is covered by the
-- summary memory `summary_id`. Archival skips sessions whose activity it covers.
CREATE TABLE session_archives (
    agent_id         text COLLATE "C" NOT NULL,
    session_id       text COLLATE "C" NOT NULL,
    archived_through timestamptz NOT NULL,
    summary_id       text COLLATE "C" NOT NULL,
    PRIMARY KEY (agent_id, session_id)
);

-- One row per scheduled job: the process holding it until `expires_at`, and the last
-- firing (slot) claimed. A firing runs in the one process that claims its slot.
CREATE TABLE job_leases (
    job        text PRIMARY KEY,
    holder     text NOT NULL,
    expires_at timestamptz NOT NULL,
    last_slot  timestamptz NOT NULL
);
