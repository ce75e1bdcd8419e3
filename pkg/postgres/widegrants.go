package postgres

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// A member's grants reach a statement as an array of repository ids
// ("repository_id = ANY($n)"). PostgreSQL plans that with the ids as
// constants and estimates each one against the column's statistics: about
// half a microsecond per id, on every call, so a member with 2,000 grants
// pays a millisecond of planning per statement before anything is read
// (issue 11: search_findings' member cases grew up to 9× from 1/10 to full
// size with the grants, not with the findings).
//
// Wide grants -- at least wideGrantsMin ids and at least a fifth of the
// tenant's repositories -- are therefore written as
// "coalesce(repository_id = ANY($n), false)": the planner does not look
// inside coalesce (it takes half the rows, at no cost per id), and a
// planner that believes half the rows pass walks the newest-first indexes,
// which is the right plan when a member sees a good share of the tenant.
// The array is still a constant of a custom plan, which PostgreSQL checks
// through a hash table; the read forces a custom plan for that (a generic
// plan would carry it as a parameter and search it element by element).
// Narrow grants keep the exact form: with few ids, or a small share of a big
// tenant, the estimate decides between reading the granted repositories'
// rows and walking the tenant, and the walk would read rows of repositories
// the member never sees.
const (
	wideGrantsMin = 100
	// wideGrantsShare: wide grants cover at least 1/wideGrantsShare of the
	// tenant's repositories.
	wideGrantsShare = 5
	// repoCountTTL is how long a tenant's repository count serves as the
	// share's denominator. It only chooses the shape of a statement, never
	// what the statement returns, so a stale count costs at most a worse
	// plan.
	repoCountTTL = 10 * time.Minute
)

// repoCount is a tenant's repository count as last read.
type repoCount struct {
	n  int64
	at time.Time
}

// repoCounts caches repository counts per tenant for wideGrants.
type repoCounts struct {
	m sync.Map
	// minIDs replaces wideGrantsMin when above zero, and now replaces
	// time.Now when set: tests run the wide form on a small fixture and
	// age the cache without waiting.
	minIDs int
	now    func() time.Time
}

// narrowToRepo checks the one repository a search asks for (repoID)
// against f here, rather than by the planner over every grant: granted, the
// search needs no grant check beyond its own repository condition (All);
// not granted, it is left no grant and returns nothing.
func narrowToRepo(f RepoFilter, repoID *int64) RepoFilter {
	if f.All || repoID == nil {
		return f
	}
	if slices.Contains(f.IDs, *repoID) {
		return RepoFilter{All: true}
	}
	return RepoFilter{IDs: []int64{}}
}

// wideGrants reports whether f's grants are wide (see wideGrantsMin). It
// reads the tenant's repository count at most once per repoCountTTL, and
// only for a member with at least wideGrantsMin grants.
func (t TenantDB) wideGrants(ctx context.Context, f RepoFilter) (bool, error) {
	minIDs := wideGrantsMin
	if t.db.repoCounts.minIDs > 0 {
		minIDs = t.db.repoCounts.minIDs
	}
	if f.All || len(f.IDs) < minIDs {
		return false, nil
	}
	n, err := t.repositoryCount(ctx)
	if err != nil {
		return false, err
	}
	return int64(len(f.IDs))*wideGrantsShare >= n, nil
}

// repositoryCount returns the tenant's repository count, cached for
// repoCountTTL.
func (t TenantDB) repositoryCount(ctx context.Context) (int64, error) {
	now := time.Now()
	if t.db.repoCounts.now != nil {
		now = t.db.repoCounts.now()
	}
	if v, ok := t.db.repoCounts.m.Load(t.tenantID); ok {
		if c := v.(repoCount); now.Sub(c.at) < repoCountTTL {
			return c.n, nil
		}
	}
	var n int64
	err := t.db.readTenant(ctx, t.tenantID, 0, `SELECT count(*) FROM repositories WHERE tenant_id = $1`, []any{t.tenantID}, func(rows pgx.Rows) error {
		var err error
		n, err = pgx.CollectExactlyOneRow(rows, pgx.RowTo[int64])
		return err
	})
	if err != nil {
		return 0, err
	}
	t.db.repoCounts.m.Store(t.tenantID, repoCount{n: n, at: now})
	return n, nil
}

// grantCheck is the condition that col is one of the granted ids in the
// array parameter param, in the form for wide or narrow grants. Its wide
// form must stay in step with search_finding_ids' (policies/findings.sql).
func grantCheck(col, param string, wide bool) string {
	if wide {
		return "coalesce(" + col + " = ANY(" + param + "), false)"
	}
	return col + " = ANY(" + param + ")"
}

// grantWhere returns the condition that limits col to f's repositories for
// a statement whose other parameters are args ($1, $2, …), the arguments
// with the grants appended when the condition needs them, and the read's
// options (a custom plan for wide grants).
func (t TenantDB) grantWhere(ctx context.Context, f RepoFilter, col string, args ...any) (string, []any, readOptions, error) {
	if f.All {
		return "true", args, readOptions{}, nil
	}
	wide, err := t.wideGrants(ctx, f)
	if err != nil {
		return "", nil, readOptions{}, err
	}
	args = append(args, nonNilIDs(f.IDs))
	return grantCheck(col, "$"+strconv.Itoa(len(args)), wide), args, readOptions{customPlan: wide}, nil
}
