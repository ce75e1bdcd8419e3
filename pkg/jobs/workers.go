package jobs

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/riverqueue/river"

	"github.com/codelotse/codelotse/pkg/codeindex"
	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/githubapp"
	"github.com/codelotse/codelotse/pkg/ingest"
	"github.com/codelotse/codelotse/pkg/postgres"
)

// Deps are what the workers need.
type Deps struct {
	DB     *postgres.DB
	GitHub *githubapp.App
	Logger *slog.Logger
	// ClosedWindow is how far back closed pull requests are synced.
	ClosedWindow time.Duration
	// SyncEvery schedules a full sync of every tenant (0: never).
	SyncEvery time.Duration
	// MembershipEvery schedules a membership refresh of every tenant
	// (0: never; memberships are then refreshed at sign-in only).
	MembershipEvery time.Duration
	// SecretRescanEvery schedules the rescan of every tenant that learned a
	// secret since its stored text was last rescanned (0:
	// DefaultSecretRescanEvery; it cannot be switched off).
	SecretRescanEvery time.Duration
	// Now is the clock of the membership caches; nil is time.Now.
	Now func() time.Time
	// Ingest prepares everything the sync stores (required).
	Ingest *ingest.Ingester
	// Enqueue, when set, takes the jobs a job's work enqueues instead of
	// the River client working it: for tests that call the work directly.
	Enqueue func(ctx context.Context, args river.JobArgs) error
}

var worker = postgres.Actor{Label: "github-sync"}

// NewWorker returns a client that works the github queue with n workers.
func NewWorker(d *Deps, n int) (*Client, error) {
	if d.ClosedWindow == 0 {
		d.ClosedWindow = 30 * 24 * time.Hour
	}
	if d.Ingest == nil {
		return nil, fmt.Errorf("jobs: Deps.Ingest is required")
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &installationWorker{d: d})
	river.AddWorker(workers, &repositoryWorker{d: d})
	river.AddWorker(workers, &indexWorker{d: d})
	river.AddWorker(workers, &syncAllWorker{d: d})
	river.AddWorker(workers, &membershipWorker{d: d})
	river.AddWorker(workers, &membershipAllWorker{d: d})
	river.AddWorker(workers, &rescanWorker{d: d})
	river.AddWorker(workers, &rescanAllWorker{d: d})
	if d.SecretRescanEvery <= 0 {
		d.SecretRescanEvery = DefaultSecretRescanEvery
	}
	periodic := []*river.PeriodicJob{river.NewPeriodicJob(river.PeriodicInterval(d.SecretRescanEvery),
		func() (river.JobArgs, *river.InsertOpts) { return RescanAllSecretsArgs{}, nil },
		&river.PeriodicJobOpts{ID: "secrets.rescan_all", RunOnStart: true})}
	if d.SyncEvery > 0 {
		periodic = append(periodic, river.NewPeriodicJob(river.PeriodicInterval(d.SyncEvery),
			func() (river.JobArgs, *river.InsertOpts) { return SyncAllArgs{}, nil }, &river.PeriodicJobOpts{ID: "github.sync_all"}))
	}
	if d.MembershipEvery > 0 {
		periodic = append(periodic, river.NewPeriodicJob(river.PeriodicInterval(d.MembershipEvery),
			func() (river.JobArgs, *river.InsertOpts) { return RefreshAllMembershipsArgs{}, nil },
			&river.PeriodicJobOpts{ID: "github.refresh_memberships_all"}))
	}
	rc, err := d.DB.NewRiverClient(&river.Config{
		Logger:       quiet(d.Logger),
		Queues:       map[string]river.QueueConfig{Queue: {MaxWorkers: n}},
		Workers:      workers,
		PeriodicJobs: periodic,
	})
	if err != nil {
		return nil, err
	}
	return &Client{river: rc}, nil
}

// Start starts working jobs; Stop waits for running jobs to finish.
func (c *Client) Start(ctx context.Context) error { return c.river.Start(ctx) }
func (c *Client) Stop(ctx context.Context) error  { return c.river.Stop(ctx) }

