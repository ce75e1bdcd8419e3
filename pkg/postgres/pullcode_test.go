package postgres_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/codelotse/codelotse/pkg/codeindex"
	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
)

func file(path, content string) codeindex.File {
	return codeindex.File{Path: path, Size: int64(len(content)), Language: codeindex.Language(path), Lines: codeindex.SplitLines(content)}
}

// TestPullIndex: a pull request's overlay replaces the files it changes
// and hides the ones it deletes; everything else reads through to the
// base index; the search function gives nothing for another tenant's or
// an unknown pull request, and dropping closed pull requests removes
// their overlay.
func TestPullIndex(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	ctx := context.Background()
	a, b := seedTenant(t, env, "acme"), seedTenant(t, env, "other")
	repo := addRepo(t, env, a, "acme/api")
	other := addRepo(t, env, b, "other/api")
	const base, head = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	for _, x := range []struct {
		tenant string
		repo   int64
	}{{a, repo.ID}, {b, other.ID}} {
		if err := env.App.InTenant(ctx, x.tenant, func(tx *postgres.Tx) error {
			if _, err := tx.ReplaceIndex(ctx, x.repo, codeindex.Snapshot{Commit: base, Files: []codeindex.File{
				file("main.go", "package main\n\nfunc BaseOnly() {}\n"),
				file("gone.go", "package main\n\nfunc GoneNeedle() {}\n"),
				file("same.go", "package main\n\nfunc SameNeedle() {}\n"),
			}}, postgres.Actor{Label: "test"}); err != nil {
				return err
			}
			_, err := tx.ReplacePullIndex(ctx, x.repo, 7, head, base,
				[]codeindex.File{file("main.go", "package main\n\nfunc HeadOnly() {}\n"), file("new.go", "package main\n\nfunc NewNeedle() {}\n")},
				[]string{"gone.go"})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	// visibleBy runs both phases with the patterns and the regex and
	// returns the paths of the chunks a search would keep; visible with
	// one literal pattern.
	visibleBy := func(tenant string, repoID int64, number int, likes []string, regex, prefix string) []string {
		t.Helper()
		var out []string
		for phase := 1; phase <= 2; phase++ {
			cands, err := env.App.Tenant(tenant).SearchPullCandidates(ctx, repoID, number, phase, likes, regex, prefix, 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cands {
				if !c.Shadowed {
					if c.Commit != head {
						t.Errorf("candidate %s has commit %s, want the head", c.Path, c.Commit)
					}
					out = append(out, c.Path)
				}
			}
		}
		return out
	}
	visible := func(tenant string, repoID int64, number int, pattern string) []string {
		t.Helper()
		return visibleBy(tenant, repoID, number, []string{"%" + pattern + "%"}, "", "")
	}
	for pattern, want := range map[string]string{"HeadOnly": "main.go", "BaseOnly": "", "GoneNeedle": "", "SameNeedle": "same.go", "NewNeedle": "new.go"} {
		if got := strings.Join(visible(a, repo.ID, 7, pattern), ","); got != want {
			t.Errorf("%s at the head: %q, want %q", pattern, got, want)
		}
	}
	// A regex prefilter alone (an alternation, no pattern) filters both
	// phases the same way.
	if got := strings.Join(visibleBy(a, repo.ID, 7, nil, `(?n)(?:Head|Base)Only\(`, ""), ","); got != "main.go" {
		t.Errorf("regex (Head|Base)Only at the head: %q, want main.go", got)
	}
	// A path prefix scopes both phases: the base's unchanged file under
	// it, the head's changed file under it (its base chunks shadowed), no
	// file outside it.
	for prefix, want := range map[string]string{"same": "same.go", "main": "main.go", "new": "new.go", "gone": "", "other/": ""} {
		if got := strings.Join(visibleBy(a, repo.ID, 7, []string{"%func%"}, "", prefix), ","); got != want {
			t.Errorf("func under %q at the head: %q, want %q", prefix, got, want)
		}
	}
	if got := strings.Join(visibleBy(a, repo.ID, 7, []string{"%Only%"}, "", "main"), ","); got != "main.go" {
		t.Errorf("Only under main at the head: %q, want the head's main.go alone", got)
	}
	// Foreign or unknown ids get nothing from the SECURITY DEFINER
	// function: another tenant's repository, an unknown pull request.
	if got := visible(a, other.ID, 7, "Needle"); len(got) != 0 {
		t.Errorf("another tenant's repository through acme: %v", got)
	}
	if got := visible(a, repo.ID, 8, "Needle"); len(got) != 0 {
		t.Errorf("a pull request without an index: %v", got)
	}
	// The base search does not see the overlay.
	cands, err := env.App.Tenant(a).SearchCandidates(ctx, []int64{repo.ID}, []string{"%HeadOnly%"}, "", "", 0, 100)
	if err != nil || len(cands) != 0 {
		t.Errorf("base search sees the pull request's head: %v, %v", cands, err)
	}

	h, ok, err := env.App.Tenant(a).PullHead(ctx, repo.ID, 7)
	if err != nil || !ok || h.HeadSHA != head {
		t.Fatalf("head = %+v, %v, %v", h, ok, err)
	}
	f, err := env.App.Tenant(a).ReadPullFile(ctx, repo.ID, h, "main.go", 1, 0)
	if err != nil || f.Commit != head || len(f.Lines) != 3 || f.Lines[2] != "func HeadOnly() {}" {
		t.Errorf("changed file at the head = %+v, %v", f, err)
	}
	if f, err := env.App.Tenant(a).ReadPullFile(ctx, repo.ID, h, "same.go", 1, 0); err != nil || f.Commit != head || f.Lines[2] != "func SameNeedle() {}" {
		t.Errorf("unchanged file at the head = %+v, %v", f, err)
	}
	if _, err := env.App.Tenant(a).ReadPullFile(ctx, repo.ID, h, "gone.go", 1, 0); codelotse.ErrorCode(err) != codelotse.NotFound {
		t.Errorf("deleted file at the head: %v, want not found", err)
	}

	if err := env.App.InTenant(ctx, a, func(tx *postgres.Tx) error {
		n, err := tx.DropPullIndexes(ctx, repo.ID, []int{3})
		if n != 1 {
			t.Errorf("dropped %d overlays, want 1", n)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := env.Admin.Pool.QueryRow(ctx, `SELECT count(*) FROM pull_code_chunks WHERE tenant_id = $1`, a).Scan(&left); err != nil || left != 0 {
		t.Errorf("chunks left after dropping: %d, %v", left, err)
	}
	if err := env.Admin.Pool.QueryRow(ctx, `SELECT count(*) FROM pull_code_chunks WHERE tenant_id = $1`, b).Scan(&left); err != nil || left == 0 {
		t.Errorf("another tenant's overlay went too: %d, %v", left, err)
	}
}

// TestSearchPullCandidatesPlans asserts, on seeded data and as the runtime
// role, which indexes both phases of a search at a pull request's head read:
// phase 1 a pull request's own files and their chunks (the overlay's trigram
// index only for a pull request of 2,000 files or more), phase 2 what
// search_code_candidates reads for one repository; never every chunk.
func TestSearchPullCandidatesPlans(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	ctx := context.Background()
	tenant, repos := seedCode(t, env, "pulls", 3, 400)
	const base = "c0ffee"
	overlay := func(n, files int) []codeindex.File {
		var out []codeindex.File
		for i := 0; i < files; i++ {
			body := fmt.Sprintf("package p\n\nfunc Changed%d() {}\n", i)
			if i%7 == 0 {
				body += "\nfunc x() { needle_rare() }\n"
			}
			out = append(out, file(fmt.Sprintf("src/pr%d/f%04d.go", n, i), body))
		}
		return out
	}
	// Pull request 7 changes 10 files, 8 changes 2,000, and 20 others
	// of another repository 50 each: the tenant's overlay is theirs too.
	if err := env.App.InTenant(ctx, tenant, func(tx *postgres.Tx) error {
		for n, files := range map[int]int{7: 10, 8: 2000} {
			if _, err := tx.ReplacePullIndex(ctx, repos[1], n, fmt.Sprintf("%040d", n), base, overlay(n, files), nil); err != nil {
				return err
			}
		}
		for n := 100; n < 120; n++ {
			if _, err := tx.ReplacePullIndex(ctx, repos[2], n, fmt.Sprintf("%040d", n), base, overlay(n, 50), nil); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := pgtest.Settle(ctx, env.Admin.Pool, "code_chunks", "code_files", "pull_code_chunks", "pull_code_files"); err != nil {
		t.Fatal(err)
	}
	regexPlan, err := codeindex.NewPlan(`(needle_rare|nomatchatall)\(`, true, false)
	if err != nil || regexPlan.Regex == "" {
		t.Fatalf("regex plan: %+v, %v", regexPlan, err)
	}
	conn, plans := explainConn(t, env)
	q := `SELECT chunk_id FROM search_pull_code_candidates($1, $2, $3, $4, '', 0, 32, $5)`
	rare := []string{`%needle\_rare%`}
	const (
		// a lookup of one file's chunks (the tenant's overlay read by the
		// same index would have the tenant alone in its condition)
		ownChunks = "AND (file_id = pf.id))"
		overTrgm  = "Bitmap Index Scan on pull_code_chunks_tenant_content_trgm"
		// search_code_candidates' window: the base index is its walk
		baseWalk = "WITH w AS MATERIALIZED"
	)
	for _, tc := range []struct {
		name     string
		number   int
		phase    int
		patterns []string
		regex    any
		want     []string
		never    []string
	}{
		{"literal, a small overlay: its own files", 7, 1, rare, nil,
			[]string{ownChunks}, []string{"Seq Scan on pull_code_", overTrgm}},
		{"regex alone, a small overlay: its own files", 7, 1, regexPlan.LikePatterns(), regexPlan.Regex,
			[]string{ownChunks}, []string{"Seq Scan on pull_code_", overTrgm}},
		{"literal, an overlay of 2,000 files: the trigram index", 8, 1, rare, nil,
			[]string{overTrgm}, []string{"Seq Scan on pull_code_chunks"}},
		{"regex alone, an overlay of 2,000 files: the trigram index", 8, 1, regexPlan.LikePatterns(), regexPlan.Regex,
			[]string{overTrgm, "(content ~ '"}, []string{"Seq Scan on pull_code_chunks"}},
		{"literal, the base index: search_code_candidates", 7, 2, rare, nil,
			[]string{baseWalk, "code_chunks_tenant_repo_id"}, []string{"Seq Scan on code_chunks"}},
		{"regex alone, the base index: search_code_candidates", 7, 2, regexPlan.LikePatterns(), regexPlan.Regex,
			[]string{baseWalk, "code_chunks_tenant_repo_id"}, []string{"Seq Scan on code_chunks"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			patterns := tc.patterns
			if patterns == nil {
				patterns = []string{}
			}
			all := planOf(t, conn, plans, tenant, q, repos[1], tc.number, tc.phase, patterns, tc.regex)
			if os.Getenv("SHOW_PLANS") != "" {
				t.Log(all)
			}
			assertPlan(t, all, tc.want, tc.never)
		})
	}
	// Both overlay branches answer alike: every changed chunk with the
	// literal (one in seven files), in chunk order, page by page.
	for n, want := range map[int]int{7: 2, 8: 286} {
		got, last := 0, int64(0)
		for {
			cands, err := env.App.Tenant(tenant).SearchPullCandidates(ctx, repos[1], n, 1, rare, "", "", last, 32)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cands {
				if c.ChunkID <= last || c.Shadowed || !strings.HasPrefix(c.Path, fmt.Sprintf("src/pr%d/", n)) {
					t.Errorf("pull request %d: candidate %d %s (shadowed %v) after %d", n, c.ChunkID, c.Path, c.Shadowed, last)
				}
				last = c.ChunkID
				got++
			}
			if len(cands) < 32 {
				break
			}
		}
		if got != want {
			t.Errorf("pull request %d: %d changed chunks with the literal, want %d", n, got, want)
		}
	}
}
