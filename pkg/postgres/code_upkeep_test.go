package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/codelotse/codelotse/pkg/codeindex"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
)

// TestCodeGINPendingListsStaySmall: every scan of a GIN index reads its
// whole pending list, so the trigram indexes that search reads keep
// theirs small (at most 256 kB) or off (migration 0068). On the catalog:
// every GIN index of ours (River's own aside) has fastupdate off or a
// limit of at most 256 kB. In use: indexing a repository through
// ReplaceIndex leaves at most 32 pending pages in the span index (with
// PostgreSQL's default 4 MB it left hundreds), and a pull request's head
// leaves none in its overlay's index.
func TestCodeGINPendingListsStaySmall(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	ctx := context.Background()

	rows, err := env.Admin.Pool.Query(ctx, `SELECT i.relname, coalesce(i.reloptions, '{}')
		FROM pg_index x
		JOIN pg_class i ON i.oid = x.indexrelid
		JOIN pg_class t ON t.oid = x.indrelid
		JOIN pg_namespace n ON n.oid = t.relnamespace
		JOIN pg_am a ON a.oid = i.relam
		WHERE n.nspname = 'public' AND a.amname = 'gin' AND t.relname NOT LIKE 'river\_%'
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for rows.Next() {
		var name string
		var opts []string
		if err := rows.Scan(&name, &opts); err != nil {
			t.Fatal(err)
		}
		seen = append(seen, name)
		bounded := false
		for _, o := range opts {
			var limit int
			if _, err := fmt.Sscanf(o, "gin_pending_list_limit=%d", &limit); err == nil && limit <= 256 {
				bounded = true
			}
			bounded = bounded || o == "fastupdate=off" || o == "fastupdate=false"
		}
		if !bounded {
			t.Errorf("GIN index %s has options %v: want fastupdate=off or gin_pending_list_limit of at most 256 (kB)", name, opts)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := "code_chunks_tenant_span_trgm,findings_search_trgm,pull_code_chunks_tenant_content_trgm"; strings.Join(seen, ",") != want {
		t.Errorf("GIN indexes %v, want %s", seen, want)
	}

	if _, err := env.Admin.Pool.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pgstattuple"); err != nil {
		t.Fatalf("pgstattuple (PostgreSQL's contrib, as pg_trgm is): %v", err)
	}
	pending := func(index string) int {
		t.Helper()
		var pages int
		if err := env.Admin.Pool.QueryRow(ctx, `SELECT pending_pages FROM pgstatginindex($1::regclass)`, index).Scan(&pages); err != nil {
			t.Fatal(err)
		}
		return pages
	}

	// 300 files of 60 lines of made-up identifiers: every chunk holds
	// hundreds of distinct trigrams, some 2 MB of pending entries in all.
	rng := rand.New(rand.NewPCG(7, 11))
	word := func() string {
		b := make([]byte, 6+rng.IntN(6))
		for i := range b {
			b[i] = byte('a' + rng.IntN(26))
		}
		return string(b)
	}
	var files []codeindex.File
	for i := range 300 {
		var body strings.Builder
		body.WriteString("package p\n\n")
		for range 60 {
			fmt.Fprintf(&body, "func %s(%s int) int { return %s + %d }\n", word(), word(), word(), rng.IntN(1000))
		}
		files = append(files, file(fmt.Sprintf("pkg%d/f%d.go", i%7, i), body.String()))
	}
	tenant := seedTenant(t, env, "pending")
	repo := addRepo(t, env, tenant, "pending/api")
	before := pending("code_chunks_tenant_span_trgm")
	var chunks int
	if err := env.App.InTenant(ctx, tenant, func(tx *postgres.Tx) error {
		_, err := tx.ReplaceIndex(ctx, repo.ID, codeindex.Snapshot{Commit: strings.Repeat("1", 40), Files: files}, postgres.Actor{Label: "test"})
		if err != nil {
			return err
		}
		return postgres.Raw(tx).QueryRow(ctx, `SELECT count(*) FROM code_chunks WHERE tenant_id = $1`, tenant).Scan(&chunks)
	}); err != nil {
		t.Fatal(err)
	}
	if got := pending("code_chunks_tenant_span_trgm"); got > 32 {
		t.Errorf("after indexing %d chunks the span index has %d pending pages (%d before), want at most 32 (256 kB)", chunks, got, before)
	}
	if err := env.App.InTenant(ctx, tenant, func(tx *postgres.Tx) error {
		_, err := tx.ReplacePullIndex(ctx, repo.ID, 3, strings.Repeat("2", 40), strings.Repeat("1", 40), files[:40], nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got := pending("pull_code_chunks_tenant_content_trgm"); got != 0 {
		t.Errorf("after a pull request's head the overlay's index has %d pending pages, want none", got)
	}
}

// TestCodeTablesVacuumSooner: indexing replaces a repository's files and
// chunks, and until VACUUM the old rows cost every search a heap visit per
// entry left in the indexes, so autovacuum visits code_chunks and
// code_files after 2 % of their rows change, not 20 % (migration 0069).
func TestCodeTablesVacuumSooner(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	want := []string{
		"autovacuum_vacuum_threshold=1000", "autovacuum_vacuum_scale_factor=0.02",
		"autovacuum_vacuum_insert_threshold=1000", "autovacuum_vacuum_insert_scale_factor=0.02",
		"autovacuum_analyze_threshold=1000", "autovacuum_analyze_scale_factor=0.02",
	}
	for _, table := range []string{"code_chunks", "code_files"} {
		var opts []string
		if err := env.Admin.Pool.QueryRow(context.Background(), `SELECT coalesce(reloptions, '{}') FROM pg_class
			WHERE oid = ('public.' || $1)::regclass`, table).Scan(&opts); err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !slices.Contains(opts, w) {
				t.Errorf("%s has options %v: want %s", table, opts, w)
			}
		}
	}
}

// TestChunkIDsComeInBlocks: two indexings writing at once each get their
// chunks as one run of ids, not ids taken in turn (migration 0070: each
// session takes ids 8,192 at a time), so that a repository's chunks stay
// neighbours in the span index's buckets. Two sessions insert chunks
// alternately, one at a time: each session's ids must follow one another.
func TestChunkIDsComeInBlocks(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	ctx := context.Background()
	var cache int64
	if err := env.Admin.Pool.QueryRow(ctx, `SELECT cache_size FROM pg_sequences
		WHERE schemaname = 'public' AND sequencename = 'code_chunks_id_seq'`).Scan(&cache); err != nil {
		t.Fatal(err)
	}
	if cache != 8192 {
		t.Errorf("code_chunks_id_seq caches %d ids a session, want 8192", cache)
	}

	tenant := seedTenant(t, env, "blocks")
	repo := addRepo(t, env, tenant, "blocks/api")
	// A file for each session: a chunk's insert widens its file's span
	// (migration 0066), which would make the second session wait for the
	// first's row lock.
	var fileIDs []int64
	if err := env.Admin.InTenant(ctx, tenant, func(tx *postgres.Tx) error {
		if _, err := postgres.Raw(tx).Exec(ctx, seedFilesSQL, tenant, repo.ID, 2); err != nil {
			return err
		}
		rows, err := postgres.Raw(tx).Query(ctx, `SELECT id FROM code_files WHERE tenant_id = $1 ORDER BY id`, tenant)
		if err != nil {
			return err
		}
		fileIDs, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var txs [2]pgx.Tx
	for i := range txs {
		conn, err := env.Admin.Pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
		if txs[i], err = conn.Begin(ctx); err != nil {
			t.Fatal(err)
		}
		defer txs[i].Rollback(ctx) //nolint:errcheck
	}
	var ids [2][]int64
	for k := range 20 {
		i := k % 2
		var id int64
		if err := txs[i].QueryRow(ctx, `INSERT INTO code_chunks (tenant_id, repository_id, file_id, start_line, end_line, content)
			VALUES ($1, $2, $3, $4, $4, 'package x') RETURNING id`, tenant, repo.ID, fileIDs[i], k+1).Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids[i] = append(ids[i], id)
	}
	for i, got := range ids {
		for k := 1; k < len(got); k++ {
			if got[k] != got[k-1]+1 {
				t.Errorf("session %d took chunk ids %v while the other wrote too: want one run", i, got)
				break
			}
		}
	}
}
