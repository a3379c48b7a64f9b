-- The entity index: who and what each active memory names (policy::entities), kept
-- from the outbox like any projection and rebuildable from the memories. An entity is
-- per agent, identified by its resolution key; its id is derived from (agent, key), so
-- a rebuild gives every entity the id it had. Its name, kind and time span are
-- derived from its mentions (the earliest surface, the most frequent specific kind),
-- so they too come out of a rebuild as they were.
CREATE TABLE entities (
    id          text COLLATE "C" PRIMARY KEY,
    agent_id    text COLLATE "C" NOT NULL,
    entity_key  text COLLATE "C" NOT NULL,
    name        text NOT NULL,
    kind        text NOT NULL,
    first_seen  timestamptz NOT NULL,
    last_seen   timestamptz NOT NULL,
    UNIQUE (agent_id, entity_key)
);

-- One mention of an entity in a memory (byte span of the memory's content).
CREATE TABLE entity_mentions (
    entity_id   text COLLATE "C" NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    memory_id   text COLLATE "C" NOT NULL,
    agent_id    text COLLATE "C" NOT NULL,
    surface     text NOT NULL,
    kind        text NOT NULL,          -- what this mention says it is
    start_at    bigint NOT NULL,
    end_at      bigint NOT NULL,
    occurred_at timestamptz NOT NULL,
    PRIMARY KEY (entity_id, memory_id, start_at)
);
CREATE INDEX entity_mentions_by_memory ON entity_mentions (memory_id);
CREATE INDEX entity_mentions_by_agent ON entity_mentions (agent_id);

-- How far the entity index has applied the outbox (one row; none: rebuild it).
CREATE TABLE entity_index_state (
    id       integer PRIMARY KEY CHECK (id = 1),
    applied  bigint NOT NULL
);
