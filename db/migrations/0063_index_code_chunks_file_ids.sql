-- The files-first branch of search_code_candidates (a search under a path
-- prefix of fewer than 2,000 files, issue 11) gathers the ids of every
-- chunk of those files after the position, one probe of this index per
-- file. With the id in the index the probe is an index-only scan and reads
-- no chunk's heap row: `path: net/http/` over 575 files of the big tenant
-- (9,800 chunks) gathered in 2.6 ms instead of 3.6–4.2 ms
-- (docs/benchmarks.md). The index keeps its columns (reading a file's
-- chunks in line order) and its name.
--
-- As with migration 0060, the old index is dropped only after the new one
-- is built; writes to code_chunks wait during the build (about a second
-- per 400,000 chunks), and the worker should be stopped while `cltctl
-- migrate` runs (docs/operations.md).
CREATE INDEX code_chunks_tenant_file_ids ON code_chunks (tenant_id, file_id, start_line) INCLUDE (id);
DROP INDEX code_chunks_tenant_file;
ALTER INDEX code_chunks_tenant_file_ids RENAME TO code_chunks_tenant_file;
