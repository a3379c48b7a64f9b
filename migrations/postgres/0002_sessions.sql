-- Sessions: each conversation's durable message log and its compaction state
-- (mirrors migrations/sqlite/0003_sessions.sql).

-- One row per session: how long its log is, how far compaction has reached, and the
-- running summary that stands in for the compacted messages in the window. Appending
-- a message locks its session's row, so sequence numbers are gap-free per session
-- even with several replicas.
CREATE TABLE sessions (
    agent_id          text COLLATE "C" NOT NULL,
    session_id        text COLLATE "C" NOT NULL,
    last_seq          bigint NOT NULL,
    compacted_through bigint NOT NULL DEFAULT 0,
    summary           text,
    summarized_at     timestamptz,
    pending_tokens    bigint NOT NULL DEFAULT 0,
    compactions       bigint NOT NULL DEFAULT 0,
    created_at        timestamptz NOT NULL,
    last_message_at   timestamptz NOT NULL,
    PRIMARY KEY (agent_id, session_id)
);

-- The message log, append-only; compaction archives it into an episodic memory but
-- keeps the rows (the log is the acknowledgement of every message).
CREATE TABLE session_messages (
    agent_id   text COLLATE "C" NOT NULL,
    session_id text COLLATE "C" NOT NULL,
    seq        bigint NOT NULL,
    role       text NOT NULL,
    content    text NOT NULL,
    tokens     bigint NOT NULL,
    at         timestamptz NOT NULL,
    PRIMARY KEY (agent_id, session_id, seq)
);
