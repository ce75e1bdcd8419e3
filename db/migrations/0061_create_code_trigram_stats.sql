-- An estimate of how many of a tenant's chunks hold each trigram (issue
-- 11), refreshed from a sample of its chunks whenever one of its
-- repositories is indexed (postgres.Tx.RefreshCodeStats).
-- search_code_candidates reads it for one choice only: whether the rest of
-- the tenant holds few enough candidates to be rechecked at once, or so
-- many (func \w+Handler\( has 8,365 chunks with func and handler for 370
-- matches) that walking on bucket by bucket finds the page sooner. A
-- trigram missing from it is one the sample did not hold twice: rare.
-- Stale or missing rows only change that choice, never an answer.
CREATE TABLE code_trigram_stats (
    tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    trigram   text NOT NULL,
    -- The estimated number of the tenant's chunks that hold the trigram;
    -- for the empty trigram, the tenant's chunk count at the refresh.
    chunks    bigint NOT NULL,
    PRIMARY KEY (tenant_id, trigram)
);
