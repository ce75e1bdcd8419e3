-- The SHA-256 of each webhook delivery's body. GitHub's signature covers
-- the body only, not X-GitHub-Delivery, so a captured delivery could be
-- replayed under a fresh delivery id; the digest recognises the same body
-- again. Rows from before this migration have none (NULLs never collide).
ALTER TABLE github_deliveries ADD COLUMN body_sha256 bytea CHECK (length(body_sha256) = 32);
CREATE UNIQUE INDEX github_deliveries_tenant_body ON github_deliveries (tenant_id, body_sha256);
