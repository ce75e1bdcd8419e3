-- search_code at tenant scale, continued (issue 11); see
-- search_code_candidates in policies/search.sql.
--
-- A trigram index that can be restricted to a span of chunk ids: the id's
-- bucket of 8,192 ((id >> 13), a btree_gin column) sits between the tenant
-- and the content, so a search that walks the chunks in id order asks for
-- the matches of the next bucket only (an equality: a range of buckets
-- would be two partial matches, each over the tenant's whole index), and
-- the recheck of the candidates — each a detoasted chunk, the bulk of the
-- cost — covers that bucket, not the tenant. The bucket is an expression
-- that no btree index has, so the planner cannot trade this index for an
-- id-range scan of the primary key that checks every chunk.
CREATE INDEX code_chunks_tenant_span_trgm ON code_chunks USING gin (tenant_id, (id >> 13), content gin_trgm_ops);

-- The tenant-wide trigram index is superseded: a search without a span
-- (a rare literal) reads the new index with the bucket unconstrained.
DROP INDEX code_chunks_tenant_content_trgm;
