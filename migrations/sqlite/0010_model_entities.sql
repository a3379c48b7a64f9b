-- What the inner-thought model said each memory names (policy::model_entities), kept
-- so the entity index is rebuilt without asking the model again: one row per memory
-- and content hash (a changed text is asked about again). `outcome` is 'ok', or why
-- the rules stand alone for this text ('timeout', 'error', 'malformed'); `answer` is
-- the model's JSON ({"entities": [...], "relations": [...]}; '{}' when it failed).
CREATE TABLE entity_model_answers (
    memory_id    TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    agent_id     TEXT NOT NULL,
    provider     TEXT NOT NULL,
    outcome      TEXT NOT NULL,
    answer       TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    PRIMARY KEY (memory_id, content_hash)
);
CREATE INDEX entity_model_answers_by_agent ON entity_model_answers (agent_id);

-- Which mentions and claims the model added (checked against the text) rather than
-- the rules.
ALTER TABLE entity_mentions ADD COLUMN by_model INTEGER NOT NULL DEFAULT 0;
ALTER TABLE entity_facts ADD COLUMN by_model INTEGER NOT NULL DEFAULT 0;

-- A name split off for one project's memories (the same name for someone else there):
-- a merge that applies in that project only, resolved before the others.
ALTER TABLE entity_merges ADD COLUMN project_id TEXT;
