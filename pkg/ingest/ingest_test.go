package ingest_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/codelotse/codelotse/pkg/codeindex"
	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/ingest"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
	"github.com/codelotse/codelotse/pkg/secretscan"
)

// derived returns n bytes derived from seed: fixed secrets for these tests
// that appear nowhere in the source (which gitleaks scans) and are the same
// on every run.
func derived(seed string, n int) []byte {
	var out []byte
	for i := 0; len(out) < n; i++ {
		h := sha256.Sum256([]byte(fmt.Sprintf("%s/%d", seed, i)))
		out = append(out, h[:]...)
	}
	return out[:n]
}

// derivedFrom maps derived bytes onto the characters of set.
func derivedFrom(seed, set string, n int) string {
	b := derived(seed, n)
	for i := range b {
		b[i] = set[int(b[i])%len(set)]
	}
	return string(b)
}

const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// k8sSecret is a Kubernetes Secret manifest: its value is found only with
// the manifest around it (the kubernetes-secret-yaml rule), so the value
// alone elsewhere — a path, a sentence — is redacted only once learned.
func k8sSecret(seed string) (manifest, value string) {
	value = base64.StdEncoding.EncodeToString(derived("k8s/"+seed, 24))
	return "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ntype: Opaque\ndata:\n  password: " + value + "\n", value
}

// privateKey is a multi-line secret: a PEM block of n body lines.
func privateKey(seed string, n int) (block string, body []string) {
	for i := 0; i < n; i++ {
		body = append(body, base64.StdEncoding.EncodeToString(derived(fmt.Sprintf("pem/%s/%d", seed, i), 48)))
	}
	return "-----BEGIN RSA PRIVATE KEY-----\n" + strings.Join(body, "\n") + "\n-----END RSA PRIVATE KEY-----", body
}

// ghp is a GitHub token, found by its shape wherever it is.
func ghp(seed string) string { return "ghp_" + derivedFrom("ghp/"+seed, alnum, 36) }

// bare checks the premise of the learning tests: the scanner alone does
// not find value in s, so only a learned fingerprint can redact it there.
func bare(t *testing.T, in *ingest.Ingester, s, value string) string {
	t.Helper()
	if out := in.Document(s, nil); out != s || !strings.Contains(s, value) {
		t.Fatalf("premise: the scanner alone redacts %q to %q", s, out)
	}
	return s
}

// db is a migrated database; each test takes fresh tenants from it.
type db struct {
	t   *testing.T
	env *pgtest.Env
	n   int
}

func newDB(t *testing.T) *db { return &db{t: t, env: pgtest.New(t)} }

// tenant creates a tenant with repository acme/api and returns both ids.
func (d *db) tenant() (string, int64) {
	d.t.Helper()
	ctx := context.Background()
	d.n++
	tn, err := d.env.Admin.CreateTenant(ctx, postgres.NewTenant{Slug: fmt.Sprintf("t%d", d.n), Name: "T"}, "test")
	if err != nil {
		d.t.Fatal(err)
	}
	var repo int64
	d.in(tn.ID, func(tx *postgres.Tx) error {
		r, err := tx.AddRepository(ctx, postgres.NewRepository{FullName: "acme/api"})
		repo = r.ID
		return err
	})
	return tn.ID, repo
}

// in runs fn in a tenant transaction as the runtime role, as the worker
// and the importers run ingestion.
func (d *db) in(tid string, fn func(tx *postgres.Tx) error) {
	d.t.Helper()
	if err := d.env.App.InTenant(context.Background(), tid, fn); err != nil {
		d.t.Fatal(err)
	}
}

// textTables are every table that holds text an agent can read.
var textTables = []string{"code_files", "code_chunks", "pull_code_files", "pull_code_chunks",
	"findings", "reviews", "pull_requests", "rules", "repositories"}

// stored is everything the tenant has stored in textTables, read as the
// administrator (no row-level security in the way), one row a line.
func (d *db) stored(tid string) string {
	d.t.Helper()
	var all []string
	for _, table := range textTables {
		all = append(all, d.env.AdminStrings(d.t, fmt.Sprintf("SELECT t::text FROM %s t WHERE tenant_id = $1", table), tid)...)
	}
	return strings.Join(all, "\n")
}

