-- bench-scatter.sql: moves random indexed files of a held code benchmark
-- fixture to the end of the chunk id order, as a push's update wrote every
-- changed file before migration 0071 (delete the file's row, insert it
-- anew, its chunks after it), and as it still writes a file that grew or is
-- new. Contents stay the same but for a trailing space, so that searches
-- find the same chunks, at other ids. For docs/benchmarks.md ("A push's
-- files out of path order"); never on a database that matters.
--
--   psql "$AdminURL" -v ON_ERROR_STOP=1 \
--     -c "set sim.tenant='$Tenant'; set sim.pushes=20; set sim.files=10; set sim.seed=0.17" \
--     -f scripts/bench-scatter.sql
--   psql "$AdminURL" -c "vacuum analyze code_chunks" -c "vacuum analyze code_files"
--
-- (AdminURL and Tenant from the BENCH_HOLD file.) sim.pushes pushes, each of
-- sim.files random files of one random repository of the tenant.
DO $$
DECLARE
  t uuid := current_setting('sim.tenant')::uuid;
  pushes int := current_setting('sim.pushes')::int;
  nfiles int := current_setting('sim.files')::int;
  p int; f record; nf bigint; r bigint;
BEGIN
  PERFORM setseed(current_setting('sim.seed')::float8);
  FOR p IN 1..pushes LOOP
    SELECT id INTO r FROM repositories WHERE tenant_id = t ORDER BY random() LIMIT 1;
    FOR f IN SELECT * FROM code_files WHERE tenant_id = t AND repository_id = r AND skip_reason IS NULL AND chunk_lo IS NOT NULL ORDER BY random() LIMIT nfiles LOOP
      CREATE TEMP TABLE IF NOT EXISTS sim_chunks (s int, e int, c text);
      TRUNCATE sim_chunks;
      INSERT INTO sim_chunks SELECT start_line, end_line, content || ' ' FROM code_chunks WHERE tenant_id = t AND file_id = f.id;
      DELETE FROM code_files WHERE tenant_id = t AND id = f.id;
      INSERT INTO code_files (tenant_id, repository_id, commit_sha, path, language, size, blob_sha, line_count, skip_reason)
        VALUES (t, r, f.commit_sha, f.path, f.language, f.size, f.blob_sha, f.line_count, NULL) RETURNING id INTO nf;
      INSERT INTO code_chunks (tenant_id, repository_id, file_id, start_line, end_line, content)
        SELECT t, r, nf, s, e, c FROM sim_chunks ORDER BY s;
    END LOOP;
  END LOOP;
END $$;
