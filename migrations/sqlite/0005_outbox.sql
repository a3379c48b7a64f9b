-- Outbox: every change to a memory or an association enqueues an entry in the same
-- transaction (by trigger, so no write path can forget it). The projector applies the
-- entries in order to the external projections (FalkorDB, ...), then trims them.

CREATE TABLE outbox (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    entity     TEXT NOT NULL,                 -- 'memory' | 'edge'
    op         TEXT NOT NULL,                 -- 'upsert' | 'delete'
    agent_id   TEXT NOT NULL,
    memory_id  TEXT,                          -- entity = 'memory'
    from_id    TEXT,                          -- entity = 'edge'
    to_id      TEXT,
    relation   TEXT,
    payload    TEXT NOT NULL DEFAULT '{}',    -- JSON: the projected properties
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

CREATE TRIGGER memories_outbox_insert AFTER INSERT ON memories BEGIN
    INSERT INTO outbox (entity, op, agent_id, memory_id, payload)
    VALUES ('memory', 'upsert', NEW.agent_id, NEW.id,
            json_object('type', NEW.memory_type, 'status', NEW.status, 'shared', NEW.shared,
                        'session_id', NEW.session_id));
END;

-- Only what a projection holds: reinforcement (access counts) does not enqueue.
CREATE TRIGGER memories_outbox_update AFTER UPDATE OF memory_type, status, shared, session_id ON memories BEGIN
    INSERT INTO outbox (entity, op, agent_id, memory_id, payload)
    VALUES ('memory', 'upsert', NEW.agent_id, NEW.id,
            json_object('type', NEW.memory_type, 'status', NEW.status, 'shared', NEW.shared,
                        'session_id', NEW.session_id));
END;

CREATE TRIGGER memories_outbox_delete AFTER DELETE ON memories BEGIN
    INSERT INTO outbox (entity, op, agent_id, memory_id) VALUES ('memory', 'delete', OLD.agent_id, OLD.id);
END;

CREATE TRIGGER associations_outbox_insert AFTER INSERT ON associations BEGIN
    INSERT INTO outbox (entity, op, agent_id, from_id, to_id, relation, payload)
    VALUES ('edge', 'upsert', NEW.agent_id, NEW.from_id, NEW.to_id, NEW.relation,
            json_object('weight', NEW.weight));
END;

CREATE TRIGGER associations_outbox_update AFTER UPDATE ON associations BEGIN
    INSERT INTO outbox (entity, op, agent_id, from_id, to_id, relation, payload)
    VALUES ('edge', 'upsert', NEW.agent_id, NEW.from_id, NEW.to_id, NEW.relation,
            json_object('weight', NEW.weight));
END;

CREATE TRIGGER associations_outbox_delete AFTER DELETE ON associations BEGIN
    INSERT INTO outbox (entity, op, agent_id, from_id, to_id, relation)
    VALUES ('edge', 'delete', OLD.agent_id, OLD.from_id, OLD.to_id, OLD.relation);
END;
