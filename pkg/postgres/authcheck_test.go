package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
	"github.com/codelotse/codelotse/pkg/tokens"
)

// TestAuthCheckRidesAlong: a token check attached to a context is answered
// by the first tenant read on it, in the same round trip, with the facts
// AuthToken gives; a second read does not repeat it; a read that fails
// before the facts arrive leaves the check to a lookup of its own; and a
// check of another tenant's token, riding along a read of this tenant,
// still answers only that token's facts (the read itself stays this
// tenant's).
func TestAuthCheckRidesAlong(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	ctx := context.Background()
	a := seedTenant(t, env, "acme")
	b := seedTenant(t, env, "bravo")
	addUser(t, env, a, "dev@acme.test", codelotse.RoleMember)
	addUser(t, env, b, "dev@bravo.test", codelotse.RoleMember)
	secretA := createToken(t, env, a, "dev@acme.test", "laptop", 30)
	secretB := createToken(t, env, b, "dev@bravo.test", "laptop", 30)
	want, _, err := env.App.AuthToken(ctx, tokens.Hash(secretA), "")
	if err != nil {
		t.Fatal(err)
	}
	countRepos := func(ctx context.Context, tenant string) (int, error) {
		var n int
		err := postgres.ReadTenant(ctx, env.App, tenant, "SELECT count(*) FROM repositories", nil, func(rows pgx.Rows) error {
			for rows.Next() {
				if err := rows.Scan(&n); err != nil {
					return err
				}
			}
			return nil
		})
		return n, err
	}
	addRepo(t, env, a, "acme/api")

	chk := postgres.NewAuthCheck(tokens.Hash(secretA), "")
	cctx := postgres.WithAuthCheck(ctx, chk)
	before := env.App.Acquires()
	if n, err := countRepos(cctx, a); err != nil || n != 1 {
		t.Fatalf("read with a check: %d repositories, %v", n, err)
	}
	if n, err := countRepos(cctx, a); err != nil || n != 1 {
		t.Fatalf("second read: %d repositories, %v", n, err)
	}
	if got := env.App.Acquires() - before; got != 2 {
		t.Errorf("two reads took %d round trips, want 2 (the check rides along, never on its own)", got)
	}
	f, found, rode, err := chk.Facts(ctx, env.App)
	if err != nil || !found || !rode {
		t.Fatalf("Facts: found %v rode %v, %v", found, rode, err)
	}
	if f.TokenID != want.TokenID || f.TenantID != a || f.UserID != want.UserID || !f.ExpiresAt.Equal(want.ExpiresAt) {
		t.Errorf("facts %+v, want %+v", f, want)
	}
	if got := env.App.Acquires() - before; got != 2 {
		t.Errorf("Facts after a read took a round trip of its own")
	}

	// A read that never reached the database (its context is done): the
	// check is looked up on its own, later, on a live context.
	chk = postgres.NewAuthCheck(tokens.Hash(secretA), "")
	dead, cancel := context.WithCancel(postgres.WithAuthCheck(ctx, chk))
	cancel()
	if _, err := countRepos(dead, a); err == nil {
		t.Fatal("read on a cancelled context succeeded")
	}
	if f, found, rode, err := chk.Facts(ctx, env.App); err != nil || !found || rode || f.TokenID != want.TokenID {
		t.Errorf("after a failed read: found %v rode %v token %s, %v", found, rode, f.TokenID, err)
	}

	// Another tenant's token riding along a read of acme: its own facts,
	// and the read still sees acme only.
	chk = postgres.NewAuthCheck(tokens.Hash(secretB), "")
	if n, err := countRepos(postgres.WithAuthCheck(ctx, chk), a); err != nil || n != 1 {
		t.Fatalf("read: %d, %v", n, err)
	}
	if f, found, _, err := chk.Facts(ctx, env.App); err != nil || !found || f.TenantID != b {
		t.Errorf("bravo's token: found %v tenant %s, %v", found, f.TenantID, err)
	}
	// An unknown token: no facts, and the read is unaffected.
	chk = postgres.NewAuthCheck(tokens.Hash(tokens.Generate()), "")
	if n, err := countRepos(postgres.WithAuthCheck(ctx, chk), a); err != nil || n != 1 {
		t.Fatalf("read: %d, %v", n, err)
	}
	if _, found, rode, err := chk.Facts(ctx, env.App); err != nil || found || !rode {
		t.Errorf("unknown token: found %v rode %v, %v", found, rode, err)
	}
}