// installation returns the tenant's installation client.
func (d *Deps) installation(ctx context.Context, tenantID string) (*githubapp.InstallationClient, postgres.TenantGitHub, error) {
	var g postgres.TenantGitHub
	err := d.DB.InTenant(ctx, tenantID, func(tx *postgres.Tx) error {
		var err error
		g, err = tx.GetTenantGitHub(ctx)
		return err
	})
	if err != nil {
		return nil, g, err
	}
	if g.InstallationID == nil {
		return nil, g, river.JobCancel(fmt.Errorf("tenant %s is not bound to a GitHub installation", g.Slug))
	}
	if d.GitHub == nil {
		return nil, g, river.JobCancel(errors.New("the GitHub App is not configured (GITHUB_APP_ID, GITHUB_APP_PRIVATE_KEY_FILE)"))
	}
	return d.GitHub.Installation(*g.InstallationID), g, nil
}

// rateLimited snoozes a job until GitHub's limit resets instead of
// spending an attempt.
func rateLimited(err error) error {
	var rl *githubapp.RateLimitError
	if errors.As(err, &rl) {
		wait := time.Until(rl.RetryAt)
		if wait < time.Second {
			wait = time.Second
		}
		return river.JobSnooze(wait)
	}
	return err
}

type installationWorker struct {
	river.WorkerDefaults[SyncInstallationArgs]
	d *Deps
}

func (w *installationWorker) Work(ctx context.Context, job *river.Job[SyncInstallationArgs]) error {
	return w.d.SyncInstallation(ctx, job.Args.TenantID)
}

// SyncInstallation is the work of a SyncInstallationArgs job.
func (d *Deps) SyncInstallation(ctx context.Context, tid string) error {
	unlock, err := d.LockTenant(ctx, "installation", tid)
	if err != nil {
		return err
	}
	defer unlock()
	inst, g, err := d.installation(ctx, tid)
	if err != nil {
		return err
	}
	accountID, _, err := inst.Account(ctx)
	if err != nil {
		return rateLimited(err)
	}
	if g.AccountID != nil && *g.AccountID != accountID {
		return river.JobCancel(fmt.Errorf("installation %d now belongs to another account (%d, bound to %d)", *g.InstallationID, accountID, *g.AccountID))
	}
	repos, err := inst.Repositories(ctx)
	if err != nil {
		return rateLimited(err)
	}
	var ids []int64
	var keep []int64
	err = d.DB.InTenant(ctx, tid, func(tx *postgres.Tx) error {
		if err := tx.SetTenantGitHubAccount(ctx, accountID); err != nil {
			return err
		}
		// Repositories gone from the installation go first, under the
		// names they had (the audit says so): a listed one may have taken
		// the name of one gone (UpsertGitHubRepository moves such a row
		// aside otherwise).
		listed := make([]int64, len(repos))
		for i, r := range repos {
			listed[i] = r.ID
		}
		if _, err := tx.RemoveGitHubRepositoriesExcept(ctx, listed, worker); err != nil {
			return err
		}
		for _, r := range repos {
			id, err := d.Ingest.UpsertGitHubRepository(ctx, tx, r.ID, r.FullName, r.DefaultBranch, r.URL, r.Private, true)
			if codelotse.ErrorCode(err) == codelotse.Invalid {
				// A name that looks like a secret is not stored; the
				// other repositories still sync.
				if d.Logger != nil {
					d.Logger.Warn("github sync: repository skipped", "tenant", tid, "github_id", r.ID, "reason", codelotse.ErrorMessage(err))
				}
				continue
			}
			if err != nil {
				return err
			}
			ids, keep = append(ids, id), append(keep, r.ID)
		}
		if len(keep) == len(listed) {
			return nil
		}
		// A repository stored before under a name now refused goes too.
		_, err := tx.RemoveGitHubRepositoriesExcept(ctx, keep, worker)
		return err
	})
	if err != nil {
		return err
	}
	// One job per repository: a failing repository fails only its own job.
	for _, id := range ids {
		if err := d.enqueue(ctx, SyncRepositoryArgs{TenantID: tid, RepositoryID: id}); err != nil {
			return err
		}
	}
	return nil
}

