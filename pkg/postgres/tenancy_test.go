package postgres_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
	"github.com/codelotse/codelotse/pkg/tokens"
)

// TestRLSCatalog is the catalog test of ARCHITECTURE §2: every table with a
// tenant_id has FORCE RLS and a policy, the runtime role cannot bypass RLS
// and owns nothing, no installation role has BYPASSRLS, and a query without
// a tenant fails instead of returning rows.
func TestRLSCatalog(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	ctx := context.Background()

	rows, err := env.App.Pool.Query(ctx, `
		SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity,
		       (SELECT count(*) FROM pg_policy p WHERE p.polrelid = c.oid),
		       (SELECT count(*) FROM pg_policy p WHERE p.polrelid = c.oid AND p.polname = 'tenant_isolation'
		          AND pg_get_expr(p.polqual, p.polrelid) LIKE '%current_setting(''app.tenant_id''%'
		          AND pg_get_expr(p.polwithcheck, p.polrelid) LIKE '%current_setting(''app.tenant_id''%')
		FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')
		  AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped)
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	type tbl struct {
		name                 string
		rls, force           bool
		policies, tenantPols int
	}
	tables, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (tbl, error) {
		var x tbl
		return x, r.Scan(&x.name, &x.rls, &x.force, &x.policies, &x.tenantPols)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"audit_events", "auth_epochs", "code_chunks", "code_files", "code_trigram_stats", "findings", "github_deliveries", "github_membership_refreshes", "github_pull_syncs", "identity_providers", "login_states", "mcp_tokens",
		"oauth_clients", "oauth_codes", "oauth_grants", "oauth_refresh_tokens", "oidc_group_mappings", "pull_code_chunks", "pull_code_files", "pull_code_heads", "pull_requests", "repo_memberships", "repositories", "reviews", "rules", "secret_fingerprints",
		"secret_rescans", "tenant_memberships", "tenant_settings", "token_handoffs", "users", "web_sessions"}
	var got []string
	for _, x := range tables {
		got = append(got, x.name)
		if !x.rls || !x.force {
			t.Errorf("table %s: row security enabled=%v forced=%v, want both", x.name, x.rls, x.force)
		}
		if x.tenantPols != 1 {
			t.Errorf("table %s: has no tenant_isolation policy on app.tenant_id (USING and WITH CHECK)", x.name)
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("tenant tables = %v, want %v", got, want)
	}

	// Every index used by tenant queries starts with tenant_id (the only
	// exceptions are the unique lookups of the system purposes).
	rows, err = env.App.Pool.Query(ctx, `
		SELECT i.relname, t.relname, a.attname
		FROM pg_index x
		JOIN pg_class i ON i.oid = x.indexrelid
		JOIN pg_class t ON t.oid = x.indrelid
		JOIN pg_namespace n ON n.oid = t.relnamespace
		LEFT JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = x.indkey[0]
		WHERE n.nspname = 'public'
		  AND EXISTS (SELECT 1 FROM pg_attribute b WHERE b.attrelid = t.oid AND b.attname = 'tenant_id')`)
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{"identity_providers_id_key": true, "users_id_key": true, "repositories_id_key": true,
		"mcp_tokens_id_key": true, "mcp_tokens_token_hash_key": true, "web_sessions_session_hash_key": true, "login_states_secret_hash_key": true, "tenant_settings_pkey": true,
		// A GIN trigram index gains nothing from a leading tenant_id (it adds
		// the tenant's whole posting list to every scan); it is read only by
		// search_finding_ids, which filters by tenant itself (issue 11).
		"findings_search_trgm": true}
	for rows.Next() {
		var idx, table string
		var first *string
		if err := rows.Scan(&idx, &table, &first); err != nil {
			t.Fatal(err)
		}
		if (first == nil || *first != "tenant_id") && !allowed[idx] {
			t.Errorf("index %s on %s does not start with tenant_id", idx, table)
		}
	}
	rows.Close()

	// The runtime role may execute exactly the system purposes' entry
	// points (besides the extensions' and River's own functions): the
	// helper that takes a tenant as an argument (search_code_index_pattern)
	// and the trigger functions are not among them, so it cannot ask them
	// about another tenant.
	var callable []string
	if err := env.Admin.Pool.QueryRow(ctx, `SELECT coalesce(array_agg(p.proname::text ORDER BY p.proname), '{}')
		FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE n.nspname = 'public' AND p.proname NOT LIKE 'river\_%' AND has_function_privilege($1, p.oid, 'EXECUTE')
		  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')`,
		env.Roles.App).Scan(&callable); err != nil {
		t.Fatal(err)
	}
	if want := []string{"auth_token", "purge_expired_login_states", "search_code_candidates", "search_finding_ids",
		"search_pull_code_candidates", "tenant_id_by_installation", "tenant_id_by_slug", "tenants_with_installation",
		"tenants_with_secret_rescans"}; !slices.Equal(callable, want) {
		t.Errorf("the runtime role may execute %v, want %v", callable, want)
	}

	// The runtime role: no superuser, no BYPASSRLS, owns nothing; and no
	// role of the installation has BYPASSRLS.
	if err := env.App.CheckRuntimeRole(ctx); err != nil {
		t.Errorf("runtime role check: %v", err)
	}
	for _, r := range []string{env.Roles.Owner, env.Roles.App, env.Roles.Auth, env.Roles.Search} {
		var super, bypass bool
		var owned int
		if err := env.Admin.Pool.QueryRow(ctx, `SELECT rolsuper, rolbypassrls,
			(SELECT count(*) FROM pg_class c WHERE c.relowner = r.oid AND c.relkind IN ('r','p'))
			FROM pg_roles r WHERE rolname = $1`, r).Scan(&super, &bypass, &owned); err != nil {
			t.Fatal(err)
		}
		if super || bypass {
			t.Errorf("role %s: superuser=%v bypassrls=%v", r, super, bypass)
		}
		if r == env.Roles.App && owned != 0 {
			t.Errorf("runtime role owns %d tables", owned)
		}
	}

	// A query without a tenant fails instead of returning rows. PostgreSQL
	// evaluates the policy's setting lazily, so on an empty table the query
	// may succeed with nothing; with rows present it must fail.
	a := seedTenant(t, env, "acme")
	u := addUser(t, env, a, "dev@acme.test", codelotse.RoleMember)
	r := addRepo(t, env, a, "acme/api")
	createToken(t, env, a, "dev@acme.test", "laptop", 30)
	if err := env.App.InTenant(ctx, a, func(tx *postgres.Tx) error {
		if err := tx.GrantRepository(ctx, u.ID, r.ID); err != nil {
			return err
		}
		_, err := tx.UpsertRule(ctx, &r.ID, codelotse.Rule{Key: "k", Title: "t", Severity: codelotse.SeverityLow})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, name := range want {
		var n int
		err := env.App.Pool.QueryRow(ctx, "SELECT count(*) FROM (SELECT * FROM "+pgx.Identifier{name}.Sanitize()+") x").Scan(&n)
		var stored int
		if serr := env.Admin.Pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{name}.Sanitize()).Scan(&stored); serr != nil {
			t.Fatal(serr)
		}
		switch {
		case err == nil && n > 0:
			t.Errorf("SELECT from %s without a tenant returned %d rows", name, n)
		case err == nil && stored > 0:
			t.Errorf("SELECT from %s (%d rows stored) without a tenant succeeded; want an error", name, stored)
		}
	}
	// ... and the tenants table too.
	if _, err := env.App.Pool.Exec(ctx, "SELECT * FROM tenants"); err == nil {
		t.Error("SELECT from tenants without a tenant succeeded")
	}
}

// TestCheckRuntimeRoleRefusesPrivilegedRoles shows the start-up check fails
// for a superuser connection.
func TestCheckRuntimeRoleRefusesPrivilegedRoles(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	var super bool
	if err := env.Admin.Pool.QueryRow(context.Background(), "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&super); err != nil {
		t.Fatal(err)
	}
	if !super {
		t.Skip("the test cluster's administrator is not a superuser")
	}
	err := env.Admin.CheckRuntimeRole(context.Background())
	if err == nil || !strings.Contains(err.Error(), "superuser") {
		t.Fatalf("CheckRuntimeRole as superuser = %v, want a refusal", err)
	}
}

// TestNoTenantSettingSurvivesTransaction uses a pool with a single
// connection, so every transaction reuses the same session, and shows the
// tenant setting of one transaction (or batched read) is gone in the next.
func TestNoTenantSettingSurvivesTransaction(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	ctx := context.Background()
	a := seedTenant(t, env, "acme")
	b := seedTenant(t, env, "bravo")

	one, err := postgres.OpenURL(ctx, env.AppURL+"&pool_max_conns=1")
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()

	var pid1, pid2 int
	if err := one.InTenant(ctx, a, func(tx *postgres.Tx) error {
		return postgres.Raw(tx).QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid1)
	}); err != nil {
		t.Fatal(err)
	}
	// Outside any tenant transaction, on the same session, the setting is
	// empty and a tenant query fails.
	var setting string
	if err := one.Pool.QueryRow(ctx, "SELECT pg_backend_pid(), coalesce(current_setting('app.tenant_id', true), '')").Scan(&pid2, &setting); err != nil {
		t.Fatal(err)
	}
	if pid1 != pid2 {
		t.Fatalf("pool used two sessions (%d, %d); the test needs one", pid1, pid2)
	}
	if setting != "" {
		t.Fatalf("app.tenant_id = %q after the transaction ended, want empty", setting)
	}
	if _, err := one.Pool.Exec(ctx, "SELECT count(*) FROM repositories"); err == nil {
		t.Fatal("tenant query after a tenant transaction succeeded without a tenant")
	}

	// The batched single read sets the tenant for its query only.
	var names []string
	err = postgres.ReadTenant(ctx, one, b, "SELECT name FROM tenants", nil, func(rows pgx.Rows) error {
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				return err
			}
			names = append(names, n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 1 || names[0] != "bravo" {
		t.Fatalf("ReadTenant(bravo) saw tenants %v, want only bravo", names)
	}
	if err := one.Pool.QueryRow(ctx, "SELECT coalesce(current_setting('app.tenant_id', true), '')").Scan(&setting); err != nil {
		t.Fatal(err)
	}
	if setting != "" {
		t.Fatalf("app.tenant_id = %q after ReadTenant, want empty", setting)
	}

	// A failed transaction does not leave the setting behind either.
	_ = one.InTenant(ctx, a, func(tx *postgres.Tx) error {
		_, err := postgres.Raw(tx).Exec(ctx, "SELECT 1/0")
		return err
	})
	if err := one.Pool.QueryRow(ctx, "SELECT coalesce(current_setting('app.tenant_id', true), '')").Scan(&setting); err != nil {
		t.Fatal(err)
	}
	if setting != "" {
		t.Fatalf("app.tenant_id = %q after a failed transaction, want empty", setting)
	}
}

// TestTenantIsolation: inside tenant A's transaction, tenant B's rows are
// invisible and cannot be written, even without a WHERE clause.
func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	ctx := context.Background()
	a := seedTenant(t, env, "acme")
	b := seedTenant(t, env, "bravo")
	addRepo(t, env, a, "acme/api")
	addRepo(t, env, b, "bravo/web")

	err := env.App.InTenant(ctx, a, func(tx *postgres.Tx) error {
		var names []string
		rows, err := postgres.Raw(tx).Query(ctx, "SELECT full_name FROM repositories")
		if err != nil {
			return err
		}
		names, err = pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		if len(names) != 1 || names[0] != "acme/api" {
			t.Errorf("tenant acme sees repositories %v", names)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = env.App.InTenant(ctx, a, func(tx *postgres.Tx) error {
		_, err := postgres.Raw(tx).Exec(ctx, "INSERT INTO repositories (tenant_id, full_name) VALUES ($1, 'evil/write')", b)
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "row-level security") {
		t.Errorf("insert into another tenant: err = %v, want a row-level security violation", err)
	}
	// UPDATE and DELETE without WHERE touch only the own tenant.
	if err := env.App.InTenant(ctx, a, func(tx *postgres.Tx) error {
		if _, err := postgres.Raw(tx).Exec(ctx, "UPDATE repositories SET default_branch = 'x'"); err != nil {
			return err
		}
		_, err := postgres.Raw(tx).Exec(ctx, "DELETE FROM repositories")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := env.App.InTenant(ctx, b, func(tx *postgres.Tx) error {
		var branch string
		if err := postgres.Raw(tx).QueryRow(ctx, "SELECT default_branch FROM repositories WHERE full_name = 'bravo/web'").Scan(&branch); err != nil {
			return err
		}
		if branch != "main" {
			t.Errorf("bravo's repository was changed by acme: default_branch = %q", branch)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The runtime role may not rewrite the audit log.
	err = env.App.InTenant(ctx, a, func(tx *postgres.Tx) error {
		_, err := postgres.Raw(tx).Exec(ctx, "DELETE FROM audit_events")
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("runtime role deleting audit events: err = %v, want permission denied", err)
	}
}

// TestAuthFunctionIsNarrow: the runtime role reads tokens across tenants
// only through auth_token, which returns facts for one hash and nothing else.
func TestAuthFunctionIsNarrow(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	ctx := context.Background()
	a := seedTenant(t, env, "acme")
	addUser(t, env, a, "dev@acme.test", codelotse.RoleMember)
	secret := createToken(t, env, a, "dev@acme.test", "laptop", 30)

	f, found, err := env.App.AuthToken(ctx, tokens.Hash(secret), "")
	if err != nil || !found {
		t.Fatalf("AuthToken = %v, %v", found, err)
	}
	if f.TenantID != a || !f.UserActive || f.RevokedAt != nil || f.MCPEnabled {
		t.Errorf("facts = %+v; want tenant %s, active user, not revoked, MCP off by default", f, a)
	}
	if _, found, err := env.App.AuthToken(ctx, tokens.Hash(tokens.Generate()), ""); err != nil || found {
		t.Errorf("unknown hash: found=%v err=%v", found, err)
	}
	// The runtime role cannot read mcp_tokens directly without a tenant.
	if _, err := env.App.Pool.Exec(ctx, "SELECT token_hash FROM mcp_tokens"); err == nil {
		t.Error("runtime role read mcp_tokens without a tenant")
	}
	// The function runs with a pinned search_path.
	var cfg []string
	if err := env.Admin.Pool.QueryRow(ctx, "SELECT proconfig FROM pg_proc WHERE proname = 'auth_token'").Scan(&cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg) == 0 || !strings.HasPrefix(cfg[0], "search_path=") {
		t.Errorf("auth_token proconfig = %v, want a pinned search_path", cfg)
	}
}

func TestMigrateIsIdempotent(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, env.AdminURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	applied, err := postgres.Migrate(ctx, conn, postgres.MigrateOptions{Roles: env.Roles})
	if err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	if len(applied) != 0 {
		t.Errorf("second migrate applied %v again", applied)
	}
}

// helpers

func seedTenant(t *testing.T, env *pgtest.Env, slug string) string {
	t.Helper()
	tn, err := env.Admin.CreateTenant(context.Background(), postgres.NewTenant{Slug: slug, Name: slug}, "test")
	if err != nil {
		t.Fatal(err)
	}
	return tn.ID
}

func addRepo(t *testing.T, env *pgtest.Env, tenantID, full string) codelotse.Repository {
	t.Helper()
	var r codelotse.Repository
	err := env.App.InTenant(context.Background(), tenantID, func(tx *postgres.Tx) error {
		var err error
		r, err = tx.AddRepository(context.Background(), postgres.NewRepository{FullName: full})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func addUser(t *testing.T, env *pgtest.Env, tenantID, email string, role codelotse.Role) codelotse.User {
	t.Helper()
	var u codelotse.User
	err := env.App.InTenant(context.Background(), tenantID, func(tx *postgres.Tx) error {
		var err error
		u, err = tx.UpsertLocalUser(context.Background(), email, "", role, time.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func createToken(t *testing.T, env *pgtest.Env, tenantID, email, name string, days int) string {
	t.Helper()
	secret := tokens.Generate()
	now := time.Now()
	exp, err := tokens.ExpiresAt(now, days)
	if err != nil {
		t.Fatal(err)
	}
	err = env.App.InTenant(context.Background(), tenantID, func(tx *postgres.Tx) error {
		u, err := tx.UserByEmail(context.Background(), email)
		if err != nil {
			return err
		}
		_, err = tx.CreateToken(context.Background(), postgres.NewToken{UserID: u.ID, Name: name, Secret: secret, ExpiresAt: exp}, now, postgres.Actor{Label: "test"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return secret
}

// TestReadTenantTimeout: the statement timeout set in the batch applies to
// the query, and does not outlive it on the pooled connection.
func TestReadTenantTimeout(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	ctx := context.Background()
	a := seedTenant(t, env, "acme")
	one, err := postgres.OpenURL(ctx, env.AppURL+"&pool_max_conns=1")
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	err = postgres.ReadTenantTimeout(ctx, one, a, 100*time.Millisecond, "SELECT pg_sleep(2)", nil, func(pgx.Rows) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "statement timeout") {
		t.Fatalf("slow query under a 100 ms timeout: err = %v", err)
	}
	var timeout string
	if err := one.Pool.QueryRow(ctx, "SHOW statement_timeout").Scan(&timeout); err != nil {
		t.Fatal(err)
	}
	if timeout != "0" {
		t.Errorf("statement_timeout = %s after the read, want the default 0", timeout)
	}

	// A forced custom plan (wide grants) is set for the query alone too,
	// beside a timeout.
	var mode, during string
	err = postgres.ReadTenantCustomPlan(ctx, one, a, time.Second, "SELECT current_setting('plan_cache_mode'), current_setting('statement_timeout')", nil, func(rows pgx.Rows) error {
		for rows.Next() {
			if err := rows.Scan(&mode, &during); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil || mode != "force_custom_plan" || during != "1s" {
		t.Fatalf("read with a custom plan: plan_cache_mode %q, statement_timeout %q, err %v", mode, during, err)
	}
	if err := one.Pool.QueryRow(ctx, "SHOW plan_cache_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "auto" {
		t.Errorf("plan_cache_mode = %s after the read, want the default auto", mode)
	}
}
