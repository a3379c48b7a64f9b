-- Namespaces: projects (per agent, grouping sessions, with an isolation flag) and
-- key-value namespaces shared by the nodes of multi-agent orchestrators
-- (mirrors migrations/sqlite/0004_namespaces.sql).

CREATE TABLE projects (
    agent_id   text COLLATE "C" NOT NULL,
    project_id text COLLATE "C" NOT NULL,
    name       text NOT NULL,
    isolated   boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (agent_id, project_id)
);

-- A session belongs to at most one project of its agent.
CREATE TABLE project_sessions (
    agent_id    text COLLATE "C" NOT NULL,
    session_id  text COLLATE "C" NOT NULL,
    project_id  text COLLATE "C" NOT NULL,
    attached_at timestamptz NOT NULL,
    PRIMARY KEY (agent_id, session_id),
    FOREIGN KEY (agent_id, project_id) REFERENCES projects (agent_id, project_id) ON DELETE CASCADE
);
CREATE INDEX project_sessions_by_project ON project_sessions (agent_id, project_id);

-- The project a memory was written in (NULL: none). Isolation is read from `projects`
-- at recall time, so changing a project's flag applies to its memories at once.
ALTER TABLE memories ADD COLUMN project_id text COLLATE "C";
CREATE INDEX memories_by_project ON memories (agent_id, project_id) WHERE project_id IS NOT NULL;

-- One row per KV namespace. `clock` is the last use number handed out: every get or
-- put of an entry takes the next one, so `kv_entries.last_used` orders entries by
-- recency of use and the lowest numbers are evicted first (the LRU order survives restarts).
CREATE TABLE kv_namespaces (
    name        text COLLATE "C" PRIMARY KEY,
    max_entries bigint NOT NULL,
    clock       bigint NOT NULL DEFAULT 0,
    hits        bigint NOT NULL DEFAULT 0,
    misses      bigint NOT NULL DEFAULT 0,
    evictions   bigint NOT NULL DEFAULT 0,
    puts        bigint NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);

CREATE TABLE kv_entries (
    namespace  text COLLATE "C" NOT NULL REFERENCES kv_namespaces (name) ON DELETE CASCADE,
    key        text COLLATE "C" NOT NULL,
    value      jsonb NOT NULL,
    tags       jsonb NOT NULL DEFAULT '[]',   -- array of strings
    written_by text COLLATE "C" NOT NULL,     -- the node (agent) that wrote the value
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    expires_at timestamptz,                   -- NULL: never
    last_used  bigint NOT NULL,
    PRIMARY KEY (namespace, key)
);
CREATE INDEX kv_entries_by_use ON kv_entries (namespace, last_used);

-- Tags of entries, for list_by_tag.
CREATE TABLE kv_entry_tags (
    namespace text COLLATE "C" NOT NULL,
    key       text COLLATE "C" NOT NULL,
    tag       text COLLATE "C" NOT NULL,
    PRIMARY KEY (namespace, tag, key),
    FOREIGN KEY (namespace, key) REFERENCES kv_entries (namespace, key) ON DELETE CASCADE
);