type syncAllWorker struct {
	river.WorkerDefaults[SyncAllArgs]
	d *Deps
}

func (w *syncAllWorker) Work(ctx context.Context, job *river.Job[SyncAllArgs]) error {
	return enqueueEach(ctx, w.d.DB.TenantsWithInstallation, func(tid string) river.JobArgs { return SyncInstallationArgs{TenantID: tid} })
}

// enqueueEach is the work of a periodic job that fans out: one job, args of
// the tenant, for each tenant that list returns.
func enqueueEach(ctx context.Context, list func(context.Context) ([]string, error), args func(tid string) river.JobArgs) error {
	tenants, err := list(ctx)
	if err != nil {
		return err
	}
	// A plain insert, not insertFollowing: a tenant's job already running
	// is as fresh as a periodic catch-up needs.
	client := postgres.RiverClientFromContext(ctx)
	for _, tid := range tenants {
		if _, err := client.Insert(ctx, args(tid), nil); err != nil {
			return err
		}
	}
	return nil
}

// unlistedPulls adds to the listed pull requests the ones the listings did
// not show although this sync must know their state: those with a code
// overlay, and args.Pull. The open listing is paged, so a pull request
// closing between two pages shifts the next page's first one out of it;
// taken as closed, its overlay would be dropped and read again whole at
// the next sync. A pull request a webhook names may have closed before
// the closed listing's window. Each is read alone (one request, rare);
// one that is gone stays out, and its overlay is dropped. It also returns
// the overlays' heads, for indexPullHeads.
func (d *Deps) unlistedPulls(ctx context.Context, tid string, inst *githubapp.InstallationClient, repo codelotse.Repository, prs []githubapp.PullRequest, pull int) ([]githubapp.PullRequest, map[int]postgres.PullCodeHead, error) {
	listed := make(map[int]bool, len(prs))
	for _, pr := range prs {
		listed[pr.Number] = true
	}
	var heads map[int]postgres.PullCodeHead
	if err := d.DB.InTenant(ctx, tid, func(tx *postgres.Tx) error {
		var err error
		heads, err = tx.PullCodeHeads(ctx, repo.ID)
		return err
	}); err != nil {
		return nil, nil, err
	}
	var missing []int
	for n := range heads {
		if !listed[n] {
			missing = append(missing, n)
		}
	}
	if _, has := heads[pull]; pull > 0 && !listed[pull] && !has {
		missing = append(missing, pull)
	}
	if len(missing) == 0 {
		return prs, heads, nil
	}
	slices.Sort(missing)
	for _, n := range missing {
		pr, err := inst.PullRequest(ctx, repo.FullName, n)
		if codelotse.ErrorCode(err) == codelotse.NotFound {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		prs = append(prs, pr)
	}
	slices.SortFunc(prs, func(a, b githubapp.PullRequest) int { return a.Number - b.Number })
	return prs, heads, nil
}

type repositoryWorker struct {
	river.WorkerDefaults[SyncRepositoryArgs]
	d *Deps
}

func (w *repositoryWorker) Work(ctx context.Context, job *river.Job[SyncRepositoryArgs]) error {
	return w.d.SyncRepository(ctx, job.Args)
}

// SyncRepository is the work of a SyncRepositoryArgs job.
func (d *Deps) SyncRepository(ctx context.Context, args SyncRepositoryArgs) error {
	tid, rid := args.TenantID, args.RepositoryID
	unlock, err := d.LockRepository(ctx, tid, rid)
	if err != nil {
		return err
	}
	defer unlock()
	inst, _, err := d.installation(ctx, tid)
	if err != nil {
		return err
	}
	repo, err := d.repository(ctx, tid, rid)
	if err != nil {
		return err
	}
	prs, err := inst.PullRequests(ctx, repo.FullName, time.Now().Add(-d.ClosedWindow))
	if err != nil {
		return rateLimited(err)
	}
	prs, heads, err := d.unlistedPulls(ctx, tid, inst, repo, prs, args.Pull)
	if err != nil {
		return rateLimited(err)
	}
	var synced map[int]time.Time
	if err := d.DB.InTenant(ctx, tid, func(tx *postgres.Tx) error {
		var err error
		synced, err = tx.PullSyncs(ctx, rid)
		return err
	}); err != nil {
		return err
	}
	for _, pr := range prs {
		if last, ok := synced[pr.Number]; ok && pr.State != "open" && pr.Number != args.Pull && !pr.UpdatedAt.IsZero() && pr.UpdatedAt.Equal(last) {
			// A closed pull request that has not changed since its last
			// complete sync: nothing to read again. Open ones are always
			// read (their listings are conditional requests, so unchanged
			// pages cost no rate limit), because resolving a review
			// thread does not change a pull request's updated_at. A
			// webhook about a closed one names it (args.Pull).
			continue
		}
		reviews, err := inst.Reviews(ctx, repo.FullName, pr.Number)
		if err != nil {
			return rateLimited(err)
		}
		comments, err := inst.ReviewComments(ctx, repo.FullName, pr.Number)
		if err != nil {
			return rateLimited(err)
		}
		threads, err := d.reviewThreads(ctx, inst, repo.FullName, pr.Number, len(comments))
		if err != nil {
			return rateLimited(err)
		}
		imports, notReviews := reviewImports(repo.FullName, pr, reviews, comments, threads)
		for _, imp := range imports {
			if err := d.DB.InTenant(ctx, tid, func(tx *postgres.Tx) error {
				_, err := d.Ingest.Import(ctx, tx, imp, worker)
				return err
			}); err != nil {
				return err
			}
		}
		if len(notReviews) > 0 {
			// Stored by a version that imported them.
			if err := d.DB.InTenant(ctx, tid, func(tx *postgres.Tx) error {
				_, err := tx.DeleteReviews(ctx, rid, notReviews)
				return err
			}); err != nil {
				return err
			}
		}
		if !pr.UpdatedAt.IsZero() {
			if err := d.DB.InTenant(ctx, tid, func(tx *postgres.Tx) error {
				return tx.RecordPullSync(ctx, rid, pr.Number, pr.UpdatedAt)
			}); err != nil {
				return err
			}
		}
	}
	if err := d.indexPullHeads(ctx, tid, inst, repo, prs, heads); err != nil {
		return rateLimited(err)
	}
	alerts, err := inst.CodeScanningAlerts(ctx, repo.FullName)
	if err != nil {
		return rateLimited(err)
	}
	if err := d.DB.InTenant(ctx, tid, func(tx *postgres.Tx) error {
		if alerts == nil {
			// Code scanning is off or has no analysis (any more): GitHub
			// shows no alerts, so the ones stored before go, rather than
			// staying open findings for ever.
			_, err := tx.DeleteReviews(ctx, rid, []string{codeScanningReview})
			return err
		}
		_, err := d.Ingest.Import(ctx, tx, alertImport(repo.FullName, alerts), worker)
		return err
	}); err != nil {
		return err
	}
	return d.enqueue(ctx, IndexRepositoryArgs{TenantID: tid, RepositoryID: rid})
}

type indexWorker struct {
	river.WorkerDefaults[IndexRepositoryArgs]
	d *Deps
}

func (w *indexWorker) Timeout(*river.Job[IndexRepositoryArgs]) time.Duration { return 30 * time.Minute }

func (w *indexWorker) Work(ctx context.Context, job *river.Job[IndexRepositoryArgs]) error {
	tid, rid := job.Args.TenantID, job.Args.RepositoryID
	unlock, err := w.d.LockRepository(ctx, tid, rid)
	if err != nil {
		return err
	}
	defer unlock()
	inst, _, err := w.d.installation(ctx, tid)
	if err != nil {
		return err
	}
	repo, err := w.d.repository(ctx, tid, rid)
	if err != nil {
		return err
	}
	head, err := inst.HeadCommit(ctx, repo.FullName, repo.DefaultBranch)
	if err != nil {
		return rateLimited(err)
	}
	if head == repo.IndexedCommit {
		return nil // already indexed at this commit
	}
	done, err := w.d.indexIncrementally(ctx, tid, inst, repo, head)
	if err != nil {
		return rateLimited(err)
	}
	if done {
		unlock()
		return w.d.enqueue(ctx, SyncRepositoryArgs{TenantID: tid, RepositoryID: rid, AfterIndex: true})
	}
	rc, err := inst.Archive(ctx, repo.FullName, head)
	if err != nil {
		return rateLimited(err)
	}
	defer rc.Close()
	snap, err := codeindex.ReadTarball(rc, head)
	if err != nil {
		return err
	}
	if err := w.d.DB.InTenant(ctx, tid, func(tx *postgres.Tx) error {
		_, err := w.d.Ingest.Index(ctx, tx, rid, snap, worker)
		return err
	}); err != nil {
		return err
	}
	// The base index moved: the pull-request overlays read against the
	// old one are rebuilt by a repository sync, which needs the lock.
	unlock()
	return w.d.enqueue(ctx, SyncRepositoryArgs{TenantID: tid, RepositoryID: rid, AfterIndex: true})
}

func (d *Deps) repository(ctx context.Context, tid string, id int64) (codelotse.Repository, error) {
	var r codelotse.Repository
	err := d.DB.InTenant(ctx, tid, func(tx *postgres.Tx) error {
		var err error
		r, err = tx.RepositoryByID(ctx, id)
		return err
	})
	if codelotse.ErrorCode(err) == codelotse.NotFound {
		return r, river.JobCancel(err) // removed since the job was queued
	}
	return r, err
}

// LockRepository holds a session advisory lock for one repository of one
// tenant for the whole job, so two workers never sync or index the same
// repository at once; a held lock snoozes the job instead of waiting.
func (d *Deps) LockRepository(ctx context.Context, tid string, id int64) (func(), error) {
	return d.lockJob(ctx, fmt.Sprintf("codelotse-repo:%s:%d", tid, id))
}

// LockTenant is LockRepository for a job over the whole tenant (what: the
// installation sync, the membership refresh). A job that follows a running
// one (insertFollowing) must not run beside it: the older job's writes,
// from what it read earlier, would land after the newer ones (an
// installation sync removing a repository just added, a membership refresh
// restoring access just lowered).
func (d *Deps) LockTenant(ctx context.Context, what, tid string) (func(), error) {
	return d.lockJob(ctx, fmt.Sprintf("codelotse-%s:%s", what, tid))
}

func (d *Deps) lockJob(ctx context.Context, name string) (func(), error) {
	h := fnv.New64a()
	h.Write([]byte(name))
	key := int64(h.Sum64())
	unlock, ok, err := d.DB.TryAdvisoryLock(ctx, key)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, river.JobSnooze(15 * time.Second)
	}
	var once sync.Once
	// Idempotent: a job may release early and defer the release too.
	return func() { once.Do(unlock) }, nil
}

