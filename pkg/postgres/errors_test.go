package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
)

// TestErrorsNameTheOperation: an error from storage says which operation
// failed, and keeps the code and the user's message the edges translate.
func TestErrorsNameTheOperation(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	ctx := context.Background()
	a := seedTenant(t, env, "acme")
	repo := addRepo(t, env, a, "acme/api")
	_, err := env.App.Tenant(a).ReadIndexedFile(ctx, repo.ID, "missing.go", 1, 0)
	if !strings.HasPrefix(fmt.Sprint(err), "postgres.ReadIndexedFile: ") {
		t.Errorf("error = %v, want it to start with the operation", err)
	}
	if codelotse.ErrorCode(err) != codelotse.NotFound || codelotse.ErrorMessage(err) != "File not found in the code index: missing.go" {
		t.Errorf("code %s, message %q: the wrap must not change what a user reads", codelotse.ErrorCode(err), codelotse.ErrorMessage(err))
	}
}

// TestNotFoundOnlyForMissingRows: a mapping or membership that does not
// exist is reported as such, but a failing statement is not turned into
// "No such mapping." or a default role (the admin page and cltctl did both).
func TestNotFoundOnlyForMissingRows(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	ctx := context.Background()
	a := seedTenant(t, env, "acme")
	u := addUser(t, env, a, "dev@acme.test", codelotse.RoleAdmin)
	err := env.App.InTenant(ctx, a, func(tx *postgres.Tx) error {
		if _, err := tx.DeleteGroupMapping(ctx, 424242); codelotse.ErrorCode(err) != codelotse.NotFound || codelotse.ErrorMessage(err) != "No such mapping." {
			t.Errorf("deleting a missing mapping: %v, want NotFound", err)
		}
		if role, found, err := tx.MembershipRole(ctx, u.ID); err != nil || !found || role != codelotse.RoleAdmin {
			t.Errorf("MembershipRole = %q, %v, %v; want admin", role, found, err)
		}
		if _, found, err := tx.MembershipRole(ctx, "00000000-0000-0000-0000-000000000000"); err != nil || found {
			t.Errorf("MembershipRole of nobody: found %v, err %v; want not found, no error", found, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// In an aborted transaction every statement fails (SQLSTATE 25P02):
	// that is a database error, not a missing row.
	_ = env.App.InTenant(ctx, a, func(tx *postgres.Tx) error {
		if _, err := postgres.Raw(tx).Exec(ctx, "SELECT 1/0"); err == nil {
			t.Fatal("1/0 did not fail")
		}
		if _, err := tx.DeleteGroupMapping(ctx, 424242); err == nil || codelotse.ErrorCode(err) == codelotse.NotFound {
			t.Errorf("deleting in a failed transaction: %v, want the database error", err)
		}
		if _, _, err := tx.MembershipRole(ctx, u.ID); err == nil {
			t.Error("MembershipRole in a failed transaction: no error")
		}
		return errors.New("rolled back")
	})
}

// TestQueryCanceledBySQLState: a statement timeout is recognised by its
// SQLSTATE (57014), not by the server's message, which a translated
// lc_messages would change.
func TestQueryCanceledBySQLState(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	ctx := context.Background()
	a := seedTenant(t, env, "acme")
	err := postgres.ReadTenantTimeout(ctx, env.App, a, 50*time.Millisecond, "SELECT pg_sleep(2)", nil, func(pgx.Rows) error { return nil })
	if !postgres.IsQueryCanceled(err) || !postgres.IsQueryCanceled(fmt.Errorf("postgres.X: %w", err)) {
		t.Errorf("statement timeout not recognised: %v", err)
	}
	if postgres.IsQueryCanceled(errors.New("ERROR: canceling statement due to statement timeout (SQLSTATE 57014)")) {
		t.Error("an error that only reads like a timeout was classified by its text")
	}
}
