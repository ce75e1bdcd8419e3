-- A repository's lower-cased full name as a stored column (issue 11), so
-- that looking a repository up by name, and paging the repository listing,
-- are index conditions under row-level security.
--
-- lower() is not leakproof, so under RLS PostgreSQL cannot use
-- "lower(full_name) = lower($n)" (nor a keyset on lower(full_name)) to
-- search the index repositories_tenant_full_name: it evaluates the
-- condition after the tenant policy, on every repository of the tenant.
-- Resolving a repository argument (every tool that takes one) read all of
-- a tenant's repositories, 1.2 ms at 3,000 and growing with them; each page
-- of list_repositories read every repository before it. A stored column
-- compared with leakproof operators (texteq, text_gt and the id's int8
-- operators; lower() then applies to the argument only) is an index
-- condition.
--
-- Adding a stored generated column rewrites the table under an exclusive
-- lock: a repositories table is small (rows of names and settings; the
-- big tenant's 3,000 rows take well under a second).
ALTER TABLE repositories ADD COLUMN name_key text GENERATED ALWAYS AS (lower(full_name)) STORED;

-- The listing's order (name_key, id) and the lookup by name. The unique
-- index on (tenant_id, lower(full_name)) stays: it is the upsert's conflict
-- target.
CREATE INDEX repositories_tenant_name_key ON repositories (tenant_id, name_key, id);
