package postgres

import (
	"context"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/codelotse/codelotse/db"
	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/policies"
)

// migrateLockKey serialises concurrent `cltctl migrate` runs on one database
// (advisory locks are per database).
const migrateLockKey = 0x636c746d6967 // "cltmig"

// MigrateOptions configures Migrate.
type MigrateOptions struct {
	Roles Roles
	// AppPassword, when set, becomes the runtime role's password. Empty keeps
	// whatever the role has (trust authentication in development).
	AppPassword string
	// BeforeSchema runs after the roles exist and before the migrations and
	// policies (River's own migrations, so that the policies' grants cover
	// its tables).
	BeforeSchema func(ctx context.Context) error
}

// Migrate brings the database to the current schema as the administrative
// connection: it creates the extensions and roles if missing, applies the
// pending migrations as the owner role, then re-applies the policies. It is
// idempotent and safe to run from several processes at once.
func Migrate(ctx context.Context, conn *pgx.Conn, opts MigrateOptions) (applied []string, err error) {
	defer wrap(&err, "postgres.Migrate")
	r := opts.Roles
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(migrateLockKey)); err != nil {
		return nil, codelotse.Wrap(codelotse.Unavailable, err, "cannot take the migration lock")
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", int64(migrateLockKey)) //nolint:errcheck

	if err := ensureRoles(ctx, conn, opts); err != nil {
		return nil, err
	}
	for _, ext := range []string{"pg_trgm", "btree_gin"} {
		if _, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS "+ext); err != nil {
			return nil, codelotse.Wrap(codelotse.Unavailable, err, "cannot create extension "+ext)
		}
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf("GRANT USAGE, CREATE ON SCHEMA public TO %s", pgx.Identifier{r.Owner}.Sanitize())); err != nil {
		return nil, codelotse.Wrap(codelotse.Unavailable, err, "cannot grant the owner role the schema")
	}

	if opts.BeforeSchema != nil {
		if err := opts.BeforeSchema(ctx); err != nil {
			return nil, err
		}
	}

	names, err := fs.Glob(db.Migrations, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	slices.Sort(names)

	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL ROLE "+pgx.Identifier{r.Owner}.Sanitize()); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, "SELECT name FROM schema_migrations")
		if err != nil {
			return err
		}
		done, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, name := range names {
			base := strings.TrimPrefix(name, "migrations/")
			if slices.Contains(done, base) {
				continue
			}
			body, err := fs.ReadFile(db.Migrations, name)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, expand(string(body), r)); err != nil {
				return fmt.Errorf("migration %s: %w", base, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (name) VALUES ($1)", base); err != nil {
				return err
			}
			applied = append(applied, base)
		}
		if _, err := tx.Exec(ctx, expand(policies.Owner, r)); err != nil {
			return fmt.Errorf("policies/tenancy.sql: %w", err)
		}
		if _, err := tx.Exec(ctx, "RESET ROLE"); err != nil {
			return err
		}
		for _, sql := range policies.Admin() {
			if _, err := tx.Exec(ctx, expand(sql, r)); err != nil {
				return fmt.Errorf("policies (admin phase): %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, codelotse.Wrap(codelotse.Internal, err, "migration failed")
	}
	return applied, nil
}

// expand substitutes the role names into SQL. Role names are validated by
// RolesFor and quoted here, so the substitution cannot inject SQL.
func expand(sql string, r Roles) string {
	return strings.NewReplacer(
		"{{owner}}", pgx.Identifier{r.Owner}.Sanitize(),
		"{{app}}", pgx.Identifier{r.App}.Sanitize(),
		"{{auth}}", pgx.Identifier{r.Auth}.Sanitize(),
		"{{search}}", pgx.Identifier{r.Search}.Sanitize(),
	).Replace(sql)
}

// ensureRoles creates the three roles if they are missing and re-asserts
// their attributes, so that no role of the installation can bypass RLS even
// if someone altered it by hand.
func ensureRoles(ctx context.Context, conn *pgx.Conn, opts MigrateOptions) error {
	r := opts.Roles
	var super bool
	if err := conn.QueryRow(ctx, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&super); err != nil {
		return err
	}
	for _, role := range []struct {
		name  string
		login bool
	}{{r.Owner, false}, {r.App, true}, {r.Auth, false}, {r.Search, false}} {
		id := pgx.Identifier{role.name}.Sanitize()
		login := "NOLOGIN"
		if role.login {
			login = "LOGIN"
		}
		var exists bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)", role.name).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE ROLE %s %s NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE", id, login)); err != nil && !isUniqueViolation(err, "") && !isDuplicateObject(err) {
				return codelotse.Wrap(codelotse.Unavailable, err, "cannot create role "+role.name)
			}
		}
		alter := fmt.Sprintf("ALTER ROLE %s %s NOBYPASSRLS NOCREATEDB NOCREATEROLE", id, login)
		if super {
			// Only a superuser may change the SUPERUSER attribute.
			alter += " NOSUPERUSER"
		}
		if _, err := conn.Exec(ctx, alter); err != nil {
			return codelotse.Wrap(codelotse.Unavailable, err, "cannot alter role "+role.name)
		}
		if !super {
			// A non-superuser administrator (a managed database) must be a
			// member of the owner and auth roles to act as them.
			if _, err := conn.Exec(ctx, fmt.Sprintf("GRANT %s TO CURRENT_USER", id)); err != nil {
				return codelotse.Wrap(codelotse.Unavailable, err, "cannot grant role "+role.name+" to the administrator")
			}
		}
	}
	if opts.AppPassword != "" {
		// PASSWORD cannot take a bind parameter; quote it as a literal.
		lit := "'" + strings.ReplaceAll(opts.AppPassword, "'", "''") + "'"
		if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER ROLE %s PASSWORD %s", pgx.Identifier{r.App}.Sanitize(), lit)); err != nil {
			return codelotse.Wrap(codelotse.Unavailable, err, "cannot set the runtime role's password")
		}
	}
	return nil
}

