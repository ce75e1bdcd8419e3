-- Token handoffs (issue 14): the MCP access page creates a token on POST
-- and redirects to a GET that shows it once, so that reloading the page
-- never creates another token. Between the two requests the token waits
-- here, sealed (AES-GCM) under a key derived from the browser's session
-- cookie, which is never stored: a database reader cannot open it, only
-- the browser that created it, and only once (the GET deletes the row).
CREATE TABLE token_handoffs (
    tenant_id   uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id          uuid NOT NULL DEFAULT gen_random_uuid(),
    session_id  uuid NOT NULL,
    token_id    uuid NOT NULL,
    sealed      bytea NOT NULL CHECK (length(sealed) BETWEEN 28 AND 512),
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, session_id) REFERENCES web_sessions (tenant_id, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, token_id) REFERENCES mcp_tokens (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX token_handoffs_tenant_expires ON token_handoffs (tenant_id, expires_at);