var actor = postgres.Actor{Label: "test"}

const commit = "0123456789abcdef0123456789abcdef01234567"

// TestEntryPointsRedactAndLearn: each preparing entry point redacts a
// secret that needs its surrounding lines to be found, and learns it: once
// the Learned is recorded, a later document of the same tenant that holds
// the value alone is stored redacted.
func TestEntryPointsRedactAndLearn(t *testing.T) {
	ctx := context.Background()
	d := newDB(t)
	in := ingest.New(secretscan.New())
	cases := []struct {
		name string
		// prepare passes doc through the entry point and returns every
		// string of the result.
		prepare func(doc string, l *ingest.Learned) []string
	}{
		{"Document", func(doc string, l *ingest.Learned) []string { return []string{in.Document(doc, l)} }},
		{"File", func(doc string, l *ingest.Learned) []string {
			f := in.File(codeindex.File{Path: "deploy/secret.yaml", Lines: codeindex.SplitLines(doc)}, l)
			return append([]string{f.Path}, f.Lines...)
		}},
		{"Snapshot", func(doc string, l *ingest.Learned) []string {
			snap := in.Snapshot(codeindex.Snapshot{Commit: commit, Files: []codeindex.File{
				{Path: "README.md", Lines: []string{"hello"}}, {Path: "deploy/secret.yaml", Lines: codeindex.SplitLines(doc)}}}, l)
			var out []string
			for _, f := range snap.Files {
				out = append(append(out, f.Path), f.Lines...)
			}
			return out
		}},
		{"ReviewImport", func(doc string, l *ingest.Learned) []string {
			imp := in.ReviewImport(codelotse.ReviewImport{Repository: "acme/api", Source: "review-json",
				PullRequest: &codelotse.PullRequest{Number: 1, Title: "Add the manifest"},
				Review:      codelotse.Review{ExternalID: "r1", Summary: "ok"},
				Findings:    []codelotse.Finding{{RuleKey: "k8s", Title: "Secret in manifest", Body: "Found:\n" + doc}}}, l)
			return []string{imp.Repository, imp.Source, imp.PullRequest.Title, imp.Review.Summary, imp.Findings[0].Title, imp.Findings[0].Body}
		}},
		{"Rule", func(doc string, l *ingest.Learned) []string {
			r := in.Rule(codelotse.Rule{Key: "no-manifests", Title: "No manifests", Instructions: "Never commit:\n" + doc, PathGlobs: []string{"deploy/**"}}, l)
			return append([]string{r.Title, r.Instructions}, r.PathGlobs...)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			manifest, value := k8sSecret(tc.name)
			later := bare(t, in, "the database password is "+value+" until rotated", value)
			var l ingest.Learned
			out := strings.Join(tc.prepare(manifest, &l), "\n")
			if g := ingest.Leaks(value, out); g != "" {
				t.Errorf("%q of the secret survives: %q", g, out)
			}
			if !strings.Contains(out, "[REDACTED:") {
				t.Errorf("no placeholder in %q", out)
			}

			tid, repo := d.tenant()
			d.in(tid, func(tx *postgres.Tx) error {
				if err := l.Record(ctx, tx); err != nil {
					return err
				}
				_, err := in.Index(ctx, tx, repo, codeindex.Snapshot{Commit: commit, Files: []codeindex.File{{Path: "NOTES.md", Lines: []string{later}}}}, actor)
				return err
			})
			if s := d.stored(tid); strings.Contains(s, value) || !strings.Contains(s, "the database password is [REDACTED:") {
				t.Errorf("the learned value is not redacted in a later document: %q", s)
			}
		})
	}
}

