-- Outbox: every change to a memory or an association enqueues an entry in the same
-- transaction (by trigger, so no write path can forget it). The projector applies the
-- entries in order to the external projections (FalkorDB, ...), then trims them
-- (mirrors migrations/sqlite/0005_outbox.sql). Every transaction that changes memories
-- or edges holds the store's write lock, so entries commit in `seq` order: a reader of
-- `seq > n` never skips an entry that commits later with a smaller number.

CREATE TABLE outbox (
    seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    entity     text NOT NULL,                 -- 'memory' | 'edge'
    op         text NOT NULL,                 -- 'upsert' | 'delete'
    agent_id   text COLLATE "C" NOT NULL,
    memory_id  text COLLATE "C",              -- entity = 'memory'
    from_id    text COLLATE "C",              -- entity = 'edge'
    to_id      text COLLATE "C",
    relation   text COLLATE "C",
    payload    jsonb NOT NULL DEFAULT '{}',   -- the projected properties
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE FUNCTION memories_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO outbox (entity, op, agent_id, memory_id) VALUES ('memory', 'delete', OLD.agent_id, OLD.id);
        RETURN OLD;
    END IF;
    INSERT INTO outbox (entity, op, agent_id, memory_id, payload)
    VALUES ('memory', 'upsert', NEW.agent_id, NEW.id,
            jsonb_build_object('type', NEW.memory_type, 'status', NEW.status, 'shared', NEW.shared,
                               'session_id', NEW.session_id));
    RETURN NEW;
END
$$;

CREATE TRIGGER memories_outbox_insert AFTER INSERT ON memories
    FOR EACH ROW EXECUTE FUNCTION memories_outbox();
-- Only what a projection holds: reinforcement (access counts) does not enqueue.
CREATE TRIGGER memories_outbox_update AFTER UPDATE OF memory_type, status, shared, session_id ON memories
    FOR EACH ROW EXECUTE FUNCTION memories_outbox();
CREATE TRIGGER memories_outbox_delete AFTER DELETE ON memories
    FOR EACH ROW EXECUTE FUNCTION memories_outbox();

CREATE FUNCTION associations_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO outbox (entity, op, agent_id, from_id, to_id, relation)
        VALUES ('edge', 'delete', OLD.agent_id, OLD.from_id, OLD.to_id, OLD.relation);
        RETURN OLD;
    END IF;
    INSERT INTO outbox (entity, op, agent_id, from_id, to_id, relation, payload)
    VALUES ('edge', 'upsert', NEW.agent_id, NEW.from_id, NEW.to_id, NEW.relation,
            jsonb_build_object('weight', NEW.weight));
    RETURN NEW;
END
$$;

CREATE TRIGGER associations_outbox_write AFTER INSERT OR UPDATE ON associations
    FOR EACH ROW EXECUTE FUNCTION associations_outbox();
CREATE TRIGGER associations_outbox_delete AFTER DELETE ON associations
    FOR EACH ROW EXECUTE FUNCTION associations_outbox();
