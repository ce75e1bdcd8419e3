-- Purpose code.search: the candidate step of search_code (ARCHITECTURE §6.6).
--
-- LIKE, ILIKE and regex operators are not leakproof, so under the tenant
-- policy PostgreSQL evaluates the policy first and will not use the trigram
-- index for the pattern. This function runs as {{search}}, which reads
-- code_chunks, code_files and repositories under a permissive policy, and
-- applies the tenant itself: the tenant comes from the caller's transaction
-- (app.tenant_id) and the repositories from the caller's grants. It reads
-- only the columns a search result needs.
GRANT USAGE ON SCHEMA public TO {{search}};
GRANT SELECT (tenant_id, id, repository_id, file_id, start_line, end_line, content) ON code_chunks TO {{search}};
GRANT SELECT (tenant_id, id, repository_id, commit_sha, path, line_count) ON code_files TO {{search}};
GRANT SELECT (tenant_id, id, full_name) ON repositories TO {{search}};
DROP POLICY IF EXISTS code_search_read ON code_chunks;
CREATE POLICY code_search_read ON code_chunks FOR SELECT TO {{search}} USING (true);
DROP POLICY IF EXISTS code_search_read ON code_files;
CREATE POLICY code_search_read ON code_files FOR SELECT TO {{search}} USING (true);
DROP POLICY IF EXISTS code_search_read ON repositories;
CREATE POLICY code_search_read ON repositories FOR SELECT TO {{search}} USING (true);

-- search_code_candidates returns the chunks of the given repositories whose
-- content contains every pattern (case-insensitive ILIKE patterns, already
-- escaped by the caller), in chunk order after p_after_chunk, at most
-- p_limit of them, with their file's path. The caller filters paths and
-- confirms each candidate line by line; p_path_prefix only narrows the scan
-- when there is no pattern (a scoped, literal-less regex).
--
-- The plan is pinned rather than left to statistics, which are missing
-- right after an index is written (the runtime role cannot ANALYZE): with
-- patterns, the trigram GIN index finds the candidate chunks first and only
-- those are joined to their files; without, the files under the prefix are
-- read first. Sequential and plain index scans are switched off inside the
-- function so that neither plan degrades into reading every chunk.
DROP FUNCTION IF EXISTS search_code_candidates(bigint[], text[], text, bigint, integer);
CREATE FUNCTION search_code_candidates(
    p_repo_ids    bigint[],
    p_patterns    text[],
    p_path_prefix text,
    p_after_chunk bigint,
    p_limit       integer)
RETURNS TABLE (
    chunk_id      bigint,
    repository_id bigint,
    full_name     text,
    commit_sha    text,
    path          text,
    start_line    integer,
    end_line      integer,
    line_count    integer,
    content       text)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
SET enable_seqscan = off
SET enable_indexscan = off
AS $fn$
DECLARE
    v_tenant uuid := current_setting('app.tenant_id')::uuid;
    v_sql    text;
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 5000 THEN
        RAISE EXCEPTION 'search_code_candidates: limit must be 1..5000';
    END IF;
    IF coalesce(array_length(p_patterns, 1), 0) > 5 THEN
        RAISE EXCEPTION 'search_code_candidates: at most 5 patterns';
    END IF;
    -- Patterns are bound as parameters ($6[i]), never spliced into the SQL.
    IF coalesce(array_length(p_patterns, 1), 0) > 0 THEN
        v_sql := 'WITH cand AS MATERIALIZED (
                SELECT c.id, c.repository_id, c.file_id, c.start_line, c.end_line, c.content
                FROM public.code_chunks c
                WHERE c.tenant_id = $1 AND c.repository_id = ANY($2) AND c.id > $4';
        FOR i IN 1 .. array_length(p_patterns, 1) LOOP
            v_sql := v_sql || format(' AND c.content ILIKE $6[%s]', i);
        END LOOP;
        v_sql := v_sql || ' ORDER BY c.id LIMIT $5)
            SELECT cand.id, cand.repository_id, r.full_name, f.commit_sha, f.path, cand.start_line, cand.end_line, f.line_count, cand.content
            FROM cand
            JOIN public.code_files f ON f.tenant_id = $1 AND f.id = cand.file_id
            JOIN public.repositories r ON r.tenant_id = $1 AND r.id = cand.repository_id
            ORDER BY cand.id';
    ELSE
        v_sql := 'SELECT c.id, c.repository_id, r.full_name, f.commit_sha, f.path, c.start_line, c.end_line, f.line_count, c.content
            FROM public.code_files f
            JOIN public.code_chunks c ON c.tenant_id = f.tenant_id AND c.file_id = f.id
            JOIN public.repositories r ON r.tenant_id = f.tenant_id AND r.id = f.repository_id
            WHERE f.tenant_id = $1 AND f.repository_id = ANY($2) AND c.id > $4
              AND ($3 = $q$$q$ OR left(f.path, length($3)) = $3)
            ORDER BY c.id LIMIT $5';
    END IF;
    RETURN QUERY EXECUTE v_sql USING v_tenant, p_repo_ids, p_path_prefix, p_after_chunk, p_limit, p_patterns;
