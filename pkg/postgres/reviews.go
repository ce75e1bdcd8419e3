package postgres

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// ImportResult says what an import changed.
type ImportResult struct {
	RepositoryID  int64
	PullRequestID *int64
	ReviewID      int64
	Findings      int
	Removed       int
}

// ImportReview stores a pull request, a review and its findings in the
// caller's transaction. Re-importing the same review (same repository and
// external id) updates it: findings are upserted by fingerprint and those no
// longer in the import are removed. The repository must be registered.
func (tx *Tx) ImportReview(ctx context.Context, imp codelotse.ReviewImport, actor Actor) (_ ImportResult, err error) {
	defer wrap(&err, "postgres.ImportReview")
	tenantID := tx.tenantID
	var res ImportResult
	repo, err := tx.RepositoryByName(ctx, imp.Repository)
	if codelotse.ErrorCode(err) == codelotse.NotFound {
		return res, codelotse.Errorf(codelotse.Invalid, "/repository: %s is not registered in this tenant; add it first with cltctl repo add", imp.Repository)
	}
	if err != nil {
		return res, err
	}
	res.RepositoryID = repo.ID

	if pr := imp.PullRequest; pr != nil {
		var id int64
		err := tx.q.QueryRow(ctx, `INSERT INTO pull_requests (tenant_id, repository_id, number, title, author, state, base_ref, head_ref, head_sha, url)
			VALUES ($1, $2, $3, $4, $5, coalesce(nullif($6, ''), 'open'), $7, $8, $9, $10)
			ON CONFLICT (tenant_id, repository_id, number) DO UPDATE SET
				title = coalesce(nullif(EXCLUDED.title, ''), pull_requests.title),
				author = coalesce(nullif(EXCLUDED.author, ''), pull_requests.author),
				-- An import that does not know the state (SARIF) keeps it.
				state = CASE WHEN $6 = '' THEN pull_requests.state ELSE $6 END,
				base_ref = coalesce(nullif(EXCLUDED.base_ref, ''), pull_requests.base_ref),
				head_ref = coalesce(nullif(EXCLUDED.head_ref, ''), pull_requests.head_ref),
				head_sha = coalesce(nullif(EXCLUDED.head_sha, ''), pull_requests.head_sha),
				url = coalesce(nullif(EXCLUDED.url, ''), pull_requests.url),
				updated_at = now()
			RETURNING id`,
			tenantID, repo.ID, pr.Number, pr.Title, pr.Author, pr.State, pr.BaseRef, pr.HeadRef, pr.HeadSHA, prURL(repo, pr)).Scan(&id)
		if err != nil {
			return res, err
		}
		res.PullRequestID = &id
	}

	r := imp.Review
	created := r.CreatedAt
	if created.IsZero() {
		created = time.Now()
	}
	err = tx.q.QueryRow(ctx, `INSERT INTO reviews (tenant_id, repository_id, pull_request_id, external_id, commit_sha, status, summary, author, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT (tenant_id, repository_id, external_id) DO UPDATE SET
			pull_request_id = EXCLUDED.pull_request_id, commit_sha = EXCLUDED.commit_sha, status = EXCLUDED.status,
			summary = EXCLUDED.summary, author = EXCLUDED.author,
			created_at = CASE WHEN $10 THEN EXCLUDED.created_at ELSE reviews.created_at END
		RETURNING id, created_at`,
		tenantID, repo.ID, res.PullRequestID, r.ExternalID, r.CommitSHA, r.Status, r.Summary, r.Author, created, !r.CreatedAt.IsZero()).
		Scan(&res.ReviewID, &created)
	if err != nil {
		return res, err
	}

	n := len(imp.Findings)
	rule, sev, status, path, title, body, sugg, fp, commit, source := make([]string, n), make([]string, n), make([]string, n),
		make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	start, end := make([]*int32, n), make([]*int32, n)
	for i, f := range imp.Findings {
		rule[i], sev[i], status[i], path[i], title[i], body[i], sugg[i], fp[i] = f.RuleKey, string(f.Severity), f.Status, f.Path, f.Title, f.Body, f.Suggestion, f.Fingerprint
		commit[i] = f.CommitSHA
		if commit[i] == "" {
			commit[i] = r.CommitSHA
		}
		source[i] = f.Source
		if source[i] == "" {
			source[i] = imp.Source
		}
		start[i], end[i] = i32(f.StartLine), i32(f.EndLine)
	}
	tag, err := tx.q.Exec(ctx, `INSERT INTO findings (tenant_id, repository_id, pull_request_id, review_id, rule_key, severity, status,
			path, start_line, end_line, title, body, suggestion, fingerprint, commit_sha, source, created_at)
		SELECT $1, $2, $3, $4, u.rule, u.sev, u.status, u.path, u.start, u.stop, u.title, u.body, u.sugg, u.fp, u.commit, u.source, $5
		FROM unnest($6::text[], $7::text[], $8::text[], $9::text[], $10::int[], $11::int[], $12::text[], $13::text[], $14::text[], $15::text[], $16::text[], $17::text[])
			AS u(rule, sev, status, path, start, stop, title, body, sugg, fp, commit, source)
		ON CONFLICT (tenant_id, review_id, fingerprint) DO UPDATE SET
			rule_key = EXCLUDED.rule_key, severity = EXCLUDED.severity, status = EXCLUDED.status, path = EXCLUDED.path,
			start_line = EXCLUDED.start_line, end_line = EXCLUDED.end_line, title = EXCLUDED.title, body = EXCLUDED.body,
			suggestion = EXCLUDED.suggestion, commit_sha = EXCLUDED.commit_sha, source = EXCLUDED.source,
			pull_request_id = EXCLUDED.pull_request_id, updated_at = now()`,
		tenantID, repo.ID, res.PullRequestID, res.ReviewID, created,
		rule, sev, status, path, start, end, title, body, sugg, fp, commit, source)
	if err != nil {
		return res, err
	}
	res.Findings = int(tag.RowsAffected())
	tag, err = tx.q.Exec(ctx, `DELETE FROM findings WHERE tenant_id = $1 AND review_id = $2 AND NOT (fingerprint = ANY($3))`,
		tenantID, res.ReviewID, fp)
	if err != nil {
		return res, err
	}
	res.Removed = int(tag.RowsAffected())
	return res, tx.insertAudit(ctx, actor, "review.imported", imp.Repository,
		map[string]any{"review": r.ExternalID, "source": imp.Source, "findings": res.Findings, "removed": res.Removed})
}

