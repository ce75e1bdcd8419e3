-- Indexes for search_findings at tenant scale (issue 11).
--
-- The text query is answered by search_finding_ids (policies/findings.sql),
-- a SECURITY DEFINER function, because under row-level security PostgreSQL
-- will not use an index for a LIKE predicate (it is not leakproof). The
-- trigram index covers exactly the expression that function matches; keep
-- the two in step.
--
-- Unlike the btree indexes, this one does not lead with tenant_id: in a GIN
-- index a tenant_id key does not narrow a scan, it adds the posting list of
-- every row of the tenant to it (for a big tenant, hundreds of thousands of
-- entries to intersect for a word that occurs five times). The function
-- filters by tenant and repository on the few rows the trigrams yield.
--
-- fastupdate is off: with it, new rows wait in the GIN pending list until a
-- vacuum merges them, and the planner prices a scan of a long pending list
-- so high that it falls back to reading the tenant's findings. Findings are
-- written in imports and syncs, not on a hot path, so inserting straight
-- into the index is the better trade.
CREATE INDEX findings_search_trgm ON findings
    USING gin ((lower(title || ' ' || body || ' ' || rule_key || ' ' || path)) gin_trgm_ops)
    WITH (fastupdate = off);

-- rule: an exact rule key, newest first, without reading other rules' rows.
CREATE INDEX findings_tenant_rule_created ON findings (tenant_id, rule_key, created_at DESC, id DESC);

-- pull_request: the findings of one pull request, newest first.
CREATE INDEX findings_tenant_pr_created ON findings (tenant_id, pull_request_id, created_at DESC, id DESC);