// reviewThreads reads the pull request's review threads from GraphQL,
// keyed by their first comment, for whether each is resolved. A pull
// request without comments costs nothing. When GraphQL is not available
// (404: an old GitHub Enterprise Server) or does not show the pull request,
// it returns nil and the findings fall back to what REST says.
func (d *Deps) reviewThreads(ctx context.Context, inst *githubapp.InstallationClient, fullName string, number, comments int) (map[int64]githubapp.ReviewThread, error) {
	if comments == 0 {
		return nil, nil
	}
	list, err := inst.ReviewThreads(ctx, fullName, number)
	if errors.Is(err, githubapp.ErrGraphQLUnavailable) || codelotse.ErrorCode(err) == codelotse.NotFound {
		d.log().Warn("review threads unavailable; resolved state falls back to outdated comments", "repository", fullName, "number", number, "err", err)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make(map[int64]githubapp.ReviewThread, len(list))
	for _, t := range list {
		out[t.RootCommentID] = t
	}
	return out, nil
}

// reviewImports turns a pull request's GitHub reviews and their inline
// comments into one import per review. Each inline comment that starts a
// thread becomes a finding at its path and lines; replies belong to their
// thread and are not findings of their own. threads (nil without GraphQL)
// says which threads are resolved.
//
// A review that only carries replies is not imported, and its external id
// is in notReviews: GitHub files each reply to a review thread as a review
// of its own (state COMMENTED, no body, the reply its only comment), which
// a reader sees as a comment in the thread, not as a review. Imported, it
// became the pull request's latest review, with no findings, hiding the
// review whose threads are still open.
func reviewImports(fullName string, pr githubapp.PullRequest, reviews []githubapp.Review, comments []githubapp.ReviewComment, threads map[int64]githubapp.ReviewThread) (out []codelotse.ReviewImport, notReviews []string) {
	p := &codelotse.PullRequest{Number: pr.Number, Title: pr.Title, Author: pr.Author, State: pr.State,
		BaseRef: pr.Base, HeadRef: pr.Head, HeadSHA: pr.HeadSHA, URL: pr.URL}
	for _, rv := range reviews {
		imp := codelotse.ReviewImport{Repository: fullName, PullRequest: p, Source: "github",
			Review: codelotse.Review{ExternalID: fmt.Sprintf("github:review:%d", rv.ID), CommitSHA: rv.CommitID,
				Status: strings.ToLower(rv.State), Summary: rv.Body, Author: rv.Author, CreatedAt: rv.SubmittedAt}}
		for _, c := range comments {
			if c.ReviewID != rv.ID || c.InReplyTo != nil {
				continue
			}
			var th *githubapp.ReviewThread
			if t, ok := threads[c.ID]; ok {
				th = &t
			}
			imp.Findings = append(imp.Findings, commentFinding(c, th))
		}
		if len(imp.Findings) == 0 && strings.TrimSpace(rv.Body) == "" && strings.EqualFold(rv.State, "COMMENTED") {
			notReviews = append(notReviews, imp.Review.ExternalID)
			continue
		}
		out = append(out, imp)
	}
	return out, notReviews
}

func commentFinding(c githubapp.ReviewComment, th *githubapp.ReviewThread) codelotse.Finding {
	f := codelotse.Finding{RuleKey: "github/review-comment", Severity: codelotse.SeverityMedium, Status: codelotse.StatusOpen,
		Path: c.Path, Title: commentTitle(c.Body), Body: c.Body, Suggestion: suggestion(c.Body), Fingerprint: fmt.Sprintf("github-comment:%d", c.ID),
		CommitSHA: c.CommitID, Source: "github"}
	line, start := c.Line, c.StartLine
	outdated := c.Outdated
	if th != nil {
		outdated = th.Outdated
		if th.Resolved {
			f.Status = codelotse.StatusResolved
		}
	}
	if outdated {
		// The code the comment was made on has changed: keep it at its
		// original place and commit. Without GraphQL nobody can say
		// whether the thread was resolved, so an outdated comment counts
		// as resolved; with it, the thread's own state decides.
		f.CommitSHA, line = c.OriginalCommitID, c.OriginalLine
		start = nil
		if th != nil {
			start = th.OriginalStartLine
		} else {
			f.Status = codelotse.StatusResolved
		}
	}
	if start == nil {
		start = line
	}
	f.StartLine, f.EndLine = start, line
	return f
}

// codeScanningReview is the external id of the review that holds a
// repository's code-scanning alerts.
const codeScanningReview = "github:code-scanning"

// alertImport turns code-scanning alerts into the findings of one
// repository-level review.
func alertImport(fullName string, alerts []githubapp.Alert) codelotse.ReviewImport {
	imp := codelotse.ReviewImport{Repository: fullName, Source: "github:code-scanning",
		Review: codelotse.Review{ExternalID: codeScanningReview, Status: "completed", Author: "GitHub code scanning",
			Summary: fmt.Sprintf("%d code-scanning alerts.", len(alerts))}}
	for _, a := range alerts {
		status := codelotse.StatusOpen
		switch a.State {
		case "dismissed":
			status = codelotse.StatusDismissed
		case "fixed":
			status = codelotse.StatusResolved
		}
		title := a.RuleDescription
		if title == "" {
			title = a.RuleName
		}
		if title == "" {
			title = a.RuleID
		}
		f := codelotse.Finding{RuleKey: a.Tool + "/" + a.RuleID, Severity: alertSeverity(a.Severity), Status: status, Path: a.Path,
			Title: title, Body: a.Message, Fingerprint: fmt.Sprintf("github-alert:%d", a.Number), CommitSHA: a.CommitSHA, Source: "github:code-scanning"}
		if a.StartLine > 0 {
			s, e := a.StartLine, max(a.EndLine, a.StartLine)
			f.StartLine, f.EndLine = &s, &e
		}
		imp.Findings = append(imp.Findings, f)
	}
	return imp
}

// alertSeverity maps GitHub's security severity (critical, high, medium,
// low) or rule severity (error, warning, note, none).
func alertSeverity(s string) codelotse.Severity {
	switch strings.ToLower(s) {
	case "critical":
		return codelotse.SeverityCritical
	case "high", "error":
		return codelotse.SeverityHigh
	case "medium", "warning":
		return codelotse.SeverityMedium
	case "low", "note":
		return codelotse.SeverityLow
	}
	return codelotse.SeverityInfo
}

// commentTitle is a short title for a review comment: its first line
// with words, not markup (HTML comments, fences, images, headings,
// emphasis and badges some review bots put first are skipped or removed),
// cut at a word boundary to at most 100 characters.
func commentTitle(body string) string {
	inComment, inFence := false, false
	for _, l := range strings.Split(body, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "```") || strings.HasPrefix(l, "~~~") {
			inFence = !inFence // code, such as a suggestion, is no title
			continue
		}
		if inFence {
			continue
		}
		if inComment {
			if _, after, ok := strings.Cut(l, "-->"); ok {
				inComment, l = false, strings.TrimSpace(after)
			} else {
				continue
			}
		}
		if strings.HasPrefix(l, "<!--") {
			if _, after, ok := strings.Cut(l, "-->"); ok {
				l = strings.TrimSpace(after)
			} else {
				inComment = true
				continue
			}
		}
		if strings.HasPrefix(l, "![") || strings.HasPrefix(l, "<") {
			continue
		}
		l = strings.TrimLeft(l, "#>*-+ \t")
		l = strings.NewReplacer("**", "", "__", "", "`", "").Replace(l)
		l = strings.TrimSpace(strings.Trim(l, "_*"))
		if l == "" {
			continue
		}
		if r := []rune(l); len(r) > 100 {
			cut := string(r[:100])
			if i := strings.LastIndexByte(cut, ' '); i > 60 {
				cut = cut[:i]
			}
			l = strings.TrimRight(cut, " ,;:") + "…"
		}
		return l
	}
	return "Review comment"
}

// suggestion is the code of the comment's first ```suggestion block (the
// lines GitHub offers to commit in place of the commented ones), or "".
// The fence may be longer than three backticks, as GitHub allows when the
// suggestion itself contains a fence.
func suggestion(body string) string {
	lines := strings.Split(strings.ReplaceAll(body, "\r\n", "\n"), "\n")
	for i, l := range lines {
		t := strings.TrimSpace(l)
		n := len(t) - len(strings.TrimLeft(t, "`"))
		if n < 3 || strings.TrimSpace(t[n:]) != "suggestion" {
			continue
		}
		fence := t[:n]
		var out []string
		for _, s := range lines[i+1:] {
			if st := strings.TrimSpace(s); strings.HasPrefix(st, fence) && strings.Trim(st, "`") == "" {
				return strings.Join(out, "\n")
			}
			out = append(out, s)
		}
		return "" // an unclosed block is not a suggestion GitHub would offer
	}
	return ""
}
