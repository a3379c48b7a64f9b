-- Sleep cycle and archival: session archive marks and job leases.

-- One row per archived session: activity up to `archived_through` is covered by the
-- summary memory `summary_id`. Archival skips sessions whose activity it covers.
CREATE TABLE session_archives (
    agent_id         TEXT NOT NULL,
    session_id       TEXT NOT NULL,
    archived_through TEXT NOT NULL,
    summary_id       TEXT NOT NULL,
    PRIMARY KEY (agent_id, session_id)
);

-- One row per scheduled job: the process holding it until `expires_at`, and the last
-- firing (slot) claimed. A firing runs in the one process that claims its slot.
CREATE TABLE job_leases (
    job        TEXT PRIMARY KEY NOT NULL,
    holder     TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    last_slot  TEXT NOT NULL
);

-- Purging looks for archived memories by age.
CREATE INDEX memories_archived ON memories (agent_id, updated_at) WHERE status = 'archived';
