package main

import (
	"context"
	"fmt"
	"strings"

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
	applied, err := postgres.MigrateURL(e.ctx, e.cfg.DatabaseURL, postgres.MigrateOptions{Roles: e.cfg.Roles, AppPassword: e.cfg.AppPassword,
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
	name, err := postgres.EnsureDatabase(e.ctx, e.cfg.DatabaseURL)
	if err != nil {
		return err
	}
	if name != "" {
		fmt.Fprintf(e.stdout, "created database %s\n", name)
	}
	return nil
}
