-- Indexes for search_code at tenant scale (issue 11); see
-- search_code_candidates in policies/search.sql.

-- Phase 1 walks each searched repository's chunks in id order.
CREATE INDEX code_chunks_tenant_repo_id ON code_chunks (tenant_id, repository_id, id);

-- A path prefix finds its files by range (LIKE 'prefix%') instead of
-- reading every file of the repositories.
CREATE INDEX code_files_tenant_path ON code_files (tenant_id, path text_pattern_ops);
