-- Bounds of each indexed file's chunk ids (issue 11), so that a search
-- under a path prefix knows where in id order the prefix's chunks are
-- without reading them; see search_code_candidates in
-- policies/search.sql.
--
-- A search returns chunks in id order. Under a path prefix it used to find
-- them one file at a time (an index probe per file: 4.5 ms for net/http/'s
-- 575 files on the big tenant) and checked every chunk one by one
-- (syscall/ at full size: 180 ms for a literal with no match there), or,
-- with 2,000 files or more, walked the whole tenant and dropped what lay
-- outside the prefix (go/: 150-250 ms). A file's chunks are written
-- together, in path order, so a prefix's chunks lie in a few runs of ids;
-- the spans of its files, read from the path index, give those runs.
--
-- chunk_lo and chunk_hi bound the file's chunk ids: every chunk of the
-- file has lo <= id <= hi (NULL: the file never had chunks, a skipped one).
-- An insert widens them to the new rows (the trigger below, whoever
-- writes); a delete leaves them as they were, still bounds, so that
-- deleting a repository's files (a full re-index) pays nothing for them.
-- A writer that deletes a file's chunks and writes them anew (the
-- redaction's ReplaceStoredFile, at the end of the id order) clears the
-- file's span in between, so that it stays tight. A chunk's id and file
-- never change: an UPDATE of either is refused.
ALTER TABLE code_files ADD COLUMN chunk_lo bigint, ADD COLUMN chunk_hi bigint;

-- The path index carries the spans (and the repository), so that a
-- prefix's spans are read from the index alone. It replaces
-- code_files_tenant_path and takes its name. It is built before the spans
-- are filled, so that it is usable by every transaction as soon as the
-- migration commits (an index built after this transaction's own updates
-- of the table could wait for older transactions to end). Reads and
-- writes of code_files and code_chunks wait for the migration (seconds
-- for the big tenant's 53,000 files and 400,000 chunks).
CREATE INDEX code_files_tenant_path_spans ON code_files (tenant_id, path text_pattern_ops)
    INCLUDE (repository_id, chunk_lo, chunk_hi);
DROP INDEX code_files_tenant_path;
ALTER INDEX code_files_tenant_path_spans RENAME TO code_files_tenant_path;

-- The fill reads and writes every tenant's rows; the policies make the
-- tables FORCE ROW LEVEL SECURITY again after the migrations.
ALTER TABLE code_files NO FORCE ROW LEVEL SECURITY;
ALTER TABLE code_chunks NO FORCE ROW LEVEL SECURITY;
UPDATE code_files f SET chunk_lo = s.lo, chunk_hi = s.hi
FROM (SELECT c.tenant_id, c.file_id, min(c.id) AS lo, max(c.id) AS hi
      FROM code_chunks c GROUP BY c.tenant_id, c.file_id) s
WHERE f.tenant_id = s.tenant_id AND f.id = s.file_id;
ALTER TABLE code_files FORCE ROW LEVEL SECURITY;
ALTER TABLE code_chunks FORCE ROW LEVEL SECURITY;

-- A statement trigger with a transition table: one UPDATE per statement,
-- whatever its number of rows. It runs as the writer (the runtime role,
-- under the tenant policy: the rows a statement writes are its tenant's).
CREATE FUNCTION code_chunk_spans_insert() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, public, pg_temp
AS $fn$
BEGIN
    UPDATE public.code_files f
    SET chunk_lo = least(f.chunk_lo, n.lo), chunk_hi = greatest(f.chunk_hi, n.hi)
    FROM (SELECT c.tenant_id, c.file_id, min(c.id) AS lo, max(c.id) AS hi
          FROM new_chunks c GROUP BY c.tenant_id, c.file_id) n
    WHERE f.tenant_id = n.tenant_id AND f.id = n.file_id;
    RETURN NULL;
END
$fn$;
REVOKE ALL ON FUNCTION code_chunk_spans_insert() FROM PUBLIC;
CREATE TRIGGER code_chunk_spans_insert AFTER INSERT ON code_chunks
    REFERENCING NEW TABLE AS new_chunks FOR EACH STATEMENT EXECUTE FUNCTION code_chunk_spans_insert();

CREATE FUNCTION code_chunk_spans_refuse() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, public, pg_temp
AS $fn$
BEGIN
    RAISE EXCEPTION 'a chunk''s id and file never change (code_files.chunk_lo and chunk_hi bound them, migration 0066): delete the chunk and insert it anew';
END
$fn$;
REVOKE ALL ON FUNCTION code_chunk_spans_refuse() FROM PUBLIC;
CREATE TRIGGER code_chunk_spans_refuse BEFORE UPDATE OF id, file_id ON code_chunks
    FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id OR OLD.file_id IS DISTINCT FROM NEW.file_id)
    EXECUTE FUNCTION code_chunk_spans_refuse();
