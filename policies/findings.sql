-- Purpose findings.search: the text query of search_findings (issue 11).
--
-- LIKE is not leakproof, so under the tenant policy PostgreSQL evaluates the
-- policy before the pattern and cannot use the trigram index of
-- db/migrations/0015. This function runs as {{search}}, which reads findings
-- and pull_requests under a permissive policy, and applies the tenant
-- itself: the tenant comes from the caller's transaction (app.tenant_id), the
-- repositories from the caller's grants. It returns ids only; the caller
-- reads the rows under the tenant policy, so RLS stays the backstop.
--
-- The stored text is already redacted at ingestion (ARCHITECTURE §6.2), so
-- the pattern can never act as an oracle for a secret.
GRANT SELECT (tenant_id, id, repository_id, pull_request_id, rule_key, severity, status, path, title, body, created_at) ON findings TO {{search}};
GRANT SELECT (tenant_id, id, repository_id, number) ON pull_requests TO {{search}};
DROP POLICY IF EXISTS findings_search_read ON findings;
CREATE POLICY findings_search_read ON findings FOR SELECT TO {{search}} USING (true);
DROP POLICY IF EXISTS findings_search_read ON pull_requests;
CREATE POLICY findings_search_read ON pull_requests FOR SELECT TO {{search}} USING (true);

-- search_finding_ids returns, newest first, the ids of at most p_limit
-- findings of the caller's tenant in the granted repositories (all of them
-- when p_all) whose title, body, rule or path contains p_query
-- (case-insensitive, a plain substring: % and _ match themselves) and that
-- pass the other filters (each NULL when unused).
--
-- Two phases, so neither common nor rare words fall off a cliff:
--  1. the newest 1,000 findings that pass the other filters are read in
--     index order and the pattern is checked on them. A common word fills
--     the page here, long before a trigram bitmap over the whole tenant
--     would have been built and sorted.
--  2. only if that window holds too few matches (and there are older rows)
--     is the trigram index asked for every match, which is cheap exactly
--     when matches are rare.
-- The window is complete for the newest rows, so phase 1's answer, when it
-- is enough, is the same as phase 2's would be.
DROP FUNCTION IF EXISTS search_finding_ids(boolean, bigint[], bigint, text, text[], text, text, text, integer, timestamptz, bigint, integer);
DROP FUNCTION IF EXISTS search_finding_ids(boolean, bigint[], bigint, text, text[], text, text, text, integer, timestamptz, bigint, integer, boolean);
CREATE FUNCTION search_finding_ids(
    p_all         boolean,
    p_repo_ids    bigint[],
    p_repo_id     bigint,
    p_query       text,
    p_severities  text[],
    p_status      text,
    p_rule        text,
    p_path_prefix text,
    p_pr_number   integer,
    p_after_time  timestamptz,
    p_after_id    bigint,
    p_limit       integer,
    -- The caller's grants are wide (pkg/postgres/widegrants.go): checked
    -- as an opaque filter the planner does not estimate id by id.
    p_wide        boolean DEFAULT false)
