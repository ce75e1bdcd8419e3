package postgres_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
)

// TestApplyGitHubMemberships: users are matched by GitHub id; a kept user
// gets the role and exactly the listed repositories, fresh; a user GitHub
// no longer lists is expired and loses their repositories; users without
// a GitHub id and other tenants are untouched.
func TestApplyGitHubMemberships(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	ctx := context.Background()
	a, b := seedTenant(t, env, "acme"), seedTenant(t, env, "other")
	api, web := addRepo(t, env, a, "acme/api"), addRepo(t, env, a, "acme/web")
	stays := addUser(t, env, a, "stays@acme.test", codelotse.RoleMember)
	leaves := addUser(t, env, a, "leaves@acme.test", codelotse.RoleMember)
	local := addUser(t, env, a, "local@acme.test", codelotse.RoleMember)
	foreign := addUser(t, env, b, "stays@other.test", codelotse.RoleMember)
	old := time.Now().Add(-25 * time.Hour)
	if _, err := env.Admin.Pool.Exec(ctx, `UPDATE users SET github_user_id = CASE email
			WHEN 'stays@acme.test' THEN 101 WHEN 'leaves@acme.test' THEN 102 WHEN 'stays@other.test' THEN 101 END
		WHERE email IN ('stays@acme.test', 'leaves@acme.test', 'stays@other.test')`); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Admin.Pool.Exec(ctx, `UPDATE tenant_memberships SET refreshed_at = $1`, old); err != nil {
		t.Fatal(err)
	}
	if err := env.App.InTenant(ctx, a, func(tx *postgres.Tx) error {
		for _, g := range []struct {
			u    string
			repo int64
		}{{stays.ID, web.ID}, {leaves.ID, api.ID}} {
			if err := tx.GrantRepository(ctx, g.u, g.repo); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	now := time.Now().Truncate(time.Second)
	var refreshed, expired int
	err := env.App.InTenant(ctx, a, func(tx *postgres.Tx) error {
		var err error
		refreshed, expired, err = tx.ApplyGitHubMemberships(ctx, map[int64]postgres.GitHubAccess{
			101: {Role: codelotse.RoleAdmin, RepoIDs: []int64{api.ID}},
			999: {Role: codelotse.RoleMember}, // a GitHub user who never signed in
		}, now, time.Time{}, postgres.Actor{Label: "test"})
		return err
	})
	if err != nil || refreshed != 1 || expired != 1 {
		t.Fatalf("apply: refreshed %d, expired %d, %v", refreshed, expired, err)
	}
	type row struct {
		role   string
		source string
		at     time.Time
		repos  []int64
	}
	read := func(tenant, user string) row {
		var r row
		if err := env.Admin.Pool.QueryRow(ctx, `SELECT m.role, m.source, m.refreshed_at,
				coalesce((SELECT array_agg(repository_id ORDER BY repository_id) FROM repo_memberships rm WHERE rm.tenant_id = m.tenant_id AND rm.user_id = m.user_id), '{}')
			FROM tenant_memberships m WHERE m.tenant_id = $1 AND m.user_id = $2`, tenant, user).Scan(&r.role, &r.source, &r.at, &r.repos); err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := read(a, stays.ID); r.role != "admin" || r.source != "github" || !r.at.Equal(now) || !slices.Equal(r.repos, []int64{api.ID}) {
		t.Errorf("kept user = %+v", r)
	}
	if r := read(a, leaves.ID); r.at.After(time.Unix(0, 0)) || len(r.repos) != 0 {
		t.Errorf("removed user = %+v, want expired without repositories", r)
	}
	if r := read(a, local.ID); r.at.Sub(old).Abs() > time.Millisecond {
		t.Errorf("user without a GitHub id was touched: %+v", r)
	}
	if r := read(b, foreign.ID); r.at.Sub(old).Abs() > time.Millisecond {
		t.Errorf("another tenant's user with the same GitHub id was touched: %+v", r)
	}
	var users int
	if err := env.Admin.Pool.QueryRow(ctx, `SELECT count(*) FROM users WHERE tenant_id = $1`, a).Scan(&users); err != nil || users != 3 {
		t.Errorf("users = %d (%v): a GitHub user who never signed in must not get a row", users, err)
	}

	// The outcome is kept for the admin page; a later failure keeps the
	// time of the last success.
	if err := env.App.InTenant(ctx, a, func(tx *postgres.Tx) error {
		if err := tx.RecordMembershipRefresh(ctx, postgres.MembershipRefresh{State: "ok", Members: 2, FinishedAt: now}); err != nil {
			return err
		}
		return tx.RecordMembershipRefresh(ctx, postgres.MembershipRefresh{State: "missing_permission", Detail: "Members", FinishedAt: now.Add(time.Hour)})
	}); err != nil {
		t.Fatal(err)
	}
	var st *postgres.MembershipRefresh
	_ = env.App.InTenant(ctx, a, func(tx *postgres.Tx) error {
		st, err = tx.GetMembershipRefresh(ctx)
		return err
	})
	if err != nil || st == nil || st.State != "missing_permission" || st.LastOKAt == nil || !st.LastOKAt.Equal(now) {
		t.Errorf("refresh status = %+v, %v", st, err)
	}
	_ = env.App.InTenant(ctx, b, func(tx *postgres.Tx) error {
		st, err = tx.GetMembershipRefresh(ctx)
		return err
	})
	if err != nil || st != nil {
		t.Errorf("another tenant sees a refresh status: %+v, %v", st, err)
	}
}
