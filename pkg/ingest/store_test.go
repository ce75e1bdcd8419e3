package ingest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/codelotse/codelotse/pkg/codeindex"
	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/ingest"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
	"github.com/codelotse/codelotse/pkg/secretscan"
)

// corpus is the shared planted-secret corpus plus the plantedCases.
func corpus(t *testing.T) []ingest.Planted {
	var data []byte
	var err error
	for _, p := range []string{"../../../shared/testdata/secrets.json", "../../testdata/secrets.json"} {
		if data, err = os.ReadFile(p); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("no planted-secret corpus: %v", err)
	}
	var entries []struct{ Name, Secret, Line string }
	if err := json.Unmarshal(data, &entries); err != nil {
		t.Fatal(err)
	}
	var out []ingest.Planted
	for _, e := range entries {
		out = append(out, ingest.Planted{Name: e.Name, Secret: e.Secret, Doc: e.Line})
	}
	return append(out, ingest.PlantedCases(t)...)
}

// storedTables are the tables an agent's answers come from.
var storedTables = []string{"code_chunks", "code_files", "findings", "reviews", "rules", "repositories", "pull_requests"}

// assertNoneStored reads every row of the stored tables as the
// administrator (no row-level security in the way) and fails on any piece
// of any planted secret.
func assertNoneStored(t *testing.T, env *pgtest.Env, cases []ingest.Planted) {
	t.Helper()
	for _, table := range storedTables {
		texts := env.AdminStrings(t, fmt.Sprintf("SELECT t::text FROM %s t", table))
		all := strings.Join(texts, "\n")
		// Row text escapes newlines and quotes; compare against both.
		unescaped := strings.NewReplacer(`\n`, "\n", `\"`, `"`, `""`, `"`).Replace(all)
		for _, p := range cases {
			if g := ingest.Leaks(p.Secret, all); g != "" {
				t.Errorf("%s: %q of secret %s is stored", table, g, p.Name)
			} else if g := ingest.Leaks(p.Secret, unescaped); g != "" {
				t.Errorf("%s: %q of secret %s is stored (escaped)", table, g, p.Name)
			}
		}
	}
}

func seedTenant(t *testing.T, env *pgtest.Env) string {
	tn, err := env.Admin.CreateTenant(context.Background(), postgres.NewTenant{Slug: "acme", Name: "Acme"}, "test")
	if err != nil {
		t.Fatal(err)
	}
	return tn.ID
}

