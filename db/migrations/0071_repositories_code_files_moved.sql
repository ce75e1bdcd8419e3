-- How many of a repository's indexed files were written out of path order
-- since its index was last written whole (issue 11).
--
-- A whole indexing (ReplaceIndex, from the archive) writes a repository's
-- chunks in path order, so a directory's chunks are one run of ids: the
-- walks of search_code_candidates, and above all a path prefix's runs
-- (migration 0066), rely on that. A push's incremental update
-- (UpdateIndex) used to delete every changed file and write it anew at the
-- end of the id order. On the big tenant of issue 11 (full size), 200
-- pushes of ten random files each (2,000 files, 4 % of the chunks) made
-- searches under a path prefix 1.7-4.6 times as slow (p50, docs/
-- benchmarks.md): err under net/ 4.3 -> 18.0 ms, deadline exceeded under
-- math/ 11.6 -> 53.4 ms, context.Context under go/ 34.5 -> 92.2 ms; twenty
-- such pushes (200 files), 1.4-2.8 times; 64 files, up to 1.8 times.
--
-- Now a changed file that still fits its old chunk ids is rewritten in
-- place (only its chunks whose text changed). A file that grew past them,
-- a new file, or one the redaction re-chunks goes to the end of the id
-- order and is counted here. Once the count passes a limit, the next push
-- indexes the repository whole from its archive, in path order again, and
-- the count starts from zero (pkg/postgres UpdateIndex, pkg/jobs).
ALTER TABLE repositories ADD COLUMN code_files_moved integer NOT NULL DEFAULT 0;

-- Repositories updated by pushes before this migration may be scattered
-- already. They start from the breaks in their files' path order (byte
-- order, as the archive's files are written) that a search under a path
-- prefix sees as a new run: a file whose first chunk id lies below the
-- previous file's last, or more than 64 ids above it (the gap
-- search_code_candidates merges runs across). A file moved into the middle
-- of the order makes two, so the count may start high and the next push
-- index such a repository whole. The fill reads every tenant's rows, as in
-- migration 0066; the policies make the tables FORCE ROW LEVEL SECURITY
-- again after the migrations.
ALTER TABLE code_files NO FORCE ROW LEVEL SECURITY;
ALTER TABLE repositories NO FORCE ROW LEVEL SECURITY;
UPDATE repositories r SET code_files_moved = s.breaks
FROM (SELECT o.tenant_id, o.repository_id,
             count(*) FILTER (WHERE o.lo < o.prev_hi OR o.lo > o.prev_hi + 64) AS breaks
      FROM (SELECT f.tenant_id, f.repository_id, f.chunk_lo AS lo,
                   lag(f.chunk_hi) OVER (PARTITION BY f.tenant_id, f.repository_id ORDER BY f.path COLLATE "C") AS prev_hi
            FROM code_files f WHERE f.chunk_lo IS NOT NULL) o
      GROUP BY o.tenant_id, o.repository_id) s
WHERE r.tenant_id = s.tenant_id AND r.id = s.repository_id AND s.breaks > 0;
ALTER TABLE code_files FORCE ROW LEVEL SECURITY;
ALTER TABLE repositories FORCE ROW LEVEL SECURITY;
