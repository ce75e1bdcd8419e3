package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/postgres"
)

// TestWideGrants checks the wide-grants decision (widegrants.go): enough
// ids and a fifth of the tenant's repositories; never for an admin; the
// repository count is read once and then again only after its time to live,
// so a tenant that grows is seen within that time.
func TestWideGrants(t *testing.T) {
	t.Parallel()
	env, s := seedBig(t, 40) // 75 repositories
	ctx := context.Background()
	var now atomic.Int64
	now.Store(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC).UnixNano())
	postgres.SetWideGrants(env.App, 10, func() time.Time { return time.Unix(0, now.Load()) })
	tdb := env.App.Tenant(s.TenantID)
	wide := func(f postgres.RepoFilter) bool {
		t.Helper()
		ok, err := postgres.WideGrants(ctx, tdb, f)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	ids := func(n int) postgres.RepoFilter { return postgres.RepoFilter{IDs: s.RepoIDs[:n]} }
	for _, tc := range []struct {
		name string
		f    postgres.RepoFilter
		want bool
	}{
		{"admin", postgres.RepoFilter{All: true}, false},
		{"no grants", postgres.RepoFilter{}, false},
		{"fewer ids than the minimum", ids(9), false},
		{"the minimum but under a fifth", ids(14), false},
		{"a fifth", ids(15), true},
		{"most", ids(50), true},
	} {
		if got := wide(tc.f); got != tc.want {
			t.Errorf("%s: wide = %v, want %v", tc.name, got, tc.want)
		}
	}
	// The tenant triples: 15 ids stay wide on the cached count until it
	// expires, then are a fifteenth.
	if err := env.Admin.InTenant(ctx, s.TenantID, func(tx *postgres.Tx) error {
		_, err := postgres.Raw(tx).Exec(ctx, `INSERT INTO repositories (tenant_id, full_name, url)
			SELECT $1, format('bigorg/more-%s', i), '' FROM generate_series(1, 150) i`, s.TenantID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !wide(ids(15)) {
		t.Error("the cached count was read again before its time to live")
	}
	now.Add(int64(9 * time.Minute))
	if !wide(ids(15)) {
		t.Error("the cached count was read again after 9 minutes")
	}
	now.Add(int64(2 * time.Minute))
	if wide(ids(15)) {
		t.Error("15 of 225 repositories are wide: the count was not read again after its time to live")
	}
}

// TestResolveRepositoryChecksGrants: the grant is checked after the lookup
// (no grant array in the statement); an ungranted repository, by id or by
// name, is "Not found." like an unknown one.
func TestResolveRepositoryChecksGrants(t *testing.T) {
	t.Parallel()
	env, s := seedBig(t, 400) // 7 repositories, 5 granted
	ctx := context.Background()
	tdb := env.App.Tenant(s.TenantID)
	member := postgres.RepoFilter{IDs: s.MemberRepoIDs}
	granted, ungranted := s.MemberRepoIDs[1], s.RepoIDs[len(s.RepoIDs)-1]
	for _, tc := range []struct {
		name string
		f    postgres.RepoFilter
		ref  string
		want int64 // 0: not found
	}{
		{"granted, by id", member, strconv.FormatInt(granted, 10), granted},
		{"granted, by name in other case", member, fmt.Sprintf("BigOrg/Repo-%05d", 2), granted},
		{"ungranted, by id", member, strconv.FormatInt(ungranted, 10), 0},
		{"ungranted, by name", member, fmt.Sprintf("bigorg/repo-%05d", len(s.RepoIDs)), 0},
		{"ungranted, admin", postgres.RepoFilter{All: true}, strconv.FormatInt(ungranted, 10), ungranted},
		{"no grants", postgres.RepoFilter{}, strconv.FormatInt(granted, 10), 0},
		{"unknown", member, "bigorg/nope", 0},
	} {
		r, err := tdb.ResolveRepository(ctx, tc.f, tc.ref)
		switch {
		case tc.want == 0 && (codelotse.ErrorCode(err) != codelotse.NotFound || codelotse.ErrorMessage(err) != "Not found."):
			t.Errorf("%s: err = %v, want Not found.", tc.name, err)
		case tc.want != 0 && (err != nil || r.ID != tc.want):
			t.Errorf("%s: got %d, %v, want %d", tc.name, r.ID, err, tc.want)
		}
	}
}

// TestRepositoryReadsWithWideGrants: the repository reads that take a
// principal's grants (ListRepositories paged to the end, with and without
// a query; IndexedRepositoryIDs) return exactly the granted repositories
// in both forms of the grant check.
func TestRepositoryReadsWithWideGrants(t *testing.T) {
	t.Parallel()
	env, s := seedBig(t, 40) // 75 repositories, 50 granted
	ctx := context.Background()
	// Every third repository has a code index.
	if err := env.Admin.InTenant(ctx, s.TenantID, func(tx *postgres.Tx) error {
		_, err := postgres.Raw(tx).Exec(ctx, `UPDATE repositories SET indexed_commit = 'abc', indexed_at = now() WHERE tenant_id = $1 AND id % 3 = 0`, s.TenantID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	tdb := env.App.Tenant(s.TenantID)
	member := postgres.RepoFilter{IDs: s.MemberRepoIDs}
	granted := map[int64]bool{}
	for _, id := range s.MemberRepoIDs {
		granted[id] = true
	}
	// list pages through the listing, 7 at a time, to its end.
	list := func(f postgres.RepoFilter, query string) []int64 {
		t.Helper()
		var ids []int64
		var after int64
		for {
			page, err := tdb.ListRepositories(ctx, f, query, after, 7)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range page {
				ids = append(ids, r.ID)
			}
			if len(page) < 7 {
				return ids
			}
			after = page[len(page)-1].ID
		}
	}
	indexed := func() []int64 {
		t.Helper()
		ids, err := tdb.IndexedRepositoryIDs(ctx, member)
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	check := func(form string, ids []int64, want func(int64) bool, n int) {
		t.Helper()
		seen := map[int64]bool{}
		for _, id := range ids {
			if !granted[id] || !want(id) || seen[id] {
				t.Errorf("%s: repository %d listed (granted %v, twice %v)", form, id, granted[id], seen[id])
			}
			seen[id] = true
		}
		if len(seen) != n {
			t.Errorf("%s: %d repositories, want %d", form, len(seen), n)
		}
	}
	all := func(int64) bool { return true }
	third := func(id int64) bool { return id%3 == 0 }
	nThird := 0
	for _, id := range s.MemberRepoIDs {
		if third(id) {
			nThird++
		}
	}
	for _, wide := range []bool{false, true} {
		if wide {
			postgres.SetWideGrants(env.App, 2, nil)
		}
		if ok, err := postgres.WideGrants(ctx, tdb, member); err != nil || ok != wide {
			t.Fatalf("WideGrants = %v, %v; want %v", ok, err, wide)
		}
		form := fmt.Sprintf("wide=%v", wide)
		check(form+" list", list(member, ""), all, len(s.MemberRepoIDs))
		check(form+" list repo-0001", list(member, "REPO-0001"), all, 10) // repo-00010 … repo-00019, all among the 50 granted
		check(form+" indexed", indexed(), third, nThird)
	}

	// The listing's order is lower-cased full name, then id, as before the
	// name key (migration 0067): names in mixed case and with punctuation,
	// inserted out of name order, paged through with the cursor as an
	// admin, against PostgreSQL's own ORDER BY lower(full_name), id.
	if err := env.Admin.InTenant(ctx, s.TenantID, func(tx *postgres.Tx) error {
		_, err := postgres.Raw(tx).Exec(ctx, `INSERT INTO repositories (tenant_id, full_name, url)
			SELECT $1, n, '' FROM unnest(ARRAY['bigorg/Zed', 'BIGORG/alpha', 'bigorg/Beta-1', 'bigorg/beta_0', 'bigorg/_x',
				'bigorg/REPO-00007x', 'other/a', 'Bigorg/beta.2']) n`, s.TenantID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var want []int64
	if err := env.Admin.InTenant(ctx, s.TenantID, func(tx *postgres.Tx) error {
		rows, err := postgres.Raw(tx).Query(ctx, `SELECT id FROM repositories WHERE tenant_id = $1 ORDER BY lower(full_name), id`, s.TenantID)
		if err != nil {
			return err
		}
		want, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got := list(postgres.RepoFilter{All: true}, ""); !slices.Equal(got, want) {
		t.Errorf("listing order:\n got %v\nwant %v", got, want)
	}
}
