package ingest_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/codeindex"
	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/ingest"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/secretscan"
)

// requested is the tenant's rescan request count (0: none), read as the
// administrator.
func (d *db) requested(tid string) int64 {
	d.t.Helper()
	got := d.env.AdminStrings(d.t, `SELECT requested::text FROM secret_rescans WHERE tenant_id = $1`, tid)
	if len(got) == 0 {
		return 0
	}
	n, err := strconv.ParseInt(got[0], 10, 64)
	if err != nil {
		d.t.Fatal(err)
	}
	return n
}

// chunkLayout is every chunk of the tenant's code index and overlays as
// "table id file start-end", in id order.
func (d *db) chunkLayout(tid string) []string {
	d.t.Helper()
	return d.env.AdminStrings(d.t, `SELECT 'code ' || id || ' ' || file_id || ' ' || start_line || '-' || end_line FROM code_chunks WHERE tenant_id = $1
		UNION ALL SELECT 'pull ' || id || ' ' || file_id || ' ' || start_line || '-' || end_line FROM pull_code_chunks WHERE tenant_id = $1
		ORDER BY 1`, tid)
}

// placeholder is what the value of doc's secret becomes once learned.
func placeholder(t *testing.T, doc, value string) string {
	t.Helper()
	for _, f := range secretscan.New().Find(doc) {
		if f.Fingerprint == sha256.Sum256([]byte(value)) {
			return "[REDACTED:" + f.RuleID + "]"
		}
	}
	t.Fatalf("premise: %q is not a secret of its document", value)
	return ""
}

// storeBare stores value alone (no pattern finds it there) through every
// ingestion path of the tenant: file contents and paths of the code index
// and of a pull request's overlay, a review import, a rule and a
// repository's URL.
func storeBare(t *testing.T, d *db, in *ingest.Ingester, tid string, repo int64, value, redacted string) {
	t.Helper()
	ctx := context.Background()
	text := bare(t, in, "probe "+value, value)
	var lines []string
	for i := 0; i < 130; i++ {
		lines = append(lines, "line "+strconv.Itoa(i))
	}
	lines[3], lines[77] = text, "x := \""+value+"\""
	d.in(tid, func(tx *postgres.Tx) error {
		_, err := in.Index(ctx, tx, repo, codeindex.Snapshot{Commit: commit, Files: []codeindex.File{
			{Path: "notes.txt", Lines: lines},
			{Path: "dir/" + value + "/x.txt", Lines: []string{"x"}},
			// The path the value's will become: the rescan gives it a
			// suffix instead of a second file of the same path.
			{Path: "dir/" + redacted + "/x.txt", Lines: []string{"y"}},
		}}, actor)
		return err
	})
	d.in(tid, func(tx *postgres.Tx) error {
		_, err := in.IndexPull(ctx, tx, repo, 7, commit, commit, []codeindex.File{
			{Path: "pr/" + value + ".txt", Lines: lines}}, nil)
		return err
	})
	d.in(tid, func(tx *postgres.Tx) error {
		_, err := in.Import(ctx, tx, codelotse.ReviewImport{Repository: "acme/api", Source: "review-json",
			PullRequest: &codelotse.PullRequest{Number: 3, Title: text},
			Review:      codelotse.Review{ExternalID: "r1", Status: "completed", Summary: text},
			Findings: []codelotse.Finding{{RuleKey: "r", Severity: codelotse.SeverityLow, Status: "open", Title: text, Body: text,
				Suggestion: "use " + value, Fingerprint: "fp"}}}, actor)
		return err
	})
	d.in(tid, func(tx *postgres.Tx) error {
		_, err := in.UpsertRule(ctx, tx, &repo, codelotse.Rule{Key: "rule", Title: "T", Severity: codelotse.SeverityLow,
			Instructions: text, PathGlobs: []string{"**/" + value + "/*"}})
		return err
	})
	d.in(tid, func(tx *postgres.Tx) error {
		_, err := in.AddRepository(ctx, tx, postgres.NewRepository{FullName: "acme/web", URL: "https://example.test/" + value})
		return err
	})
}

