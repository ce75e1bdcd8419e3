package jobs_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/codelotse/codelotse/pkg/codeindex"
	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/githubapp"
	"github.com/codelotse/codelotse/pkg/githubapp/githubtest"
	"github.com/codelotse/codelotse/pkg/ingest"
	"github.com/codelotse/codelotse/pkg/jobs"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
	"github.com/codelotse/codelotse/pkg/secretscan"
)

// githubFixture is a tenant bound to installation 3001 of organization
// acme-org on a fake GitHub, and its githubDeps.
func githubFixture(t *testing.T) (*pgtest.Env, *githubtest.Server, *jobs.Deps, string) {
	t.Helper()
	env := pgtest.New(t)
	gh := githubtest.New(t)
	gh.AddOrg(2001, "acme-org")
	gh.AddInstallation(3001, 2001)
	inst := int64(3001)
	tn, err := env.Admin.CreateTenant(context.Background(), postgres.NewTenant{Slug: "acme", Name: "Acme", GitHubInstallationID: &inst}, "test")
	if err != nil {
		t.Fatal(err)
	}
	return env, gh, githubDeps(t, env, gh, nil), tn.ID
}

// githubDeps are Deps on the fake GitHub, through transport when it is not
// nil, whose jobs' follow-up jobs are dropped instead of enqueued.
func githubDeps(t *testing.T, env *pgtest.Env, gh *githubtest.Server, transport http.RoundTripper) *jobs.Deps {
	t.Helper()
	cfg := githubapp.AppConfig{AppID: gh.AppID, PrivateKeyPEM: gh.AppPrivateKeyPEM(), APIURL: gh.APIURL}
	if transport != nil {
		cfg.HTTPClient = &http.Client{Transport: transport}
	}
	app, err := githubapp.NewApp(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &jobs.Deps{DB: env.App, GitHub: app, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Ingest: ingest.New(secretscan.New()), ClosedWindow: 30 * 24 * time.Hour, Enqueue: func(context.Context, river.JobArgs) error { return nil }}
}

// TestRepositoryRenamedToAFreedName: GitHub lets a repository take the name
// of one deleted, or two swap names; the stored names then collided on the
// unique name, which failed every installation sync, membership refresh
// and sign-in for good. The installation sync removes the gone repository
// first and moves a row whose name another repository now has aside; a
// membership refresh keeps the stored names.
func TestRepositoryRenamedToAFreedName(t *testing.T) {
	env, gh, d, tid := githubFixture(t)
	ctx := context.Background()
	names := func() map[string]int64 {
		t.Helper()
		out := map[string]int64{}
		for _, row := range env.AdminStrings(t, fmt.Sprintf(`SELECT full_name || ' ' || github_id FROM repositories WHERE tenant_id = '%s'`, tid)) {
			var name string
			var id int64
			if _, err := fmt.Sscan(row, &name, &id); err != nil {
				t.Fatal(err)
			}
			out[name] = id
		}
		return out
	}
	want := func(step string, w map[string]int64) {
		t.Helper()
		if got := names(); !maps.Equal(got, w) {
			t.Fatalf("%s: repositories %v, want %v", step, got, w)
		}
	}
	gh.AddRepo(3001, githubtest.Repo{ID: 4001, Name: "api"})
	gh.AddRepo(3001, githubtest.Repo{ID: 4002, Name: "web"})
	gh.AddRepo(3001, githubtest.Repo{ID: 4003, Name: "web-next"})
	if err := d.SyncInstallation(ctx, tid); err != nil {
		t.Fatal(err)
	}
	want("first sync", map[string]int64{"acme-org/api": 4001, "acme-org/web": 4002, "acme-org/web-next": 4003})

	gh.DeleteRepo(4002)
	gh.RenameRepo(4003, "web")
	if err := d.SyncInstallation(ctx, tid); err != nil {
		t.Fatalf("sync after web-next took the deleted web's name: %v", err)
	}
	want("web-next renamed to the deleted web's name", map[string]int64{"acme-org/api": 4001, "acme-org/web": 4003})

	// A swap seen first by a membership refresh, whose read may be
	// minutes old: it keeps the stored names; the installation sync
	// settles them.
	gh.RenameRepo(4001, "web")
	gh.RenameRepo(4003, "api")
	if err := d.RefreshMemberships(ctx, tid); err != nil {
		t.Fatalf("membership refresh after a swap: %v", err)
	}
	want("the swap's refresh", map[string]int64{"acme-org/api": 4001, "acme-org/web": 4003})
	if err := d.SyncInstallation(ctx, tid); err != nil {
		t.Fatal(err)
	}
	want("the swap after an installation sync", map[string]int64{"acme-org/api": 4003, "acme-org/web": 4001})
}

// addAPIRepository adds acme-org/api (GitHub id 4001) to the installation
// and syncs the installation.
func addAPIRepository(t *testing.T, gh *githubtest.Server, d *jobs.Deps, tid string) {
	t.Helper()
	gh.AddRepo(3001, githubtest.Repo{ID: 4001, Name: "api"})
	if err := d.SyncInstallation(context.Background(), tid); err != nil {
		t.Fatal(err)
	}
}

// syncRepository runs a repository sync of fullName directly.
func syncRepository(t *testing.T, env *pgtest.Env, d *jobs.Deps, tid, fullName string) int64 {
	t.Helper()
	var id int64
	if err := env.App.InTenant(context.Background(), tid, func(tx *postgres.Tx) error {
		r, err := tx.RepositoryByName(context.Background(), fullName)
		id = r.ID
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := d.SyncRepository(context.Background(), jobs.SyncRepositoryArgs{TenantID: tid, RepositoryID: id}); err != nil {
		t.Fatalf("sync %s: %v", fullName, err)
	}
	return id
}

// TestThreadRepliesAreNotReviews: GitHub files each reply to a review
// thread as a review of its own (COMMENTED, no body, the reply its only
// comment). It is not imported, so the pull request's latest review stays
// the one whose threads are open, and one stored by an earlier version is
// deleted. A commented review with a body, or with a thread of its own,
// still counts.
func TestThreadRepliesAreNotReviews(t *testing.T) {
	env, gh, d, tid := githubFixture(t)
	ctx := context.Background()
	addAPIRepository(t, gh, d, tid)
	now := time.Now().UTC().Truncate(time.Second)
	gh.AddPullRequest(4001, githubtest.PullRequest{Number: 7, Title: "Add the store", Author: "octocat", CreatedAt: now, UpdatedAt: now})
	gh.AddReview(4001, 7, githubtest.Review{ID: 501, Author: "coderabbitai[bot]", AuthorType: "Bot", State: "CHANGES_REQUESTED", Body: "Two problems.", SubmittedAt: now})
	gh.AddReviewComment(4001, 7, githubtest.ReviewComment{ID: 601, ReviewID: 501, Author: "coderabbitai[bot]", Path: "a.go", Line: 3, Body: "Nil dereference.", CreatedAt: now})
	gh.AddReviewComment(4001, 7, githubtest.ReviewComment{ID: 603, ReviewID: 501, Author: "coderabbitai[bot]", Path: "b.go", Line: 9, Body: "Unchecked error.", CreatedAt: now})
	// An earlier version stored a reply's review; the sync deletes it.
	repoID := syncRepository(t, env, d, tid, "acme-org/api")
	stale := codelotse.ReviewImport{Repository: "acme-org/api", PullRequest: &codelotse.PullRequest{Number: 7, Title: "Add the store", State: "open"},
		Source: "github", Review: codelotse.Review{ExternalID: "github:review:500", Status: "commented", Author: "octocat", CreatedAt: now.Add(30 * time.Second)}}
	if err := env.App.InTenant(ctx, tid, func(tx *postgres.Tx) error {
		_, err := d.Ingest.Import(ctx, tx, stale, postgres.Actor{Label: "test"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	gh.AddReview(4001, 7, githubtest.Review{ID: 500, Author: "octocat", State: "COMMENTED", SubmittedAt: now.Add(30 * time.Second)})
	gh.AddReviewComment(4001, 7, githubtest.ReviewComment{ID: 600, ReviewID: 500, InReplyTo: 603, Author: "octocat", Path: "b.go", Line: 9, Body: "Looking.", CreatedAt: now.Add(30 * time.Second)})
	// The author answers on the first thread: GitHub makes review 502.
	later := now.Add(time.Minute)
	gh.AddReview(4001, 7, githubtest.Review{ID: 502, Author: "octocat", State: "COMMENTED", SubmittedAt: later})
	gh.AddReviewComment(4001, 7, githubtest.ReviewComment{ID: 602, ReviewID: 502, InReplyTo: 601, Author: "octocat", Path: "a.go", Line: 3, Body: "Will fix.", CreatedAt: later})
	syncRepository(t, env, d, tid, "acme-org/api")

	db := env.App.Tenant(tid)
	latest, err := db.GetReview(ctx, repoID, 7, nil)
	if err != nil {
		t.Fatal(err)
	}
	if latest.Review.ExternalID != "github:review:501" || len(latest.Findings) != 2 {
		t.Errorf("latest review: %s with %d findings, want github:review:501 with 2", latest.Review.ExternalID, len(latest.Findings))
	}
	if _, open, err := db.FindingsOfPR(ctx, repoID, 7, nil); err != nil || len(open) != 2 {
		t.Errorf("open findings of the latest review: %d (%v), want 2", len(open), err)
	}
	if got := env.AdminStrings(t, `SELECT external_id FROM reviews WHERE pull_request_id IS NOT NULL ORDER BY external_id`); !slices.Equal(got, []string{"github:review:501"}) {
		t.Errorf("stored reviews %v, want only github:review:501", got)
	}

	// A commented review with words of its own is a review.
	gh.AddReview(4001, 7, githubtest.Review{ID: 503, Author: "hubot", State: "COMMENTED", Body: "Looks fine apart from the threads.", SubmittedAt: later.Add(time.Minute)})
	syncRepository(t, env, d, tid, "acme-org/api")
	if latest, err := db.GetReview(ctx, repoID, 7, nil); err != nil || latest.Review.ExternalID != "github:review:503" {
		t.Errorf("latest after a commented review with a body: %s (%v), want github:review:503", latest.Review.ExternalID, err)
	}
}

// holdFirst is a transport that holds the first request whose path
// contains path until release is closed.
type holdFirst struct {
	base             http.RoundTripper
	path             string
	once             sync.Once
	reached, release chan struct{}
}

func newHoldFirst(gh *githubtest.Server, path string) *holdFirst {
	return &holdFirst{base: gh.Client().Transport, path: path, reached: make(chan struct{}), release: make(chan struct{})}
}

func (h *holdFirst) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.Contains(r.URL.Path, h.path) {
		h.once.Do(func() {
			close(h.reached)
			<-h.release
		})
	}
	return h.base.RoundTrip(r)
}

// TestRemovalDuringARefreshIsNotUndone: a member removed on GitHub while a
// membership refresh is between reading GitHub and writing is expired by
// the webhook at once; the refresh, whose reading predates the removal,
// leaves them expired instead of making them fresh again until the next
// refresh. The refresh the webhook queued then settles them.
func TestRemovalDuringARefreshIsNotUndone(t *testing.T) {
	env, gh, _, tid := githubFixture(t)
	ctx := context.Background()
	gh.AddRepo(3001, githubtest.Repo{ID: 4001, Name: "api", Private: true})
	gh.AddUser(githubtest.User{ID: 1001, Login: "octocat"})
	gh.AddUser(githubtest.User{ID: 1002, Login: "hubot"})
	gh.SetMembership(1001, 2001, "active", "member")
	gh.SetMembership(1002, 2001, "active", "member")
	gh.SetBasePermission(2001, "read")
	users := map[int64]string{}
	if err := env.App.InTenant(ctx, tid, func(tx *postgres.Tx) error {
		for id, login := range map[int64]string{1001: "octocat", 1002: "hubot"} {
			u, err := tx.UpsertGitHubUser(ctx, id, login, "", login+"@acme.test")
			if err != nil {
				return err
			}
			users[id] = u.ID
			if err := tx.RefreshMembership(ctx, u.ID, "member", "github", time.Now().Add(-2*time.Hour)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	hold := newHoldFirst(gh, "/collaborators")
	d := githubDeps(t, env, gh, hold)
	fresh := func(id int64) string {
		t.Helper()
		return strings.Join(env.AdminStrings(t, `SELECT (m.refreshed_at > now() - interval '1 hour')::text || ' repos=' ||
			(SELECT count(*) FROM repo_memberships r WHERE r.tenant_id = m.tenant_id AND r.user_id = m.user_id)
			FROM tenant_memberships m WHERE m.user_id = '`+users[id]+`'`), ",")
	}

	running := make(chan error, 1)
	go func() { running <- d.RefreshMemberships(ctx, tid) }()
	<-hold.reached // it has read the members, octocat among them
	gh.SetMembership(1001, 2001, "", "")
	if err := env.App.InTenant(ctx, tid, func(tx *postgres.Tx) error {
		_, err := tx.ExpireGitHubMemberships(ctx, []int64{1001}, postgres.Actor{Label: "github-webhook"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	close(hold.release)
	if err := <-running; err != nil {
		t.Fatal(err)
	}
	if got := fresh(1001); got != "false repos=0" {
		t.Errorf("octocat, removed while the refresh ran: %s, want false repos=0", got)
	}
	if got := fresh(1002); got != "true repos=1" {
		t.Errorf("hubot, refreshed by it: %s, want true repos=1", got)
	}
	// The refresh the webhook queued reads GitHub after the removal.
	if err := d.RefreshMemberships(ctx, tid); err != nil {
		t.Fatal(err)
	}
	if got := fresh(1001); got != "false repos=0" {
		t.Errorf("octocat after the next refresh: %s, want false repos=0", got)
	}
}

// TestPullSyncReadsAClosedPullRequest: a sync skips a closed pull request
// whose updated_at has not moved since it was read, and resolving a review
// thread does not move it; a sync asked for that pull request by a webhook
// (SyncRepositoryArgs.Pull) reads it anyway.
func TestPullSyncReadsAClosedPullRequest(t *testing.T) {
	env, gh, d, tid := githubFixture(t)
	ctx := context.Background()
	addAPIRepository(t, gh, d, tid)
	now := time.Now().UTC().Truncate(time.Second)
	gh.AddPullRequest(4001, githubtest.PullRequest{Number: 7, Title: "Add the store", Author: "octocat", State: "closed", Merged: true, CreatedAt: now, UpdatedAt: now})
	gh.AddReview(4001, 7, githubtest.Review{ID: 501, Author: "hubot", State: "COMMENTED", Body: "One problem.", SubmittedAt: now})
	gh.AddReviewComment(4001, 7, githubtest.ReviewComment{ID: 601, ReviewID: 501, Author: "hubot", Path: "a.go", Line: 3, Body: "Nil dereference.", CreatedAt: now})
	repoID := syncRepository(t, env, d, tid, "acme-org/api")
	status := func() []string {
		return env.AdminStrings(t, `SELECT status FROM findings WHERE rule_key = 'github/review-comment'`)
	}
	if got := status(); !slices.Equal(got, []string{"open"}) {
		t.Fatalf("after the first sync: %v", got)
	}
	gh.ResolveThread(4001, 7, 601, true)
	syncRepository(t, env, d, tid, "acme-org/api")
	if got := status(); !slices.Equal(got, []string{"open"}) {
		t.Fatalf("a plain sync read the unchanged closed pull request again (%v): this test no longer shows the skip", got)
	}
	if err := d.SyncRepository(ctx, jobs.SyncRepositoryArgs{TenantID: tid, RepositoryID: repoID, Pull: 7}); err != nil {
		t.Fatal(err)
	}
	if got := status(); !slices.Equal(got, []string{"resolved"}) {
		t.Errorf("after a sync asked for pull request 7: %v, want resolved", got)
	}
	// Closed before the closed listing's window: the sync reads it alone.
	gh.ResolveThread(4001, 7, 601, false)
	d.ClosedWindow = -time.Hour // the closed listing stops at once
	if err := d.SyncRepository(ctx, jobs.SyncRepositoryArgs{TenantID: tid, RepositoryID: repoID, Pull: 7}); err != nil {
		t.Fatal(err)
	}
	if got := status(); !slices.Equal(got, []string{"open"}) {
		t.Errorf("after a sync asked for pull request 7, closed before the window: %v, want open", got)
	}
}

// TestCodeScanningSwitchedOff: when GitHub stops answering for a
// repository's code scanning (switched off, or its analyses deleted), the
// alerts stored before go with their review instead of staying open
// findings; switched on again, they come back.
func TestCodeScanningSwitchedOff(t *testing.T) {
	env, gh, d, tid := githubFixture(t)
	addAPIRepository(t, gh, d, tid)
	gh.AddCodeScanningAlert(4001, githubtest.CodeScanningAlert{Number: 1, RuleID: "go/sql-injection", RuleName: "SQL injection",
		RuleSeverity: "error", SecuritySeverityLevel: "high", Path: "main.go", StartLine: 3, EndLine: 3, Message: "A query built from input."})
	alerts := func() []string {
		return env.AdminStrings(t, `SELECT f.status FROM findings f JOIN reviews r ON r.tenant_id = f.tenant_id AND r.id = f.review_id
			WHERE r.external_id = 'github:code-scanning'`)
	}
	for _, step := range []struct {
		name    string
		setting githubtest.CodeScanning
		want    []string
	}{
		{"enabled", githubtest.CodeScanningEnabled, []string{"open"}},
		{"switched off", githubtest.CodeScanningDisabled, nil},
		{"enabled again", githubtest.CodeScanningEnabled, []string{"open"}},
		{"its analyses deleted", githubtest.CodeScanningNoAnalysis, nil},
	} {
		gh.SetCodeScanning(4001, step.setting)
		syncRepository(t, env, d, tid, "acme-org/api")
		if got := alerts(); !slices.Equal(got, step.want) {
			t.Errorf("%s: alerts %v, want %v", step.name, got, step.want)
		}
	}
}

// TestStaleRefreshKeepsTheStoredNames: a membership refresh that read the
// repositories before one was renamed and another took its name must not
// write its stale names: the renamed row would hold the live repository's
// name, and its next sync would read that repository's pull requests (by
// name) into it. The refresh keeps the names the installation sync stored.
func TestStaleRefreshKeepsTheStoredNames(t *testing.T) {
	env, gh, d, tid := githubFixture(t)
	ctx := context.Background()
	addAPIRepository(t, gh, d, tid)
	gh.AddUser(githubtest.User{ID: 1001, Login: "octocat"})
	gh.SetMembership(1001, 2001, "active", "member")
	gh.SetBasePermission(2001, "read")
	hold := newHoldFirst(gh, "/collaborators")
	slow := githubDeps(t, env, gh, hold)
	running := make(chan error, 1)
	go func() { running <- slow.RefreshMemberships(ctx, tid) }()
	<-hold.reached // it has read the repositories: 4001 is api
	gh.RenameRepo(4001, "api-old")
	gh.AddRepo(3001, githubtest.Repo{ID: 4002, Name: "api", Private: true})
	if err := d.SyncInstallation(ctx, tid); err != nil { // the repository webhook's
		t.Fatal(err)
	}
	close(hold.release)
	if err := <-running; err != nil {
		t.Fatalf("the stale refresh: %v", err)
	}
	got := env.AdminStrings(t, `SELECT full_name || '=' || github_id FROM repositories ORDER BY github_id`)
	if !slices.Equal(got, []string{"acme-org/api-old=4001", "acme-org/api=4002"}) {
		t.Errorf("after the stale refresh: %v, want acme-org/api-old=4001 and acme-org/api=4002", got)
	}
}

// closeOnPage is a transport that closes a pull request on the fake GitHub
// just before the open listing's second page is read: the listing's later
// pull requests move up a place, and the first of the second page is on
// neither page.
type closeOnPage struct {
	gh     *githubtest.Server
	number int
	once   sync.Once
}

func (c *closeOnPage) RoundTrip(r *http.Request) (*http.Response, error) {
	if q := r.URL.Query(); strings.HasSuffix(r.URL.Path, "/pulls") && q.Get("state") == "open" && q.Get("page") == "2" {
		c.once.Do(func() { c.gh.ClosePullRequest(4001, c.number, false) })
	}
	return c.gh.Client().Transport.RoundTrip(r)
}

// TestPullRequestShiftedOutOfTheListing: a pull request closing while the
// open pull requests are listed page by page shifts another one out of
// the listing. The sync reads the one it has an overlay for alone and
// keeps its overlay, instead of dropping it and reading it whole again at
// the next sync; an overlay of a pull request that did close (read alone
// too, when it closed before the closed listing's window) goes.
func TestPullRequestShiftedOutOfTheListing(t *testing.T) {
	env, gh, d, tid := githubFixture(t)
	ctx := context.Background()
	gh.SetMaxPerPage(2)
	addAPIRepository(t, gh, d, tid)
	base := strings.Repeat("a", 40)
	gh.SetRepoFiles(4001, base, map[string]string{"main.go": "package main\n"})
	gh.SetBranchHead(4001, "main", base)
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for n := 1; n <= 3; n++ {
		head := strings.Repeat(strconv.Itoa(n), 40)
		gh.SetRepoFiles(4001, head, map[string]string{"main.go": fmt.Sprintf("package main\n\n// change %d\n", n)})
		gh.AddPullRequest(4001, githubtest.PullRequest{Number: n, Title: fmt.Sprint("Change ", n), Author: "octocat",
			HeadSHA: head, CreatedAt: t0.Add(time.Duration(n) * time.Hour)})
	}
	var repoID int64
	if err := env.App.InTenant(ctx, tid, func(tx *postgres.Tx) error {
		r, err := tx.RepositoryByName(ctx, "acme-org/api")
		if err != nil {
			return err
		}
		repoID = r.ID
		_, err = d.Ingest.Index(ctx, tx, r.ID, codeindex.Snapshot{Commit: base, Files: []codeindex.File{
			{Path: "main.go", Lines: []string{"package main"}}}}, postgres.Actor{Label: "test"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	overlays := func() []string {
		return env.AdminStrings(t, `SELECT number::text FROM pull_code_heads WHERE repository_id = $1 ORDER BY number`, repoID)
	}
	syncRepository(t, env, d, tid, "acme-org/api")
	if got := overlays(); !slices.Equal(got, []string{"1", "2", "3"}) {
		t.Fatalf("after the first sync: overlays of %v", got)
	}

	// Newest first, two a page: #3 #2 | #1. #3 closes before page 2 is
	// read, so page 2 (from the third open one) is empty and #1 is on
	// neither page.
	shifting := githubDeps(t, env, gh, &closeOnPage{gh: gh, number: 3})
	if err := shifting.SyncRepository(ctx, jobs.SyncRepositoryArgs{TenantID: tid, RepositoryID: repoID}); err != nil {
		t.Fatal(err)
	}
	if got := overlays(); !slices.Equal(got, []string{"1", "2"}) {
		t.Errorf("after #3 closed during the listing: overlays of %v, want 1 and 2", got)
	}
	read := 0
	for _, r := range gh.Requests() {
		if strings.HasSuffix(r, "/pulls/1") {
			read++
		}
	}
	if read != 1 {
		t.Errorf("#1 read alone %d times, want once", read)
	}

	// #2 closed long before the closed listing's window: read alone, it
	// is closed, and its overlay goes.
	gh.ClosePullRequest(4001, 2, true)
	d.ClosedWindow = -time.Hour // the closed listing stops at once
	syncRepository(t, env, d, tid, "acme-org/api")
	if got := overlays(); !slices.Equal(got, []string{"1"}) {
		t.Errorf("after #2 closed outside the window: overlays of %v, want 1", got)
	}
}
