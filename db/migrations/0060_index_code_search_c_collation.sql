-- search_code's trigram indexes under the "C" collation (issue 11); see
-- search_code_candidates in policies/search.sql.
--
-- A candidate's recheck is the bulk of a search's cost: each ILIKE lowers
-- the whole chunk first, and under the database's locale that is a
-- towlower per character, about 24 µs for a 1.5 KB chunk on a 2-core
-- machine; under "C" it is an ASCII byte loop, about 6 µs. The searches'
-- ILIKE and ~ predicates now say COLLATE "C" (the caller widens what an
-- ASCII-only fold would miss, codeindex.Plan.LikePatterns), and an index
-- serves an operator only under its own column's collation, so both
-- trigram indexes are rebuilt with the content column under "C". Their
-- trigrams are unchanged (pg_trgm folds them with the database's locale
-- whatever the column's collation).
--
-- Building them reads every chunk: about two minutes for 400,000 chunks
-- on that machine, during which writes to these tables wait (reads do
-- not). Each new index is built before the old one is dropped and takes
-- its name, so searches read through the old one meanwhile; the drops
-- then hold the tables exclusively until the migration's transaction
-- commits. Stop the worker while this runs: an indexing job that starts
-- during the build can deadlock with the policies' locks at the end, and
-- the whole migration rolls back (docs/operations.md, "migration 0060").
CREATE INDEX code_chunks_tenant_span_trgm_c ON code_chunks
    USING gin (tenant_id, (id >> 13), content COLLATE "C" gin_trgm_ops);
CREATE INDEX pull_code_chunks_tenant_content_trgm_c ON pull_code_chunks
    USING gin (tenant_id, content COLLATE "C" gin_trgm_ops);

DROP INDEX code_chunks_tenant_span_trgm;
ALTER INDEX code_chunks_tenant_span_trgm_c RENAME TO code_chunks_tenant_span_trgm;
DROP INDEX pull_code_chunks_tenant_content_trgm;
ALTER INDEX pull_code_chunks_tenant_content_trgm_c RENAME TO pull_code_chunks_tenant_content_trgm;