// TestRedactKnownRewritesTextStoredBefore: text stored before a secret was
// learned keeps its bare value (the premise), a rescan is requested by the
// transaction that learns it, and RedactKnown rewrites every such text of
// the tenant in place: chunks keep their ids and lines, no other tenant's
// row changes, and the request is cleared.
func TestRedactKnownRewritesTextStoredBefore(t *testing.T) {
	ctx := context.Background()
	d := newDB(t)
	in := ingest.New(secretscan.New())
	manifest, value := k8sSecret("rescan")
	mine, myRepo := d.tenant()
	other, otherRepo := d.tenant()
	redacted := placeholder(t, manifest, value)
	storeBare(t, d, in, mine, myRepo, value, redacted)
	storeBare(t, d, in, other, otherRepo, value, redacted)
	if d.requested(mine) != 0 {
		t.Fatalf("a rescan was requested before any secret was learned")
	}
	st, err := in.RedactKnown(ctx, d.env.App, mine, false, actor)
	if err != nil || st.Requested || len(st.Scanned) != 0 {
		t.Fatalf("RedactKnown without a request = %+v, %v; want nothing read", st, err)
	}

	// A push adds the manifest: the secret is learned, and the text stored
	// before still holds it (what the rescan is for).
	d.in(mine, func(tx *postgres.Tx) error {
		_, err := in.IndexChanges(ctx, tx, myRepo, "c2", []codeindex.File{
			{Path: "deploy/secret.yaml", Lines: codeindex.SplitLines(manifest)}}, nil, actor)
		return err
	})
	if n := d.requested(mine); n != 1 {
		t.Fatalf("requested %d after the secret was learned, want 1", n)
	}
	if !strings.Contains(d.stored(mine), value) {
		t.Fatalf("premise: the text stored before the secret was learned does not hold it")
	}
	// Learning it again requests nothing more; another secret does.
	d.in(mine, func(tx *postgres.Tx) error {
		_, err := in.IndexChanges(ctx, tx, myRepo, "c3", []codeindex.File{
			{Path: "deploy/copy.yaml", Lines: codeindex.SplitLines(manifest)}}, nil, actor)
		return err
	})
	if n := d.requested(mine); n != 1 {
		t.Fatalf("requested %d after a known secret was learned again, want 1", n)
	}
	manifest2, value2 := k8sSecret("rescan-2")
	d.in(mine, func(tx *postgres.Tx) error {
		_, err := in.Import(ctx, tx, codelotse.ReviewImport{Repository: "acme/api", Source: "review-json",
			Review: codelotse.Review{ExternalID: "r2", Status: "completed", Summary: manifest2}}, actor)
		return err
	})
	if n := d.requested(mine); n != 2 {
		t.Fatalf("requested %d after a second secret was learned, want 2", n)
	}
	// A rescan that began before the second secret does not clear the
	// request.
	if cleared, err := d.env.App.FinishSecretRescan(ctx, mine, 1, actor, nil); err != nil || cleared {
		t.Fatalf("FinishSecretRescan at a stale count = %v, %v; want the request left standing", cleared, err)
	}

	layout := d.chunkLayout(mine)
	otherBefore := d.stored(other)
	st, err = in.RedactKnown(ctx, d.env.App, mine, false, actor)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Requested || st.Pending {
		t.Errorf("RedactKnown = %+v; want a requested rescan that cleared its request", st)
	}
	// Every table that holds agent-readable text held the value.
	for _, table := range textTables {
		if st.Changed[table] == 0 {
			t.Errorf("no row of %s rewritten (scanned %d); changed %v", table, st.Scanned[table], st.Changed)
		}
	}
	if s := d.stored(mine); strings.Contains(s, value) {
		t.Errorf("the value is still stored after the rescan:\n%s", s)
	}
	if !strings.Contains(d.stored(mine), "probe "+redacted) {
		t.Errorf("the probes were not kept around the placeholder")
	}
	if got := d.chunkLayout(mine); strings.Join(got, "\n") != strings.Join(layout, "\n") {
		t.Errorf("chunks moved or changed lines:\nbefore %v\nafter  %v", layout, got)
	}
	paths := d.env.AdminStrings(t, `SELECT path FROM code_files WHERE tenant_id = $1 AND path LIKE 'dir/%' ORDER BY path`, mine)
	if want := []string{"dir/" + redacted + "/x.txt", "dir/" + redacted + "/x.txt~2"}; strings.Join(paths, ",") != strings.Join(want, ",") {
		t.Errorf("paths %v, want %v (the rewritten path suffixed, not a duplicate)", paths, want)
	}
	// The file reads back whole, its line with the value redacted.
	f, err := d.env.App.Tenant(mine).ReadIndexedFile(ctx, myRepo, "notes.txt", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Lines) != 130 || f.Lines[77] != `x := "`+redacted+`"` || f.Lines[78] != "line 78" {
		t.Errorf("notes.txt reads back as %d lines, line 78 %q", len(f.Lines), f.Lines[77])
	}
	if n := d.requested(mine); n != 0 {
		t.Errorf("the request stands after the rescan (%d)", n)
	}
	// The audit log: the stale finish above, then the rescan with what it
	// rewrote.
	events := d.env.AdminStrings(t, `SELECT actor || ' ' || (details->>'pending') || ' ' || coalesce(details->'rewritten'->>'code_chunks', '-')
		FROM audit_events WHERE tenant_id = $1 AND action = 'secrets.rescanned' ORDER BY id`, mine)
	if want := []string{"test true -", fmt.Sprintf("test false %d", st.Changed["code_chunks"])}; strings.Join(events, ",") != strings.Join(want, ",") {
		t.Errorf("audit events %v, want %v", events, want)
	}
	if d.stored(other) != otherBefore || !strings.Contains(otherBefore, value) {
		t.Errorf("the other tenant's rows changed, or never held the value (it never learned the secret)")
	}
	if strings.Contains(d.stored(mine), value2) {
		t.Errorf("the second secret is stored")
	}

	// Nothing requested: nothing read. Forced: everything read, nothing
	// left to rewrite.
	if st, err := in.RedactKnown(ctx, d.env.App, mine, false, actor); err != nil || st.Requested || len(st.Scanned) != 0 {
		t.Errorf("second RedactKnown = %+v, %v; want nothing read", st, err)
	}
	st, err = in.RedactKnown(ctx, d.env.App, mine, true, actor)
	if err != nil {
		t.Fatal(err)
	}
	for table, n := range st.Changed {
		if n != 0 {
			t.Errorf("forced RedactKnown rewrote %d rows of %s again", n, table)
		}
	}
	if st.Scanned["code_chunks"] == 0 || st.Scanned["findings"] == 0 {
		t.Errorf("forced RedactKnown scanned %v", st.Scanned)
	}
}