// TestNothingStoredRaw stores every planted secret through every ingestion
// path (index contents and paths, a review import, a rule) and reads the
// tables back as the administrator.
func TestNothingStoredRaw(t *testing.T) {
	ctx := context.Background()
	env := pgtest.New(t)
	tid := seedTenant(t, env)
	in := ingest.New(secretscan.New())
	cases := corpus(t)
	actor := postgres.Actor{Label: "test"}
	var snap codeindex.Snapshot
	snap.Commit = strings.Repeat("a", 40)
	var findings []codelotse.Finding
	for i, p := range cases {
		// The secret in the middle of a file long enough to span chunks.
		var b strings.Builder
		for k := 0; k < 45; k++ {
			fmt.Fprintf(&b, "line %d before\n", k)
		}
		b.WriteString(p.Doc + "\nafter\n")
		snap.Files = append(snap.Files, codeindex.File{Path: "secrets/" + p.Name + ".txt", Lines: codeindex.SplitLines(b.String())})
		// A bare value (no keyword around it) in a path: only single-line
		// secrets, as a path holds no newline.
		bare := p.Secret
		if strings.Contains(bare, "\n") {
			bare = "none"
		} else {
			snap.Files = append(snap.Files, codeindex.File{Path: "leak/" + bare + "/config.txt", Lines: []string{"PATHPLANT"}})
		}
		findings = append(findings, codelotse.Finding{RuleKey: "planted/" + p.Name, Severity: codelotse.SeverityHigh, Status: "open",
			Path: "secrets/" + bare, Title: "Credential " + p.Name, Body: "Found:\n" + p.Doc + "\nrotate it", Suggestion: "Remove " + p.Secret,
			Fingerprint: fmt.Sprintf("fp-%d", i)})
	}
	err := env.App.InTenant(ctx, tid, func(tx *postgres.Tx) error {
		r, err := in.AddRepository(ctx, tx, postgres.NewRepository{FullName: "acme/api", URL: "https://example.test/acme/api?token=" + cases[1].Secret})
		if err != nil {
			return err
		}
		if _, err := in.Index(ctx, tx, r.ID, snap, actor); err != nil {
			return err
		}
		for _, p := range cases {
			if _, err := in.UpsertRule(ctx, tx, &r.ID, codelotse.Rule{Key: "planted-" + p.Name, Title: "Planted " + p.Name,
				Severity: codelotse.SeverityLow, Instructions: "Never write:\n" + p.Doc, PathGlobs: []string{"**/" + strings.ReplaceAll(p.Secret, "\n", " ")}}); err != nil {
				return err
			}
		}
		_, err = in.Import(ctx, tx, codelotse.ReviewImport{Repository: "acme/api", Source: "review-json",
			PullRequest: &codelotse.PullRequest{Number: 1, Title: "Rotate " + cases[1].Secret, Author: "dev " + cases[0].Secret},
			Review:      codelotse.Review{ExternalID: "r1", Status: "completed", Summary: "Summary:\n" + cases[2].Doc, Author: "bot"},
			Findings:    findings}, actor)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	assertNoneStored(t, env, cases)

	// Line numbers stay true: the line after each planted document is
	// where it was.
	for _, p := range cases[:3] {
		f, err := env.App.Tenant(tid).ReadIndexedFile(ctx, 1, "secrets/"+p.Name+".txt", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := 45 + strings.Count(p.Doc, "\n") + 2
		if f.LineCount != want || f.Lines[want-1] != "after" {
			t.Errorf("%s: %d lines, last %q; want %d ending in \"after\"", p.Name, f.LineCount, f.Lines[len(f.Lines)-1], want)
		}
	}
}

// TestRedactRewritesRawRows plants raw rows directly (as rows stored before
// this version would be), runs the maintenance redaction, and checks that
// nothing raw is left, that the file's chunks are rebuilt consistently, and
// that a second run changes nothing.
func TestRedactRewritesRawRows(t *testing.T) {
	ctx := context.Background()
	env := pgtest.New(t)
	tid := seedTenant(t, env)
	cases := corpus(t)
	admin := env.Admin.Pool
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := admin.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`INSERT INTO repositories (tenant_id, full_name, url) VALUES ($1, 'acme/api', $2)`, tid, "https://x.test/?t="+cases[1].Secret)
	var doc strings.Builder
	for k := 0; k < 38; k++ {
		fmt.Fprintf(&doc, "line %d\n", k)
	}
	for _, p := range cases {
		doc.WriteString(p.Doc + "\n")
	}
	lines := codeindex.SplitLines(doc.String())
	exec(`INSERT INTO code_files (tenant_id, repository_id, commit_sha, path, size, line_count)
		SELECT $1, id, 'c0ffee', $2, $3, $4 FROM repositories WHERE tenant_id = $1`, tid, "leak/"+cases[1].Secret+"/all.txt", doc.Len(), len(lines))
	for _, c := range codeindex.Chunks(lines) {
		exec(`INSERT INTO code_chunks (tenant_id, repository_id, file_id, start_line, end_line, content)
			SELECT $1, repository_id, id, $2, $3, $4 FROM code_files WHERE tenant_id = $1`, tid, c.StartLine, c.EndLine, c.Content)
	}
	exec(`INSERT INTO pull_requests (tenant_id, repository_id, number, title, author) SELECT $1, id, 1, $2, $3 FROM repositories WHERE tenant_id = $1`,
		tid, "Fix "+cases[0].Secret, "dev")
	exec(`INSERT INTO reviews (tenant_id, repository_id, external_id, summary, status) SELECT $1, id, 'r1', $2, $3 FROM repositories WHERE tenant_id = $1`,
		tid, doc.String(), "done "+strings.ReplaceAll(cases[2].Secret, "\n", " "))
	for i, p := range cases {
		exec(`INSERT INTO findings (tenant_id, repository_id, review_id, severity, path, title, body, suggestion, fingerprint)
			SELECT $1, repository_id, id, 'high', $2, $3, $4, $5, $6 FROM reviews WHERE tenant_id = $1`,
			tid, "p/"+strings.ReplaceAll(p.Secret, "\n", " "), "t "+p.Name, "Body:\n"+p.Doc, "Remove "+p.Secret, fmt.Sprintf("fp%d", i))
		exec(`INSERT INTO rules (tenant_id, key, title, severity, instructions, path_globs) VALUES ($1, $2, 'Planted', 'low', $3, $4)`,
			tid, fmt.Sprintf("planted-%d", i), "Never:\n"+p.Doc, []string{"** " + strings.ReplaceAll(p.Secret, "\n", " ")})
	}

	in := ingest.New(secretscan.New())
	st, err := in.Redact(ctx, env.Admin, tid)
	if err != nil {
		t.Fatal(err)
	}
	if st.Changed["code_files"] != 1 || st.Changed["findings"] != len(cases) || st.Changed["rules"] != len(cases) {
		t.Errorf("changed %v, want the file, every finding and every rule", st.Changed)
	}
	assertNoneStored(t, env, cases)

	// The rebuilt chunks give back the whole file with its line count.
	var path string
	if err := admin.QueryRow(ctx, `SELECT path FROM code_files WHERE tenant_id = $1`, tid).Scan(&path); err != nil {
		t.Fatal(err)
	}
	f, err := env.App.Tenant(tid).ReadIndexedFile(ctx, 1, path, 0, 0)
	if err == nil && len(f.Lines) != len(lines) {
		t.Errorf("%d lines read back, want %d", len(f.Lines), len(lines))
	}
	var chunks int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM code_chunks WHERE tenant_id = $1`, tid).Scan(&chunks); err != nil {
		t.Fatal(err)
	}
	if chunks != len(codeindex.Chunks(lines)) {
		t.Errorf("%d chunks after redaction, want %d", chunks, len(codeindex.Chunks(lines)))
	}

	again, err := in.Redact(ctx, env.Admin, tid)
	if err != nil {
		t.Fatal(err)
	}
	for table, n := range again.Changed {
		if n != 0 {
			t.Errorf("second run changed %d rows of %s", n, table)
		}
	}
}
