-- Sessions: each conversation's durable message log and its compaction state.

-- One row per session: how long its log is, how far compaction has reached, and the
-- running summary that stands in for the compacted messages in the window.
CREATE TABLE sessions (
    agent_id          TEXT NOT NULL,
    session_id        TEXT NOT NULL,
    last_seq          INTEGER NOT NULL,
    compacted_through INTEGER NOT NULL DEFAULT 0,
    summary           TEXT,
    summarized_at     TEXT,
    pending_tokens    INTEGER NOT NULL DEFAULT 0,
    compactions       INTEGER NOT NULL DEFAULT 0,
    created_at        TEXT NOT NULL,
    last_message_at   TEXT NOT NULL,
    PRIMARY KEY (agent_id, session_id)
);

-- The message log, append-only; compaction archives it into an episodic memory but
-- keeps the rows (the log is the acknowledgement of every message).
CREATE TABLE session_messages (
    agent_id   TEXT NOT NULL,
    session_id TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    role       TEXT NOT NULL,
    content    TEXT NOT NULL,
    tokens     INTEGER NOT NULL,
    at         TEXT NOT NULL,
    PRIMARY KEY (agent_id, session_id, seq)
);
