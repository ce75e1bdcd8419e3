package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/githubapp/githubtest"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
)

// TestRefreshMemberships: the refresh keeps an aged member fresh with the
// repositories GitHub lists for them, expires a user GitHub no longer
// lists, and records the outcome; an installation without the Members
// permission leaves the caches alone and records why.
func TestRefreshMemberships(t *testing.T) {
	env := pgtest.New(t)
	ctx := context.Background()
	gh := githubtest.New(t)
	gh.AddOrg(2001, "acme-org")
	gh.AddInstallation(3001, 2001)
	gh.AddRepo(3001, githubtest.Repo{ID: 4001, Name: "api", Private: true})
	gh.AddRepo(3001, githubtest.Repo{ID: 4002, Name: "web"})
	gh.AddUser(githubtest.User{ID: 1001, Login: "octocat"})
	gh.AddUser(githubtest.User{ID: 1002, Login: "hubot"})
	gh.SetMembership(1001, 2001, "active", "member")
	gh.SetTeam(2001, "backend", []int64{1001}, map[int64]string{4001: "pull"})

	inst := int64(3001)
	tn, err := env.Admin.CreateTenant(ctx, postgres.NewTenant{Slug: "acme", Name: "Acme", GitHubInstallationID: &inst}, "test")
	if err != nil {
		t.Fatal(err)
	}
	var octo, hubot string
	if err := env.App.InTenant(ctx, tn.ID, func(tx *postgres.Tx) error {
		for _, u := range []struct {
			id    int64
			login string
			out   *string
		}{{1001, "octocat", &octo}, {1002, "hubot", &hubot}} {
			usr, err := tx.UpsertGitHubUser(ctx, u.id, u.login, "", u.login+"@acme.test")
			if err != nil {
				return err
			}
			if err := tx.RefreshMembership(ctx, usr.ID, "member", "github", time.Now().Add(-25*time.Hour)); err != nil {
				return err
			}
			*u.out = usr.ID
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	d := githubDeps(t, env, gh, nil)
	if err := d.RefreshMemberships(ctx, tn.ID); err != nil {
		t.Fatal(err)
	}
	fresh := func(user string) (bool, []string) {
		var ok bool
		var repos []string
		if err := env.Admin.Pool.QueryRow(ctx, `SELECT m.refreshed_at > now() - interval '1 hour',
				coalesce((SELECT array_agg(r.full_name ORDER BY r.full_name) FROM repo_memberships rm JOIN repositories r ON r.tenant_id = rm.tenant_id AND r.id = rm.repository_id
				          WHERE rm.tenant_id = m.tenant_id AND rm.user_id = m.user_id), '{}')
			FROM tenant_memberships m WHERE m.tenant_id = $1 AND m.user_id = $2`, tn.ID, user).Scan(&ok, &repos); err != nil {
			t.Fatal(err)
		}
		return ok, repos
	}
	if ok, repos := fresh(octo); !ok || len(repos) != 1 || repos[0] != "acme-org/api" {
		t.Errorf("member after refresh: fresh=%v repos=%v, want fresh with acme-org/api", ok, repos)
	}
	if ok, repos := fresh(hubot); ok || len(repos) != 0 {
		t.Errorf("non-member after refresh: fresh=%v repos=%v, want expired", ok, repos)
	}
	status := func() *postgres.MembershipRefresh {
		var st *postgres.MembershipRefresh
		if err := env.App.InTenant(ctx, tn.ID, func(tx *postgres.Tx) error {
			var err error
			st, err = tx.GetMembershipRefresh(ctx)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := status(); st == nil || st.State != "ok" || st.Members != 1 || st.Repositories != 2 || st.UsersRefreshed != 1 || st.UsersExpired != 1 {
		t.Errorf("status = %+v", st)
	}

	// Without the Members permission nothing changes but the status.
	if _, err := env.Admin.Pool.Exec(ctx, `UPDATE tenant_memberships SET refreshed_at = now() - interval '2 hours' WHERE user_id = $1`, octo); err != nil {
		t.Fatal(err)
	}
	gh.RevokeInstallationPermission(3001, "members")
	if err := d.RefreshMemberships(ctx, tn.ID); err != nil {
		t.Fatalf("a missing permission must not fail the job: %v", err)
	}
	if _, repos := fresh(octo); len(repos) != 1 {
		t.Errorf("member after a refresh without permission: repos=%v, want the caches untouched", repos)
	}
	var age time.Duration
	if err := env.Admin.Pool.QueryRow(ctx, `SELECT extract(epoch FROM now() - refreshed_at)::bigint * 1000000000 FROM tenant_memberships WHERE user_id = $1`, octo).Scan(&age); err != nil || age < time.Hour {
		t.Errorf("the failed refresh stamped the cache (age %v, %v)", age, err)
	}
	if st := status(); st == nil || st.State != "missing_permission" || st.LastOKAt == nil {
		t.Errorf("status without permission = %+v", st)
	}
}
