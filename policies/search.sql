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
GRANT SELECT (tenant_id, id, repository_id, commit_sha, path, line_count, chunk_lo, chunk_hi) ON code_files TO {{search}};
GRANT SELECT (tenant_id, id, full_name) ON repositories TO {{search}};
DROP POLICY IF EXISTS code_search_read ON code_chunks;
CREATE POLICY code_search_read ON code_chunks FOR SELECT TO {{search}} USING (true);
DROP POLICY IF EXISTS code_search_read ON code_files;
CREATE POLICY code_search_read ON code_files FOR SELECT TO {{search}} USING (true);
DROP POLICY IF EXISTS code_search_read ON repositories;
CREATE POLICY code_search_read ON repositories FOR SELECT TO {{search}} USING (true);
GRANT SELECT (tenant_id, trigram, chunks) ON code_trigram_stats TO {{search}};
DROP POLICY IF EXISTS code_search_read ON code_trigram_stats;
CREATE POLICY code_search_read ON code_trigram_stats FOR SELECT TO {{search}} USING (true);

-- search_code_regex is p_regex when PostgreSQL compiles it, else NULL: a
-- prefilter regex the engine rejects (too complex, say) is dropped, and
-- the search runs on its patterns alone, which are a superset too.
DROP FUNCTION IF EXISTS search_code_regex(text);
CREATE FUNCTION search_code_regex(p_regex text) RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF p_regex IS NOT NULL THEN
        PERFORM '' ~ p_regex COLLATE "C";
    END IF;
    RETURN p_regex;
EXCEPTION WHEN invalid_regular_expression OR program_limit_exceeded THEN
    RETURN NULL;
END
$fn$;
ALTER FUNCTION search_code_regex(text) OWNER TO {{search}};
REVOKE ALL ON FUNCTION search_code_regex(text) FROM PUBLIC;

-- search_code_index_pattern is the ILIKE pattern the span index is asked
-- with for p_pattern (an escaped '%literal%' pattern of
-- search_code_candidates): the tenant's three rarest trigrams of it
-- (code_trigram_stats; one missing there is rare) as the pieces of the
-- literal that hold them, in their order, '%piece%piece%'. A GIN scan's
-- cost grows with the number of trigrams it intersects (every other
-- trigram is advanced to each candidate of the rarest), and a long
-- literal has twenty, most of them common (con, ext, req), while its
-- three rarest select about as few chunks. It is implied by p_pattern
-- (each piece is a run of the literal's letters and digits, in order and
-- apart), so the caller checks p_pattern itself afterwards. p_pattern
-- unchanged when it has at most three trigrams, when the three are
-- estimated to select more than 8,192 of the tenant's chunks, or when the
-- tenant has no estimates. share is the share of the tenant's chunks that
-- hold the pattern's rarest trigram, an upper bound of the share that
-- holds the pattern (NULL without estimates, or for a pattern without a
-- trigram).
DROP FUNCTION IF EXISTS search_code_index_pattern(uuid, text);
CREATE FUNCTION search_code_index_pattern(p_tenant uuid, p_pattern text, OUT pattern text, OUT share float8)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_chunks bigint;
    v_pos    integer[];
    v_all    integer;
    v_min    bigint;
    v_out    text := '%';
    v_start  integer;
    v_end    integer;
    v_est    bigint;
BEGIN
    pattern := p_pattern;
    -- (A tenant counted at no chunks has no shares to compute.)
    SELECT s.chunks INTO v_chunks FROM public.code_trigram_stats s
    WHERE s.tenant_id = p_tenant AND s.trigram = '' AND s.chunks > 0;
    IF v_chunks IS NULL THEN
        RETURN;
    END IF;
    -- Every trigram of a run of ASCII letters and digits, at its place in
    -- the pattern (an escaped character is never a letter or digit, and a
    -- widened one is _): the runs partition the pattern with the gaps
    -- before them.
    WITH m AS (
        SELECT q.n, length(q.x[1]) AS gap, q.x[2] AS run
        FROM regexp_matches(p_pattern, '([^A-Za-z0-9]*)([A-Za-z0-9]+)', 'g') WITH ORDINALITY AS q(x, n)),
    r AS (SELECT m.run, (sum(m.gap + length(m.run)) OVER (ORDER BY m.n) - length(m.run) + 1)::integer AS start FROM m),
    t AS (SELECT r.start + i.i - 1 AS pos, lower(r.run) AS word, lower(substr(r.run, i.i, 3)) AS g
          FROM r CROSS JOIN LATERAL generate_series(1, length(r.run) - 2) AS i(i)),
    d AS (SELECT t.pos, t.word, coalesce((SELECT s.chunks FROM public.code_trigram_stats s
                                          WHERE s.tenant_id = p_tenant AND s.trigram = t.g), 0) AS df FROM t),
    c AS (SELECT d.pos, d.word, d.df FROM d ORDER BY d.df, d.pos LIMIT 3),
    -- The chunks the three select, as search_code_candidates estimates
    -- the rest's: per word the rarest share, the words' multiplied.
    e AS (SELECT min(c.df) AS df FROM c GROUP BY c.word)
    SELECT (SELECT count(*) FROM t)::integer,
           (SELECT min(d.df) FROM d),
           (SELECT array_agg(c.pos ORDER BY c.pos) FROM c),
           (SELECT CASE WHEN min(e.df) = 0 THEN 0
                        ELSE (v_chunks * exp(greatest(sum(ln(greatest(e.df, 1)::float8 / v_chunks)), -700)))::bigint END
            FROM e)
    INTO v_all, v_min, v_pos, v_est;
    share := v_min::float8 / v_chunks;
    -- Only when they are selective: a common literal's whole trigram set
    -- (with the word boundaries pg_trgm takes from it, context.Context)
    -- selects far fewer chunks than its three rarest letters.
    IF v_all <= 3 OR v_est > 8192 THEN
        RETURN;
    END IF;
    -- Overlapping or adjacent trigrams are one piece.
    FOREACH v_start IN ARRAY v_pos LOOP
        IF v_end IS NOT NULL AND v_start <= v_end + 1 THEN
            v_out := v_out || substr(p_pattern, v_end + 1, v_start + 2 - v_end);
        ELSE
            v_out := v_out || CASE WHEN v_end IS NULL THEN '' ELSE '%' END || substr(p_pattern, v_start, 3);
        END IF;
        v_end := greatest(coalesce(v_end, 0), v_start + 2);
    END LOOP;
    pattern := v_out || '%';
END
$fn$;
ALTER FUNCTION search_code_index_pattern(uuid, text) OWNER TO {{search}};
REVOKE ALL ON FUNCTION search_code_index_pattern(uuid, text) FROM PUBLIC;

