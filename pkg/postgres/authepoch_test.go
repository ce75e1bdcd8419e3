package postgres_test

import (
	"context"
	"fmt"
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
	t.Parallel()
	env := pgtest.New(t)
	ctx := context.Background()
	a := seedTenant(t, env, "acme")
	b := seedTenant(t, env, "bravo")
	addUser(t, env, a, "dev@acme.test", codelotse.RoleMember)
	addUser(t, env, b, "dev@bravo.test", codelotse.RoleMember)
	createToken(t, env, a, "dev@acme.test", "laptop", 30)
	createToken(t, env, b, "dev@bravo.test", "laptop", 30)
	repo := addRepo(t, env, a, "acme/api")

	epoch := func(tenant string) int64 { t.Helper(); return epochOf(t, env, tenant) }
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

	// A row moved to another tenant changes both tenants' epochs.
	exec(`DELETE FROM tenant_settings WHERE tenant_id = $1`, b)
	ea, eb := epoch(a), epoch(b)
	exec(`UPDATE tenant_settings SET tenant_id = $2 WHERE tenant_id = $1`, a, b)
	if epoch(a) == ea || epoch(b) == eb {
		t.Errorf("moving acme's settings to bravo: acme's epoch %d -> %d, bravo's %d -> %d", ea, epoch(a), eb, epoch(b))
	}
	exec(`UPDATE tenant_settings SET tenant_id = $2 WHERE tenant_id = $1`, b, a)

	// Inserts into and deletes from every table, in a tenant of their own
	// (in the order their keys allow), each give it a new epoch.
	c := seedTenant(t, env, "charlie")
	crepo := addRepo(t, env, c, "charlie/api")
	inserts := []struct{ table, sql string }{
		{"tenant_settings", `INSERT INTO tenant_settings (tenant_id) VALUES ($1) ON CONFLICT (tenant_id) DO UPDATE SET updated_at = now()`},
		{"users", `INSERT INTO users (tenant_id, email) VALUES ($1, 'new@charlie.test')`},
		{"tenant_memberships", `INSERT INTO tenant_memberships (tenant_id, user_id, role) SELECT tenant_id, id, 'member' FROM users WHERE tenant_id = $1`},
		{"repo_memberships", `INSERT INTO repo_memberships (tenant_id, user_id, repository_id) SELECT tenant_id, id, ` + fmt.Sprint(crepo.ID) + ` FROM users WHERE tenant_id = $1`},
		{"identity_providers", `INSERT INTO identity_providers (tenant_id, issuer, client_id, client_secret) VALUES ($1, 'https://idp.charlie.test', 'c', 's')`},
		{"oidc_group_mappings", `INSERT INTO oidc_group_mappings (tenant_id, idp_id, group_name, role) SELECT tenant_id, id, 'team', 'member' FROM identity_providers WHERE tenant_id = $1`},
	}
	for _, in := range inserts {
		before := epoch(c)
		exec(in.sql, c)
		if epoch(c) == before {
			t.Errorf("an insert into %s left the epoch", in.table)
		}
	}
	createToken(t, env, c, "new@charlie.test", "laptop", 30)
	for _, table := range []string{"oidc_group_mappings", "identity_providers", "repo_memberships", "tenant_memberships", "mcp_tokens", "users", "tenant_settings", "tenants"} {
		col := "tenant_id"
		if table == "tenants" {
			col = "id"
		}
		before := epoch(c)
		exec(`DELETE FROM `+pgx.Identifier{table}.Sanitize()+` WHERE `+col+` = $1`, c)
		if epoch(c) == before {
			t.Errorf("a delete from %s left the epoch", table)
		}
	}

	// The column lists of the row triggers: every column of mcp_tokens
	// {{auth}} may read (auth_token's purpose) but last_used_at, and the
	// tenant's id and slug.
	for _, tc := range []struct {
		table string
		want  []string
	}{{"mcp_tokens", nil}, {"tenants", []string{"id", "slug"}}} {
		var got []string
		if err := env.Admin.Pool.QueryRow(ctx, `SELECT array_agg(a.attname::text ORDER BY a.attname)
			FROM pg_trigger g JOIN pg_attribute a ON a.attrelid = g.tgrelid AND a.attnum = ANY(g.tgattr)
			WHERE g.tgrelid = $1::regclass AND g.tgname = 'auth_epoch'`, tc.table).Scan(&got); err != nil {
			t.Fatal(err)
		}
		want := tc.want
		if want == nil {
			if err := env.Admin.Pool.QueryRow(ctx, `SELECT array_agg(column_name::text ORDER BY column_name)
				FROM information_schema.column_privileges
				WHERE table_name = $1 AND grantee = $2 AND privilege_type = 'SELECT' AND column_name <> 'last_used_at'`,
				tc.table, env.Roles.Auth).Scan(&want); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s's epoch trigger watches %v, want %v", tc.table, got, want)
		}
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
	if _, err := env.Admin.Pool.Exec(ctx, `DELETE FROM auth_epochs`); err == nil {
		t.Error("deleting epochs was allowed (a missing row reads as epoch 0 again)")
	}
}

// TestAuthCheckByEpoch: a check made with cached facts of the token's
// tenant is confirmed by the epoch a read brings along (no lookup; the
// facts are the cached ones); after a change of the tenant's auth facts
// it is not, and Facts looks the token up, with the new epoch; cached facts
// of another tenant ride along in full.
func TestAuthCheckByEpoch(t *testing.T) {
	t.Parallel()
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

// TestAuthEpochsNoDeadlock: the flows that change auth rows after locking
// other rows (a revocation, an OAuth refresh or code exchange, the
// membership refresh), interleaved with the ones that change those rows in
// another order (deleting a user, an OIDC or GitHub sign-in), commit both,
// as they did before epochs: a tenant's epoch is taken at commit, after
// every other lock. (Taken at the first changing statement, each of these
// deadlocked.)
func TestAuthEpochsNoDeadlock(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	ctx := context.Background()
	a := seedTenant(t, env, "acme")
	u := addUser(t, env, a, "dev@acme.test", codelotse.RoleMember)
	old := addUser(t, env, a, "old@acme.test", codelotse.RoleMember)
	createToken(t, env, a, "dev@acme.test", "laptop", 30)
	var tok, idp, client, grant string
	for _, q := range []struct {
		sql  string
		args []any
		into *string
	}{
		{`SELECT id::text FROM mcp_tokens WHERE tenant_id = $1`, []any{a}, &tok},
		{`INSERT INTO identity_providers (tenant_id, issuer, client_id, client_secret)
			VALUES ($1, 'https://idp.example.test', 'c', 's') RETURNING id::text`, []any{a}, &idp},
		{`INSERT INTO oauth_clients (tenant_id, client_id, kind, redirect_uris)
			VALUES ($1, 'cld_x', 'dcr', ARRAY['http://127.0.0.1/cb']) RETURNING id::text`, []any{a}, &client},
		{`INSERT INTO oauth_grants (tenant_id, user_id, client_ref, client_name, resource, idp_id, idp_groups, expires_at)
			VALUES ($1, $2, $3::uuid, 'c', 'https://x/t/acme/mcp', $4::uuid, ARRAY['g'], now() + interval '30 days') RETURNING id::text`,
			[]any{a, u.ID, &client, &idp}, &grant},
	} {
		for i, arg := range q.args {
			if p, ok := arg.(*string); ok {
				q.args[i] = *p
			}
		}
		if err := env.Admin.Pool.QueryRow(ctx, q.sql, q.args...).Scan(q.into); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
	for _, q := range []string{
		// The token is an OIDC one, so that the sign-in's snapshot update
		// changes it (and sets an epoch at commit).
		`UPDATE mcp_tokens SET idp_id = '` + idp + `', idp_groups = '{g}' WHERE id = '` + tok + `'`,
		`UPDATE users SET github_user_id = 1 WHERE id = '` + old.ID + `'`,
		`INSERT INTO repositories (tenant_id, github_id, full_name, default_branch, url, private)
			VALUES ('` + a + `', 42, 'acme/api', 'main', 'https://github.com/acme/api', true)`,
	} {
		if _, err := env.Admin.Pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	upsertRepo := `UPDATE repositories SET github_id = $2, full_name = $3 WHERE tenant_id = $1 AND github_id = $2 RETURNING id`
	cases := []struct {
		name  string
		steps []step
		same  bool // no auth row changes: the epoch stays
	}{
		{"RevokeToken (the token FOR UPDATE) against DeleteUser (users, then the user's tokens)", []step{
			{tx: 0, sql: `SELECT revoked_at FROM mcp_tokens WHERE tenant_id = $1 AND id::text = $2 AND oauth_grant_id IS NULL FOR UPDATE`, args: []any{a, tok}},
			{tx: 1, sql: `UPDATE users SET deleted_at = now() WHERE tenant_id = $1 AND id = $2 AND deleted_at IS NULL RETURNING id`, args: []any{a, u.ID}},
			{tx: 1, sql: `UPDATE mcp_tokens SET revoked_at = now() WHERE tenant_id = $1 AND user_id = $2 AND revoked_at IS NULL`, args: []any{a, u.ID}, waits: true},
			{tx: 0, sql: `UPDATE mcp_tokens SET revoked_at = now() WHERE tenant_id = $1 AND id::text = $2`, args: []any{a, tok}, waits: true},
		}, false},
		{"RefreshOAuthToken (the grant FOR UPDATE, then expired tokens) against an OIDC sign-in (tokens' groups, then grants')", []step{
			{tx: 0, sql: `SELECT g.id FROM oauth_grants g WHERE g.tenant_id = $1 AND g.id = $2::uuid FOR UPDATE OF g`, args: []any{a, grant}},
			{tx: 1, sql: `UPDATE mcp_tokens SET idp_groups = $4 WHERE tenant_id = $1 AND user_id = $2 AND idp_id = $3::uuid`, args: []any{a, u.ID, idp, []string{"g2"}}},
			{tx: 1, sql: `UPDATE oauth_grants SET idp_groups = $4 WHERE tenant_id = $1 AND user_id = $2 AND idp_id = $3::uuid`, args: []any{a, u.ID, idp, []string{"g2"}}, waits: true},
			{tx: 0, sql: `DELETE FROM mcp_tokens WHERE tenant_id = $1 AND oauth_grant_id = $2::uuid AND expires_at < now() - interval '1 day'`, args: []any{a, grant}, waits: true},
		}, false},
		{"the membership refresh (a repository, then memberships) against a first GitHub sign-in (a user, then that repository)", []step{
			{tx: 0, sql: upsertRepo, args: []any{a, int64(42), "acme/api"}},
			{tx: 1, sql: `INSERT INTO users (tenant_id, email, name, github_user_id, github_login) VALUES ($1, 'new@acme.test', 'New', 2, 'new') RETURNING id`, args: []any{a}},
			{tx: 1, sql: upsertRepo, args: []any{a, int64(42), "acme/api"}, waits: true},
			{tx: 0, sql: `DELETE FROM repo_memberships WHERE tenant_id = $1 AND user_id = $2`, args: []any{a, old.ID}, waits: true},
		}, false},
		{"ExchangeOAuthCode (the user FOR UPDATE, then expired tokens) against a sign-in (membership, then the user)", []step{
			{tx: 0, sql: `SELECT email FROM users WHERE tenant_id = $1 AND id = $2 FOR UPDATE`, args: []any{a, old.ID}},
			{tx: 1, sql: `INSERT INTO tenant_memberships (tenant_id, user_id, role, source, refreshed_at) VALUES ($1, $2, 'member', 'github', now())
				ON CONFLICT (tenant_id, user_id) DO UPDATE SET refreshed_at = now()`, args: []any{a, old.ID}},
			{tx: 1, sql: `UPDATE users SET name = 'x' WHERE tenant_id = $1 AND id = $2`, args: []any{a, old.ID}, waits: true},
			{tx: 0, sql: `DELETE FROM mcp_tokens WHERE tenant_id = $1 AND oauth_grant_id = gen_random_uuid()`, args: []any{a}, waits: true},
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := epochOf(t, env, a)
			for i, err := range interleave(t, env, a, tc.steps) {
				if err != nil {
					t.Errorf("transaction %d: %v", i, err)
				}
			}
			if changed := epochOf(t, env, a) != before; changed == tc.same {
				t.Errorf("the tenant's epoch changed: %v, want %v", changed, !tc.same)
			}
		})
	}
}

func epochOf(t *testing.T, env *pgtest.Env, tenant string) int64 {
	t.Helper()
	var e int64
	if err := env.Admin.Pool.QueryRow(context.Background(), `SELECT coalesce((SELECT epoch FROM auth_epochs WHERE tenant_id = $1), 0)`, tenant).Scan(&e); err != nil {
		t.Fatal(err)
	}
	return e
}

// step is a statement of one of interleave's two transactions; waits: it
// may block on the other's locks, so it runs in the background, and the
// next step runs once it waits for a lock or is done.
type step struct {
	tx    int
	sql   string
	args  []any
	waits bool
}

// interleave runs steps on two runtime-role transactions of tenant, in
// order, commits both (the first, then the second), and returns the first
// error of each. A lock wait that outlasts lock_timeout is an error, never
// a hang.
func interleave(t *testing.T, env *pgtest.Env, tenant string, steps []step) [2]error {
	t.Helper()
	ctx := context.Background()
	var txs [2]pgx.Tx
	var pids [2]int
	for i := range txs {
		tx, err := env.App.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if err := tx.QueryRow(ctx, `SELECT pg_backend_pid() FROM set_config('app.tenant_id', $1, true)`, tenant).Scan(&pids[i]); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '20s'`); err != nil {
			t.Fatal(err)
		}
		txs[i] = tx
	}
	run := func(tx pgx.Tx, s step) error {
		_, err := tx.Exec(ctx, s.sql, s.args...)
		return err
	}
	var errs [2]error
	var pending [2]chan error
	collect := func(i int) {
		if pending[i] != nil {
			if err := <-pending[i]; err != nil && errs[i] == nil {
				errs[i] = err
			}
			pending[i] = nil
		}
	}
	for _, s := range steps {
		collect(s.tx)
		if errs[s.tx] != nil {
			continue
		}
		if !s.waits {
			errs[s.tx] = run(txs[s.tx], s)
			continue
		}
		ch := make(chan error, 1)
		pending[s.tx] = ch
		go func(tx pgx.Tx, s step) { ch <- run(tx, s) }(txs[s.tx], s)
		for waiting := false; !waiting && len(ch) == 0; {
			if err := env.Admin.Pool.QueryRow(ctx, `SELECT coalesce(wait_event_type, '') = 'Lock' FROM pg_stat_activity WHERE pid = $1`, pids[s.tx]).Scan(&waiting); err != nil {
				t.Fatal(err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	for i := range txs {
		collect(i)
		if errs[i] == nil {
			errs[i] = txs[i].Commit(ctx)
		}
	}
	return errs
}
