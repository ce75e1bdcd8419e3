package main

import (
	"fmt"
	"time"

	"github.com/codelotse/codelotse/pkg/authn"
	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/postgres"
)

// breakGlassTTL bounds a break-glass link.
const breakGlassTTL = 15 * time.Minute

// cmdBreakGlass: cltctl break-glass --tenant SLUG --email EMAIL
//
// Prints a single-use sign-in link valid for 15 minutes. The session it
// opens is marked break-glass on every page, can act as a tenant admin (all
// audited as break-glass) and cannot create tokens.
func cmdBreakGlass(e *env, args []string) error {
	fs := e.flags("break-glass")
	slug := fs.String("tenant", "", "tenant slug")
	email := fs.String("email", "", "the operator's email: an existing user of the tenant (cltctl user add first)")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if err := need("tenant", *slug, "email", *email); err != nil {
		return err
	}
	var link string
	err := e.inTenant(*slug, func(tx *postgres.Tx) error {
		// Only an existing, not deleted user: break-glass must never create
		// or revive an account (a deleted user stays deleted).
		u, err := tx.UserByEmail(e.ctx, *email)
		if codelotse.ErrorCode(err) == codelotse.NotFound {
			return codelotse.Errorf(codelotse.NotFound, "no user with email %s in tenant %s: add the operator first with cltctl user add --tenant %s --email %s", *email, *slug, *slug, *email)
		}
		if err != nil {
			return err
		}
		link, err = oneTimeLink(e, tx, u.ID, "break-glass", breakGlassTTL)
		if err != nil {
			return err
		}
		return tx.AuditBreakGlassIssued(e.ctx, *email, operator)
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, link)
	return nil
}

// oneTimeLink stores a single-use sign-in state and returns its link.
func oneTimeLink(e *env, tx *postgres.Tx, userID, kind string, ttl time.Duration) (string, error) {
	value := tx.TenantID() + "." + authn.NewSecret()
	if err := tx.CreateLoginState(e.ctx, authn.HashValue(value), postgres.LoginState{Kind: kind, UserID: userID}, ttl); err != nil {
		return "", err
	}
	return e.cfg.PublicURL + "/auth/link?v=" + value, nil
}