// TestLearnedSecretsStayInTheirTenant: a secret learned while storing one
// tenant's documents is redacted in every later document that tenant
// stores, through every storing entry point, and in none of another
// tenant's (which never saw it: its fingerprint is not theirs to apply).
func TestLearnedSecretsStayInTheirTenant(t *testing.T) {
	ctx := context.Background()
	d := newDB(t)
	in := ingest.New(secretscan.New())
	manifest, value := k8sSecret("tenant")
	mine, myRepo := d.tenant()
	other, otherRepo := d.tenant()
	d.in(mine, func(tx *postgres.Tx) error {
		_, err := in.Index(ctx, tx, myRepo, codeindex.Snapshot{Commit: commit, Files: []codeindex.File{
			{Path: "deploy/secret.yaml", Lines: codeindex.SplitLines(manifest)}}}, actor)
		return err
	})
	if s := d.stored(mine); strings.Contains(s, value) {
		t.Fatalf("the manifest's value is stored: %q", s)
	}

	// Each probe stores the value alone after a marker of its own, so
	// that the marker shows the probe stored its row and what follows the
	// marker shows whether the value was redacted.
	probes := []struct {
		name  string
		store func(tx *postgres.Tx, repo int64, text string) error
	}{
		{"Index (content)", func(tx *postgres.Tx, repo int64, text string) error {
			_, err := in.Index(ctx, tx, repo, codeindex.Snapshot{Commit: commit, Files: []codeindex.File{
				{Path: "deploy/secret.yaml", Lines: []string{"x"}}, {Path: "notes.txt", Lines: []string{"a", text, "b"}}}}, actor)
			return err
		}},
		{"Index (path)", func(tx *postgres.Tx, repo int64, text string) error {
			_, err := in.Index(ctx, tx, repo, codeindex.Snapshot{Commit: commit, Files: []codeindex.File{
				{Path: "dir/" + strings.ReplaceAll(text, " ", "_") + "/x.txt", Lines: []string{"x"}}}}, actor)
			return err
		}},
		{"IndexChanges", func(tx *postgres.Tx, repo int64, text string) error {
			_, err := in.IndexChanges(ctx, tx, repo, commit, []codeindex.File{{Path: "changed.txt", Lines: []string{text}}}, nil, actor)
			return err
		}},
		{"IndexPull", func(tx *postgres.Tx, repo int64, text string) error {
			_, err := in.IndexPull(ctx, tx, repo, 7, commit, commit, []codeindex.File{{Path: "pr.txt", Lines: []string{text}}}, nil)
			return err
		}},
		{"Import", func(tx *postgres.Tx, repo int64, text string) error {
			_, err := in.Import(ctx, tx, codelotse.ReviewImport{Repository: "acme/api", Source: "review-json",
				PullRequest: &codelotse.PullRequest{Number: 3, Title: text},
				Review:      codelotse.Review{ExternalID: "r-" + text[:6], Status: "completed", Summary: text},
				Findings:    []codelotse.Finding{{RuleKey: "r", Severity: codelotse.SeverityLow, Status: "open", Title: text, Body: text, Fingerprint: "fp"}}}, actor)
			return err
		}},
		{"UpsertRule", func(tx *postgres.Tx, repo int64, text string) error {
			_, err := in.UpsertRule(ctx, tx, &repo, codelotse.Rule{Key: "rule", Title: "T", Severity: codelotse.SeverityLow,
				Instructions: text, PathGlobs: []string{"**/" + strings.ReplaceAll(text, " ", "_")}})
			return err
		}},
		{"AddRepository", func(tx *postgres.Tx, repo int64, text string) error {
			_, err := in.AddRepository(ctx, tx, postgres.NewRepository{FullName: "acme/web", URL: "https://example.test/" + strings.ReplaceAll(text, " ", "/")})
			return err
		}},
		{"UpsertGitHubRepository", func(tx *postgres.Tx, repo int64, text string) error {
			_, err := in.UpsertGitHubRepository(ctx, tx, 4242, "acme/gh", "main", "https://example.test/"+strings.ReplaceAll(text, " ", "/"), true, true)
			return err
		}},
	}
	for i, p := range probes {
		t.Run(p.name, func(t *testing.T) {
			marker := fmt.Sprintf("probe%d", i)
			text := bare(t, in, marker+" "+value, value)
			// Paths and URLs hold the text with "/" or "_" for the space.
			seen := func(s string) (markerStored, valueStored bool) {
				for _, sep := range []string{" ", "_", "/"} {
					if strings.Contains(s, marker+sep+value) {
						valueStored = true
					}
					if strings.Contains(s, marker+sep) {
						markerStored = true
					}
				}
				return
			}
			d.in(mine, func(tx *postgres.Tx) error { return p.store(tx, myRepo, text) })
			if m, v := seen(d.stored(mine)); !m || v {
				t.Errorf("own tenant: probe stored %v, value stored %v; want the probe stored with the value redacted", m, v)
			}
			d.in(other, func(tx *postgres.Tx) error { return p.store(tx, otherRepo, text) })
			if m, v := seen(d.stored(other)); !m || !v {
				t.Errorf("other tenant: probe stored %v, value stored %v; want it stored as written (the other tenant never learned it)", m, v)
			}
		})
	}
}

