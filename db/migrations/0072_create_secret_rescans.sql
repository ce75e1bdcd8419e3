-- Tenants whose stored text must be rescanned for the bare values of
-- secrets learned since it was written (issue 9's promise, ARCHITECTURE
-- §6.2: secrets are never stored, so search cannot be an oracle for one).
--
-- Ingestion learns a secret where a pattern finds it (a key in a
-- Kubernetes Secret, a password after "password:") and from then on
-- redacts the value alone wherever it appears. Text stored before the
-- secret was learned was redacted with the secrets known then: a push that
-- adds deploy/secret.yaml teaches the tenant its password, but a file the
-- push did not touch, another repository, a finding or a pull request's
-- overlay that holds the same value alone keeps it stored, and a search for
-- a prefix of it would answer whether the next character is right.
--
-- Every transaction that records a fingerprint new to its tenant also
-- bumps the tenant's row here (pkg/postgres RecordSecretFingerprints, in
-- the same statement). The worker's periodic job rescans each tenant listed
-- (pkg/ingest RedactKnown: every stored text, by the tenant's known
-- secrets) and deletes the row only if it was not bumped meanwhile.
CREATE TABLE secret_rescans (
    tenant_id    uuid PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    -- requested counts the transactions that learned a new secret; a
    -- rescan clears the row only at the count it started from.
    requested    bigint NOT NULL DEFAULT 1 CHECK (requested > 0),
    requested_at timestamptz NOT NULL DEFAULT now()
);

-- Tenants that learned secrets before this migration may hold such values
-- already: each is rescanned once. The fill reads every tenant's
-- fingerprints, as migrations 0066 and 0071 read every tenant's rows; the
-- policies make the table FORCE ROW LEVEL SECURITY again after the
-- migrations.
ALTER TABLE secret_fingerprints NO FORCE ROW LEVEL SECURITY;
INSERT INTO secret_rescans (tenant_id) SELECT DISTINCT tenant_id FROM secret_fingerprints;
ALTER TABLE secret_fingerprints FORCE ROW LEVEL SECURITY;
