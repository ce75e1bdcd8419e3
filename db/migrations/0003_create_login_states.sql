-- One-time sign-in states: the OAuth/OIDC state of a sign-in in progress
-- (with its PKCE verifier and nonce), and single-use links printed by
-- cltctl (break-glass, and development sign-in for make run). Only the
-- SHA-256 of the secret part is stored; the tenant id travels in the clear
-- part of the value, so the callback can find the row under RLS.
CREATE TABLE login_states (
    tenant_id    uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id           uuid NOT NULL DEFAULT gen_random_uuid(),
    secret_hash  bytea NOT NULL UNIQUE CHECK (length(secret_hash) = 32),
    kind         text NOT NULL CHECK (kind IN ('github', 'oidc', 'break-glass', 'dev')),
    user_id      uuid,
    idp_id       uuid,
    verifier     text NOT NULL DEFAULT '',
    nonce        text NOT NULL DEFAULT '',
    return_to    text NOT NULL DEFAULT '',
    -- SHA-256 of the value of the browser's sign-in cookie: a callback is
    -- accepted only in the browser that started the sign-in (login CSRF).
    browser_hash bytea,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    used_at      timestamptz,
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, user_id) REFERENCES users (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX login_states_tenant_expires ON login_states (tenant_id, expires_at);
