-- Identity: API keys (only a hash of each secret is kept) and the audit log of key
-- changes, erasures, admin actions and authorization failures.

CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,      -- the key's public id (mnm_<id>_<secret>)
    name         TEXT NOT NULL,
    tenant       TEXT NOT NULL,
    agent_id     TEXT,                  -- NULL: every agent of the tenant
    scopes       TEXT NOT NULL,         -- comma-separated: read, write, admin
    secret_hash  TEXT NOT NULL,         -- SHA-256 of the secret, hex
    created_at   TEXT NOT NULL,
    last_used_at TEXT,
    expires_at   TEXT,
    revoked_at   TEXT
);
CREATE INDEX api_keys_by_tenant ON api_keys (tenant, created_at);

CREATE TABLE audit_log (
    seq    INTEGER PRIMARY KEY AUTOINCREMENT,
    at     TEXT NOT NULL,
    actor  TEXT NOT NULL,               -- a key id, or "operator"
    tenant TEXT,
    action TEXT NOT NULL,
    target TEXT,
    detail TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_log_by_tenant ON audit_log (tenant, seq);
