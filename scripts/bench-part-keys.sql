-- bench-part-keys.sql: what each key of the span index costs when one part
-- of a held code benchmark fixture's tenant is asked for its candidates of
-- a pattern: a sub-bucket asked with the tenant's, the bucket's and its own
-- key (as search_code_candidates did before 2026-12-07), with its own key
-- alone (as it does now), and a bucket with and without the tenant's key.
-- Each statement is planned and run sim.n times in one session, as the
-- search's EXECUTE does (planning included), in turn; a first round warms
-- the session's caches and is not shown (it reads up to twice as slow),
-- then two rounds; the figures are ms a statement. Pick a bucket and a sub-bucket of the
-- tenant's (a sub-bucket is id >> 10, its bucket id >> 13).
--
--   psql "$AdminURL" -v ON_ERROR_STOP=1 -c "set sim.tenant='$Tenant'" -c "set sim.bucket='5'" \
--        -c "set sim.sub='45'" -c "set sim.pattern='%context.context%'" -c "set sim.n='300'" \
--        -f scripts/bench-part-keys.sql
SET enable_seqscan = off;
SET enable_indexscan = off;
SET max_parallel_workers_per_gather = 0;
DO $$
DECLARE
    t   uuid := current_setting('sim.tenant')::uuid;
    b   bigint := current_setting('sim.bucket')::bigint;
    s   bigint := current_setting('sim.sub')::bigint;
    pat text := current_setting('sim.pattern');
    n   integer := current_setting('sim.n')::integer;
    q   record;
    r   bigint;
    t0  timestamptz;
BEGIN
    FOR round IN 0 .. 2 LOOP
        FOR q IN SELECT * FROM (VALUES
            ('sub-bucket, tenant + bucket + own key', 'SELECT count(*) FROM code_chunks c WHERE c.tenant_id = $1 AND (c.id >> 13) = $2 AND (c.id >> 10) = $3 AND c.content ILIKE $4 COLLATE "C"'),
            ('sub-bucket, own key alone',            'SELECT count(*) FROM code_chunks c WHERE coalesce(c.tenant_id, $1) = $1 AND (c.id >> 10) = $3 AND c.content ILIKE $4 COLLATE "C"'),
            ('bucket, tenant + own key',             'SELECT count(*) FROM code_chunks c WHERE c.tenant_id = $1 AND (c.id >> 13) = $2 AND c.content ILIKE $4 COLLATE "C"'),
            ('bucket, own key alone',                'SELECT count(*) FROM code_chunks c WHERE coalesce(c.tenant_id, $1) = $1 AND (c.id >> 13) = $2 AND c.content ILIKE $4 COLLATE "C"')
        ) AS v(name, sql) LOOP
            EXECUTE q.sql INTO r USING t, b, s, pat;
            t0 := clock_timestamp();
            FOR i IN 1 .. n LOOP
                EXECUTE q.sql INTO r USING t, b, s, pat;
            END LOOP;
            IF round > 0 THEN
                RAISE NOTICE 'round %: % — % ms (% candidates matched)', round, q.name,
                    round((extract(epoch FROM clock_timestamp() - t0) * 1000 / n)::numeric, 3), r;
            END IF;
        END LOOP;
    END LOOP;
END $$;
