-- OAuth 2.1 for MCP clients (ARCHITECTURE §4a, issue 12). Every table is a
-- tenant table (forced RLS through policies/tenancy.sql): the authorization
-- server of a tenant is /t/{slug}, so every request already knows its
-- tenant and nothing here is read across tenants.

-- Clients the tenant's authorization server knows: dynamic registrations
-- (RFC 7591, client_id cld_…, expiring when unused) and the cached Client
-- ID Metadata Documents of URL client_ids (cache_until from HTTP caching).
CREATE TABLE oauth_clients (
    tenant_id     uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id            uuid NOT NULL DEFAULT gen_random_uuid(),
    client_id     text NOT NULL CHECK (length(client_id) BETWEEN 1 AND 2000),
    kind          text NOT NULL CHECK (kind IN ('cimd', 'dcr')),
    name          text NOT NULL DEFAULT '' CHECK (length(name) <= 400),
    client_uri    text NOT NULL DEFAULT '',
    redirect_uris text[] NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_used_at  timestamptz,
    -- dcr: the registration is deleted after this unless used (each use
    -- extends it); cimd: unused.
    expires_at    timestamptz,
    -- cimd: the document may be reused until cache_until; etag revalidates.
    fetched_at    timestamptz,
    cache_until   timestamptz,
    etag          text NOT NULL DEFAULT '',
    PRIMARY KEY (tenant_id, id),
    UNIQUE (tenant_id, client_id)
);

-- A grant: one person allowed one client to read this tenant's MCP
-- endpoint (the resource). It lasts at most 90 days; revoking it revokes
-- its access and refresh tokens.
CREATE TABLE oauth_grants (
    tenant_id     uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id            uuid NOT NULL DEFAULT gen_random_uuid(),
    user_id       uuid NOT NULL,
    client_ref    uuid NOT NULL,
    client_name   text NOT NULL CHECK (length(client_name) BETWEEN 1 AND 400),
    resource      text NOT NULL,
    scope         text NOT NULL DEFAULT 'mcp:read' CHECK (scope = 'mcp:read'),
    -- The OIDC provider and groups snapshot the access tokens carry.
    idp_id        uuid,
    idp_groups    text[],
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL,
    revoked_at    timestamptz,
    revoked_reason text NOT NULL DEFAULT '',
    CHECK (expires_at > created_at AND expires_at <= created_at + interval '90 days 1 minute'),
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, user_id) REFERENCES users (tenant_id, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, client_ref) REFERENCES oauth_clients (tenant_id, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, idp_id) REFERENCES identity_providers (tenant_id, id)
);
CREATE INDEX oauth_grants_tenant_user ON oauth_grants (tenant_id, user_id, created_at DESC);
CREATE INDEX oauth_grants_tenant_client ON oauth_grants (tenant_id, client_ref);

-- Authorization codes: only the SHA-256 is stored; single use, short-lived.
-- grant_id is set by the exchange, so that a second use can revoke what the
-- first one issued.
CREATE TABLE oauth_codes (
    tenant_id      uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id             uuid NOT NULL DEFAULT gen_random_uuid(),
    code_hash      bytea NOT NULL CHECK (length(code_hash) = 32),
    user_id        uuid NOT NULL,
    client_ref     uuid NOT NULL,
    redirect_uri   text NOT NULL,
    code_challenge text NOT NULL,
    resource       text NOT NULL,
    idp_id         uuid,
    idp_groups     text[],
    created_at     timestamptz NOT NULL DEFAULT now(),
    expires_at     timestamptz NOT NULL,
    used_at        timestamptz,
    grant_id       uuid,
    PRIMARY KEY (tenant_id, id),
    -- Looked up inside the tenant of the token endpoint, never across.
    UNIQUE (tenant_id, code_hash),
    FOREIGN KEY (tenant_id, user_id) REFERENCES users (tenant_id, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, client_ref) REFERENCES oauth_clients (tenant_id, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, grant_id) REFERENCES oauth_grants (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX oauth_codes_tenant_expires ON oauth_codes (tenant_id, expires_at);

-- Refresh tokens (clr_…): only the SHA-256 is stored. Each use rotates:
-- used_at is set and a new token issued; presenting a used one again
-- revokes the whole grant (reuse detection).
CREATE TABLE oauth_refresh_tokens (
    tenant_id   uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id          uuid NOT NULL DEFAULT gen_random_uuid(),
    grant_id    uuid NOT NULL,
    token_hash  bytea NOT NULL CHECK (length(token_hash) = 32),
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    used_at     timestamptz,
    PRIMARY KEY (tenant_id, id),
    UNIQUE (tenant_id, token_hash),
    FOREIGN KEY (tenant_id, grant_id) REFERENCES oauth_grants (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX oauth_refresh_tokens_tenant_grant ON oauth_refresh_tokens (tenant_id, grant_id);

-- Access tokens are ordinary clt_ tokens; those issued to OAuth clients
-- record their grant and the resource (audience) they are bound to.
ALTER TABLE mcp_tokens ADD COLUMN oauth_grant_id uuid;
ALTER TABLE mcp_tokens ADD COLUMN audience text;
ALTER TABLE mcp_tokens ADD CONSTRAINT mcp_tokens_oauth_grant_fk
    FOREIGN KEY (tenant_id, oauth_grant_id) REFERENCES oauth_grants (tenant_id, id) ON DELETE CASCADE;
ALTER TABLE mcp_tokens ADD CONSTRAINT mcp_tokens_oauth_audience
    CHECK ((oauth_grant_id IS NULL) = (audience IS NULL));
CREATE INDEX mcp_tokens_tenant_grant ON mcp_tokens (tenant_id, oauth_grant_id) WHERE oauth_grant_id IS NOT NULL;