-- search_code_candidates returns the chunks of the given repositories whose
-- content contains every pattern (case-insensitive ILIKE patterns under
-- the "C" collation, already escaped and widened by the caller,
-- codeindex.Plan.LikePatterns) and matches p_regex (a PostgreSQL ARE, the
-- caller's superset translation of a regular-expression query,
-- codeindex.ARE; NULL: none) and whose file's path starts with
-- p_path_prefix (empty: any), in chunk order after p_after_chunk, at most
-- p_limit of them, with their file's path. The caller confirms each
-- candidate line by line. The patterns and the regex are the filter: the
-- trigram index takes both (pg_trgm extracts trigrams from the regex
-- itself, alternations included), so a regex alone scopes a search as a
-- pattern does. A regex PostgreSQL cannot compile is dropped (the
-- patterns alone are a superset too).
--
-- The answer is always "the first p_limit matching chunks after
-- p_after_chunk"; only the way there depends on the query, so that neither a
-- common nor a rare literal, nor one repository of a big tenant, falls off a
-- cliff (issue 11):
--  * a path prefix with no filter (a scoped, literal-less regex), or a
--    narrow one (whose chunks are cheaper to check one by one than to
--    walk): the files under the prefix first, then their chunks, checked
--    without the trigram index;
--  * any other path prefix of at most 10,000 files (more: the tenant is
--    walked and the prefix checked on the rows, as every prefix of 2,000
--    files or more once was): the walk below (windows, buckets, the rest)
--    in the runs of ids that hold the prefix's chunks, from its files'
--    spans (code_files.chunk_lo, chunk_hi, migration 0066), skipping the
--    ids in between; its windows read the runs' chunks by primary key,
--    its buckets are asked as everywhere (a run's part of a bucket by
--    sub-bucket where the rest of the bucket holds more candidates), and
--    every step's rows are checked for the prefix (a run holds other
--    files' chunks where they were written in between). A directory's
--    files are indexed together, so its chunks are a few runs: on the big
--    tenant go/ (2,770 files) no longer walks the tenant, nor is every
--    chunk of syscall/ (1,770 files) checked one by one;
--  * no filter otherwise (a literal-less regex scoped to a repository):
--    the next chunks of the repositories in id order, every one a
--    candidate;
--  * otherwise, phase 1: a window of the next chunks of the granted
--    repositories in id order (twice the page), checked directly, which
--    answers a common literal long before any trigram bitmap could; phase
--    2, only when the window holds too few matches: the chunks after it a
--    bucket of 8,192 ids at a time, each bucket asking the trigram index
--    code_chunks_tenant_span_trgm (whose second column is the bucket) for
--    its own matches, so that the work — the index walk and the recheck of
--    the candidates, each a detoasted chunk — depends on the bucket and not
--    on the size of the tenant; phase 3, with more than 8 buckets left
--    (more than one for one repository, whose rest is its own, asked
--    with its key), when the yield so far says the page needs all of
--    them (or nothing was found yet): the same index for the rest at once (a
--    rare literal, whose candidates are few) — unless the tenant's
--    trigram estimates (code_trigram_stats) say that query would recheck
--    more than 4,096 candidates and 128 per bucket left (it rechecks its
--    scope's candidates before the position too; the literal's rarest
--    trigram is that common), which would cost more than walking on. Otherwise the walk goes on
--    bucket by bucket, asking again after each: the rest's candidates are
--    all rechecked (a bitmap heap scan cannot stop in id order), most of
--    them past the page's end when the yield says it ends sooner. With
--    estimates, buckets and the rest ask the index with each literal's
--    rarest trigrams when those are selective (search_code_index_pattern),
--    leave a literal whose every trigram is in half of the chunks to the
--    rows when another is selective (its share, search_code_index_pattern), and check
--    the whole literals on their rows. Where the bucket's ids outside
--    the part the page needs (from the position to the end the yield
--    predicts, or to the run's end) hold more candidates than asking
--    that part sub-bucket by sub-bucket costs, only the position's
--    sub-bucket of 1,024 ids is asked (the index's third column,
--    migration 0065), so that the bucket's other candidates are not all
--    rechecked; the further sub-buckets the page needs are asked in one
--    statement that stops once the page is full. Once the estimates say
--    the rest at once will not be chosen, the further whole buckets the
--    predicted end reaches are asked in one statement too (at most 8), until
--    half of the page is found, so that a sparse walk plans a statement
--    for a few buckets, not one a bucket.
--    A further window is checked only while it is small or
--    costs less than the index's candidates for its ids. With few
--    repositories each bucket starts at the next chunk of one of them and
--    the walk ends at their last chunk, so that one repository of many is
--    searched over its own chunks. Each phase's matches come after the
--    previous phase's (larger ids), so the concatenation is in order.
--
-- Plans are pinned where statistics cannot be trusted (the trigram
-- selectivity of a pattern is unreliable — a word in 40 % of chunks was
-- estimated at two rows — and the runtime role cannot ANALYZE): the window
-- is fetched by primary key before any pattern is checked; the bucket and
-- rest queries switch sequential and plain index scans off for their
-- statement (scoped to this function by the SET clauses), so they take the
-- trigram bitmap, and the exact bounds and the repository filter are
-- applied to the bitmap's rows (outside the CTE), never offered to a btree
-- index instead.
DROP FUNCTION IF EXISTS search_code_candidates(bigint[], text[], text, bigint, integer);
DROP FUNCTION IF EXISTS search_code_candidates(bigint[], text[], text, bigint, integer, text);
CREATE FUNCTION search_code_candidates(
    p_repo_ids    bigint[],
    p_patterns    text[],
    p_path_prefix text,
    p_after_chunk bigint,
    p_limit       integer,
    p_regex       text DEFAULT NULL)
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
SET enable_seqscan = on
SET enable_indexscan = on
AS $fn$
DECLARE
    v_tenant   uuid := current_setting('app.tenant_id')::uuid;
    v_npat     integer := coalesce(array_length(p_patterns, 1), 0);
    v_nrepo    integer := coalesce(array_length(p_repo_ids, 1), 0);
    v_own      boolean;
    v_regex    text := search_code_regex(p_regex);
    v_filter   boolean;
    -- Up to this many repositories, windows go per repository and the
    -- walk skips to their next chunk (one index probe each per step).
    v_few      constant integer := 64;
    v_pats     text := '';
    -- Each pattern's check on the rows (below), and the literal it
    -- looks for ($11[i], NULL for a pattern with a wildcard).
    v_checks   text := '';
    v_lits     text[] := '{}';
    v_prefix   text := NULL;
    v_files    integer;
    -- Under a path prefix: the prefix's chunks after the position (an
    -- upper bound, the sum of its files' spans), and the runs of ids that
    -- hold them (its files' spans, migration 0066, merged where they
    -- overlap or lie closer than v_gap ids), walked instead of the
    -- tenant; v_k is the run the walk is in.
    v_total    bigint;
    v_ilo      bigint[];
    v_ihi      bigint[];
    v_nint     integer := 0;
    v_k        integer := 1;
    v_runs     boolean := false;
    v_gap      constant bigint := 64;
    v_single   boolean;
    v_broad    boolean := false;
    v_files_max constant integer := 10000;
    v_left     bigint;
    v_idsleft  bigint;
    v_kw       integer;
    v_reach    bigint;
    -- The bucket step's reach (the predicted end, the run's end or the
    -- bucket's) and the sub-buckets from the position to it.
    v_until    bigint;
    v_nsub     bigint;
    -- The ids of the bucket that can hold candidates (one repository,
    -- asked with its key: its first chunk, v_own_lo, to its last, v_end;
    -- else the bucket), and those the page needs of them.
    v_from     bigint;
    v_to       bigint;
    v_need_lo  bigint;
    v_need_hi  bigint;
    v_own_lo   bigint;
    v_ids      bigint[] := '{}';
    v_all      bigint[];
    v_pos      integer;
    v_found    bigint[];
    v_n        integer;
    v_need     integer := p_limit;
    v_lo       bigint := p_after_chunk;
    v_hi       bigint;
    v_end      bigint;
    v_next     bigint;
    v_window   integer := greatest(64, 2 * p_limit);
    -- A window of at most this many chunks is checked without asking
    -- whether the index would cost less (below): about a statement's worth.
    v_window_min constant integer := 128;
    v_src      text;
    v_window_sql text;
    v_bucket_sql text;
    -- The bucket step's further parts (below): consecutive buckets, or
    -- sub-buckets of one bucket, from $4 to $12 ($13: 0 for buckets, 3
    -- for sub-buckets), in one statement that stops once the parts so far
    -- found $14 ids; the last part asked, the ids they found, and how many
    -- found make the step enough.
    v_steps_sql text;
    v_part_from text;
    v_part_ids text;
    v_last     bigint;
    -- The parts a step asks (the first alone, the others in one
    -- statement), and the ids of the runs it covered (under a prefix).
    v_parts    bigint[];
    v_covered  bigint;
    -- At most this many sub-buckets a statement (as many ids as
    -- v_steps_max buckets).
    v_parts_max constant integer := 64;
    v_more     bigint[];
    v_enough   integer;
    -- At most this many whole buckets a statement.
    v_steps_max constant integer := 8;
    v_idx      text[];
    v_cond     text;
    v_share    float8[];
    v_common   constant float8 := 0.5;
    v_size     integer;
    v_rest     boolean := false;
    v_bucket   bigint;
    v_sub      bigint;
    v_step     bigint;
    v_span     bigint;
    -- The share of the tenant's chunks that hold the rarest trigram the
    -- index is asked with (search_code_index_pattern; NULL: unknown), an
    -- estimate of a bucket's candidates per id.
    v_dense    float8;
    v_seen     bigint := 0;
    v_matched  bigint := 0;
    v_est      bigint;
    -- The most candidates the rest of the tenant may hold to be rechecked
    -- at once (about 40 ms of rechecks on a 2-core machine), and the
    -- estimate: the tenant's chunks holding the patterns' rarest trigram
    -- (NULL: no estimate, the yield decides alone), over its id span.
    v_rest_max constant bigint := 4096;
    v_bucket_cands constant bigint := 128;
    v_df       bigint;
    v_df_read  boolean := false;
    -- The estimates say the rest at once costs more than walking on, now
    -- and for the rest of the walk.
    v_no_rest  boolean := false;
    -- The repositories are all of the tenant's (NULL: not asked yet).
    v_every    boolean;
    -- The bucket step may ask several parts in one statement.
    v_walk     boolean;
    v_first    bigint;
    v_start    bigint;
    -- The prefix's runs (below): its files after the position ($4), the
    -- part summed up (%s: per repository, or per file), and the parts
    -- merged where they overlap or lie within $5 ids of one another.
    v_runs_sql constant text := 'WITH s AS (SELECT f.repository_id AS rid, f.chunk_lo AS lo, f.chunk_hi AS hi FROM public.code_files f
                WHERE f.tenant_id = $1 AND f.repository_id = ANY($2) AND f.path LIKE $3 AND f.chunk_hi > $4
                LIMIT $6),
            p AS (%s),
            g AS (SELECT p.lo, p.hi, CASE WHEN p.lo <= max(p.hi) OVER (ORDER BY p.lo, p.hi
                      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) + $5 THEN 0 ELSE 1 END AS brk FROM p),
            r AS (SELECT g.lo, g.hi, sum(g.brk) OVER (ORDER BY g.lo, g.hi) AS run FROM g),
            m AS (SELECT min(r.lo) AS lo, max(r.hi) AS hi FROM r GROUP BY r.run)
        SELECT (SELECT coalesce(sum(p.n), 0) FROM p)::int, (SELECT coalesce(sum(p.ids), 0) FROM p)::bigint,
               ARRAY(SELECT m.lo FROM m ORDER BY m.lo), ARRAY(SELECT m.hi FROM m ORDER BY m.lo),
               (SELECT coalesce(bool_and(p.one), true) FROM p)';
    -- A page of rows by primary key ($2: the ids, in order); OFFSET 0 keeps
    -- each lateral lookup a lookup, never a hash of every file of the tenant.
    v_rows_sql constant text := 'SELECT c.id, c.repository_id, r.full_name, f.commit_sha, f.path, c.start_line, c.end_line, f.line_count, c.content
        FROM public.code_chunks c
        CROSS JOIN LATERAL (SELECT f.commit_sha, f.path, f.line_count FROM public.code_files f
                            WHERE f.tenant_id = $1 AND f.id = c.file_id OFFSET 0) f
        CROSS JOIN LATERAL (SELECT r.full_name FROM public.repositories r
                            WHERE r.tenant_id = $1 AND r.id = c.repository_id OFFSET 0) r
        WHERE c.tenant_id = $1 AND c.id = ANY($2) ORDER BY c.id';
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 5000 THEN
        RAISE EXCEPTION 'search_code_candidates: limit must be 1..5000';
    END IF;
    IF v_npat > 5 THEN
        RAISE EXCEPTION 'search_code_candidates: at most 5 patterns';
    END IF;
    -- Flat, so that p_repo_ids[1] is the one repository below whatever
    -- the array's dimensions or bounds.
    p_repo_ids := ARRAY(SELECT x.id FROM unnest(p_repo_ids) AS x(id));
    v_nrepo := coalesce(array_length(p_repo_ids, 1), 0);
    -- One repository asks the span index with its own key (migration
    -- 0064), so its buckets and its rest are its own, not the tenant's.
    v_own := v_nrepo = 1;
    IF v_nrepo = 0 OR p_after_chunk IS NULL THEN
        RETURN;
    END IF;
    v_filter := v_npat > 0 OR v_regex IS NOT NULL;
    -- Patterns, the regex, the prefix and the literals are bound as
    -- parameters ($6[i], $9, $7, $11[i]), never spliced into the SQL;
    -- only the choice of predicates is dynamic. Every EXECUTE below that
    -- uses v_pats or v_checks passes eleven parameters ($10 is the bucket
    -- and rest query's sub-bucket).
    -- All compare under the "C" collation, the span index's
    -- (migration 0060): an ILIKE then folds ASCII letters with a byte
    -- loop, about four times cheaper per chunk than the locale's folding
    -- (the caller's patterns widen what it would not fold), and the ARE
    -- writes its foldings out, so no locale decides either.
    -- On the rows (windows, slices, and the rows of a bucket or the rest
    -- when the index is asked with the rarest trigrams; asked with the
    -- whole patterns, its own recheck checks them) a
    -- pattern with no wildcard but its ends ('%literal%', escapes aside:
    -- every literal of a case-insensitive search of ASCII text) is
    -- checked as strpos(lower(content), literal) under the same
    -- collation, which selects exactly what the ILIKE does (both lower
    -- ASCII letters only, then compare bytes) at about half its cost per
    -- chunk: LIKE's matcher tries each place the literal's first letter
    -- occurs, strpos skips through the text (deadline exceeded's 860
    -- candidates at full size: 4.5 -> 2.6 us each, fetch included). An
    -- index condition stays an ILIKE (the trigram index serves LIKE, not
    -- strpos). The patterns come first: a check is about a third as dear
    -- per chunk as the ARE, so the ARE runs on the few rows that hold
    -- every literal.
    FOR i IN 1 .. v_npat LOOP
        IF p_patterns[i] ~ '^%([^%_\\]|\\.)*%$' THEN
            v_lits[i] := lower(regexp_replace(substr(p_patterns[i], 2, length(p_patterns[i]) - 2), '\\(.)', '\1', 'g') COLLATE "C");
            v_checks := v_checks || format(' AND strpos(lower(coalesce(c.content, %L) COLLATE "C"), $11[%s]) > 0', '', i);
        ELSE
            v_lits[i] := NULL;
            v_checks := v_checks || format(' AND coalesce(c.content, %L) ILIKE $6[%s] COLLATE "C"', '', i);
        END IF;
    END LOOP;
    -- The rows' check: the literals, then the ARE, in that order in one
    -- expression. As separate conditions the planner would order them
    -- by its cost estimate, which counts strpos, lower and > as three
    -- operators and the ARE as one, and so run the ARE first.
    IF v_regex IS NULL THEN
        v_pats := v_checks;
    ELSIF v_npat = 0 THEN
        v_pats := ' AND c.content ~ $9 COLLATE "C"';
    ELSE
        v_pats := format(' AND CASE WHEN true%s THEN coalesce(c.content, %L) ~ $9 COLLATE "C" ELSE false END', v_checks, '');
    END IF;
    IF coalesce(p_path_prefix, '') <> '' THEN
        v_prefix := replace(replace(replace(p_path_prefix, '\', '\\'), '%', '\%'), '_', '\_') || '%';
    END IF;

    IF v_prefix IS NOT NULL AND v_filter THEN
        -- The prefix's files after the position, from the path index alone
        -- (their spans and repository are in it): how many, how many
        -- chunks at most, and their spans merged into runs in id order. A
        -- prefix with no filter lists its chunks files first, below, and
        -- needs no runs. ReplaceIndex writes a repository file by file in
        -- path order, so a directory's chunks are usually one stretch per
        -- repository: the files are summed up per repository first, and
        -- where each repository's spans leave at most v_gap ids between
        -- them in all (one run each), only those stretches are merged
        -- (net/http/ on the big tenant, 575 files in 5 repositories: 0.34
        -- ms, where merging every file's span took 0.94). Otherwise
        -- (chunks written interleaved by concurrent indexings, or files
        -- rewritten since) a second statement merges every file's span,
        -- unless the prefix holds too many files to be walked in runs at
        -- all (v_broad, below).
        -- Both give the same runs where a repository's spans do not
        -- overlap (its files are written one after another); were they to,
        -- a run would only be wider: the walk checks its rows for the
        -- prefix, so a run bounds the work, never the results.
        EXECUTE format(v_runs_sql, 'SELECT count(*) AS n, sum(s.hi - greatest(s.lo, $4 + 1) + 1) AS ids, min(s.lo) AS lo, max(s.hi) AS hi,
                                           max(s.hi) - min(s.lo) + 1 - sum(s.hi - s.lo + 1) <= $5 AS one
                                    FROM s GROUP BY s.rid')
            INTO v_files, v_total, v_ilo, v_ihi, v_single USING v_tenant, p_repo_ids, v_prefix, p_after_chunk, v_gap, v_files_max + 1;
        IF NOT v_single AND v_files <= v_files_max THEN
            EXECUTE format(v_runs_sql, 'SELECT 1 AS n, s.hi - greatest(s.lo, $4 + 1) + 1 AS ids, s.lo, s.hi, true AS one FROM s')
                INTO v_files, v_total, v_ilo, v_ihi, v_single USING v_tenant, p_repo_ids, v_prefix, p_after_chunk, v_gap, v_files_max + 1;
        END IF;
        v_nint := coalesce(array_length(v_ilo, 1), 0);
        IF v_nint = 0 THEN
            RETURN;
        END IF;
        -- So many files that reading their spans would cost more than the
        -- prefix saves (it is most of the tenant, or a huge one's): the
        -- tenant is walked, the prefix checked on the rows.
        v_broad := v_files > v_files_max;
        -- The walk below, in the runs, when checking every chunk under
        -- the prefix one by one (about 7 us each, fetch and check, and 7
        -- us a file to find them: that way's worst case, a literal with
        -- no match) would cost more than the walk's worst case: about
        -- 1.5 ms a statement, two per run (a window, a sub-bucket) and
        -- one per 1,024 ids of them. go/ on the big tenant: 1,610 chunks
        -- of 275 files in 5 runs at 1/10 are checked one by one (11 ms,
        -- 15 walked), 13,220 of 2,770 at full size walked (43 ms).
        v_runs := NOT v_broad AND 11 * v_total + 14 * v_files > 6000 * v_nint;
    END IF;
    IF v_prefix IS NOT NULL AND NOT v_runs AND NOT v_broad THEN
        -- Files first: the files under the prefix, then the ids of their
        -- chunks after the position (one index lookup per file; no content
        -- is read), in order; then those chunks are fetched by primary key
        -- and checked a slice at a time (twice the page first, then as
        -- many as the yield says the rest of the page needs), so that a
        -- common literal under a broad prefix stops early. The CTE and
        -- OFFSET 0 keep that order whatever the estimates say of the
        -- patterns.
        EXECUTE 'WITH f AS MATERIALIZED (
                SELECT f.id FROM public.code_files f
                WHERE f.tenant_id = $1 AND f.repository_id = ANY($2) AND f.path LIKE $3)
            SELECT ARRAY(SELECT c.id FROM f
                CROSS JOIN LATERAL (SELECT c.id FROM public.code_chunks c
                                    WHERE c.tenant_id = $1 AND c.file_id = f.id AND c.id > $4 OFFSET 0) c
                ORDER BY c.id)'
            INTO v_all
            USING v_tenant, p_repo_ids, v_prefix, p_after_chunk;
        v_pos := 1;
        v_size := v_window;
        WHILE v_need > 0 AND v_pos <= coalesce(array_length(v_all, 1), 0) LOOP
            IF NOT v_filter THEN
                v_found := v_all[v_pos : v_pos + v_need - 1];
            ELSE
                -- By primary key first (a CTE of its own), never a trigram
                -- bitmap over the tenant on a misestimated pattern.
                EXECUTE format('WITH c AS MATERIALIZED (SELECT c.id, c.content FROM public.code_chunks c
                                     WHERE c.tenant_id = $1 AND c.id = ANY($2))
                    SELECT ARRAY(SELECT c.id FROM c WHERE true %s ORDER BY c.id LIMIT $5)', v_pats)
                    INTO v_found
                    USING v_tenant, v_all[v_pos : v_pos + v_size - 1], p_path_prefix, p_after_chunk, v_need, p_patterns,
                          NULL::text, NULL::integer, v_regex, NULL::bigint, v_lits;
            END IF;
            v_n := coalesce(array_length(v_found, 1), 0);
            v_ids := v_ids || v_found;
            v_need := v_need - v_n;
            v_matched := v_matched + v_n;
            v_pos := v_pos + v_size;
            v_seen := v_seen + v_size;
            v_size := CASE WHEN v_matched = 0 THEN v_size * 4
                           ELSE least(v_size * 8, greatest(v_window / 2, v_seen * v_need * 5 / (4 * v_matched))) END;
        END LOOP;
        RETURN QUERY EXECUTE v_rows_sql USING v_tenant, v_ids;
        RETURN;
    END IF;

    IF NOT v_filter THEN
        -- Every chunk is a candidate: the next p_limit of the repositories
        -- (the first p_limit of each, then the smallest of their union).
        IF v_nrepo <= v_few THEN
            EXECUTE 'SELECT ARRAY(SELECT w.id FROM unnest($2) AS g(rid)
                CROSS JOIN LATERAL (SELECT c.id FROM public.code_chunks c
                    WHERE c.tenant_id = $1 AND c.repository_id = g.rid AND c.id > $3
                    ORDER BY c.id LIMIT $4) w
                ORDER BY w.id LIMIT $4)'
                INTO v_ids USING v_tenant, p_repo_ids, p_after_chunk, p_limit;
        ELSE
            EXECUTE 'SELECT ARRAY(SELECT c.id FROM public.code_chunks c
                WHERE c.tenant_id = $1 AND c.id > $3 AND c.repository_id = ANY($2)
                ORDER BY c.id LIMIT $4)'
                INTO v_ids USING v_tenant, p_repo_ids, p_after_chunk, p_limit;
        END IF;
        RETURN QUERY EXECUTE v_rows_sql USING v_tenant, v_ids;
        RETURN;
    END IF;

    -- Where the walk ends: the repositories' last chunk (few), or the
    -- tenant's. One repository's first chunk too (two probes of one
    -- index): its candidates lie between the two (the bucket step's
    -- sub-bucket rule, the rest's start).
    IF v_own THEN
        SELECT min(c.id), max(c.id) INTO v_own_lo, v_end FROM public.code_chunks c
        WHERE c.tenant_id = v_tenant AND c.repository_id = p_repo_ids[1];
    ELSIF v_nrepo <= v_few THEN
        SELECT max(x.id) INTO v_end FROM unnest(p_repo_ids) AS g(rid)
        CROSS JOIN LATERAL (SELECT c.id FROM public.code_chunks c
                            WHERE c.tenant_id = v_tenant AND c.repository_id = g.rid
                            ORDER BY c.id DESC LIMIT 1) x;
    ELSE
        SELECT max(c.id) INTO v_end FROM public.code_chunks c WHERE c.tenant_id = v_tenant;
    END IF;
    IF v_runs THEN
        v_end := least(v_end, v_ihi[v_nint]);
    END IF;
    -- A window: the next $8 chunks of the repositories after $4 (per
    -- repository through code_chunks_tenant_repo_id when there are few,
    -- else an id range, so that the work stays bounded however few of the
    -- range's chunks are granted), fetched by primary key before the
    -- patterns are checked (a CTE of its own), so that the planner cannot
    -- trade the window for a trigram bitmap on a misestimated pattern.
    IF v_runs THEN
        -- Under a prefix, the next chunks of the runs ($12, $13: the runs
        -- the window may reach, whose ids hold at least $8 chunks'
        -- worth), one range scan of the primary key each; a run's ids may
        -- hold other repositories' chunks (written in between), which the
        -- repository filter drops.
        v_src := 'SELECT w.id FROM unnest($12::bigint[], $13::bigint[]) AS i(lo, hi)
            CROSS JOIN LATERAL (SELECT c.id FROM public.code_chunks c
                WHERE c.tenant_id = $1 AND c.id >= i.lo AND c.id <= i.hi AND c.id > $4
                  AND c.repository_id = ANY($2)
                ORDER BY c.id LIMIT $8) w
            ORDER BY w.id LIMIT $8';
    ELSIF v_nrepo <= v_few THEN
        v_src := 'SELECT w.id FROM unnest($2) AS g(rid)
            CROSS JOIN LATERAL (SELECT c.id FROM public.code_chunks c
                WHERE c.tenant_id = $1 AND c.repository_id = g.rid AND c.id > $4
                ORDER BY c.id LIMIT $8) w
            ORDER BY w.id LIMIT $8';
    ELSE
        v_src := 'SELECT c.id FROM public.code_chunks c
            WHERE c.tenant_id = $1 AND c.id > $4 AND c.id <= $4 + $8 AND c.repository_id = ANY($2)';
    END IF;
    v_window_sql := format('WITH w AS MATERIALIZED (%s),
        c AS MATERIALIZED (SELECT c.id, c.file_id, c.content FROM public.code_chunks c
                           WHERE c.tenant_id = $1 AND c.id = ANY(ARRAY(SELECT w.id FROM w)))
        SELECT (SELECT count(*)::int FROM w), (SELECT max(w.id) FROM w),
               ARRAY(SELECT c.id FROM c
                     CROSS JOIN LATERAL (SELECT f.path FROM public.code_files f
                                         WHERE f.tenant_id = $1 AND f.id = c.file_id OFFSET 0) f
                     WHERE ($7::text IS NULL OR f.path LIKE $7) %s ORDER BY c.id LIMIT $5)', v_src, v_pats);

    v_size := v_window;
    LOOP
        EXIT WHEN v_need <= 0 OR v_end IS NULL OR v_lo >= v_end;
        IF v_runs THEN
            -- Past the runs before the position: the walk goes on at the
            -- next run's start.
            WHILE v_k <= v_nint AND v_ihi[v_k] <= v_lo LOOP
                v_k := v_k + 1;
            END LOOP;
            EXIT WHEN v_k > v_nint;
            v_lo := greatest(v_lo, v_ilo[v_k] - 1);
        END IF;
        IF v_nrepo <= v_few THEN
            -- Skip to the next chunk of one of the repositories, past the
            -- chunks of others (an index-only probe each).
            SELECT min(x.id) INTO v_next FROM unnest(p_repo_ids) AS g(rid)
            CROSS JOIN LATERAL (SELECT c.id FROM public.code_chunks c
                                WHERE c.tenant_id = v_tenant AND c.repository_id = g.rid AND c.id > v_lo
                                ORDER BY c.id LIMIT 1) x;
        ELSE
            -- Skip to the tenant's next chunk (an index-only probe): the
            -- ids of other tenants are never walked.
            SELECT c.id INTO v_next FROM public.code_chunks c
            WHERE c.tenant_id = v_tenant AND c.id > v_lo ORDER BY c.id LIMIT 1;
        END IF;
        EXIT WHEN v_next IS NULL;
        IF v_runs AND v_next > v_ihi[v_k] THEN
            -- No chunk of the repositories left in this run.
            v_lo := v_ihi[v_k];
            CONTINUE;
        END IF;
        v_lo := v_next - 1;
        v_bucket := (v_lo + 1) >> 13;
        IF v_size IS NOT NULL THEN
            -- A window of v_size chunks, checked directly.
            IF v_runs THEN
                -- The runs from this one on until their ids could hold
                -- the window (ids left of each, summed); outside the
                -- runs v_kw stays NULL and so do $12 and $13.
                v_kw := v_k;
                v_reach := v_ihi[v_k] - v_lo;
                WHILE v_reach < v_size AND v_kw < v_nint LOOP
                    v_kw := v_kw + 1;
                    v_reach := v_reach + v_ihi[v_kw] - v_ilo[v_kw] + 1;
                END LOOP;
            END IF;
            EXECUTE v_window_sql INTO v_n, v_hi, v_found
                USING v_tenant, p_repo_ids, p_path_prefix, v_lo, v_need, p_patterns, v_prefix, v_size, v_regex, NULL::bigint, v_lits,
                      v_ilo[v_k : v_kw], v_ihi[v_k : v_kw];
            IF v_runs THEN
                -- A window short of v_size chunks read its runs to the end.
                IF v_n < v_size THEN
                    v_hi := v_ihi[v_kw];
                END IF;
                v_seen := v_seen + v_n;
            ELSIF v_nrepo > v_few THEN
                v_hi := v_lo + v_size;
            ELSIF v_n = 0 THEN
                EXIT; -- no chunk of the repositories after v_lo
            END IF;
            IF NOT v_runs THEN
                v_seen := v_seen + (v_hi - v_lo);
            END IF;
        ELSIF v_rest THEN
            PERFORM set_config('enable_seqscan', 'off', true);
            PERFORM set_config('enable_indexscan', 'off', true);
            EXECUTE v_bucket_sql INTO v_found
                USING v_tenant, p_repo_ids, v_lo, NULL::bigint, v_need, p_patterns, v_prefix, v_idx, v_regex, NULL::bigint, v_lits;
            v_ids := v_ids || v_found;
            EXIT;
        ELSE
            -- The bucket, or only the sub-bucket of 1,024 ids the position
            -- is in (the span index's third column, migration 0065) when
            -- the rest of the bucket would hold more candidates (v_dense
            -- per id) than the statements of asking sub-bucket by
            -- sub-bucket cost. A bitmap's rows are all rechecked, and its
            -- ids bounded only after the recheck, so a bucket asked whole
            -- rechecks every candidate of it: those past the page's
            -- predicted end (v_span; func \w+Handler\( rechecked 743 in
            -- its last bucket for 5 ids, which its first 1,024 ids held),
            -- those past the end of the run under a path prefix (math/'s
            -- first run is a third of its bucket, where err has 4,000
            -- candidates), and those before the position (context.Context
            -- under net/http/ at full size, asked from a position in the
            -- last sub-bucket of a bucket, rechecked the bucket's 513
            -- candidates where that sub-bucket holds 209). The
            -- sub-buckets the page needs (v_nsub, to the predicted end,
            -- the run's end or the bucket's) each cost a statement, about
            -- a recheck of v_bucket_cands candidates; the sub-bucket is
            -- asked when the bucket's other ids hold at least that many
            -- per needed sub-bucket (one repository, asked with its own
            -- key, has candidates only between its first and last chunk:
            -- the other repositories' ids in its bucket are not counted).
            -- A sub-bucket that holds too few asks
            -- again; with no prediction (v_span NULL after a step that
            -- found none) the page is taken to need the bucket's end. The
            -- next step goes on from the sub-bucket's end, in the same
            -- bucket.
            v_hi := ((v_bucket + 1) << 13) - 1;
            v_sub := NULL;
            -- (least() passes over NULLs: no prediction, no run.)
            v_until := least(v_hi, v_lo + v_span, CASE WHEN v_runs THEN v_ihi[v_k] END);
            IF v_dense IS NOT NULL THEN
                v_nsub := (v_until >> 10) - ((v_lo + 1) >> 10) + 1;
                v_from := v_bucket << 13;
                v_to := v_hi;
                IF v_own THEN
                    v_from := greatest(v_from, v_own_lo);
                    v_to := least(v_to, v_end);
                END IF;
                v_need_lo := greatest(((v_lo + 1) >> 10) << 10, v_from);
                v_need_hi := least((((v_until >> 10) + 1) << 10) - 1, v_to);
                IF ((v_to - v_from + 1) - greatest(v_need_hi - v_need_lo + 1, 0)) * v_dense
                   >= v_bucket_cands * v_nsub THEN
                    v_sub := (v_lo + 1) >> 10;
                END IF;
            END IF;
            -- The parts the step reaches: the sub-buckets the page needs
            -- (to v_until), asked until the page is full; or this bucket
            -- and the whole buckets after it that the predicted end
            -- (v_span, else the walk's yield v_est), the run and the
            -- walk's end reach (at most v_steps_max), asked until half
            -- of the page is found. Whole buckets stop there so that the
            -- loop weighs the next one again with the yield so far: a
            -- bucket of dense matches can put the page's end early in
            -- the next bucket, whose first sub-bucket is then asked, not
            -- its every candidate. The first part is asked alone, the
            -- others, while the page needs them, in one statement
            -- (v_steps_sql), so that the planning of a statement (about
            -- 0.2 ms) and the loop's own steps are paid once for them,
            -- not once a part: context.Context under go/ at full size
            -- asked 18 sub-buckets one statement each, func \w+Handler\(
            -- 7 buckets. Each part costs its index scan and rechecks as
            -- before.
            -- Whether the step may ask several parts in one statement. Not
            -- while the rest at once may still be chosen after this part
            -- (below): the loop weighs it again after each part, as it did
            -- before (the ReadRune regex at full size takes the rest after
            -- three buckets, where a walk of eight cost 2 ms more). Nor
            -- over a few of the tenant's repositories, not all of them
            -- (one probe for one that is not granted): after each part the
            -- loop skips to the next chunk of one of them (above), past
            -- other repositories' chunks, whose candidates a walk would
            -- recheck for nothing (a part is asked for every
            -- repository's chunks in it).
            -- One repository is asked with its own key, and many are
            -- walked bucket by bucket anyway.
            v_walk := v_no_rest OR NOT coalesce(v_left > CASE WHEN v_own THEN 1 ELSE 8 END, true);
            IF v_walk AND v_nrepo > 1 AND v_nrepo <= v_few THEN
                IF v_every IS NULL THEN
                    v_every := NOT EXISTS (SELECT 1 FROM public.repositories r
                                           WHERE r.tenant_id = v_tenant AND r.id <> ALL (p_repo_ids));
                END IF;
                v_walk := v_every;
            END IF;
            -- Under a path prefix with no prediction (the page needs
            -- every run), the sub-buckets go on into the next runs, as
            -- many as v_parts_max: the ids between runs are skipped as
            -- the loop skips them, and each run no longer costs a step of
            -- its own, whose two statements are planned again and whose
            -- first part is asked alone.
            -- context.Context under go/ at full size, 25 matches in 5
            -- runs of 2,644 ids: 10 statements of parts, now 2.
            IF NOT v_walk THEN
                v_parts := ARRAY[coalesce(v_sub, v_bucket)];
            ELSIF v_sub IS NOT NULL AND v_runs AND v_span IS NULL THEN
                v_parts := ARRAY(SELECT DISTINCT p.p FROM unnest(v_ilo[v_k : v_nint], v_ihi[v_k : v_nint]) AS x(l, h)
                                 CROSS JOIN LATERAL generate_series(greatest(x.l, v_lo + 1) >> 10, x.h >> 10) AS p(p)
                                 ORDER BY p.p LIMIT v_parts_max);
            ELSIF v_sub IS NOT NULL THEN
                v_parts := ARRAY(SELECT generate_series(v_sub, v_until >> 10));
            ELSE
                v_until := least(v_end, coalesce(v_lo + coalesce(v_span, v_est), v_hi), CASE WHEN v_runs THEN v_ihi[v_k] END);
                v_parts := ARRAY(SELECT generate_series(v_bucket, greatest(v_bucket, least(((v_until + 1) >> 13) - 1, v_bucket + v_steps_max - 1))));
            END IF;
            PERFORM set_config('enable_seqscan', 'off', true);
            PERFORM set_config('enable_indexscan', 'off', true);
            -- The first part alone: the plain statement plans and runs in
            -- about 0.3 ms less than the walk's, and a dense part is often
            -- all the step needs (context.Context at full size read 0.7
            -- ms slower when its second bucket was asked as a walk).
            EXECUTE v_bucket_sql INTO v_found
                USING v_tenant, p_repo_ids, v_lo, v_bucket, v_need, p_patterns, v_prefix, v_idx, v_regex, v_sub, v_lits;
            v_n := coalesce(array_length(v_found, 1), 0);
            v_enough := CASE WHEN v_sub IS NULL THEN (v_need + 1) / 2 ELSE v_need END;
            IF cardinality(v_parts) > 1 AND v_n < v_enough THEN
                EXECUTE v_steps_sql INTO v_last, v_more
                    USING v_tenant, p_repo_ids, v_lo, NULL::bigint, v_need - v_n, p_patterns, v_prefix, v_idx, v_regex, NULL::bigint, v_lits,
                          v_parts[2 :], CASE WHEN v_sub IS NULL THEN 0 ELSE 3 END, v_enough - v_n;
                v_found := v_found || v_more;
            ELSE
                v_last := v_parts[1];
            END IF;
            v_hi := CASE WHEN v_sub IS NULL THEN ((v_last + 1) << 13) ELSE ((v_last + 1) << 10) END - 1;
            PERFORM set_config('enable_seqscan', 'on', true);
            PERFORM set_config('enable_indexscan', 'on', true);
            -- The ids walked, for the yield: under a prefix those of the
            -- runs (a step may cross the ids between them).
            IF v_runs THEN
                SELECT coalesce(sum(least(x.h, v_hi) - greatest(x.l, v_lo + 1) + 1), 0) INTO v_covered
                FROM unnest(v_ilo, v_ihi) AS x(l, h) WHERE x.h > v_lo AND x.l <= v_hi;
            END IF;
            v_seen := v_seen + coalesce(v_covered, v_hi - v_lo);
        END IF;
        v_n := coalesce(array_length(v_found, 1), 0);
        v_ids := v_ids || v_found;
        v_need := v_need - v_n;
        v_matched := v_matched + v_n;
        v_step := coalesce(v_covered, v_hi - v_lo);
        v_covered := NULL;
        v_lo := v_hi;
        -- The next step, from the yield so far: the ids the rest of the
        -- page needs, with a quarter to spare. Dense matches: another
        -- window of that many chunks (cheaper than a bucket's candidates);
        -- sparse ones: a bucket; so sparse that more than 8 buckets would
        -- be needed, and more than 8 remain: the rest at once.
        v_est := CASE WHEN v_matched = 0 THEN NULL ELSE v_seen * v_need * 5 / (4 * v_matched) END;
        -- The part of the next bucket to ask for: as v_est, but from the
        -- last step's yield when that was denser (matches cluster: a
        -- package's files are indexed together).
        v_span := CASE WHEN v_n > 0 THEN least(v_est, greatest(v_step * v_need * 5 / (4 * v_n), 1)) END;
        -- A window again only when the last step found matches and its
        -- own yield, too, puts the page's end within reach: a window
        -- checks every chunk (about 7-10 us each), and the walk's average
        -- can stay dense long after the matches thin out. A continuation
        -- of func \w+Handler\( at full size, needing one id more after
        -- 53, asked 14 windows of about 1,300 chunks that held none
        -- (100-250 ms); a bucket asks the index.
        v_size := CASE WHEN v_est <= 2048 AND v_n > 0 AND v_step * v_need * 5 / (4 * v_n) <= 2048
                       THEN greatest(v_window / 2, v_est)::integer END;
        -- The bucket and rest query, made once, when the walk first needs
        -- it or weighs a larger window against it (a search of small
        -- windows alone never reads the estimates).
        IF v_bucket_sql IS NULL AND (v_size IS NULL OR v_size > v_window_min) THEN
            -- A bucket's candidates ($4: the bucket; $3: the position), or with no
            -- bucket the rest of the tenant's.
            -- The span index is asked with each pattern's rarest trigrams only
            -- ($8[i], search_code_index_pattern), the patterns and the regex then
            -- checked in full on its rows: as coalesce(content, ''), which no
            -- index serves, so that the planner cannot hand their twenty trigrams
            -- back to the index. Without patterns the regex is the index's
            -- condition, as before.
            IF v_npat > 0 THEN
                SELECT array_agg(r.pattern ORDER BY x.n), array_agg(r.share ORDER BY x.n) INTO v_idx, v_share
                FROM unnest(p_patterns) WITH ORDINALITY AS x(p, n)
                CROSS JOIN LATERAL search_code_index_pattern(v_tenant, x.p) AS r;
            END IF;
            -- Of several patterns, one whose every trigram is in more than
            -- half of the tenant's chunks (func, in 61 % of Go's, in
            -- func \w+Handler\() filters little that the others do not,
            -- while the index decodes its posting lists over the whole
            -- bucket: it is checked on the rows only, when another pattern
            -- is selective. (Handler( 22 -> 20 ms at full size; literals
            -- at 40 % cut a selective one's candidates enough that leaving
            -- them to the rows cost 10-20 % in a review's test.)
            IF v_npat > 1 THEN
                IF EXISTS (SELECT 1 FROM unnest(v_share) AS x(s) WHERE x.s <= v_common) THEN
                    FOR i IN 1 .. v_npat LOOP
                        IF v_share[i] > v_common THEN
                            v_idx[i] := NULL;
                        END IF;
                    END LOOP;
                END IF;
            END IF;
            SELECT min(v_share[i]) INTO v_dense FROM generate_subscripts(v_idx, 1) AS i WHERE v_idx[i] IS NOT NULL;
            IF v_idx IS NOT NULL AND v_idx IS DISTINCT FROM p_patterns THEN
                v_cond := '';
                FOR i IN 1 .. v_npat LOOP
                    IF v_idx[i] IS NOT NULL THEN
                        v_cond := v_cond || format(' AND c.content ILIKE $8[%s] COLLATE "C"', i);
                    END IF;
                END LOOP;
                -- (v_pats has patterns here: a regex alone asks the index
                -- with itself.)
                v_cond := v_cond || v_pats;
            ELSE
                -- The whole patterns are the index's condition, which its
                -- recheck checks on the rows.
                v_cond := '';
                FOR i IN 1 .. v_npat LOOP
                    v_cond := v_cond || format(' AND c.content ILIKE $6[%s] COLLATE "C"', i);
                END LOOP;
                IF v_regex IS NOT NULL THEN
                    v_cond := v_cond || ' AND c.content ~ $9 COLLATE "C"';
                END IF;
            END IF;
            -- A part (a bucket or a sub-bucket) is asked with its own key
            -- alone: with one repository, that repository too (migration
            -- 0064: its bucket then holds only that repository's
            -- candidates, not its neighbours', which were rechecked before
            -- the repository filter could drop them); never with the
            -- tenant, nor a sub-bucket with its bucket. Each key the
            -- index is asked with is one more posting tree to descend and
            -- decode for every part, and these say nothing a part's ids do
            -- not: ids are the table's, a tenant's are taken in blocks of
            -- 8,192 (migration 0070), and a sub-bucket lies in its bucket.
            -- context.Context's sub-bucket of go/ at full size: its index
            -- scan 0.79 -> 0.49 ms; a sub-bucket's statement, planning
            -- included, up to 40 % less, a bucket's 0-10 %
            -- (scripts/bench-part-keys.sql). The tenant is checked on the
            -- rows instead (coalesce: no index condition), and the ids a
            -- page takes are the granted repositories' (v_part_ids), which
            -- are the caller's tenant's: another tenant's chunk in a
            -- part's ids (where blocks meet) costs a recheck, never a
            -- result. The rest of the tenant, which has no part, is asked
            -- with the tenant (v_bucket_sql below) or with the one
            -- repository.
            -- A part's candidates and the ids of them a page takes (the
            -- bucket query's and the bucket step's walk's alike): the part
            -- condition and the limit are the statement's own.
            v_part_from := 'SELECT c.id, c.repository_id, c.file_id FROM public.code_chunks c WHERE '
                || CASE WHEN v_own THEN 'c.repository_id = $2[1] AND ' ELSE '' END || 'coalesce(c.tenant_id, $1) = $1';
            v_part_ids := 'SELECT s.id FROM s
                    WHERE s.id > $3 AND s.repository_id = ANY($2)
                      AND ($7::text IS NULL OR EXISTS (SELECT 1 FROM public.code_files f
                           WHERE f.tenant_id = $1 AND f.id = s.file_id AND f.path LIKE $7))
                    ORDER BY s.id LIMIT ';
            -- $4 and $10 are constants when it is planned (EXECUTE plans
            -- with its parameters' values), so each OR below folds to the
            -- one key it asks for: the sub-bucket ($10), else the bucket
            -- ($4), else (the rest) the tenant.
            v_bucket_sql := format('WITH s AS MATERIALIZED (
                    %s AND ($4::bigint IS NULL OR $10::bigint IS NOT NULL OR (c.id >> 13) = $4)
                      AND ($10::bigint IS NULL OR (c.id >> 10) = $10)
                      AND ($4::bigint IS NOT NULL OR %s) %s)
                SELECT ARRAY(%s$5)', v_part_from, CASE WHEN v_own THEN 'true' ELSE 'c.tenant_id = $1' END, v_cond, v_part_ids);
            -- The bucket step's: the same query for each part of $12 in
            -- turn (a recursive walk, one part a level, each part's ids
            -- sorted; the parts are ranges of ids in order),
            -- asked for what the page still needs, while the parts so far
            -- found fewer than $14 ids: the parts after the one that
            -- reaches it are never asked. $13 is 0 for buckets, 3 for
            -- sub-buckets; a constant when the statement is planned, so
            -- the index is asked with the one key of the part's kind. It
            -- returns the last part asked and the ids found.
            v_steps_sql := format('WITH RECURSIVE w(i, n, ids) AS (
                    SELECT 0, 0, ''{}''::bigint[]
                  UNION ALL
                    SELECT w.i + 1, w.n + cardinality(x.ids), x.ids FROM w
                    CROSS JOIN LATERAL (SELECT ARRAY(
                        WITH s AS MATERIALIZED (
                            %s AND ($13 <> 0 OR (c.id >> 13) = ($12::bigint[])[w.i + 1])
                              AND ($13 = 0 OR (c.id >> 10) = ($12::bigint[])[w.i + 1]) %s)
                        %s$5 - w.n) AS ids OFFSET 0) x
                    WHERE w.i < cardinality($12::bigint[]) AND w.n < $14)
                SELECT (SELECT ($12::bigint[])[max(w.i)] FROM w), ARRAY(SELECT i.id FROM w CROSS JOIN LATERAL unnest(w.ids) AS i(id) ORDER BY i.id)',
                v_part_from, v_cond, v_part_ids);
        END IF;
        -- A window checks every chunk it holds (fetch and check, about 7
        -- us each on a 2-core machine); the index gives a sub-bucket's
        -- candidates (about 0.8 ms a statement, and 5 us to recheck each
        -- of its 1,024 * v_dense). Once the window would be larger than
        -- v_window_min the estimates are read (above) and the window is
        -- kept only where it costs less than the sub-buckets its ids
        -- span: context.Context under net/http/ at full size, 3 matches
        -- in the first 64 chunks, had a window of 640 chunks checked (22
        -- matches, 4.4 ms) where its sub-bucket's 209 candidates took 2.2.
        IF v_size > v_window_min AND v_dense IS NOT NULL
           AND 7 * v_size > ((v_size + 1023) / 1024) * (800 + v_dense * 1024 * 5) THEN
            v_size := NULL;
        END IF;
        -- The rest at once only when the yield says the page needs all of
        -- it (or nothing was found yet): otherwise its candidates would be
        -- rechecked, most of them past the page's end (the big tenant's
        -- alternation rechecked 655 for 30 ids that the next seven buckets
        -- held: 267 chunks checked in all now, 794 then), and the walk goes
        -- on bucket by bucket. One repository's rest is asked with its own
        -- key, so it costs the repository's candidates and not the
        -- tenant's: it is taken with two buckets left (a search at a pull
        -- request's head, one repository of the big tenant: a rare
        -- literal 7.4 -> 4.3 ms, the ReadRune regex 13.3 -> 5.0 ms).
        -- The ids and buckets left: to the walk's end, or under a prefix
        -- those of the runs left (buckets counted per run).
        IF v_runs THEN
            SELECT coalesce(sum(x.h - greatest(x.l, v_lo + 1) + 1), 0), coalesce(sum((x.h >> 13) - (greatest(x.l, v_lo + 1) >> 13) + 1), 0)
            INTO v_idsleft, v_left
            FROM unnest(v_ilo, v_ihi) AS x(l, h) WHERE x.h > v_lo;
        ELSE
            v_idsleft := v_end - v_lo;
            v_left := (v_end >> 13) - ((v_lo + 1) >> 13);
        END IF;
        v_rest := v_seen >= 8192 AND (v_est IS NULL OR v_est >= v_idsleft)
            AND v_left > CASE WHEN v_own THEN 1 ELSE 8 END;
        -- The estimates are read when the rest is weighed, and when the
        -- walk goes on bucket by bucket with enough buckets left for the
        -- rest to be chosen later: they say then whether it ever can be
        -- (v_no_rest, below), and a step asks several buckets in one
        -- statement only once it cannot.
        IF NOT v_df_read AND (v_rest OR (v_size IS NULL AND v_left > CASE WHEN v_own THEN 1 ELSE 8 END)) THEN
            -- How many of the tenant's chunks the index gives for the
            -- patterns it is asked with (v_idx, whose pieces select
            -- at least the patterns' chunks): per
            -- word of a pattern (a run of three or more ASCII letters
            -- or digits, as pg_trgm folds it) the share of its rarest
            -- trigram (within a word trigrams go together), the words'
            -- shares multiplied (words are about independent), times
            -- the chunk count; a trigram the estimates lack is rare
            -- (0). NULL when the tenant has no estimates yet. The sum
            -- of logarithms is clamped: exp() raises on underflow, and
            -- a long literal of many words multiplies many shares.
            SELECT CASE WHEN min(d.df) = 0 THEN 0
                        ELSE (n.chunks * exp(greatest(sum(ln(greatest(d.df, 1)::float8 / n.chunks)), -700)))::bigint END
            INTO v_df
            FROM (SELECT w.word,
                         -- one primary-key probe per trigram (a join
                         -- would hash all of the tenant's estimates)
                         min(coalesce((SELECT s.chunks FROM public.code_trigram_stats s
                                       WHERE s.tenant_id = v_tenant AND s.trigram = substr(w.word, i.i, 3)), 0)) AS df
                  FROM (SELECT DISTINCT lower(m[1]) AS word
                        FROM unnest(coalesce(v_idx, p_patterns)) AS p(pat)
                        CROSS JOIN LATERAL regexp_matches(p.pat, '[A-Za-z0-9]{3,}', 'g') AS m) w
                  CROSS JOIN LATERAL generate_series(1, length(w.word) - 2) AS i(i)
                  GROUP BY w.word) d
            JOIN public.code_trigram_stats n ON n.tenant_id = v_tenant AND n.trigram = '' AND n.chunks > 0
            GROUP BY n.chunks;
            SELECT min(c.id) INTO v_first FROM public.code_chunks c WHERE c.tenant_id = v_tenant;
            -- Where the rest query's index scan starts: its ids are
            -- bounded only after the recheck (outside the CTE), so it
            -- rechecks the candidates before the position too, from
            -- the one repository's first chunk (its key), else the
            -- tenant's.
            v_start := CASE WHEN v_own THEN v_own_lo ELSE v_first END;
            v_df_read := true;
        END IF;
        IF v_df_read THEN
            -- The candidates the rest query rechecks: the estimate's
            -- share of the ids from v_start to the end (not only the ids
            -- left, which a deep page would underestimate). Walking on
            -- costs a statement and an index scan per bucket left (about
            -- 0.5 ms, the recheck of some 128 candidates), which the rest
            -- saves: the bound grows by that much per bucket left (the
            -- ReadRune regex at full size, 46 buckets left and an
            -- estimate just over 4,096, walked them all in 26-37 ms where
            -- the rest took 13-19).
            -- The bound shrinks as buckets are left behind and the
            -- estimate stays: once the rest costs more than walking on,
            -- it does for the rest of the walk.
            v_no_rest := v_df IS NOT NULL AND v_df * (v_end - v_start) / greatest(v_end - v_first, 1)
                > v_rest_max + v_bucket_cands * v_left;
            v_rest := v_rest AND NOT v_no_rest;
        END IF;
    END LOOP;
    PERFORM set_config('enable_seqscan', 'on', true);
    PERFORM set_config('enable_indexscan', 'on', true);
    RETURN QUERY EXECUTE v_rows_sql USING v_tenant, v_ids;
END
$fn$;
ALTER FUNCTION search_code_candidates(bigint[], text[], text, bigint, integer, text) OWNER TO {{search}};
REVOKE ALL ON FUNCTION search_code_candidates(bigint[], text[], text, bigint, integer, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION search_code_candidates(bigint[], text[], text, bigint, integer, text) TO {{app}};

-- Purpose code.search at a pull request's head (search_code with
-- pull_request): the same candidate step over the pull request's overlay
-- and the base index beneath it, with the same guarantees: the tenant
-- comes from app.tenant_id, the repository from the caller's grants, and
-- only the columns a result needs are read.
GRANT SELECT (tenant_id, repository_id, number, head_sha, files) ON pull_code_heads TO {{search}};
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
-- changes (at its head), each marked shadowed when its path is outside
-- p_path_prefix; phase 2 the chunks of the base index under the prefix
-- (search_code_candidates over the repository), each marked shadowed when
-- the pull request changes or deletes its path. The caller skips shadowed
-- chunks but pages past them, so a page shorter than p_limit still means
-- the phase is done. An unknown pull request returns nothing.
-- p_regex is search_code_candidates's: a further filter (NULL: none),
-- dropped when PostgreSQL cannot compile it.
DROP FUNCTION IF EXISTS search_pull_code_candidates(bigint, integer, integer, text[], text, bigint, integer);
DROP FUNCTION IF EXISTS search_pull_code_candidates(bigint, integer, integer, text[], text, bigint, integer, text);
CREATE FUNCTION search_pull_code_candidates(
    p_repo_id     bigint,
    p_number      integer,
    p_phase       integer,
    p_patterns    text[],
    p_path_prefix text,
    p_after_chunk bigint,
    p_limit       integer,
    p_regex       text DEFAULT NULL)
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
    v_sql    text;
    v_files  integer;
    v_regex  text := search_code_regex(p_regex);
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 5000 THEN
        RAISE EXCEPTION 'search_pull_code_candidates: limit must be 1..5000';
    END IF;
    IF coalesce(array_length(p_patterns, 1), 0) > 5 THEN
        RAISE EXCEPTION 'search_pull_code_candidates: at most 5 patterns';
    END IF;
    IF p_phase IS NULL OR p_phase NOT IN (1, 2) THEN
        RAISE EXCEPTION 'search_pull_code_candidates: phase must be 1 or 2';
    END IF;
    SELECT h.head_sha, h.files INTO v_head, v_files FROM public.pull_code_heads h
    WHERE h.tenant_id = v_tenant AND h.repository_id = p_repo_id AND h.number = p_number;
    IF v_head IS NULL THEN
        RETURN;
    END IF;
    IF p_phase = 2 THEN
        -- The base index: search_code_candidates over the one repository
        -- (its windows, buckets and repository key, so that neither a
        -- common nor a rare literal falls off a cliff in a big
        -- repository, issue 11; the path prefix is applied there), each
        -- chunk marked shadowed when the pull request changes or deletes
        -- its path. It reads the tenant from app.tenant_id as this
        -- function does, and the repository is the pull request's (its
        -- head was read by tenant and repository above).
        RETURN QUERY
            SELECT b.chunk_id, b.repository_id, b.full_name, v_head, b.path, b.start_line, b.end_line, b.line_count, b.content,
                   EXISTS (SELECT 1 FROM public.pull_code_files pf
                           WHERE pf.tenant_id = v_tenant AND pf.repository_id = p_repo_id AND pf.number = p_number AND pf.path = b.path)
            FROM public.search_code_candidates(ARRAY[p_repo_id], p_patterns, p_path_prefix, p_after_chunk, p_limit, p_regex) b
            ORDER BY b.chunk_id;
        RETURN;
    END IF;
    -- The overlay (v_files: the files the head changes or deletes, as
    -- ReplacePullIndex counted them). Patterns and the regex are bound as
    -- parameters ($6[i], $9), never spliced into the SQL.
    IF v_files < 2000 THEN
        -- The pull request's own files first, then their chunks (one
        -- index lookup per file), checked without the trigram index: the
        -- overlay's trigram index holds every open pull request of the
        -- tenant, so that its candidates (and, for a small overlay, the
        -- planner's scan of the tenant's overlay by its other index) grow
        -- with the tenant's pull requests, not with this one. OFFSET 0
        -- keeps each lookup a lookup. Only a pull request of 2,000 files
        -- or more asks the trigram index.
        v_sql := 'WITH cand AS MATERIALIZED (
            SELECT c.id, c.repository_id, c.file_id, c.start_line, c.end_line, c.content
            FROM public.pull_code_files pf
            CROSS JOIN LATERAL (SELECT c.id, c.repository_id, c.file_id, c.start_line, c.end_line, c.content
                                FROM public.pull_code_chunks c
                                WHERE c.tenant_id = $1 AND c.file_id = pf.id AND c.id > $4
                                  AND c.repository_id = $2 AND c.number = $7 OFFSET 0) c
            WHERE pf.tenant_id = $1 AND pf.repository_id = $2 AND pf.number = $7';
    ELSE
        v_sql := 'WITH cand AS MATERIALIZED (
            SELECT c.id, c.repository_id, c.file_id, c.start_line, c.end_line, c.content
            FROM public.pull_code_chunks c
            WHERE c.tenant_id = $1 AND c.repository_id = $2 AND c.id > $4 AND c.number = $7';
    END IF;
    FOR i IN 1 .. coalesce(array_length(p_patterns, 1), 0) LOOP
        v_sql := v_sql || format(' AND c.content ILIKE $6[%s] COLLATE "C"', i);
    END LOOP;
    IF v_regex IS NOT NULL THEN
        v_sql := v_sql || ' AND c.content ~ $9 COLLATE "C"';
    END IF;
    v_sql := v_sql || ' ORDER BY c.id LIMIT $5)
        SELECT cand.id, cand.repository_id, r.full_name, $8, f.path, cand.start_line, cand.end_line, f.line_count, cand.content,
               NOT ($3 = $q$$q$ OR left(f.path, length($3)) = $3)
        FROM cand
        JOIN public.pull_code_files f ON f.tenant_id = $1 AND f.id = cand.file_id
        JOIN public.repositories r ON r.tenant_id = $1 AND r.id = cand.repository_id
        ORDER BY cand.id';
    RETURN QUERY EXECUTE v_sql USING v_tenant, p_repo_id, p_path_prefix, p_after_chunk, p_limit, p_patterns, p_number, v_head, v_regex;
END
$fn$;
ALTER FUNCTION search_pull_code_candidates(bigint, integer, integer, text[], text, bigint, integer, text) OWNER TO {{search}};
REVOKE ALL ON FUNCTION search_pull_code_candidates(bigint, integer, integer, text[], text, bigint, integer, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION search_pull_code_candidates(bigint, integer, integer, text[], text, bigint, integer, text) TO {{app}};
