-- The span index gains the chunk's repository as a column (issue 11), so
-- that a search of one repository asks the index for that repository's
-- chunks of a bucket, not the tenant's; see search_code_candidates in
-- policies/search.sql.
--
-- A bucket is 8,192 consecutive chunk ids, and its chunks belong to
-- whichever repositories were indexed then: a repository's first and last
-- buckets hold its neighbours' chunks too, and on a tenant of small
-- repositories most buckets hold several. Asked with the tenant, the index
-- gave every candidate of the bucket, and each was rechecked (its content
-- matched against the patterns) before the repository filter could drop
-- it: on the 1/10 fixture, a one-repository search of `context.Context`
-- rechecked a whole bucket of other repositories' candidates for nothing.
-- A repository id belongs to one tenant (repositories.id is unique, and a
-- chunk's (tenant_id, repository_id) references it), so the repository
-- alone also keeps the scan inside the tenant, without walking the
-- tenant's posting tree, which holds every chunk of the tenant.
--
-- GIN takes a condition on any of its columns, so searches of many
-- repositories keep asking with the tenant. The new index is built before
-- the old one is dropped and takes its name; as with migrations 0060 and
-- 0063, writes to code_chunks wait during the build (about two
-- minutes for 400,000 chunks on a 2-core machine), the drop then holds
-- code_chunks exclusively (searches wait too) until the migration's
-- transaction commits, and the worker should be stopped while `cltctl
-- migrate` runs (docs/operations.md).
CREATE INDEX code_chunks_tenant_span_repo_trgm ON code_chunks
    USING gin (tenant_id, (id >> 13), repository_id, content COLLATE "C" gin_trgm_ops);
DROP INDEX code_chunks_tenant_span_trgm;
ALTER INDEX code_chunks_tenant_span_repo_trgm RENAME TO code_chunks_tenant_span_trgm;