func prURL(repo codelotse.Repository, pr *codelotse.PullRequest) string {
	if pr.URL != "" || repo.URL == "" {
		return pr.URL
	}
	return repo.URL + "/pull/" + itoa(pr.Number)
}

func i32(p *int) *int32 {
	if p == nil {
		return nil
	}
	v := int32(*p)
	return &v
}

func itoa(n int) string {
	return fmtInt(int64(n))
}

// ReviewDetail is a pull request with one review and its findings.
type ReviewDetail struct {
	PullRequest codelotse.PullRequest
	Review      codelotse.Review
	Findings    []codelotse.Finding
	// Reviews are the ids of all reviews of the pull request, newest first.
	Reviews []int64
}

// GetReview reads a pull request of a repository with a review (the newest
// when reviewID is nil) and its findings, most severe first.
func (t TenantDB) GetReview(ctx context.Context, repoID int64, number int, reviewID *int64) (_ ReviewDetail, err error) {
	defer wrap(&err, "postgres.GetReview")
	db, tenantID := t.db, t.tenantID
	var d ReviewDetail
	err = db.InTenant(ctx, tenantID, func(tx *Tx) error {
		p := &d.PullRequest
		err := tx.q.QueryRow(ctx, `SELECT id, repository_id, number, title, author, state, base_ref, head_ref, head_sha, url, created_at, updated_at
			FROM pull_requests WHERE tenant_id = $1 AND repository_id = $2 AND number = $3`, tenantID, repoID, number).
			Scan(&p.ID, &p.RepositoryID, &p.Number, &p.Title, &p.Author, &p.State, &p.BaseRef, &p.HeadRef, &p.HeadSHA, &p.URL, &p.CreatedAt, &p.UpdatedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return codelotse.Errorf(codelotse.NotFound, "Pull request #%d not found in this repository.", number)
		}
		if err != nil {
			return err
		}
		rows, err := tx.q.Query(ctx, `SELECT id FROM reviews WHERE tenant_id = $1 AND pull_request_id = $2 ORDER BY created_at DESC, id DESC`, tenantID, p.ID)
		if err != nil {
			return err
		}
		if d.Reviews, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
			return err
		}
		if len(d.Reviews) == 0 {
			return codelotse.Errorf(codelotse.NotFound, "Pull request #%d has no reviews yet.", number)
		}
		want := d.Reviews[0]
		if reviewID != nil {
			want = *reviewID
		}
		r := &d.Review
		err = tx.q.QueryRow(ctx, `SELECT id, repository_id, pull_request_id, external_id, commit_sha, status, summary, author, created_at
			FROM reviews WHERE tenant_id = $1 AND pull_request_id = $2 AND id = $3`, tenantID, p.ID, want).
			Scan(&r.ID, &r.RepositoryID, &r.PullRequestID, &r.ExternalID, &r.CommitSHA, &r.Status, &r.Summary, &r.Author, &r.CreatedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return codelotse.Errorf(codelotse.NotFound, "Review %d not found on pull request #%d.", want, number)
		}
		if err != nil {
			return err
		}
		d.Findings, err = queryFindings(ctx, tx.q, `WHERE f.tenant_id = $1 AND f.review_id = $2
			ORDER BY array_position(ARRAY['critical','high','medium','low','info'], f.severity), f.path, f.start_line NULLS FIRST, f.id`,
			tenantID, r.ID)
		return err
	})
	return d, err
}