// TestLineCountsStayTrue: a prepared file has exactly its original lines,
// each line without a secret unchanged at its index, however the secret
// lies (one line, a block spanning lines, at the start or the end, CRLF
// line ends), and the stored file reads back with the same lines.
func TestLineCountsStayTrue(t *testing.T) {
	ctx := context.Background()
	d := newDB(t)
	in := ingest.New(secretscan.New())
	key, body := privateKey("lines", 6)
	token := ghp("lines")
	manifest, value := k8sSecret("lines")
	cases := []struct {
		name   string
		lines  []string
		secret []string // pieces that must not survive
	}{
		{"one-line token", []string{"a", "GITHUB_TOKEN=" + token, "b"}, []string{token}},
		{"key block in the middle", append(append([]string{"x", "y"}, strings.Split(key, "\n")...), "after"), body},
		{"key block at the start", append(strings.Split(key, "\n"), "after"), body},
		{"key block at the end, no final newline", append([]string{"before"}, strings.Split(key, "\n")...), body},
		{"manifest, CRLF line ends", strings.Split(strings.ReplaceAll(manifest, "\n", "\r\n"), "\n"), []string{value}},
		{"two secrets on one line", []string{"t1=" + token + " GH_TOKEN=" + ghp("other"), "z"}, []string{token, ghp("other")}},
	}
	tid, repo := d.tenant()
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var l ingest.Learned
			f := in.File(codeindex.File{Path: fmt.Sprintf("f%d.txt", i), Lines: tc.lines}, &l)
			if len(f.Lines) != len(tc.lines) {
				t.Fatalf("%d lines prepared from %d", len(f.Lines), len(tc.lines))
			}
			joined := strings.Join(f.Lines, "\n")
			for _, s := range tc.secret {
				if g := ingest.Leaks(s, joined); g != "" {
					t.Errorf("%q survives", g)
				}
			}
			changed := 0
			for k, line := range tc.lines {
				if f.Lines[k] != line {
					changed++
					if !strings.Contains(f.Lines[k], "[REDACTED:") {
						t.Errorf("line %d changed without a placeholder: %q → %q", k+1, line, f.Lines[k])
					}
				}
			}
			if changed == 0 {
				t.Error("nothing redacted")
			}
			// Lines that hold no secret stay where they were.
			for k, line := range tc.lines {
				if line == "a" || line == "b" || line == "x" || line == "y" || line == "z" || line == "after" || line == "before" {
					if f.Lines[k] != line {
						t.Errorf("line %d %q became %q", k+1, line, f.Lines[k])
					}
				}
			}

			path := fmt.Sprintf("f%d.txt", i)
			d.in(tid, func(tx *postgres.Tx) error {
				_, err := in.Index(ctx, tx, repo, codeindex.Snapshot{Commit: commit, Files: []codeindex.File{{Path: path, Lines: tc.lines}}}, actor)
				return err
			})
			got, err := d.env.App.Tenant(tid).ReadIndexedFile(ctx, repo, path, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got.LineCount != len(tc.lines) || strings.Join(got.Lines, "\n") != joined {
				t.Errorf("stored %d lines %q, want %d lines %q", got.LineCount, got.Lines, len(tc.lines), f.Lines)
			}
		})
	}
}

