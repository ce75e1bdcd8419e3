-- bench-repack.sql: writes every repository of a held code benchmark
-- fixture's tenant again in path order, under new chunk ids (as a whole
-- indexing does, from the stored chunks instead of an archive): the
-- baseline after bench-scatter.sql. About 0.8 ms a chunk (5.5 minutes for
-- the full-size tenant's 401,395 chunks on a 2-core machine).
--
--   psql "$AdminURL" -v ON_ERROR_STOP=1 -c "set sim.tenant='$Tenant'" -f scripts/bench-repack.sql
--   psql "$AdminURL" -c "vacuum analyze code_chunks" -c "vacuum analyze code_files"
DO $$
DECLARE t uuid := current_setting('sim.tenant')::uuid; r bigint;
BEGIN
  FOR r IN SELECT id FROM repositories WHERE tenant_id = t ORDER BY id LOOP
    CREATE TEMP TABLE IF NOT EXISTS old_ids (id bigint);
    TRUNCATE old_ids;
    INSERT INTO old_ids SELECT id FROM code_chunks WHERE tenant_id = t AND repository_id = r;
    UPDATE code_files SET chunk_lo = NULL, chunk_hi = NULL WHERE tenant_id = t AND repository_id = r;
    INSERT INTO code_chunks (tenant_id, repository_id, file_id, start_line, end_line, content)
      SELECT c.tenant_id, c.repository_id, c.file_id, c.start_line, c.end_line, c.content
      FROM code_chunks c JOIN code_files f ON f.tenant_id = c.tenant_id AND f.id = c.file_id
      WHERE c.tenant_id = t AND c.repository_id = r ORDER BY f.path, c.start_line;
    DELETE FROM code_chunks c USING old_ids o WHERE c.tenant_id = t AND c.id = o.id;
  END LOOP;
END $$;