// TestRedactKnownWaitsForIngestionInFlight: an ingestion that read the
// known secrets before a secret was learned, and stores the value after
// that, is waited for: no rescan can start while it is open, and one that
// starts after it has committed reads and redacts what it stored. Without
// the wait, a rescan could read past the row before it was committed and
// clear the request, leaving the value stored.
func TestRedactKnownWaitsForIngestionInFlight(t *testing.T) {
	ctx := context.Background()
	d := newDB(t)
	in := ingest.New(secretscan.New())
	manifest, value := k8sSecret("in-flight")
	tid, repo := d.tenant()

	// The ingestion in flight: it has read the known secrets (none yet)
	// and stores the value once released, as it would have redacted it.
	read, release, stored := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		stored <- d.env.App.InTenant(ctx, tid, func(tx *postgres.Tx) error {
			if _, err := tx.SecretFingerprints(ctx); err != nil {
				return err
			}
			close(read)
			<-release
			_, err := tx.UpsertRule(ctx, &repo, codelotse.Rule{Key: "late", Title: "T", Severity: codelotse.SeverityLow,
				Instructions: "use " + value})
			return err
		})
	}()
	// However the test ends, the ingestion ends first (the database is
	// dropped after the test).
	var once sync.Once
	finish := func() { once.Do(func() { close(release) }) }
	var ended bool
	defer func() {
		finish()
		if !ended {
			<-stored
		}
	}()
	<-read
	// Meanwhile another ingestion learns the secret and commits.
	d.in(tid, func(tx *postgres.Tx) error {
		_, err := in.Import(ctx, tx, codelotse.ReviewImport{Repository: "acme/api", Source: "review-json",
			Review: codelotse.Review{ExternalID: "r1", Status: "completed", Summary: manifest}}, actor)
		return err
	})

	// A rescan that cannot wait long enough is told so, and leaves the
	// request standing.
	if _, err := d.env.App.StartSecretRescan(ctx, tid, 50*time.Millisecond); !errors.Is(err, postgres.ErrSecretsBusy) {
		t.Fatalf("StartSecretRescan while an ingestion holds the secrets = %v, want ErrSecretsBusy", err)
	}
	if d.requested(tid) != 1 {
		t.Fatalf("the request did not stand")
	}

	// A rescan started now tries the lock until the ingestion has
	// committed, then reads what it stored.
	done := make(chan error, 1)
	go func() {
		_, err := in.RedactKnown(ctx, d.env.App, tid, false, actor)
		done <- err
	}()
	finish()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ended = true
	if err := <-stored; err != nil {
		t.Fatal(err)
	}
	if s := d.stored(tid); strings.Contains(s, value) {
		t.Errorf("the value the ingestion in flight stored is still stored:\n%s", s)
	}
	if d.requested(tid) != 0 {
		t.Errorf("the request stands after the rescan")
	}
}

