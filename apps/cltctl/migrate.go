package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/jobs"
	"github.com/codelotse/codelotse/pkg/postgres"
)

// cmdMigrate: cltctl migrate
func cmdMigrate(e *env, args []string) error {
	fs := e.flags("migrate")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if err := ensureDatabase(e); err != nil {
		return err
	}
	conn, err := pgx.Connect(e.ctx, e.cfg.DatabaseURL)
	if err != nil {
		return codelotse.Wrap(codelotse.Unavailable, err, "cannot connect to DATABASE_URL")
	}
	defer conn.Close(e.ctx)
	applied, err := postgres.Migrate(e.ctx, conn, postgres.MigrateOptions{Roles: e.cfg.Roles, AppPassword: e.cfg.AppPassword,
		BeforeSchema: func(ctx context.Context) error { return jobs.Migrate(ctx, e.cfg.DatabaseURL, e.cfg.Roles.Owner) }})
	if err != nil {
		return err
	}
	if len(applied) == 0 {
		fmt.Fprintln(e.stdout, "schema is up to date; policies re-applied")
	} else {
		fmt.Fprintf(e.stdout, "applied %s; policies applied\n", strings.Join(applied, ", "))
	}
	return nil
}

// ensureDatabase creates the database named in DATABASE_URL when it does not
// exist yet (a fresh development cluster), connecting to the maintenance
// database "postgres" for that.
func ensureDatabase(e *env) error {
	cfg, err := pgx.ParseConfig(e.cfg.DatabaseURL)
	if err != nil {
		return codelotse.Wrap(codelotse.Invalid, err, "DATABASE_URL is not a valid PostgreSQL connection string")
	}
	conn, err := pgx.ConnectConfig(e.ctx, cfg)
	if err == nil {
		return conn.Close(e.ctx)
	}
	name := cfg.Database
	maint := cfg.Copy()
	maint.Database = "postgres"
	mc, merr := pgx.ConnectConfig(e.ctx, maint)
	if merr != nil {
		return codelotse.Wrap(codelotse.Unavailable, err, "cannot connect to DATABASE_URL")
	}
	defer mc.Close(e.ctx)
	var exists bool
	if err := mc.QueryRow(e.ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return codelotse.Wrap(codelotse.Unavailable, err, "cannot connect to DATABASE_URL")
	}
	if exists {
		return codelotse.Wrap(codelotse.Unavailable, err, "cannot connect to DATABASE_URL")
	}
	if _, err := mc.Exec(e.ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return codelotse.Wrap(codelotse.Unavailable, err, "cannot create database "+name)
	}
	fmt.Fprintf(e.stdout, "created database %s\n", name)
	return nil
}
