-- Each indexed file's chunk ids, as their lowest and highest (issue 11), so
-- that a search under a path prefix knows where in id order the prefix's
-- chunks are without reading them; see search_code_candidates in
-- policies/search.sql.
--
-- A search returns chunks in id order. Under a path prefix it used to find
-- them one file at a time (an index probe per file: 4.5 ms for net/http/'s
-- 575 files on the big tenant), or, with 2,000 files or more, walk the
-- whole tenant and drop what lay outside the prefix (syscall/ or go/ at
-- full size: 150-250 ms). A file's chunks are written together, in path
-- order, so a prefix's chunks lie in a few runs of ids; the spans of its
-- files, read from the path index, give those runs.
--
-- chunk_lo and chunk_hi bound the file's chunk ids: every chunk of the
-- file has lo <= id <= hi (NULL: the file has no chunks, a skipped one).
-- The triggers below keep them exact whoever writes code_chunks: an insert
-- widens the bounds to the new rows, a delete narrows them to the rows
-- that remain (a redacted file's chunks are deleted and written anew, at
-- the end of the id order). A chunk's id and file never change.
ALTER TABLE code_files ADD COLUMN chunk_lo bigint, ADD COLUMN chunk_hi bigint;

-- The backfill reads and writes every tenant's rows; the policies make the
-- table FORCE ROW LEVEL SECURITY again after the migrations.
ALTER TABLE code_files NO FORCE ROW LEVEL SECURITY;
ALTER TABLE code_chunks NO FORCE ROW LEVEL SECURITY;
UPDATE code_files f SET chunk_lo = s.lo, chunk_hi = s.hi
FROM (SELECT c.tenant_id, c.file_id, min(c.id) AS lo, max(c.id) AS hi
      FROM code_chunks c GROUP BY c.tenant_id, c.file_id) s
WHERE f.tenant_id = s.tenant_id AND f.id = s.file_id;
ALTER TABLE code_files FORCE ROW LEVEL SECURITY;
ALTER TABLE code_chunks FORCE ROW LEVEL SECURITY;

-- The path index carries the spans (and the repository), so that a
-- prefix's spans are read from the index alone. It replaces
-- code_files_tenant_path and takes its name; writes to code_files wait
-- while it is built (seconds for the big tenant's 53,000 files).
CREATE INDEX code_files_tenant_path_spans ON code_files (tenant_id, path text_pattern_ops)
    INCLUDE (repository_id, chunk_lo, chunk_hi);
DROP INDEX code_files_tenant_path;
ALTER INDEX code_files_tenant_path_spans RENAME TO code_files_tenant_path;

-- Statement triggers with transition tables: one UPDATE per statement,
-- whatever its number of rows. They run as the writer (the runtime role,
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

CREATE FUNCTION code_chunk_spans_delete() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, public, pg_temp
AS $fn$
BEGIN
    -- The files' remaining chunks (none: NULL). A file deleted with its
    -- chunks (a cascade) is gone already and is not updated.
    UPDATE public.code_files f
    SET chunk_lo = (SELECT min(c.id) FROM public.code_chunks c WHERE c.tenant_id = f.tenant_id AND c.file_id = f.id),
        chunk_hi = (SELECT max(c.id) FROM public.code_chunks c WHERE c.tenant_id = f.tenant_id AND c.file_id = f.id)
    FROM (SELECT DISTINCT c.tenant_id, c.file_id FROM old_chunks c) o
    WHERE f.tenant_id = o.tenant_id AND f.id = o.file_id;
    RETURN NULL;
END
$fn$;
REVOKE ALL ON FUNCTION code_chunk_spans_insert() FROM PUBLIC;
REVOKE ALL ON FUNCTION code_chunk_spans_delete() FROM PUBLIC;

CREATE TRIGGER code_chunk_spans_insert AFTER INSERT ON code_chunks
    REFERENCING NEW TABLE AS new_chunks FOR EACH STATEMENT EXECUTE FUNCTION code_chunk_spans_insert();
CREATE TRIGGER code_chunk_spans_delete AFTER DELETE ON code_chunks
    REFERENCING OLD TABLE AS old_chunks FOR EACH STATEMENT EXECUTE FUNCTION code_chunk_spans_delete();