// TestRescanWritesOnlyRowsItRead: a rewrite does not overwrite a row that
// changed after the rescan read it (ingestion wrote it since, with the
// secrets it knew).
func TestRescanWritesOnlyRowsItRead(t *testing.T) {
	ctx := context.Background()
	d := newDB(t)
	tid, repo := d.tenant()
	d.in(tid, func(tx *postgres.Tx) error {
		_, err := tx.UpsertRule(ctx, &repo, codelotse.Rule{Key: "k", Title: "new", Severity: codelotse.SeverityLow, Instructions: "new"})
		if err != nil {
			return err
		}
		_, err = tx.ReplaceIndex(ctx, repo, codeindex.Snapshot{Commit: commit, Files: []codeindex.File{{Path: "a.txt", Lines: []string{"new"}}}}, actor)
		return err
	})
	var rules postgres.StoredTable
	for _, t := range postgres.StoredTables {
		if t.Name == "rules" {
			rules = t
		}
	}
	d.in(tid, func(tx *postgres.Tx) error {
		rows, err := tx.StoredRows(ctx, rules, 0, 10)
		if err != nil || len(rows) != 1 {
			t.Fatalf("rules %v, %v", rows, err)
		}
		stale := postgres.StoredRow{ID: rows[0].ID, Texts: append([]string(nil), rows[0].Texts...), Globs: rows[0].Globs}
		stale.Texts[1] = "old"
		clean := postgres.StoredRow{ID: rows[0].ID, Texts: append([]string(nil), rows[0].Texts...), Globs: rows[0].Globs}
		clean.Texts[1] = "clean"
		if written, err := tx.UpdateStoredRow(ctx, rules, stale, clean); err != nil || written {
			t.Errorf("UpdateStoredRow over a changed row = %v, %v; want it left", written, err)
		}
		if written, err := tx.UpdateStoredRow(ctx, rules, rows[0], clean); err != nil || !written {
			t.Errorf("UpdateStoredRow over the row read = %v, %v; want it written", written, err)
		}
		chunks, err := tx.StoredTexts(ctx, postgres.StoredColumns[1], 0, 10)
		if err != nil || len(chunks) != 1 || postgres.StoredColumns[1].Table != "code_chunks" {
			t.Fatalf("chunks %v, %v", chunks, err)
		}
		if written, err := tx.RewriteStoredText(ctx, postgres.StoredColumns[1], chunks[0].ID, "old", "clean"); err != nil || written {
			t.Errorf("RewriteStoredText over a changed chunk = %v, %v; want it left", written, err)
		}
		return nil
	})
	if got := d.env.AdminStrings(t, `SELECT instructions FROM rules WHERE tenant_id = $1`, tid); len(got) != 1 || got[0] != "clean" {
		t.Errorf("rule instructions %v, want [clean]", got)
	}
	if got := d.env.AdminStrings(t, `SELECT content FROM code_chunks WHERE tenant_id = $1`, tid); len(got) != 1 || got[0] != "new" {
		t.Errorf("chunk %v, want [new]", got)
	}
}
