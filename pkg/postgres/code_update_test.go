package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/codeindex"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
)

// numbered is a file of n lines "<word> <i>", i from 1.
func numbered(path, word string, n int) codeindex.File {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%s %d\n", word, i)
	}
	return file(path, b.String())
}

// filesMoved is the sum of repositories.code_files_moved over repoIDs
// (every repository of the tenant when none are given).
func filesMoved(t *testing.T, env *pgtest.Env, tenant string, repoIDs ...int64) int {
	t.Helper()
	var n int
	if err := env.Admin.Pool.QueryRow(context.Background(), `SELECT coalesce(sum(code_files_moved), 0)::int FROM repositories
		WHERE tenant_id = $1 AND (coalesce(cardinality($2::bigint[]), 0) = 0 OR id = ANY($2))`, tenant, repoIDs).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// storedChunk is one chunk row as TestUpdateIndexKeepsPathOrder reads it.
type storedChunk struct {
	id, file   int64
	start, end int
	content    string
	xmin       uint32
}

// TestUpdateIndexKeepsPathOrder: a push's update rewrites a changed file
// in place when its new chunks fit its old chunk ids (the first of them,
// in line order; a chunk whose lines and text did not change is not
// written again), so that the repository's chunks stay in path order,
// which the search's walks and path-prefix runs rely on (migration
// 0071). A file that grew past its ids, or a new one, goes to the end of
// the id order and is counted in repositories.code_files_moved; past
// postgres.FilesMovedAllowed the update is refused with ErrIndexScattered and
// writes nothing; a whole indexing starts the count from zero. Searches
// see the new text, not the old, in every case.
func TestUpdateIndexKeepsPathOrder(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	ctx := context.Background()
	tenant := seedTenant(t, env, "update")
	repo := addRepo(t, env, tenant, "update/api")
	c1, c2, c3, c4 := strings.Repeat("1", 40), strings.Repeat("2", 40), strings.Repeat("3", 40), strings.Repeat("4", 40)
	actor := postgres.Actor{Label: "test"}

	// a/one.go: 100 lines (3 chunks), a/two.go: 10 (1), b/three.go: 60
	// (2), c/four.go: 10 (1), a binary listed and skipped.
	whole := []codeindex.File{
		numbered("a/one.go", "alpha", 100), numbered("a/two.go", "beta", 10),
		numbered("b/three.go", "gamma", 60), {Path: "bin/tool", Size: 9, SkipReason: "binary"},
		numbered("c/four.go", "delta", 10),
	}
	if err := env.App.InTenant(ctx, tenant, func(tx *postgres.Tx) error {
		_, err := tx.ReplaceIndex(ctx, repo.ID, codeindex.Snapshot{Commit: c1, Files: whole}, actor)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	chunks := func() map[string][]storedChunk {
		t.Helper()
		rows, err := env.Admin.Pool.Query(ctx, `SELECT f.path, c.id, c.file_id, c.start_line, c.end_line, c.content, c.xmin::text::bigint
			FROM code_chunks c JOIN code_files f ON f.tenant_id = c.tenant_id AND f.id = c.file_id
			WHERE c.tenant_id = $1 ORDER BY c.id`, tenant)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string][]storedChunk{}
		for rows.Next() {
			var p string
			var c storedChunk
			var xmin int64
			if err := rows.Scan(&p, &c.id, &c.file, &c.start, &c.end, &c.content, &xmin); err != nil {
				t.Fatal(err)
			}
			c.xmin = uint32(xmin)
			out[p] = append(out[p], c)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	moved := func() int { return filesMoved(t, env, tenant, repo.ID) }
	ids := func(cs []storedChunk) []int64 {
		out := make([]int64, len(cs))
		for i, c := range cs {
			out[i] = c.id
		}
		return out
	}
	before := chunks()
	var maxID int64
	for _, cs := range before {
		maxID = max(maxID, slices.Max(ids(cs)))
	}
	if moved() != 0 {
		t.Fatalf("code_files_moved after a whole indexing = %d", moved())
	}

	// The push: a/one.go changes its last line only (same three chunks),
	// b/three.go shrinks to one chunk, c/four.go grows to three, e/five.go
	// is new, a/two.go is deleted.
	one := numbered("a/one.go", "alpha", 100)
	one.Lines[99] = "omega 100"
	var res postgres.IndexResult
	if err := env.App.InTenant(ctx, tenant, func(tx *postgres.Tx) error {
		var err error
		res, err = tx.UpdateIndex(ctx, repo.ID, c2, []codeindex.File{
			one, numbered("b/three.go", "kappa", 30), numbered("c/four.go", "delta", 100), numbered("e/five.go", "zeta", 5),
		}, []string{"a/two.go"}, actor)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	after := chunks()
	if res.Moved != 2 || moved() != 2 {
		t.Errorf("moved files: result %d, code_files_moved %d; want 2 (c/four.go grew, e/five.go is new)", res.Moved, moved())
	}
	// a/one.go: the same rows; only the last chunk was written again.
	b1, a1 := before["a/one.go"], after["a/one.go"]
	if !slices.Equal(ids(b1), ids(a1)) || a1[0].file != b1[0].file {
		t.Errorf("a/one.go chunk ids %v → %v (file %d → %d); want the same rows", ids(b1), ids(a1), b1[0].file, a1[0].file)
	} else {
		for i := range a1 {
			rewritten := a1[i].xmin != b1[i].xmin
			if want := i == len(a1)-1; rewritten != want {
				t.Errorf("a/one.go chunk %d (lines %d-%d) rewritten: %v, want %v", i, a1[i].start, a1[i].end, rewritten, want)
			}
		}
		if !strings.HasSuffix(a1[2].content, "omega 100") {
			t.Errorf("a/one.go's last chunk = %q", a1[2].content)
		}
	}
	// b/three.go: its first id, the second deleted.
	if b3, a3 := before["b/three.go"], after["b/three.go"]; len(a3) != 1 || a3[0].id != b3[0].id || !strings.HasPrefix(a3[0].content, "kappa 1\n") || a3[0].end != 30 {
		t.Errorf("b/three.go: %v → %v; want its first chunk id holding kappa 1-30", b3, a3)
	}
	// c/four.go and e/five.go: after every earlier id, in path order.
	a4, a5 := after["c/four.go"], after["e/five.go"]
	if len(a4) != 3 || len(a5) != 1 || a4[0].id <= maxID || a5[0].id <= a4[2].id || a4[0].file == before["c/four.go"][0].file {
		t.Errorf("c/four.go %v, e/five.go %v: want both after id %d in a new file row, c before e", ids(a4), ids(a5), maxID)
	}
	if _, ok := after["a/two.go"]; ok {
		t.Error("a/two.go's chunks are still stored")
	}
	// Every file at the new commit (the unchanged binary too); every span
	// a bound of its chunks, the moved files' exactly theirs.
	var stale int
	if err := env.Admin.Pool.QueryRow(ctx, `SELECT count(*) FROM code_files WHERE tenant_id = $1 AND commit_sha <> $2`, tenant, c2).Scan(&stale); err != nil {
		t.Fatal(err)
	}
	if stale != 0 {
		t.Errorf("%d files not at the new commit", stale)
	}
	checkSpans(t, env, tenant, []int64{a4[0].file, a5[0].file})
	search := func(pattern, prefix string) []string {
		t.Helper()
		cands, err := env.App.Tenant(tenant).SearchCandidates(ctx, []int64{repo.ID}, []string{"%" + pattern + "%"}, "", prefix, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range cands {
			out = append(out, fmt.Sprintf("%s:%d", c.Path, c.StartLine))
		}
		return out
	}
	for _, q := range []struct {
		pattern, prefix string
		want            []string
	}{
		{"omega 100", "", []string{"a/one.go:81"}},
		{"alpha 100", "", nil},
		{"gamma", "", nil},
		{"kappa 30", "b/", []string{"b/three.go:1"}},
		{"delta 95", "c/", []string{"c/four.go:81"}},
		{"beta", "", nil},
		{"zeta 5", "", []string{"e/five.go:1"}},
	} {
		if got := search(q.pattern, q.prefix); !slices.Equal(got, q.want) {
			t.Errorf("search %q under %q = %v, want %v", q.pattern, q.prefix, got, q.want)
		}
	}

	// The limit (8 for this repository's 6 files): one move more is
	// refused and writes nothing; an update that moves nothing is not.
	limit := postgres.FilesMovedAllowed(6)
	if _, err := env.Admin.Pool.Exec(ctx, `UPDATE repositories SET code_files_moved = $3 WHERE tenant_id = $1 AND id = $2`,
		tenant, repo.ID, limit-1); err != nil {
		t.Fatal(err)
	}
	update := func(commit string, files ...codeindex.File) error {
		return env.App.InTenant(ctx, tenant, func(tx *postgres.Tx) error {
			_, err := tx.UpdateIndex(ctx, repo.ID, commit, files, nil, actor)
			return err
		})
	}
	if err := update(c3, numbered("f/six.go", "eta", 5)); err != nil {
		t.Fatalf("the move up to the limit: %v", err)
	}
	if moved() != limit {
		t.Errorf("code_files_moved = %d, want %d", moved(), limit)
	}
	snapshot := chunks()
	if err := update(c4, numbered("g/seven.go", "theta", 5)); !errors.Is(err, postgres.ErrIndexScattered) {
		t.Fatalf("a move past the limit: err %v, want ErrIndexScattered", err)
	}
	var commit string
	if err := env.Admin.Pool.QueryRow(ctx, `SELECT indexed_commit FROM repositories WHERE tenant_id = $1 AND id = $2`, tenant, repo.ID).Scan(&commit); err != nil {
		t.Fatal(err)
	}
	if got := chunks(); commit != c3 || moved() != limit || fmt.Sprint(got) != fmt.Sprint(snapshot) {
		t.Errorf("the refused update changed the index: commit %s, code_files_moved %d", commit, moved())
	}
	if err := update(c4, numbered("f/six.go", "iota", 5)); err != nil {
		t.Errorf("an update in place past the limit: %v", err)
	}

	for n, want := range map[int]int{0: 8, 100: 12, 512: 64, 100000: 64} {
		if got := postgres.FilesMovedAllowed(n); got != want {
			t.Errorf("FilesMovedAllowed(%d) = %d, want %d", n, got, want)
		}
	}

	// A whole indexing: path order again, nothing counted.
	if err := env.App.InTenant(ctx, tenant, func(tx *postgres.Tx) error {
		_, err := tx.ReplaceIndex(ctx, repo.ID, codeindex.Snapshot{Commit: c4, Files: whole}, actor)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if moved() != 0 {
		t.Errorf("code_files_moved after a whole indexing = %d, want 0", moved())
	}
}

// TestCodeFilesMovedFill: migration 0071 starts each repository's count
// of files out of path order from the breaks its files' spans show, as a
// search under a path prefix sees them: none for a repository written
// whole, two for each file an update moved into the middle of the order.
func TestCodeFilesMovedFill(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	ctx := context.Background()
	tenant := seedTenant(t, env, "fill")
	scattered, whole := addRepo(t, env, tenant, "fill/scattered"), addRepo(t, env, tenant, "fill/whole")
	actor := postgres.Actor{Label: "test"}
	files := func(word string, n, lines int) []codeindex.File {
		var out []codeindex.File
		for i := range n {
			out = append(out, numbered(fmt.Sprintf("src/f%03d.go", i), word, lines))
		}
		return out
	}
	if err := env.App.InTenant(ctx, tenant, func(tx *postgres.Tx) error {
		if _, err := tx.ReplaceIndex(ctx, scattered.ID, codeindex.Snapshot{Commit: strings.Repeat("1", 40), Files: files("one", 100, 60)}, actor); err != nil {
			return err
		}
		if _, err := tx.ReplaceIndex(ctx, whole.ID, codeindex.Snapshot{Commit: strings.Repeat("1", 40), Files: files("two", 100, 60)}, actor); err != nil {
			return err
		}
		// Three files of the first grow past their two chunks: moved.
		_, err := tx.UpdateIndex(ctx, scattered.ID, strings.Repeat("2", 40), []codeindex.File{
			numbered("src/f010.go", "grown", 120), numbered("src/f020.go", "grown", 120), numbered("src/f030.go", "grown", 120)}, nil, actor)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	counts := func() (a, b int) {
		return filesMoved(t, env, tenant, scattered.ID), filesMoved(t, env, tenant, whole.ID)
	}
	if a, b := counts(); a != 3 || b != 0 {
		t.Fatalf("counted by the update: %d and %d, want 3 and 0", a, b)
	}

	migration, err := os.ReadFile("../../db/migrations/0071_repositories_code_files_moved.sql")
	if err != nil {
		t.Fatal(err)
	}
	fill := string(migration)
	start := strings.Index(fill, "UPDATE repositories r SET code_files_moved")
	if start < 0 {
		t.Fatal("the migration's fill is not found")
	}
	fill = fill[start : start+strings.Index(fill[start:], ";")]
	if _, err := env.Admin.Pool.Exec(ctx, `UPDATE repositories SET code_files_moved = 0 WHERE tenant_id = $1`, tenant); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Admin.Pool.Exec(ctx, fill); err != nil {
		t.Fatalf("%s: %v", fill, err)
	}
	if a, b := counts(); a != 6 || b != 0 {
		t.Errorf("filled by the migration: %d and %d, want 6 (into and out of each moved file) and 0", a, b)
	}
}

// TestIndexWritersLockTheRepositoryFirst: every writer of a repository's
// index locks its row before its files, so that a redaction batch
// (ReplaceStoredFile, which the worker's advisory lock does not cover) and
// a whole indexing of the same repository wait for each other instead of
// deadlocking. The redaction rewrites the last file, the indexing starts
// and waits, the redaction rewrites the first file and commits, and both
// succeed. (With the indexing writing the row last, it deleted the first
// file and waited for the last, the redaction waited for the first, and
// PostgreSQL aborted one of them.)
func TestIndexWritersLockTheRepositoryFirst(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	ctx := context.Background()
	tenant := seedTenant(t, env, "locks")
	repo := addRepo(t, env, tenant, "locks/api")
	actor := postgres.Actor{Label: "test"}
	var files []codeindex.File
	for i := range 20 {
		files = append(files, numbered(fmt.Sprintf("src/f%02d.go", i), "word", 30))
	}
	snap := codeindex.Snapshot{Commit: strings.Repeat("1", 40), Files: files}
	if err := env.App.InTenant(ctx, tenant, func(tx *postgres.Tx) error {
		_, err := tx.ReplaceIndex(ctx, repo.ID, snap, actor)
		return err
	}); err != nil {
		t.Fatal(err)
	}

	waiting := func() int {
		var n int
		if err := env.Admin.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			t.Error(err)
		}
		return n
	}
	indexed := make(chan error, 1)
	err := env.App.InTenant(ctx, tenant, func(tx *postgres.Tx) error {
		stored, err := tx.StoredFiles(ctx, 0, 100)
		if err != nil {
			return err
		}
		first, last := stored[0], stored[len(stored)-1]
		last.Lines = append(last.Lines, "// rewritten")
		if err := tx.ReplaceStoredFile(ctx, last); err != nil {
			return err
		}
		go func() {
			indexed <- env.App.InTenant(ctx, tenant, func(tx *postgres.Tx) error {
				_, err := tx.ReplaceIndex(ctx, repo.ID, codeindex.Snapshot{Commit: strings.Repeat("2", 40), Files: files}, actor)
				return err
			})
		}()
		// Until the indexing waits for a lock this transaction holds.
		for deadline := time.Now().Add(30 * time.Second); waiting() == 0; {
			if time.Now().After(deadline) {
				return errors.New("the indexing never waited for the redaction")
			}
			time.Sleep(10 * time.Millisecond)
		}
		first.Lines = append(first.Lines, "// rewritten")
		return tx.ReplaceStoredFile(ctx, first)
	})
	if err != nil {
		t.Fatalf("the redaction: %v", err)
	}
	if err := <-indexed; err != nil {
		t.Fatalf("the indexing: %v", err)
	}
}
