-- Autovacuum visits code_chunks and code_files after 2 % of their rows
-- change, not PostgreSQL's default 20 % (issue 11).
--
-- ReplaceIndex replaces a repository's whole index on every indexing: its
-- files and chunks are deleted and written again under new ids. Until
-- VACUUM removes the old rows, their entries stay in every index:
--   - A search's bitmap scans of the span index return them as candidates,
--     and each costs a heap visit before it is found dead.
--   - The windows' index-only scans fetch the heap for every page that is
--     not all-visible.
-- On the big tenant of issue 11 (full size, 446,000 chunks), one
-- repository indexed again (80,279 chunks) made search_code 8-50 % slower
-- until VACUUM ANALYZE (p50; docs/benchmarks.md):
--   - a rare literal: 3.9 -> 5.7 ms;
--   - the ReadRune regex: 11.2 -> 15.0 ms;
--   - err: 1.7 -> 2.4 ms;
--   - func \w+Handler\(: 12.2 -> 14.0 ms;
--   - context.Context under go/: 24.6 -> 26.6 ms.
-- Autovacuum's default waits for 50 + 20 % of the table in dead rows: 89,000
-- there, so it did not run. The table is shared by every tenant, so a
-- large installation waits for millions, while each tenant's searches pay
-- for its own dead chunks.
--
-- At 2 % (plus 1,000 rows), autovacuum comes after any indexing of more
-- than about 9,000 chunks on that table, within autovacuum_naptime. A
-- vacuum then took 22 s there with autovacuum's default cost limits, after
-- one repository's 80,279 dead chunks (3.8 s unthrottled), and code_files
-- took 0.8 s. The same for rows only inserted (a repository indexed for the
-- first time: all-visible pages, and the GIN pending list merged) and for
-- ANALYZE.
--
-- Setting storage parameters takes a SHARE UPDATE EXCLUSIVE lock: reads and
-- writes go on.
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['code_chunks', 'code_files'] LOOP
        EXECUTE format('ALTER TABLE %I SET (
            autovacuum_vacuum_threshold = 1000,
            autovacuum_vacuum_scale_factor = 0.02,
            autovacuum_vacuum_insert_threshold = 1000,
            autovacuum_vacuum_insert_scale_factor = 0.02,
            autovacuum_analyze_threshold = 1000,
            autovacuum_analyze_scale_factor = 0.02)', t);
    END LOOP;
END
$$;
