package postgres

import (
	"context"
	"errors"
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
func ImportReview(ctx context.Context, tx pgx.Tx, tenantID string, imp codelotse.ReviewImport, actor Actor) (ImportResult, error) {
	var res ImportResult
	repo, err := RepositoryByName(ctx, tx, tenantID, imp.Repository)
	if codelotse.ErrorCode(err) == codelotse.NotFound {
		return res, codelotse.Errorf(codelotse.Invalid, "/repository: %s is not registered in this tenant; add it first with cltctl repo add", imp.Repository)
	}
	if err != nil {
		return res, err
	}
	res.RepositoryID = repo.ID

	if pr := imp.PullRequest; pr != nil {
		var id int64
		err := tx.QueryRow(ctx, `INSERT INTO pull_requests (tenant_id, repository_id, number, title, author, state, base_ref, head_ref, head_sha, url)
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
	err = tx.QueryRow(ctx, `INSERT INTO reviews (tenant_id, repository_id, pull_request_id, external_id, commit_sha, status, summary, author, created_at)
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
	tag, err := tx.Exec(ctx, `INSERT INTO findings (tenant_id, repository_id, pull_request_id, review_id, rule_key, severity, status,
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
	tag, err = tx.Exec(ctx, `DELETE FROM findings WHERE tenant_id = $1 AND review_id = $2 AND NOT (fingerprint = ANY($3))`,
		tenantID, res.ReviewID, fp)
	if err != nil {
		return res, err
	}
	res.Removed = int(tag.RowsAffected())
	return res, insertAudit(ctx, tx, tenantID, actor, "review.imported", imp.Repository,
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
func GetReview(ctx context.Context, db *DB, tenantID string, repoID int64, number int, reviewID *int64) (ReviewDetail, error) {
	var d ReviewDetail
	err := db.InTenant(ctx, tenantID, func(tx pgx.Tx) error {
		p := &d.PullRequest
		err := tx.QueryRow(ctx, `SELECT id, repository_id, number, title, author, state, base_ref, head_ref, head_sha, url, created_at, updated_at
			FROM pull_requests WHERE tenant_id = $1 AND repository_id = $2 AND number = $3`, tenantID, repoID, number).
			Scan(&p.ID, &p.RepositoryID, &p.Number, &p.Title, &p.Author, &p.State, &p.BaseRef, &p.HeadRef, &p.HeadSHA, &p.URL, &p.CreatedAt, &p.UpdatedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return codelotse.Errorf(codelotse.NotFound, "Pull request #%d not found in this repository.", number)
		}
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT id FROM reviews WHERE tenant_id = $1 AND pull_request_id = $2 ORDER BY created_at DESC, id DESC`, tenantID, p.ID)
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
		err = tx.QueryRow(ctx, `SELECT id, repository_id, pull_request_id, external_id, commit_sha, status, summary, author, created_at
			FROM reviews WHERE tenant_id = $1 AND pull_request_id = $2 AND id = $3`, tenantID, p.ID, want).
			Scan(&r.ID, &r.RepositoryID, &r.PullRequestID, &r.ExternalID, &r.CommitSHA, &r.Status, &r.Summary, &r.Author, &r.CreatedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return codelotse.Errorf(codelotse.NotFound, "Review %d not found on pull request #%d.", want, number)
		}
		if err != nil {
			return err
		}
		d.Findings, err = queryFindings(ctx, tx, `WHERE f.tenant_id = $1 AND f.review_id = $2
			ORDER BY array_position(ARRAY['critical','high','medium','low','info'], f.severity), f.path, f.start_line NULLS FIRST, f.id`,
			tenantID, r.ID)
		return err
	})
	return d, err
}

const findingColumns = `f.id, f.repository_id, r.full_name, f.pull_request_id, p.number, f.review_id, f.rule_key, f.severity, f.status,
	f.path, f.start_line, f.end_line, f.title, f.body, f.suggestion, f.fingerprint, f.commit_sha, f.source, f.created_at,
	coalesce(r.indexed_commit, '')`

func queryFindings(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, where string, args ...any) ([]codelotse.Finding, error) {
	rows, err := q.Query(ctx, `SELECT `+findingColumns+`
		FROM findings f
		JOIN repositories r ON r.tenant_id = f.tenant_id AND r.id = f.repository_id
		LEFT JOIN pull_requests p ON p.tenant_id = f.tenant_id AND p.id = f.pull_request_id
		`+where, args...)
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
	// Keyset: findings strictly older than (AfterTime, AfterID).
	AfterTime *time.Time
	AfterID   int64
	Limit     int
}

// SearchFindings returns matching findings across the viewable
// repositories, newest first.
func SearchFindings(ctx context.Context, db *DB, tenantID string, f FindingFilter) ([]codelotse.Finding, error) {
	minRank := 0
	if f.MinSeverity != "" {
		minRank = f.MinSeverity.Rank()
	}
	var out []codelotse.Finding
	err := db.InTenant(ctx, tenantID, func(tx pgx.Tx) error {
		var err error
		out, err = queryFindings(ctx, tx, `
			WHERE f.tenant_id = $1
			  AND ($2 OR f.repository_id = ANY($3))
			  AND ($4::bigint IS NULL OR f.repository_id = $4)
			  AND ($5 = '' OR strpos(lower(f.title || ' ' || f.body || ' ' || f.rule_key || ' ' || f.path), lower($5)) > 0)
			  AND array_position(ARRAY['info','low','medium','high','critical'], f.severity) - 1 >= $6
			  AND ($7 = '' OR f.status = $7)
			  AND ($8 = '' OR f.rule_key = $8)
			  AND ($9 = '' OR left(f.path, length($9)) = $9)
			  AND ($10::int IS NULL OR p.number = $10)
			  AND ($11::timestamptz IS NULL OR (f.created_at, f.id) < ($11, $12))
			ORDER BY f.created_at DESC, f.id DESC
			LIMIT $13`,
			tenantID, f.Repos.All, f.Repos.IDs, f.RepoID, f.Query, minRank, f.Status, f.Rule, f.PathPrefix, f.PRNumber,
			f.AfterTime, f.AfterID, f.Limit)
		return err
	})
	return out, err
}

// FindingsOfPR returns findings of a pull request by id (ids nil: the open
// findings of the newest review).
func FindingsOfPR(ctx context.Context, db *DB, tenantID string, repoID int64, number int, ids []int64) (codelotse.PullRequest, []codelotse.Finding, error) {
	var pr codelotse.PullRequest
	var out []codelotse.Finding
	err := db.InTenant(ctx, tenantID, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `SELECT id, number, title, head_sha, base_ref, head_ref, url, state FROM pull_requests
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
			out, err = queryFindings(ctx, tx, `WHERE f.tenant_id = $1 AND f.pull_request_id = $2 AND f.id = ANY($3)`+order, tenantID, pr.ID, ids)
			return err
		}
		out, err = queryFindings(ctx, tx, `WHERE f.tenant_id = $1 AND f.pull_request_id = $2 AND f.status = 'open'
			AND f.review_id = (SELECT id FROM reviews WHERE tenant_id = $1 AND pull_request_id = $2 ORDER BY created_at DESC, id DESC LIMIT 1)`+order,
			tenantID, pr.ID)
		return err
	})
	return pr, out, err
}
