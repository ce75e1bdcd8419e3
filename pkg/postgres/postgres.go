// Package postgres is CodeLotse's storage: the pgx pool, the migration
// runner, tenant transactions and one file of plain SQL per aggregate.
//
// Tenant data is reached through a value that carries its tenant: a *Tx
// from DB.InTenant (a transaction whose first statement sets app.tenant_id
// transaction-locally) or a TenantDB from DB.Tenant (reads of one round
// trip each). Their methods take no tenant argument and still filter by
// tenant_id explicitly; row-level security (policies/) is the backstop that
// makes a forgotten WHERE harmless, not the only guard. Operations across
// tenants or before one is known (sign-in lookups, the operator's lists)
// are methods on *DB.
//
// This is the only package that imports pgx or contains SQL
// (scripts/check-imports.sh); every error it returns names the operation
// that failed (see wrap).
package postgres

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// Roles are the SQL roles of one installation. They are derived from a
// prefix (DB_ROLE_PREFIX, default "codelotse") so that tests can create
// their own set beside a development installation on one cluster.
type Roles struct {
	// Owner runs migrations and owns every table (NOLOGIN).
	Owner string
	// App is the runtime role the API and worker log in as: no superuser,
	// no BYPASSRLS, owns nothing.
	App string
	// Auth owns the SECURITY DEFINER functions of the system purposes
	// (NOLOGIN).
	Auth string
	// Search owns the code-search candidate function (NOLOGIN).
	Search string
}

// DefaultRolePrefix is the role prefix when none is configured.
const DefaultRolePrefix = "codelotse"

var rolePrefixRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,40}$`)

// RolesFor returns the roles for prefix.
func RolesFor(prefix string) (_ Roles, err error) {
	defer wrap(&err, "postgres.RolesFor")
	if prefix == "" {
		prefix = DefaultRolePrefix
	}
	if !rolePrefixRE.MatchString(prefix) {
		return Roles{}, codelotse.Errorf(codelotse.Invalid, "role prefix %q must match %s", prefix, rolePrefixRE)
	}
	return Roles{Owner: prefix + "_owner", App: prefix + "_app", Auth: prefix + "_auth", Search: prefix + "_search"}, nil
}

// RuntimeConnString returns adminURL with the runtime role as user and, when
// password is not empty, that password. It is how the API and worker connect
// when APP_DATABASE_URL is not set.
func RuntimeConnString(adminURL string, roles Roles, password string) (_ *pgxpool.Config, err error) {
	defer wrap(&err, "postgres.RuntimeConnString")
	cfg, err := pgxpool.ParseConfig(adminURL)
	if err != nil {
		return nil, codelotse.Wrap(codelotse.Invalid, err, "DATABASE_URL is not a valid PostgreSQL connection string")
	}
	cfg.ConnConfig.User = roles.App
	cfg.ConnConfig.Password = password
	return cfg, nil
}

// PoolConfig is a parsed connection string with pool settings, for Open.
type PoolConfig = pgxpool.Config

// ParsePoolConfig parses a PostgreSQL connection string for Open.
func ParsePoolConfig(url string) (_ *PoolConfig, err error) {
	defer wrap(&err, "postgres.ParsePoolConfig")
	return pgxpool.ParseConfig(url)
}

// DB is a pool plus what tenant transactions need.
type DB struct {
	Pool *pgxpool.Pool
	// repoCounts caches each tenant's repository count, a planning hint
	// (widegrants.go).
	repoCounts repoCounts
}

// Open connects with cfg and checks that the database answers.
func Open(ctx context.Context, cfg *pgxpool.Config) (_ *DB, err error) {
	defer wrap(&err, "postgres.Open")
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "codelotse"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, codelotse.Wrap(codelotse.Unavailable, err, "cannot connect to PostgreSQL")
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, codelotse.Wrap(codelotse.Unavailable, err, fmt.Sprintf("cannot connect to PostgreSQL as %s", cfg.ConnConfig.User))
	}
	return &DB{Pool: pool}, nil
}

// OpenURL parses url and opens it.
func OpenURL(ctx context.Context, url string) (_ *DB, err error) {
	defer wrap(&err, "postgres.OpenURL")
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, codelotse.Wrap(codelotse.Invalid, err, "not a valid PostgreSQL connection string")
	}
	return Open(ctx, cfg)
}

// Now is the database's clock: the time to compare with timestamps the
// database wrote (statement_timestamp), whatever the caller's clock says.
func (db *DB) Now(ctx context.Context) (_ time.Time, err error) {
	defer wrap(&err, "postgres.Now")
	var t time.Time
	err = db.Pool.QueryRow(ctx, "SELECT statement_timestamp()").Scan(&t)
	return t, classifyConn(err)
}

// Close closes the pool.
func (db *DB) Close() { db.Pool.Close() }

// Ping checks that the database answers (for /readyz).
func (db *DB) Ping(ctx context.Context) (err error) {
	defer wrap(&err, "postgres.Ping")
	return db.Pool.Ping(ctx)
}

const setTenant = "SELECT set_config('app.tenant_id', $1, true)"

// Tx is a tenant transaction: a pgx transaction whose first statement set
// app.tenant_id, plus that tenant. Its methods are the storage operations
// that write or need several statements; none takes a tenant argument,
// because a transaction belongs to exactly one tenant. A Tx is only valid
// inside the function given to DB.InTenant.
type Tx struct {
	q        pgx.Tx
	tenantID string
}

// TenantID is the tenant the transaction belongs to.
func (tx *Tx) TenantID() string { return tx.tenantID }

// InTenant runs fn in a transaction whose first statement sets app.tenant_id
// for that transaction only. fn's error rolls the transaction back and is
// returned as fn returned it (its storage calls already name themselves, and
// a caller may test for its own errors); InTenant's own failures (begin, the
// tenant setting, commit) are wrapped as postgres.InTenant.
func (db *DB) InTenant(ctx context.Context, tenantID string, fn func(*Tx) error) error {
	if tenantID == "" {
		return codelotse.Errorf(codelotse.Internal, "tenant transaction without a tenant")
	}
	var fnErr error
	err := pgx.BeginFunc(ctx, db.Pool, func(q pgx.Tx) error {
		if _, err := q.Exec(ctx, setTenant, tenantID); err != nil {
			return err
		}
		fnErr = fn(&Tx{q: q, tenantID: tenantID})
		return fnErr
	})
	// fn's error is returned as fn returned it (pgx passes it through);
	// only begin, the tenant setting and commit are this function's.
	// (Not err != fnErr: comparing errors of uncomparable types panics.)
	if err != nil && fnErr == nil {
		err = fmt.Errorf("postgres.InTenant: %w", err)
	}
	return classifyConn(err)
}

// TenantDB is the pool bound to one tenant, for reads that need no
// transaction of their own: each of its methods is one round trip (a
// pipeline of the tenant setting and the query, see readTenant) or opens
// its own tenant transaction. It has the same calling convention as Tx: the
// tenant travels with the value, never as an argument.
type TenantDB struct {
	db       *DB
	tenantID string
}

// Tenant returns the pool bound to tenantID.
func (db *DB) Tenant(tenantID string) TenantDB { return TenantDB{db: db, tenantID: tenantID} }

// TenantID is the tenant the handle is bound to.
func (t TenantDB) TenantID() string { return t.tenantID }

// readTenant runs one read in a single round trip: a pipeline of the tenant
// setting and the query, which PostgreSQL executes as one implicit
// transaction (one Sync), so the transaction-local setting covers the query
// and ends with it. A timeout above zero sets a statement timeout for the
// query, transaction-locally in the same round trip.
func (db *DB) readTenant(ctx context.Context, tenantID string, timeout time.Duration, sql string, args []any, scan func(pgx.Rows) error) error {
	return db.readTenantWith(ctx, tenantID, readOptions{timeout: timeout}, sql, args, scan)
}

// readOptions are a read's transaction-local settings.
type readOptions struct {
	// timeout above zero is the query's statement timeout.
	timeout time.Duration
	// customPlan plans the query for its parameters' values on every call,
	// never with PostgreSQL's cached generic plan (plan_cache_mode): for a
	// statement whose plan depends on a value the generic plan would treat
	// as unknown (wide grants, widegrants.go).
	customPlan bool
}

// readTenantWith is readTenant with settings beyond a timeout.
func (db *DB) readTenantWith(ctx context.Context, tenantID string, o readOptions, sql string, args []any, scan func(pgx.Rows) error) error {
	return classifyConn(db.readTenantBatch(ctx, tenantID, o, sql, args, scan))
}

func (db *DB) readTenantBatch(ctx context.Context, tenantID string, o readOptions, sql string, args []any, scan func(pgx.Rows) error) error {
	timeout := o.timeout
	if tenantID == "" {
		return codelotse.Errorf(codelotse.Internal, "tenant read without a tenant")
	}
	b := &pgx.Batch{}
	// A provisional authentication's check rides along (see AuthCheck):
	// first in the pipeline, so the token is looked up before the read,
	// and outside the read's statement timeout; or, for cached facts of
	// this tenant, only its epoch, right after the tenant is set (the
	// runtime role reads its own tenant's epoch only).
	chk, _ := ctx.Value(authCheckKey{}).(*AuthCheck)
	if chk != nil && !chk.claim() {
		chk = nil
	}
	byEpoch := chk != nil && chk.byEpochOf(tenantID)
	if chk != nil && !byEpoch {
		b.Queue(authTokenSQL, chk.hash, chk.resource)
	}
	b.Queue(setTenant, tenantID)
	if byEpoch {
		b.Queue(authEpochSQL, tenantID)
	}
	if timeout > 0 {
		b.Queue("SELECT set_config('statement_timeout', $1, true)", strconv.FormatInt(timeout.Milliseconds(), 10))
	}
	if o.customPlan {
		b.Queue("SELECT set_config('plan_cache_mode', 'force_custom_plan', true)")
	}
	b.Queue(sql, args...)
	br := db.Pool.SendBatch(ctx, b)
	if chk != nil && !byEpoch {
		f, found, err := scanTokenFacts(br.QueryRow())
		if err != nil {
			chk.release()
			br.Close()
			return err
		}
		chk.set(f, found)
	}
	if _, err := br.Exec(); err != nil {
		if byEpoch {
			chk.release()
		}
		br.Close()
		return err
	}
	if byEpoch {
		var epoch int64
		if err := br.QueryRow().Scan(&epoch); err != nil {
			chk.release()
			br.Close()
			return err
		}
		chk.setEpoch(epoch)
	}
	// The settings' results, in the order they were queued.
	for _, queued := range []bool{timeout > 0, o.customPlan} {
		if !queued {
			continue
		}
		if _, err := br.Exec(); err != nil {
			br.Close()
			return err
		}
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return err
	}
	err = scan(rows)
	rows.Close()
	if err == nil {
		err = rows.Err()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// CheckRuntimeRole refuses a connection whose role could bypass row-level
// security: a superuser, a role with BYPASSRLS, or the owner of a table
// (owners are subject to FORCE RLS, but could switch it off).
func (db *DB) CheckRuntimeRole(ctx context.Context) (err error) {
	defer wrap(&err, "postgres.CheckRuntimeRole")
	var user string
	var super, bypass bool
	var owned int
	err = db.Pool.QueryRow(ctx, `
		SELECT r.rolname, r.rolsuper, r.rolbypassrls,
		       (SELECT count(*) FROM pg_class c WHERE c.relowner = r.oid AND c.relkind IN ('r', 'p'))
		FROM pg_roles r WHERE r.rolname = current_user`).Scan(&user, &super, &bypass, &owned)
	if err != nil {
		return codelotse.Wrap(codelotse.Unavailable, err, "cannot read the database role")
	}
	switch {
	case super:
		return codelotse.Errorf(codelotse.Forbidden, "refusing to serve as %s: the role is a superuser and would bypass row-level security; connect as the runtime role", user)
	case bypass:
		return codelotse.Errorf(codelotse.Forbidden, "refusing to serve as %s: the role has BYPASSRLS", user)
	case owned > 0:
		return codelotse.Errorf(codelotse.Forbidden, "refusing to serve as %s: the role owns %d tables and could disable row-level security", user, owned)
	}
	return nil
}

func fmtInt(n int64) string { return strconv.FormatInt(n, 10) }

// Acquires is how many times a connection has been taken from the pool:
// one per statement, pipeline or transaction (tests count round trips of a
// request with it; pipelined statements are one).
func (db *DB) Acquires() int64 { return db.Pool.Stat().AcquireCount() }