// TestSnapshotKeepsFilesWhosePathsDifferOnlyInASecret: paths that redact
// to the same text stay separate files, numbered in order.
func TestSnapshotKeepsFilesWhosePathsDifferOnlyInASecret(t *testing.T) {
	in := ingest.New(secretscan.New())
	var files []codeindex.File
	for i := 0; i < 3; i++ {
		files = append(files, codeindex.File{Path: "tokens/" + ghp(fmt.Sprint(i)) + "/a.txt", Lines: []string{fmt.Sprint(i)}})
	}
	files = append(files, codeindex.File{Path: "plain.txt", Lines: []string{"p"}})
	snap := in.Snapshot(codeindex.Snapshot{Commit: commit, Files: files}, nil)
	if len(snap.Files) != len(files) || snap.Commit != commit {
		t.Fatalf("%d files at %s, want %d at %s", len(snap.Files), snap.Commit, len(files), commit)
	}
	base := snap.Files[0].Path
	want := []string{base, base + "~2", base + "~3", "plain.txt"}
	for i, f := range snap.Files {
		if f.Path != want[i] || (i < 3 && f.Lines[0] != fmt.Sprint(i)) {
			t.Errorf("file %d: %q %q, want %q", i, f.Path, f.Lines, want[i])
		}
		if i < 3 && (strings.Contains(f.Path, "ghp_") || !strings.Contains(f.Path, "[REDACTED:")) {
			t.Errorf("file %d: path %q not redacted", i, f.Path)
		}
	}
}

