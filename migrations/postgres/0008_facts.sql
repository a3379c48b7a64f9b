-- Facts over time (policy::facts): each claim a memory makes about a subject
-- ("Alice lives in Lisbon"), kept by the entity index from the outbox like its
-- mentions. Validity windows are not stored: they are worked out from all the claims
-- of a subject and attribute when read, so out-of-order memories and rebuilds agree.
-- Claims of superseded and stale memories stay (a contradiction closes a fact, never
-- deletes it); a forgotten, archived or deleted memory's claims go.
CREATE TABLE entity_facts (
    memory_id       text COLLATE "C" NOT NULL,
    ordinal         bigint NOT NULL,       -- the claim's place in its memory
    agent_id        text COLLATE "C" NOT NULL,
    subject_key     text COLLATE "C" NOT NULL,
    subject         text NOT NULL,
    attribute       text COLLATE "C" NOT NULL,
    value           text NOT NULL,
    value_key       text COLLATE "C" NOT NULL,
    value_is_entity boolean NOT NULL,
    ends            boolean NOT NULL,      -- the claim says the fact ended
    observed_at     timestamptz NOT NULL,  -- when the memory happened
    PRIMARY KEY (memory_id, ordinal)
);
CREATE INDEX entity_facts_by_subject ON entity_facts (agent_id, subject_key, attribute);
CREATE INDEX entity_facts_by_value ON entity_facts (agent_id, value_key);

-- Merges of an agent's entities: an alias key resolved to another entity's key, by a
-- person (POST /v1/entities/{id}/merge) or because a memory states the alias
-- ("Melanie (Mel)"). The history of the person's decisions, not a projection: a
-- rebuild keeps it. An undone merge (a split) keeps its row, with undone_at, so a
-- stated alias is not merged again.
CREATE TABLE entity_merges (
    id          text COLLATE "C" PRIMARY KEY,
    agent_id    text COLLATE "C" NOT NULL,
    alias_key   text COLLATE "C" NOT NULL,
    name_key    text COLLATE "C" NOT NULL,
    origin      text NOT NULL,            -- 'user' or 'stated'
    memory_id   text COLLATE "C",         -- the memory stating the alias
    created_at  timestamptz NOT NULL,
    undone_at   timestamptz
);
CREATE INDEX entity_merges_by_alias ON entity_merges (agent_id, alias_key);

-- A mention by a merged alias ("Mel" of Melanie): the entity's name comes from the
-- others first.
ALTER TABLE entity_mentions ADD COLUMN via_alias boolean NOT NULL DEFAULT false;

-- The index must be built again to hold the claims of memories already stored.
DELETE FROM entity_index_state;