// PendingMigrations lists the embedded migrations that the database has not
// applied. A missing schema (no schema_migrations table) is an error, so
// that /readyz fails on a database nobody migrated.
func (d *DB) PendingMigrations(ctx context.Context) (_ []string, err error) {
	defer wrap(&err, "postgres.PendingMigrations")
	names, err := fs.Glob(db.Migrations, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	rows, err := d.Pool.Query(ctx, "SELECT name FROM schema_migrations")
	if err != nil {
		return nil, codelotse.Wrap(codelotse.Unavailable, err, "reading schema_migrations")
	}
	done, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, codelotse.Wrap(codelotse.Unavailable, err, "reading schema_migrations")
	}
	var pending []string
	for _, name := range names {
		if base := strings.TrimPrefix(name, "migrations/"); !slices.Contains(done, base) {
			pending = append(pending, base)
		}
	}
	slices.Sort(pending)
	return pending, nil
}

// MigrateURL connects to adminURL and runs Migrate (cltctl migrate).
func MigrateURL(ctx context.Context, adminURL string, opts MigrateOptions) (applied []string, err error) {
	defer wrap(&err, "postgres.MigrateURL")
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return nil, codelotse.Wrap(codelotse.Unavailable, err, "cannot connect to DATABASE_URL")
	}
	defer conn.Close(ctx)
	return Migrate(ctx, conn, opts)
}

// EnsureDatabase creates the database named in adminURL when it does not
// exist yet (a fresh development cluster), connecting to the maintenance
// database "postgres" for that. It returns the name of the database it
// created, "" when the database was there.
func EnsureDatabase(ctx context.Context, adminURL string) (created string, err error) {
	defer wrap(&err, "postgres.EnsureDatabase")
	cfg, err := pgx.ParseConfig(adminURL)
	if err != nil {
		return "", codelotse.Wrap(codelotse.Invalid, err, "DATABASE_URL is not a valid PostgreSQL connection string")
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err == nil {
		return "", conn.Close(ctx)
	}
	name := cfg.Database
	maint := cfg.Copy()
	maint.Database = "postgres"
	mc, merr := pgx.ConnectConfig(ctx, maint)
	if merr != nil {
		return "", codelotse.Wrap(codelotse.Unavailable, err, "cannot connect to DATABASE_URL")
	}
	defer mc.Close(ctx)
	var exists bool
	if err := mc.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", codelotse.Wrap(codelotse.Unavailable, err, "cannot connect to DATABASE_URL")
	}
	if exists {
		return "", codelotse.Wrap(codelotse.Unavailable, err, "cannot connect to DATABASE_URL")
	}
	if _, err := mc.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", codelotse.Wrap(codelotse.Unavailable, err, "cannot create database "+name)
	}
	return name, nil
}
