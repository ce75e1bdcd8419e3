// Package pgtest gives tests a real, fresh PostgreSQL database: its own
// database and its own set of roles (a random DB_ROLE_PREFIX), migrated
// exactly as `cltctl migrate` does, dropped again when the test ends.
//
// It connects to TEST_DATABASE_URL, else DATABASE_URL, else the local
// development cluster (postgres@127.0.0.1:5432), as an administrator that
// may create databases and roles.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/codelotse/codelotse/pkg/postgres"
)

// Env is one test database.
type Env struct {
	// AdminURL connects to the test database as the administrator.
	AdminURL string
	// AppURL connects to the test database as the runtime role.
	AppURL string
	// RolePrefix is the DB_ROLE_PREFIX of this database's roles.
	RolePrefix string
	Roles      postgres.Roles
	// Admin is a pool on AdminURL, App a pool on AppURL.
	Admin, App *postgres.DB
}

// BaseURL is the administrative URL tests start from.
func BaseURL() string {
	for _, k := range []string{"TEST_DATABASE_URL", "DATABASE_URL"} {
		if v := os.Getenv(k); v != "" {
			return v
		}
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// New creates and migrates a fresh database, or fails the test with the
// reason (PostgreSQL is required: the suite never mocks it).
func New(t testing.TB) *Env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	suffix := randHex(6)
	dbName := "clt_test_" + suffix
	prefix := "clt_t" + suffix
	roles, err := postgres.RolesFor(prefix)
	if err != nil {
		t.Fatal(err)
	}

	base, err := pgx.ParseConfig(BaseURL())
	if err != nil {
		t.Fatalf("pgtest: bad base URL: %v", err)
	}
	admin, err := pgx.ConnectConfig(ctx, base)
	if err != nil {
		t.Fatalf("pgtest: PostgreSQL is required for this test and is not reachable at %s@%s:%d: %v", base.User, base.Host, base.Port, err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{dbName}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	env := &Env{RolePrefix: prefix, Roles: roles}
	t.Cleanup(func() { env.drop(t, base, dbName) })

	dbCfg := base.Copy()
	dbCfg.Database = dbName
	env.AdminURL = connString(dbCfg)
	appCfg := dbCfg.Copy()
	appCfg.User = roles.App
	appCfg.Password = ""
	env.AppURL = connString(appCfg)

	conn, err := pgx.ConnectConfig(ctx, dbCfg)
	if err != nil {
		t.Fatalf("pgtest: connect to test database: %v", err)
	}
	if _, err := postgres.Migrate(ctx, conn, postgres.MigrateOptions{Roles: roles,
		BeforeSchema: func(ctx context.Context) error { return postgres.MigrateRiver(ctx, env.AdminURL, roles.Owner) }}); err != nil {
		conn.Close(ctx)
		t.Fatalf("pgtest: migrate: %v", err)
	}
	conn.Close(ctx)

	if env.Admin, err = postgres.OpenURL(ctx, env.AdminURL); err != nil {
		t.Fatalf("pgtest: open admin pool: %v", err)
	}
	if env.App, err = postgres.OpenURL(ctx, env.AppURL); err != nil {
		t.Fatalf("pgtest: open runtime pool: %v", err)
	}
	return env
}

func (env *Env) drop(t testing.TB, base *pgx.ConnConfig, dbName string) {
	if env.Admin != nil {
		env.Admin.Close()
	}
	if env.App != nil {
		env.App.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, base)
	if err != nil {
		t.Errorf("pgtest cleanup: %v", err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{dbName}.Sanitize()+" WITH (FORCE)"); err != nil {
		t.Errorf("pgtest cleanup: drop database: %v", err)
	}
	for _, r := range []string{env.Roles.Search, env.Roles.Auth, env.Roles.App, env.Roles.Owner} {
		if _, err := conn.Exec(ctx, "DROP ROLE IF EXISTS "+pgx.Identifier{r}.Sanitize()); err != nil {
			t.Errorf("pgtest cleanup: drop role %s: %v", r, err)
		}
	}
}

func connString(c *pgx.ConnConfig) string {
	if strings.HasPrefix(c.Host, "/") {
		return fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", c.Host, c.Port, c.User, c.Database)
	}
	u := url.URL{Scheme: "postgres", Host: net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port))), Path: "/" + c.Database, RawQuery: "sslmode=disable"}
	if c.Password != "" {
		u.User = url.UserPassword(c.User, c.Password)
	} else {
		u.User = url.User(c.User)
	}
	return u.String()
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// AdminStrings runs sql as the administrator (no row-level security in the
// way) and returns the first column of every row, which must be text. It is
// how tests outside pkg/postgres read rows without importing pgx.
func (env *Env) AdminStrings(t testing.TB, sql string, args ...any) []string {
	t.Helper()
	rows, err := env.Admin.Pool.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatalf("pgtest: %s: %v", sql, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("pgtest: %s: %v", sql, err)
	}
	return out
}

// Held is where a held fixture's database is: what pkg/postgres's
// TestHoldCodeBenchFixture writes to the file BENCH_HOLD names.
type Held struct {
	AdminURL, AppURL, Tenant string
	Repos                    []int64
	Roles                    postgres.Roles
}

// AttachHeld attaches to the fixture held in the file BENCH_FIXTURE names,
// or returns nil when it is not set; the pools are closed when tb ends.
// The database is left as it is (a variants run may have applied another
// policies/search.sql to it).
func AttachHeld(tb testing.TB) (*Env, *Held) {
	tb.Helper()
	file := os.Getenv("BENCH_FIXTURE")
	if file == "" {
		return nil, nil
	}
	body, err := os.ReadFile(file)
	if err != nil {
		tb.Fatalf("BENCH_FIXTURE: %v", err)
	}
	var h Held
	if err := json.Unmarshal(body, &h); err != nil {
		tb.Fatalf("BENCH_FIXTURE %s: %v", file, err)
	}
	ctx := context.Background()
	env := &Env{AdminURL: h.AdminURL, AppURL: h.AppURL, Roles: h.Roles}
	if env.Admin, err = postgres.OpenURL(ctx, h.AdminURL); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(env.Admin.Close)
	if env.App, err = postgres.OpenURL(ctx, h.AppURL); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(env.App.Close)
	tb.Logf("attached to the fixture held in %s", file)
	return env, &h
}