END
$fn$;
ALTER FUNCTION search_code_candidates(bigint[], text[], text, bigint, integer) OWNER TO {{search}};
REVOKE ALL ON FUNCTION search_code_candidates(bigint[], text[], text, bigint, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION search_code_candidates(bigint[], text[], text, bigint, integer) TO {{app}};

-- Purpose code.search at a pull request's head (search_code with
-- pull_request): the same candidate step over the pull request's overlay
-- and the base index beneath it, with the same guarantees: the tenant
-- comes from app.tenant_id, the repository from the caller's grants, and
-- only the columns a result needs are read.
GRANT SELECT (tenant_id, repository_id, number, head_sha) ON pull_code_heads TO {{search}};
GRANT SELECT (tenant_id, id, repository_id, number, path, deleted, line_count) ON pull_code_files TO {{search}};
GRANT SELECT (tenant_id, id, repository_id, number, file_id, start_line, end_line, content) ON pull_code_chunks TO {{search}};
DROP POLICY IF EXISTS code_search_read ON pull_code_heads;
CREATE POLICY code_search_read ON pull_code_heads FOR SELECT TO {{search}} USING (true);
DROP POLICY IF EXISTS code_search_read ON pull_code_files;
CREATE POLICY code_search_read ON pull_code_files FOR SELECT TO {{search}} USING (true);
DROP POLICY IF EXISTS code_search_read ON pull_code_chunks;
CREATE POLICY code_search_read ON pull_code_chunks FOR SELECT TO {{search}} USING (true);

-- search_pull_code_candidates runs in two phases, each in chunk order
-- after p_after_chunk: phase 1 the chunks of the files the pull request
-- changes (at its head), phase 2 the chunks of the base index, each
-- marked shadowed when the pull request changes or deletes its path (the
-- caller skips those but pages past them, so a page shorter than p_limit
-- still means the phase is done). An unknown pull request returns nothing.
DROP FUNCTION IF EXISTS search_pull_code_candidates(bigint, integer, integer, text[], text, bigint, integer);
CREATE FUNCTION search_pull_code_candidates(
    p_repo_id     bigint,
    p_number      integer,
    p_phase       integer,
    p_patterns    text[],
    p_path_prefix text,
    p_after_chunk bigint,
    p_limit       integer)
RETURNS TABLE (
    chunk_id      bigint,
    repository_id bigint,
    full_name     text,
    commit_sha    text,
    path          text,
    start_line    integer,
    end_line      integer,
    line_count    integer,
    content       text,
    shadowed      boolean)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
SET enable_seqscan = off
SET enable_indexscan = off
AS $fn$
DECLARE
    v_tenant uuid := current_setting('app.tenant_id')::uuid;
    v_head   text;
    v_from   text;
    v_sql    text;
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 5000 THEN
        RAISE EXCEPTION 'search_pull_code_candidates: limit must be 1..5000';
    END IF;
    IF coalesce(array_length(p_patterns, 1), 0) > 5 THEN
        RAISE EXCEPTION 'search_pull_code_candidates: at most 5 patterns';
    END IF;
    IF p_phase NOT IN (1, 2) THEN
        RAISE EXCEPTION 'search_pull_code_candidates: phase must be 1 or 2';
    END IF;
    SELECT h.head_sha INTO v_head FROM public.pull_code_heads h
    WHERE h.tenant_id = v_tenant AND h.repository_id = p_repo_id AND h.number = p_number;
    IF v_head IS NULL THEN
        RETURN;
    END IF;
    IF p_phase = 1 THEN
        v_from := 'public.pull_code_chunks';
    ELSE
        v_from := 'public.code_chunks';
    END IF;
    -- Patterns are bound as parameters ($6[i]), never spliced into the SQL.
    v_sql := 'WITH cand AS MATERIALIZED (
            SELECT c.id, c.repository_id, c.file_id, c.start_line, c.end_line, c.content
            FROM ' || v_from || ' c
            WHERE c.tenant_id = $1 AND c.repository_id = $2 AND c.id > $4';
    IF p_phase = 1 THEN
        v_sql := v_sql || ' AND c.number = $7';
    END IF;
    FOR i IN 1 .. coalesce(array_length(p_patterns, 1), 0) LOOP
        v_sql := v_sql || format(' AND c.content ILIKE $6[%s]', i);
    END LOOP;
    v_sql := v_sql || ' ORDER BY c.id LIMIT $5)';
    IF p_phase = 1 THEN
        v_sql := v_sql || '
            SELECT cand.id, cand.repository_id, r.full_name, $8, f.path, cand.start_line, cand.end_line, f.line_count, cand.content,
                   NOT ($3 = $q$$q$ OR left(f.path, length($3)) = $3)
            FROM cand
            JOIN public.pull_code_files f ON f.tenant_id = $1 AND f.id = cand.file_id
            JOIN public.repositories r ON r.tenant_id = $1 AND r.id = cand.repository_id
            ORDER BY cand.id';
    ELSE
        v_sql := v_sql || '
            SELECT cand.id, cand.repository_id, r.full_name, $8, f.path, cand.start_line, cand.end_line, f.line_count, cand.content,
                   (NOT ($3 = $q$$q$ OR left(f.path, length($3)) = $3)) OR EXISTS (
                       SELECT 1 FROM public.pull_code_files pf
                       WHERE pf.tenant_id = $1 AND pf.repository_id = $2 AND pf.number = $7 AND pf.path = f.path)
            FROM cand
            JOIN public.code_files f ON f.tenant_id = $1 AND f.id = cand.file_id
            JOIN public.repositories r ON r.tenant_id = $1 AND r.id = cand.repository_id
            ORDER BY cand.id';
    END IF;
    RETURN QUERY EXECUTE v_sql USING v_tenant, p_repo_id, p_path_prefix, p_after_chunk, p_limit, p_patterns, p_number, v_head;
END
$fn$;
ALTER FUNCTION search_pull_code_candidates(bigint, integer, integer, text[], text, bigint, integer) OWNER TO {{search}};
REVOKE ALL ON FUNCTION search_pull_code_candidates(bigint, integer, integer, text[], text, bigint, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION search_pull_code_candidates(bigint, integer, integer, text[], text, bigint, integer) TO {{app}};