// TestUnavailableScannerFailsClosed: when the scanner has no rules (as
// secretscan.New leaves it if its configuration cannot be built; a nil
// scanner behaves the same), every document is replaced by placeholders
// with its line structure kept, nothing is learned, files stay distinct,
// and identifiers that cannot hold a placeholder are refused.
func TestUnavailableScannerFailsClosed(t *testing.T) {
	ctx := context.Background()
	d := newDB(t)
	in := ingest.New(nil)
	const placeholder = "[REDACTED:" + secretscan.Unavailable + "]"
	onlyPlaceholders := func(t *testing.T, what string, ss ...string) {
		t.Helper()
		for _, s := range ss {
			for _, line := range strings.Split(s, "\n") {
				if line != placeholder {
					t.Errorf("%s: %q stored through an unavailable scanner", what, line)
				}
			}
		}
	}

	var l ingest.Learned
	doc := "first line\nsecond line\nthird"
	out := in.Document(doc, &l)
	if strings.Count(out, "\n") != 2 {
		t.Errorf("Document: %q has not the 3 lines of %q", out, doc)
	}
	onlyPlaceholders(t, "Document", out)
	if in.Document("", &l) != "" {
		t.Error("the empty document is not empty")
	}

	snap := in.Snapshot(codeindex.Snapshot{Commit: commit, Files: []codeindex.File{
		{Path: "a.go", Lines: []string{"package a", "", "func A() {}"}}, {Path: "b.go", Lines: []string{"package b"}}}}, &l)
	if len(snap.Files) != 2 || snap.Files[0].Path == snap.Files[1].Path || len(snap.Files[0].Lines) != 3 {
		t.Fatalf("snapshot %+v: want two distinct files, the first of 3 lines", snap.Files)
	}
	for _, f := range snap.Files {
		onlyPlaceholders(t, "Snapshot", strings.TrimSuffix(f.Path, "~2"))
		for _, line := range f.Lines {
			if line != "" {
				onlyPlaceholders(t, "Snapshot", line)
			}
		}
	}

	imp := in.ReviewImport(codelotse.ReviewImport{Repository: "acme/api", Source: "review-json",
		PullRequest: &codelotse.PullRequest{Number: 1, Title: "t", Author: "a"},
		Review:      codelotse.Review{ExternalID: "r", Summary: "s"},
		Findings:    []codelotse.Finding{{Title: "t", Body: "b\nc", Path: "p"}}}, &l)
	onlyPlaceholders(t, "ReviewImport", imp.Repository, imp.Source, imp.PullRequest.Title, imp.PullRequest.Author,
		imp.Review.ExternalID, imp.Review.Summary, imp.Findings[0].Title, imp.Findings[0].Body, imp.Findings[0].Path)
	r := in.Rule(codelotse.Rule{Key: "k", Title: "t", Instructions: "i", PathGlobs: []string{"*.go"}}, &l)
	onlyPlaceholders(t, "Rule", r.Title, r.Instructions, r.PathGlobs[0])

	tid, repo := d.tenant()
	d.in(tid, func(tx *postgres.Tx) error {
		if err := l.Record(ctx, tx); err != nil {
			return err
		}
		_, err := in.Index(ctx, tx, repo, codeindex.Snapshot{Commit: commit, Files: []codeindex.File{{Path: "main.go", Lines: []string{"package main", "func main() {}"}}}}, actor)
		return err
	})
	var fps int
	if err := d.env.Admin.Pool.QueryRow(ctx, `SELECT count(*) FROM secret_fingerprints WHERE tenant_id = $1`, tid).Scan(&fps); err != nil {
		t.Fatal(err)
	}
	if fps != 0 {
		t.Errorf("%d fingerprints learned through an unavailable scanner", fps)
	}
	if s := d.stored(tid); strings.Contains(s, "package main") || strings.Contains(s, "main.go") {
		t.Errorf("code stored through an unavailable scanner: %q", s)
	}
	var lines int
	if err := d.env.Admin.Pool.QueryRow(ctx, `SELECT line_count FROM code_files WHERE tenant_id = $1`, tid).Scan(&lines); err != nil || lines != 2 {
		t.Errorf("stored file has %d lines (%v), want 2", lines, err)
	}

	// A rule key and a repository name are identifiers: no placeholder
	// can stand in for them, so they are refused, not stored.
	err := d.env.App.InTenant(ctx, tid, func(tx *postgres.Tx) error {
		_, err := in.UpsertRule(ctx, tx, nil, codelotse.Rule{Key: "k", Title: "t", Severity: codelotse.SeverityLow})
		return err
	})
	if codelotse.ErrorCode(err) != codelotse.Invalid {
		t.Errorf("UpsertRule: %v, want an invalid-input error", err)
	}
	err = d.env.App.InTenant(ctx, tid, func(tx *postgres.Tx) error {
		_, err := in.AddRepository(ctx, tx, postgres.NewRepository{FullName: "acme/web"})
		return err
	})
	if codelotse.ErrorCode(err) != codelotse.Invalid {
		t.Errorf("AddRepository: %v, want an invalid-input error", err)
	}
}

// notPrepared are the string fields of a review import that ingestion
// stores as they come, each for a reason; every other string field must be
// prepared (TestReviewImportPreparesEveryTextField).
var notPrepared = map[string]string{
	"PullRequest.State":         "an enumeration (CHECK open, closed, merged)",
	"PullRequest.HeadSHA":       "a commit id, compared with GitHub's (importers check it is hex)",
	"Review.CommitSHA":          "a commit id (importers check it is hex)",
	"Finding.Severity":          "an enumeration (codelotse.ParseSeverity)",
	"Finding.Status":            "an enumeration (CHECK open, resolved, dismissed)",
	"Finding.Fingerprint":       "the finding's identity within its review, never shown to agents",
	"Finding.CommitSHA":         "a commit id (the review's)",
	"Finding.RepoFullName":      "filled when reading, not stored",
	"Finding.RepoIndexedCommit": "filled when reading, not stored",
}

