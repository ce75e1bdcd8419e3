package postgres_test

import (
	"context"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
	"github.com/codelotse/codelotse/pkg/tokens"
)

// TestAuthEpochs: every table auth_token reads (as it is installed, so that
// a table added to it later is covered too) gives the tenant a new epoch on
// any statement that changes its rows, and only that tenant; a statement
// that changes nothing, recording a token's use and a new token do not; and
// nobody but the triggers can set an epoch back, nor TRUNCATE the tables.
func TestAuthEpochs(t *testing.T) {
	env := pgtest.New(t)
	ctx := context.Background()
	a := seedTenant(t, env, "acme")
	b := seedTenant(t, env, "bravo")
	addUser(t, env, a, "dev@acme.test", codelotse.RoleMember)
	addUser(t, env, b, "dev@bravo.test", codelotse.RoleMember)
	createToken(t, env, a, "dev@acme.test", "laptop", 30)
	createToken(t, env, b, "dev@bravo.test", "laptop", 30)
	repo := addRepo(t, env, a, "acme/api")

	epoch := func(tenant string) int64 {
		t.Helper()
		var e int64
		if err := env.Admin.Pool.QueryRow(ctx, `SELECT coalesce((SELECT epoch FROM auth_epochs WHERE tenant_id = $1), 0)`, tenant).Scan(&e); err != nil {
			t.Fatal(err)
		}
		return e
	}
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := env.Admin.Pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	// bumps reports whether sql gave acme a new epoch, and checks that
	// bravo's stayed.
	bumps := func(sql string, args ...any) bool {
		t.Helper()
		ea, eb := epoch(a), epoch(b)
		exec(sql, args...)
		if epoch(b) != eb {
			t.Errorf("%s: bravo's epoch changed", sql)
		}
		return epoch(a) != ea
	}

	// The tables auth_token reads, from its installed source.
	var src string
	if err := env.Admin.Pool.QueryRow(ctx, `SELECT prosrc FROM pg_proc WHERE proname = 'auth_token'`).Scan(&src); err != nil {
		t.Fatal(err)
	}
	var tables []string
	for _, m := range regexp.MustCompile(`public\.(\w+)`).FindAllStringSubmatch(src, -1) {
		if m[1] != "auth_epochs" && !slices.Contains(tables, m[1]) {
			tables = append(tables, m[1])
		}
	}
	slices.Sort(tables)
	want := []string{"identity_providers", "mcp_tokens", "oidc_group_mappings", "repo_memberships", "tenant_memberships", "tenant_settings", "tenants", "users"}
	if !slices.Equal(tables, want) {
		t.Errorf("auth_token reads %v; this test (and policies/tenancy.sql's triggers) know %v", tables, want)
	}

	// Make sure every table has a row of acme's, so that an update of all
	// of acme's rows changes something.
	err := env.App.InTenant(ctx, a, func(tx *postgres.Tx) error {
		if _, err := tx.SetMCPEnabled(ctx, true, postgres.Actor{Label: "test"}); err != nil {
			return err
		}
		u, err := tx.UserByEmail(ctx, "dev@acme.test")
		if err != nil {
			return err
		}
		return tx.GrantRepository(ctx, u.ID, repo.ID)
	})
	if err != nil {
		t.Fatal(err)
	}
	exec(`INSERT INTO identity_providers (tenant_id, issuer, client_id, client_secret)
		VALUES ($1, 'https://idp.example.test', 'client', 'sealed')`, a)
	exec(`INSERT INTO oidc_group_mappings (tenant_id, idp_id, group_name, role)
		SELECT tenant_id, id, 'team', 'member' FROM identity_providers WHERE tenant_id = $1`, a)

	for _, table := range want {
		col := "tenant_id"
		if table == "tenants" {
			col = "id"
		}
		// Every column but the ones a plain touch writes: a no-op update of
		// each row is still a change of the statement.
		set := map[string]string{"mcp_tokens": "revoked_at = revoked_at", "tenants": "slug = slug"}[table]
		if set == "" {
			set = col + " = " + col
		}
		if !bumps(`UPDATE `+pgx.Identifier{table}.Sanitize()+` SET `+set+` WHERE `+col+` = $1`, a) {
			t.Errorf("an update of %s left the epoch", table)
		}
		if bumps(`UPDATE ` + pgx.Identifier{table}.Sanitize() + ` SET ` + set + ` WHERE false`) {
			t.Errorf("an update of no row of %s gave a new epoch", table)
		}
	}
	if bumps(`UPDATE mcp_tokens SET last_used_at = now() WHERE tenant_id = $1`, a) {
		t.Error("recording a token's use gave a new epoch")
	}
	if !bumps(`DELETE FROM repo_memberships WHERE tenant_id = $1`, a) {
		t.Error("deleting a repository membership left the epoch")
	}
	if !bumps(`INSERT INTO repo_memberships (tenant_id, user_id, repository_id, permission, refreshed_at)
		SELECT tenant_id, id, $2, 'read', now() FROM users WHERE tenant_id = $1`, a, repo.ID) {
		t.Error("inserting a repository membership left the epoch")
	}
	if !bumps(`DELETE FROM oidc_group_mappings WHERE tenant_id = $1`, a) {
		t.Error("deleting a group mapping left the epoch")
	}
	// The runtime role's own writes go through the triggers too.
	before := epoch(a)
	if err := env.App.InTenant(ctx, a, func(tx *postgres.Tx) error {
		_, err := tx.SetMCPEnabled(ctx, false, postgres.Actor{Label: "test"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if epoch(a) == before {
		t.Error("switching MCP off as the runtime role left the epoch")
	}

	// Nobody sets an epoch but the triggers; TRUNCATE is refused.
	err = env.App.InTenant(ctx, a, func(tx *postgres.Tx) error {
		_, err := postgres.Raw(tx).Exec(ctx, `UPDATE auth_epochs SET epoch = 1`)
		return err
	})
	if err == nil {
		t.Error("the runtime role set its tenant's epoch")
	}
	for _, table := range append(want, "auth_epochs") {
		if _, err := env.Admin.Pool.Exec(ctx, `TRUNCATE `+pgx.Identifier{table}.Sanitize()+` CASCADE`); err == nil {
			t.Errorf("TRUNCATE %s was allowed", table)
		}
	}
}

// TestAuthCheckByEpoch: a check made with cached facts of the token's
// tenant is confirmed by the epoch a read brings along (no lookup; the
// facts are the cached ones); after a change of the tenant's auth facts
// it is not, and Facts looks the token up, with the new epoch; cached facts
// of another tenant ride along in full.
func TestAuthCheckByEpoch(t *testing.T) {
	env := pgtest.New(t)
	ctx := context.Background()
	a := seedTenant(t, env, "acme")
	b := seedTenant(t, env, "bravo")
	addUser(t, env, a, "dev@acme.test", codelotse.RoleMember)
	secret := createToken(t, env, a, "dev@acme.test", "laptop", 30)
	addRepo(t, env, a, "acme/api")
	hash := tokens.Hash(secret)
	cached, found, err := env.App.AuthToken(ctx, hash, "")
	if err != nil || !found {
		t.Fatalf("AuthToken: %v %v", found, err)
	}
	read := func(chk *postgres.AuthCheck, tenant string) {
		t.Helper()
		err := postgres.ReadTenant(postgres.WithAuthCheck(ctx, chk), env.App, tenant, "SELECT count(*) FROM repositories", nil,
			func(rows pgx.Rows) error {
				for rows.Next() {
				}
				return nil
			})
		if err != nil {
			t.Fatal(err)
		}
	}

	chk := postgres.NewAuthCheck(hash, "").WithCached(cached)
	start := env.App.Acquires()
	read(chk, a)
	f, found, rode, err := chk.Facts(ctx, env.App)
	if err != nil || !found || !rode || !postgres.ConfirmedByEpoch(chk) {
		t.Fatalf("unchanged: found %v rode %v by epoch %v, %v", found, rode, postgres.ConfirmedByEpoch(chk), err)
	}
	if f.TokenID != cached.TokenID || f.Epoch != cached.Epoch {
		t.Errorf("confirmed facts %+v, want the cached %+v", f, cached)
	}
	if n := env.App.Acquires() - start; n != 1 {
		t.Errorf("a read and its confirmation took %d round trips, want 1", n)
	}

	// The token is revoked after the facts were cached.
	err = env.App.InTenant(ctx, a, func(tx *postgres.Tx) error {
		return tx.RevokeToken(ctx, cached.TokenID, "", postgres.Actor{Label: "test"})
	})
	if err != nil {
		t.Fatal(err)
	}
	chk = postgres.NewAuthCheck(hash, "").WithCached(cached)
	read(chk, a)
	if postgres.ConfirmedByEpoch(chk) {
		t.Fatal("cached facts confirmed after a revocation")
	}
	f, found, rode, err = chk.Facts(ctx, env.App)
	if err != nil || !found || rode || f.RevokedAt == nil || f.Epoch == cached.Epoch {
		t.Errorf("after the revocation: found %v rode %v revoked %v epoch %d (cached %d), %v", found, rode, f.RevokedAt != nil, f.Epoch, cached.Epoch, err)
	}

	// Facts cached for acme, riding along a read of bravo: the full lookup.
	chk = postgres.NewAuthCheck(hash, "").WithCached(cached)
	read(chk, b)
	f, found, rode, err = chk.Facts(ctx, env.App)
	if err != nil || !found || !rode || postgres.ConfirmedByEpoch(chk) || f.RevokedAt == nil {
		t.Errorf("another tenant's read: found %v rode %v by epoch %v revoked %v, %v", found, rode, postgres.ConfirmedByEpoch(chk), f.RevokedAt != nil, err)
	}
}

// TestAuthEpochsNoDeadlock: two transactions of one tenant that change the
// same auth rows in opposite orders serialise on the tenant's epoch instead
// of deadlocking: the second waits for the epoch before its statement
// takes any row, so the first can go on to the second's rows and commit.
func TestAuthEpochsNoDeadlock(t *testing.T) {
	env := pgtest.New(t)
	ctx := context.Background()
	a := seedTenant(t, env, "acme")
	repo := addRepo(t, env, a, "acme/api")
	var users []string
	for _, email := range []string{"one@acme.test", "two@acme.test"} {
		u := addUser(t, env, a, email, codelotse.RoleMember)
		users = append(users, u.ID)
		if err := env.App.InTenant(ctx, a, func(tx *postgres.Tx) error { return tx.GrantRepository(ctx, u.ID, repo.ID) }); err != nil {
			t.Fatal(err)
		}
	}
	touch := `UPDATE repo_memberships SET refreshed_at = now() WHERE tenant_id = $1 AND user_id = $2`
	begin := func() (pgx.Tx, int) {
		t.Helper()
		tx, err := env.App.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var pid int
		if err := tx.QueryRow(ctx, `SELECT pg_backend_pid() FROM set_config('app.tenant_id', $1, true)`, a).Scan(&pid); err != nil {
			t.Fatal(err)
		}
		// A deadlock would be found after deadlock_timeout; nothing here
		// may wait longer than this for anything else.
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '20s'`); err != nil {
			t.Fatal(err)
		}
		return tx, pid
	}
	first, _ := begin()
	defer first.Rollback(ctx)
	second, pid := begin()
	defer second.Rollback(ctx)
	if _, err := first.Exec(ctx, touch, a, users[0]); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := second.Exec(ctx, touch, a, users[1])
		done <- err
	}()
	// Wait until the second statement waits for a lock (the epoch's).
	for waiting := false; !waiting; {
		if err := env.Admin.Pool.QueryRow(ctx, `SELECT coalesce(wait_event_type, '') = 'Lock' FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			t.Fatalf("the second transaction did not wait for the first: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if _, err := first.Exec(ctx, touch, a, users[1]); err != nil {
		t.Fatalf("the first transaction, going on to the second's rows: %v", err)
	}
	if err := first.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the second transaction after the first committed: %v", err)
	}
	if err := second.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}
