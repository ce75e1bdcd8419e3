package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/authn"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
	"github.com/codelotse/codelotse/pkg/tokens"
)

// cltctl runs the CLI against the test database and returns stdout.
func cltctl(t *testing.T, env *pgtest.Env, args ...string) (string, error) {
	t.Helper()
	out, _, err := cltctlStreams(t, env, args...)
	return out, err
}

// cltctlStreams is cltctl that also returns what the CLI wrote to stderr.
func cltctlStreams(t *testing.T, env *pgtest.Env, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	vars := map[string]string{"DATABASE_URL": env.AdminURL, "DB_ROLE_PREFIX": env.RolePrefix, "PUBLIC_URL": "http://127.0.0.1:8080"}
	var out, errOut bytes.Buffer
	err = run(context.Background(), args, func(k string) string { return vars[k] }, &out, &errOut)
	return out.String(), errOut.String(), err
}

func mustCltctl(t *testing.T, env *pgtest.Env, args ...string) string {
	t.Helper()
	out, err := cltctl(t, env, args...)
	if err != nil {
		t.Fatalf("cltctl %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// TestDeletedUserStaysLockedOut: deleting a user revokes their tokens and
// web sessions in the same transaction; re-adding the email (cltctl user
// add, a GitHub or an OIDC sign-in) revives the account but none of them;
// break-glass for an unknown or deleted email fails with a clear error.
func TestDeletedUserStaysLockedOut(t *testing.T) {
	env := pgtest.New(t)
	ctx := context.Background()
	mustCltctl(t, env, "tenant", "create", "--slug", "acme", "--name", "Acme")
	mustCltctl(t, env, "tenant", "set-mcp", "--slug", "acme", "--enabled", "true")
	mustCltctl(t, env, "user", "add", "--tenant", "acme", "--email", "dev@acme.test")
	secret := strings.TrimSpace(mustCltctl(t, env, "token", "create", "--tenant", "acme", "--email", "dev@acme.test", "--name", "laptop"))
	if !strings.HasPrefix(secret, "clt_") {
		t.Fatalf("token create printed %q", secret)
	}
	tid, err := env.Admin.TenantIDBySlug(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	cookieValue := tid + "." + authn.NewSecret()
	var userID string
	err = env.App.InTenant(ctx, tid, func(tx *postgres.Tx) error {
		u, err := tx.UserByEmail(ctx, "dev@acme.test")
		if err != nil {
			return err
		}
		userID = u.ID
		_, err = tx.CreateWebSession(ctx, authn.HashValue(cookieValue), u.ID, false, "", nil, time.Hour)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	live := func() (token, session bool) {
		t.Helper()
		f, found, err := env.App.AuthToken(ctx, tokens.Hash(secret), "")
		if err != nil {
			t.Fatal(err)
		}
		token = found && f.RevokedAt == nil && f.UserActive
		_, session, err = env.App.Tenant(tid).WebSessionByHash(ctx, authn.HashValue(cookieValue))
		if err != nil {
			t.Fatal(err)
		}
		return token, session
	}
	if tok, sess := live(); !tok || !sess {
		t.Fatalf("before deletion: token %v, session %v", tok, sess)
	}

	mustCltctl(t, env, "user", "delete", "--tenant", "acme", "--email", "dev@acme.test")
	if _, err := cltctl(t, env, "break-glass", "--tenant", "acme", "--email", "dev@acme.test"); err == nil || !strings.Contains(err.Error(), "no user with email") {
		t.Errorf("break-glass for a deleted user: %v", err)
	}
	if _, err := cltctl(t, env, "break-glass", "--tenant", "acme", "--email", "nobody@acme.test"); err == nil || !strings.Contains(err.Error(), "cltctl user add") {
		t.Errorf("break-glass for an unknown email: %v", err)
	}

	// Every way back in revives the account, none its credentials.
	mustCltctl(t, env, "user", "add", "--tenant", "acme", "--email", "dev@acme.test")
	if tok, sess := live(); tok || sess {
		t.Errorf("after user add: token live %v, session live %v", tok, sess)
	}
	if !strings.HasPrefix(mustCltctl(t, env, "break-glass", "--tenant", "acme", "--email", "dev@acme.test"), "http://127.0.0.1:8080/auth/link?v=") {
		t.Error("break-glass for an existing user printed no link")
	}
	mustCltctl(t, env, "user", "delete", "--tenant", "acme", "--email", "dev@acme.test")
	err = env.App.InTenant(ctx, tid, func(tx *postgres.Tx) error {
		if _, err := tx.UpsertGitHubUser(ctx, 4242, "dev", "Dev", "dev@acme.test"); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if tok, sess := live(); tok || sess {
		t.Errorf("after a GitHub sign-in: token live %v, session live %v", tok, sess)
	}
	mustCltctl(t, env, "user", "delete", "--tenant", "acme", "--email", "dev@acme.test")
	// An OIDC sign-in with a verified email of a user not bound to
	// another identity links to (and revives) the same account.
	if _, err := env.Admin.Pool.Exec(ctx, `UPDATE users SET github_user_id = NULL WHERE tenant_id = $1 AND id = $2`, tid, userID); err != nil {
		t.Fatal(err)
	}
	err = env.App.InTenant(ctx, tid, func(tx *postgres.Tx) error {
		p, err := tx.UpsertIdentityProvider(ctx, postgres.IdentityProvider{Issuer: "https://idp.acme.test", ClientID: "c", ClientSecret: "s",
			Scopes: []string{"openid"}}, postgres.Actor{Label: "test"})
		if err != nil {
			return err
		}
		u, err := tx.UpsertOIDCUser(ctx, p.ID, "sub-1", "dev@acme.test", "Dev", true)
		if err == nil && u.ID != userID {
			t.Errorf("the OIDC sign-in made a new user %s, not %s", u.ID, userID)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if tok, sess := live(); tok || sess {
		t.Errorf("after an OIDC sign-in: token live %v, session live %v", tok, sess)
	}
	var pending int
	if err := env.Admin.Pool.QueryRow(ctx, `SELECT count(*) FROM login_states WHERE user_id = $1`, userID).Scan(&pending); err != nil {
		t.Fatal(err)
	}
	if pending != 0 {
		t.Errorf("%d sign-in links of the deleted user survived", pending)
	}
}