// TestReviewImportPreparesEveryTextField sets every string field of a
// review import (found by reflection, so a field added later is covered) to
// a document with a secret and checks that each comes back without it,
// except the fields listed in notPrepared.
func TestReviewImportPreparesEveryTextField(t *testing.T) {
	in := ingest.New(secretscan.New())
	token := ghp("fields")
	doc := "value GITHUB_TOKEN=" + token
	imp := codelotse.ReviewImport{PullRequest: &codelotse.PullRequest{}, Findings: []codelotse.Finding{{}, {}}}
	n := 0
	eachString(reflect.ValueOf(&imp).Elem(), func(name string, v reflect.Value) {
		v.SetString(doc)
		n++
	})
	if n < 20 {
		t.Fatalf("only %d string fields found", n)
	}
	out := in.ReviewImport(imp, nil)
	eachString(reflect.ValueOf(&out).Elem(), func(name string, v reflect.Value) {
		_, skip := notPrepared[name]
		switch got := v.String(); {
		case skip && got != doc:
			t.Errorf("%s changed to %q; is it still %s?", name, got, notPrepared[name])
		case !skip && strings.Contains(got, token):
			t.Errorf("%s keeps the secret", name)
		}
	})
}

// eachString calls fn for every string field under v (through pointers,
// slices and structs), named <struct type>.<field>.
func eachString(v reflect.Value, fn func(string, reflect.Value)) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			eachString(v.Elem(), fn)
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			eachString(v.Index(i), fn)
		}
	case reflect.Struct:
		if v.Type().PkgPath() == "time" {
			return
		}
		for i := 0; i < v.NumField(); i++ {
			if f := v.Type().Field(i); f.Type.Kind() == reflect.String {
				fn(v.Type().Name()+"."+f.Name, v.Field(i))
			} else {
				eachString(v.Field(i), fn)
			}
		}
	}
}

// TestFileNamesInOtherEncodings: git allows any bytes in a file name, and a
// name in Latin-1 made the whole repository's indexing fail (PostgreSQL
// refuses invalid UTF-8). Such a name is stored with U+FFFD for its invalid
// bytes, two that become the same name both stay, and so does the rest of
// the repository; a push that deletes such a file deletes it.
func TestFileNamesInOtherEncodings(t *testing.T) {
	d := newDB(t)
	tid, repo := d.tenant()
	in := ingest.New(secretscan.New())
	ctx := context.Background()
	files := []codeindex.File{
		{Path: "docs/caf\xe9.txt", Lines: []string{"one"}},
		{Path: "docs/caf\xe8.txt", Lines: []string{"two"}},
		{Path: "main.go", Lines: []string{"package main"}},
	}
	d.in(tid, func(tx *postgres.Tx) error {
		_, err := in.Index(ctx, tx, repo, codeindex.Snapshot{Commit: commit, Files: files}, actor)
		return err
	})
	got := d.env.AdminStrings(t, `SELECT path FROM code_files WHERE tenant_id = $1 ORDER BY path`, tid)
	want := []string{"docs/caf\uFFFD.txt", "docs/caf\uFFFD.txt~2", "main.go"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("stored paths %q, want %q", got, want)
	}
	d.in(tid, func(tx *postgres.Tx) error {
		_, err := in.IndexChanges(ctx, tx, repo, strings.Repeat("1", 40), nil, []string{"docs/caf\xe9.txt"}, actor)
		return err
	})
	if got := d.env.AdminStrings(t, `SELECT path FROM code_files WHERE tenant_id = $1 ORDER BY path`, tid); len(got) != 2 {
		t.Errorf("after deleting the Latin-1 name: %q", got)
	}

	// A file really named with U+FFFD keeps its name: the Latin-1 one,
	// which sorts first, is the one suffixed.
	snap := in.Snapshot(codeindex.Snapshot{Commit: commit, Files: []codeindex.File{
		{Path: "caf\xe9.go", Lines: []string{"latin-1"}},
		{Path: "caf\uFFFD.go", Lines: []string{"real"}},
	}}, nil)
	if snap.Files[0].Path != "caf\uFFFD.go~2" || snap.Files[1].Path != "caf\uFFFD.go" || snap.Files[1].Lines[0] != "real" {
		t.Errorf("names: %q %q", snap.Files[0].Path, snap.Files[1].Path)
	}
}
