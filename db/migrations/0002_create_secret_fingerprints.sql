-- Secrets found in a tenant's content at import or indexing time, kept only
-- as SHA-256 fingerprints (never the secret), so that the result pipeline
-- redacts every later occurrence of the same value even where no pattern
-- recognises it (a bare password in a path or a suggestion).
CREATE TABLE secret_fingerprints (
    tenant_id   uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    fingerprint bytea NOT NULL CHECK (length(fingerprint) = 32),
    length      integer NOT NULL CHECK (length BETWEEN 1 AND 4096),
    rule_id     text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, fingerprint)
);
