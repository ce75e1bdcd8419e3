package main

import (
	"fmt"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/postgres"
)

// cmdUserAdd: cltctl user add --tenant SLUG --email EMAIL [--role admin|member] [--name NAME]
//
// The user gets a tenant membership refreshed now, which grants access for
// codelotse.GrantMaxAge like a GitHub sign-in; running it again refreshes it.
func cmdUserAdd(e *env, args []string) error {
	fs := e.flags("user add")
	slug := fs.String("tenant", "", "tenant slug")
	email := fs.String("email", "", "email address")
	role := fs.String("role", "member", "admin or member (admins see every repository)")
	name := fs.String("name", "", "display name")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if err := need("tenant", *slug, "email", *email); err != nil {
		return err
	}
	if err := displayName("name", *name); err != nil {
		return err
	}
	r, err := roleFlag(*role)
	if err != nil {
		return err
	}
	var u codelotse.User
	err = e.inTenant(*slug, func(tx *postgres.Tx) error {
		u, err = tx.AddLocalMember(e.ctx, *email, *name, r, e.now, operator)
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "user %s (%s) is %s of %s (local access, no 24-hour expiry)\n", u.Email, u.ID, r, *slug)
	return nil
}

// cmdUserDelete: cltctl user delete --tenant SLUG --email EMAIL
func cmdUserDelete(e *env, args []string) error {
	fs := e.flags("user delete")
	slug := fs.String("tenant", "", "tenant slug")
	email := fs.String("email", "", "email address")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if err := need("tenant", *slug, "email", *email); err != nil {
		return err
	}
	if err := e.inTenant(*slug, func(tx *postgres.Tx) error {
		return tx.DeleteUser(e.ctx, *email, operator)
	}); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "user %s deleted from %s; their tokens no longer work\n", *email, *slug)
	return nil
}