RETURNS TABLE (id bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER
-- A page is at most a few dozen ids; the default estimate of 1,000 rows
-- would make the caller's join read the findings table instead of fetching
-- those ids by primary key.
ROWS 50
SET search_path = pg_catalog, public, pg_temp
-- Declared so that the set_config below is scoped to this function and
-- restored when it returns; see phase 2.
SET enable_indexscan = on
SET enable_seqscan = on
AS $fn$
DECLARE
    v_tenant uuid := current_setting('app.tenant_id')::uuid;
    v_where  text := 'f.tenant_id = $1';
    v_like   text;
    v_window integer;
    v_ids    bigint[];
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
        RAISE EXCEPTION 'search_finding_ids: limit must be 1..1000';
    END IF;
    IF p_query IS NULL OR p_query = '' THEN
        RAISE EXCEPTION 'search_finding_ids: query is required';
    END IF;
    -- Every value is bound as a parameter ($n), never spliced into the SQL;
    -- only the choice of predicates is dynamic, so that each call is planned
    -- for the filters it really has.
    IF NOT p_all AND coalesce(p_wide, false) THEN
        -- Every EXECUTE below is planned for its values, so the array is a
        -- constant, checked through a hash table.
        v_where := v_where || ' AND coalesce(f.repository_id = ANY($2), false)';
    ELSIF NOT p_all THEN
        v_where := v_where || ' AND f.repository_id = ANY($2)';
    END IF;
    IF p_repo_id IS NOT NULL THEN
        v_where := v_where || ' AND f.repository_id = $3';
    END IF;
    IF p_severities IS NOT NULL THEN
        v_where := v_where || ' AND f.severity = ANY($5)';
    END IF;
    IF p_status IS NOT NULL THEN
        v_where := v_where || ' AND f.status = $6';
    END IF;
    IF p_rule IS NOT NULL THEN
        v_where := v_where || ' AND f.rule_key = $7';
    END IF;
    IF p_path_prefix IS NOT NULL THEN
        v_where := v_where || ' AND left(f.path, length($8)) = $8';
    END IF;
    IF p_pr_number IS NOT NULL THEN
        v_where := v_where || ' AND f.pull_request_id = (SELECT p.id FROM public.pull_requests p
            WHERE p.tenant_id = $1 AND p.repository_id = $3 AND p.number = $9)';
    END IF;
    IF p_after_time IS NOT NULL THEN
        v_where := v_where || ' AND (f.created_at, f.id) < ($10, $11)';
    END IF;
    v_like := '%' || replace(replace(replace(lower(p_query), '\', '\\'), '%', '\%'), '_', '\_') || '%';

    EXECUTE format('SELECT count(*)::int,
            (array_agg(w.id ORDER BY w.created_at DESC, w.id DESC) FILTER (WHERE w.t LIKE $13))[1:$12]
        FROM (SELECT f.id, f.created_at, lower(f.title || '' '' || f.body || '' '' || f.rule_key || '' '' || f.path) AS t
              FROM public.findings f WHERE %s
              ORDER BY f.created_at DESC, f.id DESC LIMIT 1000) w', v_where)
        INTO v_window, v_ids
        USING v_tenant, p_repo_ids, p_repo_id, p_query, p_severities, p_status, p_rule, p_path_prefix,
              p_pr_number, p_after_time, p_after_id, p_limit, v_like;
    IF coalesce(array_length(v_ids, 1), 0) >= p_limit OR v_window < 1000 THEN
        RETURN QUERY SELECT u.id FROM unnest(v_ids) WITH ORDINALITY AS u(id, n) ORDER BY u.n;
        RETURN;
    END IF;

    -- Phase 2: rare matches. Plain index scans and sequential scans are
    -- switched off for this statement only (restored on return by the SET
    -- clauses above), so the planner can neither walk the whole tenant
    -- newest-first hoping for an early match nor read the table: it takes
    -- the trigram bitmap and sorts the few rows it yields.
    -- A query shorter than a trigram has no trigram to look up, so it keeps
    -- the newest-first walk.
    IF length(p_query) >= 3 THEN
        PERFORM set_config('enable_indexscan', 'off', true);
        PERFORM set_config('enable_seqscan', 'off', true);
    END IF;
    RETURN QUERY EXECUTE format('SELECT f.id FROM public.findings f
        WHERE %s AND lower(f.title || '' '' || f.body || '' '' || f.rule_key || '' '' || f.path) LIKE $13
        ORDER BY f.created_at DESC, f.id DESC LIMIT $12', v_where)
        USING v_tenant, p_repo_ids, p_repo_id, p_query, p_severities, p_status, p_rule, p_path_prefix,
              p_pr_number, p_after_time, p_after_id, p_limit, v_like;
END
$fn$;
ALTER FUNCTION search_finding_ids(boolean, bigint[], bigint, text, text[], text, text, text, integer, timestamptz, bigint, integer, boolean) OWNER TO {{search}};
REVOKE ALL ON FUNCTION search_finding_ids(boolean, bigint[], bigint, text, text[], text, text, text, integer, timestamptz, bigint, integer, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION search_finding_ids(boolean, bigint[], bigint, text, text[], text, text, text, integer, timestamptz, bigint, integer, boolean) TO {{app}};