const findingsSelect = `SELECT ` + findingColumns + `
		FROM findings f
		JOIN repositories r ON r.tenant_id = f.tenant_id AND r.id = f.repository_id
		LEFT JOIN pull_requests p ON p.tenant_id = f.tenant_id AND p.id = f.pull_request_id
		`

const findingColumns = `f.id, f.repository_id, r.full_name, f.pull_request_id, p.number, f.review_id, f.rule_key, f.severity, f.status,
	f.path, f.start_line, f.end_line, f.title, f.body, f.suggestion, f.fingerprint, f.commit_sha, f.source, f.created_at,
	coalesce(r.indexed_commit, '')`

func queryFindings(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, where string, args ...any) ([]codelotse.Finding, error) {
	rows, err := q.Query(ctx, findingsSelect+where, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanFinding)
}

func scanFinding(row pgx.CollectableRow) (codelotse.Finding, error) {
	var f codelotse.Finding
	var sev string
	var start, end, num *int32
	err := row.Scan(&f.ID, &f.RepositoryID, &f.RepoFullName, &f.PullRequestID, &num, &f.ReviewID, &f.RuleKey, &sev, &f.Status,
		&f.Path, &start, &end, &f.Title, &f.Body, &f.Suggestion, &f.Fingerprint, &f.CommitSHA, &f.Source, &f.CreatedAt,
		&f.RepoIndexedCommit)
	f.Severity = codelotse.Severity(sev)
	f.StartLine, f.EndLine, f.PRNumber = intp(start), intp(end), intp(num)
	return f, err
}

func intp(p *int32) *int {
	if p == nil {
		return nil
	}
	v := int(*p)
	return &v
}

// FindingFilter selects findings for search_findings.
type FindingFilter struct {
	Repos       RepoFilter
	RepoID      *int64
	Query       string
	MinSeverity codelotse.Severity
	Status      string // "" means all
	Rule        string
	PathPrefix  string
	PRNumber    *int
	// Keyset: findings strictly older than finding AfterID (0: from the
	// newest). Only the id travels in a cursor; its time is read here.
	AfterID int64
	Limit   int
}

