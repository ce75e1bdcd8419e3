-- The span index gains a sub-bucket column, (id >> 10), 1,024 consecutive
-- chunk ids (issue 11), so that search_code_candidates can ask for a part
-- of a bucket (8,192 ids, (id >> 13)): the one sub-bucket the position is
-- in, by equality, when the page is predicted to end early in a dense
-- bucket; see search_code_candidates in policies/search.sql.
--
-- A bitmap heap scan rechecks every candidate the index gives before any
-- row is dropped by its id, so a bucket asked whole for the last few ids of
-- a page rechecks all of its candidates: on the big tenant of issue 11,
-- func \w+Handler\( rechecked the 743 candidates of its last bucket for 5
-- ids, which the bucket's first 1,024 ids held. (A range of sub-buckets was
-- tried: btree_gin makes each bound a partial match over the tenant's keys
-- on that side, far dearer than one key.)
--
-- The bucket column stays: a whole bucket is asked with it alone (one key,
-- no range), as before. The new index is built before the old one is
-- dropped and takes its name, as in migrations 0060 and 0064: writes to
-- code_chunks wait during the build (about two minutes for 400,000 chunks on
-- a 2-core machine), the drop then holds code_chunks exclusively until the
-- migration's transaction commits, and the worker should be stopped while
-- `cltctl migrate` runs (docs/operations.md).
CREATE INDEX code_chunks_tenant_span_sub_trgm ON code_chunks
    USING gin (tenant_id, (id >> 13), (id >> 10), repository_id, content COLLATE "C" gin_trgm_ops);
DROP INDEX code_chunks_tenant_span_trgm;
ALTER INDEX code_chunks_tenant_span_sub_trgm RENAME TO code_chunks_tenant_span_trgm;
