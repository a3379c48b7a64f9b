-- Identity: API keys and the audit log (mirrors migrations/sqlite/0006_identity.sql).

CREATE TABLE api_keys (
    id           text COLLATE "C" PRIMARY KEY,
    name         text NOT NULL,
    tenant       text COLLATE "C" NOT NULL,
    agent_id     text COLLATE "C",
    scopes       text NOT NULL,
    secret_hash  text NOT NULL,
    created_at   timestamptz NOT NULL,
    last_used_at timestamptz,
    expires_at   timestamptz,
    revoked_at   timestamptz
);
CREATE INDEX api_keys_by_tenant ON api_keys (tenant, created_at);

CREATE TABLE audit_log (
    seq    bigserial PRIMARY KEY,
    at     timestamptz NOT NULL,
    actor  text NOT NULL,
    tenant text COLLATE "C",
    action text NOT NULL,
    target text,
    detail jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_log_by_tenant ON audit_log (tenant, seq);