// SearchFindings returns matching findings across the viewable
// repositories, newest first, in one round trip.
//
// The WHERE clause holds only the filters that are set (values are always
// bound parameters), so each query is planned for what it asks: an
// "($n = ” OR col = $n)" form would keep a generic plan from using the rule
// or pull-request index. A text query goes through search_finding_ids
// (policies/findings.sql), the only way to use the trigram index under RLS;
// the rows themselves are still read under the tenant policy.
func (t TenantDB) SearchFindings(ctx context.Context, f FindingFilter) (_ []codelotse.Finding, err error) {
	defer wrap(&err, "postgres.SearchFindings")
	db, tenantID := t.db, t.tenantID
	if err := f.check(); err != nil {
		return nil, err
	}
	f.Repos = narrowToRepo(f.Repos, f.RepoID)
	wide, err := t.wideGrants(ctx, f.Repos)
	if err != nil {
		return nil, err
	}
	sql, args, err := searchFindingsQuery(tenantID, f, wide)
	if err != nil {
		return nil, err
	}
	// Only a statement that checks the grants itself needs a custom plan
	// for them; a text query passes them to search_finding_ids, whose
	// statements are planned for their values anyway.
	o := readOptions{customPlan: wide && f.Query == ""}
	var out []codelotse.Finding
	err = db.readTenantWith(ctx, tenantID, o, sql, args, func(rows pgx.Rows) error {
		var err error
		out, err = pgx.CollectRows(rows, scanFinding)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// check refuses a filter no statement can serve, before anything is read.
func (f FindingFilter) check() error {
	if f.Limit < 1 || f.Limit > 1000 {
		return codelotse.Errorf(codelotse.Internal, "postgres.SearchFindings: limit %d out of range", f.Limit)
	}
	if f.PRNumber != nil && f.RepoID == nil {
		return codelotse.Errorf(codelotse.Invalid, "pull_request needs repository: pull request numbers are per repository.")
	}
	return nil
}

// searchFindingsQuery builds SearchFindings' statement; the plan test runs
// it under EXPLAIN. wide writes the grant check for wide grants
// (widegrants.go); the caller then forces a custom plan unless the grants
// go to search_finding_ids.
func searchFindingsQuery(tenantID string, f FindingFilter, wide bool) (string, []any, error) {
	if err := f.check(); err != nil {
		return "", nil, err
	}
	var severities []string
	if f.MinSeverity != "" {
		for _, s := range []codelotse.Severity{codelotse.SeverityInfo, codelotse.SeverityLow, codelotse.SeverityMedium, codelotse.SeverityHigh, codelotse.SeverityCritical} {
			if s.Rank() >= f.MinSeverity.Rank() {
				severities = append(severities, string(s))
			}
		}
	}
	args := []any{tenantID}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	// The cursor carries only the last finding's id; its time is read here.
	// A finding deleted since then reads as -infinity, so the listing ends
	// rather than starting over.
	afterTime := func(id int64) string {
		if id == 0 {
			return "NULL::timestamptz"
		}
		return "coalesce((SELECT c.created_at FROM findings c WHERE c.tenant_id = $1 AND c.id = " + arg(id) + "), '-infinity'::timestamptz)"
	}
	where := "WHERE f.tenant_id = $1"
	if f.Query != "" {
		null := func(s string) *string {
			if s == "" {
				return nil
			}
			return &s
		}
		var sevArg any
		if severities != nil {
			sevArg = severities
		}
		where += " AND f.id = ANY(ARRAY(SELECT s.id FROM search_finding_ids(" + strings.Join([]string{
			arg(f.Repos.All), arg(nonNilIDs(f.Repos.IDs)), arg(f.RepoID), arg(f.Query), arg(sevArg) + "::text[]",
			arg(null(f.Status)), arg(null(f.Rule)), arg(null(f.PathPrefix)), arg(f.PRNumber) + "::int",
			afterTime(f.AfterID), arg(f.AfterID), arg(f.Limit), arg(wide),
		}, ", ") + ") s))"
	} else {
		if !f.Repos.All {
			where += " AND " + grantCheck("f.repository_id", arg(nonNilIDs(f.Repos.IDs)), wide)
		}
		if f.RepoID != nil {
			where += " AND f.repository_id = " + arg(*f.RepoID)
		}
		if severities != nil {
			where += " AND f.severity = ANY(" + arg(severities) + ")"
		}
		if f.Status != "" {
			where += " AND f.status = " + arg(f.Status)
		}
		if f.Rule != "" {
			where += " AND f.rule_key = " + arg(f.Rule)
		}
		if f.PathPrefix != "" {
			n := arg(f.PathPrefix)
			where += " AND left(f.path, length(" + n + ")) = " + n
		}
		if f.PRNumber != nil {
			where += " AND f.pull_request_id = (SELECT id FROM pull_requests WHERE tenant_id = $1 AND repository_id = " +
				arg(*f.RepoID) + " AND number = " + arg(*f.PRNumber) + ")"
		}
		if f.AfterID != 0 {
			where += " AND (f.created_at, f.id) < (" + afterTime(f.AfterID) + ", " + arg(f.AfterID) + ")"
		}
	}
	// Built before the return statement: Go does not order the read of
	// args against the call of arg in one expression list.
	sql := findingsSelect + where + " ORDER BY f.created_at DESC, f.id DESC LIMIT " + arg(f.Limit)
	return sql, args, nil
}

// nonNilIDs keeps "no grants" an empty array rather than NULL, for which
// "= ANY" would be NULL as well, but less obviously so.
func nonNilIDs(ids []int64) []int64 {
	if ids == nil {
		return []int64{}
	}
	return ids
}

// FindingsOfPR returns findings of a pull request by id (ids nil: the open
// findings of the newest review).
func (t TenantDB) FindingsOfPR(ctx context.Context, repoID int64, number int, ids []int64) (_ codelotse.PullRequest, _ []codelotse.Finding, err error) {
	defer wrap(&err, "postgres.FindingsOfPR")
	db, tenantID := t.db, t.tenantID
	var pr codelotse.PullRequest
	var out []codelotse.Finding
	err = db.InTenant(ctx, tenantID, func(tx *Tx) error {
		err := tx.q.QueryRow(ctx, `SELECT id, number, title, head_sha, base_ref, head_ref, url, state FROM pull_requests
			WHERE tenant_id = $1 AND repository_id = $2 AND number = $3`, tenantID, repoID, number).
			Scan(&pr.ID, &pr.Number, &pr.Title, &pr.HeadSHA, &pr.BaseRef, &pr.HeadRef, &pr.URL, &pr.State)
		if errors.Is(err, pgx.ErrNoRows) {
			return codelotse.Errorf(codelotse.NotFound, "Pull request #%d not found in this repository.", number)
		}
		if err != nil {
			return err
		}
		order := ` ORDER BY array_position(ARRAY['critical','high','medium','low','info'], f.severity), f.path, f.start_line NULLS FIRST, f.id`
		if ids != nil {
			out, err = queryFindings(ctx, tx.q, `WHERE f.tenant_id = $1 AND f.pull_request_id = $2 AND f.id = ANY($3)`+order, tenantID, pr.ID, ids)
			return err
		}
		out, err = queryFindings(ctx, tx.q, `WHERE f.tenant_id = $1 AND f.pull_request_id = $2 AND f.status = 'open'
			AND f.review_id = (SELECT id FROM reviews WHERE tenant_id = $1 AND pull_request_id = $2 ORDER BY created_at DESC, id DESC LIMIT 1)`+order,
			tenantID, pr.ID)
		return err
	})
	return pr, out, err
}

// DeleteReviews deletes the repository's reviews with these external ids,
// and their findings with them; it reports how many it deleted. The sync
// uses it for what GitHub lists as reviews that are not reviews to a
// reader (a reply's own review).
func (tx *Tx) DeleteReviews(ctx context.Context, repoID int64, externalIDs []string) (_ int, err error) {
	defer wrap(&err, "postgres.DeleteReviews")
	tag, err := tx.q.Exec(ctx, `DELETE FROM reviews WHERE tenant_id = $1 AND repository_id = $2 AND external_id = ANY($3)`,
		tx.tenantID, repoID, externalIDs)
	if err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}
