-- Namespaces: projects (per agent, grouping sessions, with an isolation flag) and
-- key-value namespaces shared by the nodes of multi-agent orchestrators.

CREATE TABLE projects (
    agent_id   TEXT NOT NULL,
    project_id TEXT NOT NULL,
    name       TEXT NOT NULL,
    isolated   INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (agent_id, project_id)
);

-- A session belongs to at most one project of its agent.
CREATE TABLE project_sessions (
    agent_id    TEXT NOT NULL,
    session_id  TEXT NOT NULL,
    project_id  TEXT NOT NULL,
    attached_at TEXT NOT NULL,
    PRIMARY KEY (agent_id, session_id),
    FOREIGN KEY (agent_id, project_id) REFERENCES projects (agent_id, project_id) ON DELETE CASCADE
);
CREATE INDEX project_sessions_by_project ON project_sessions (agent_id, project_id);

-- The project a memory was written in (NULL: none). Isolation is read from `projects`
-- at recall time, so changing a project's flag applies to its memories at once.
ALTER TABLE memories ADD COLUMN project_id TEXT;
CREATE INDEX memories_by_project ON memories (agent_id, project_id) WHERE project_id IS NOT NULL;

-- One row per KV namespace. `clock` is the last use number handed out: every get or
-- put of an entry takes the next one, so `kv_entries.last_used` orders entries by
-- recency of use and the lowest numbers are evicted first (the LRU order survives restarts).
CREATE TABLE kv_namespaces (
    name        TEXT PRIMARY KEY NOT NULL,
    max_entries INTEGER NOT NULL,
    clock       INTEGER NOT NULL DEFAULT 0,
    hits        INTEGER NOT NULL DEFAULT 0,
    misses      INTEGER NOT NULL DEFAULT 0,
    evictions   INTEGER NOT NULL DEFAULT 0,
    puts        INTEGER NOT NULL DEFAULT 0,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);

CREATE TABLE kv_entries (
    namespace  TEXT NOT NULL REFERENCES kv_namespaces (name) ON DELETE CASCADE,
    key        TEXT NOT NULL,
    value      TEXT NOT NULL,               -- JSON
    tags       TEXT NOT NULL DEFAULT '[]',  -- JSON array of strings
    written_by TEXT NOT NULL,               -- the node (agent) that wrote the value
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    expires_at TEXT,                        -- RFC 3339; NULL: never
    last_used  INTEGER NOT NULL,
    PRIMARY KEY (namespace, key)
);
CREATE INDEX kv_entries_by_use ON kv_entries (namespace, last_used);

-- Tags of entries, for list_by_tag.
CREATE TABLE kv_entry_tags (
    namespace TEXT NOT NULL,
    key       TEXT NOT NULL,
    tag       TEXT NOT NULL,
    PRIMARY KEY (namespace, tag, key),
    FOREIGN KEY (namespace, key) REFERENCES kv_entries (namespace, key) ON DELETE CASCADE
);
