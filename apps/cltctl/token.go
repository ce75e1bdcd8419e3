package main

import (
	"fmt"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/tokens"
)

// cmdTokenCreate: cltctl token create --tenant SLUG --email EMAIL --name NAME [--expires-days N]
//
// Only the token is printed on stdout, so that scripts can capture it.
func cmdTokenCreate(e *env, args []string) error {
	fs := e.flags("token create")
	slug := fs.String("tenant", "", "tenant slug")
	email := fs.String("email", "", "email of the user the token acts for")
	name := fs.String("name", "", "token name (1-100 characters)")
	days := fs.Int("expires-days", tokens.DefaultExpiryDays, "lifetime in days (1-90)")
	groups := fs.String("idp-groups", "", "create the token as an OIDC sign-in would: bound to the tenant's identity provider with this comma-separated groups snapshot")
	issuer := fs.String("issuer", "", "with --idp-groups: the provider's issuer (needed when the tenant has several)")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if err := need("tenant", *slug, "email", *email, "name", *name); err != nil {
		return err
	}
	if *days < tokens.MinExpiryDays || *days > tokens.MaxExpiryDays {
		return usageError{fmt.Sprintf("--expires-days must be %d to %d, not %d", tokens.MinExpiryDays, tokens.MaxExpiryDays, *days)}
	}
	db, err := e.admin()
	if err != nil {
		return err
	}
	defer db.Close()
	tid, err := e.tenant(db, *slug)
	if err != nil {
		return err
	}
	var oidc *oidcSnapshot
	if *groups != "" || *issuer != "" {
		oidc = &oidcSnapshot{issuer: *issuer, groups: []string{}}
		for _, g := range strings.Split(*groups, ",") {
			if g = strings.TrimSpace(g); g != "" {
				oidc.groups = append(oidc.groups, g)
			}
		}
	}
	secret, err := createTokenWith(e, db, tid, *email, *name, *days, oidc)
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, secret)
	return nil
}

// oidcSnapshot binds a token to an identity provider and a groups snapshot.
type oidcSnapshot struct {
	issuer string
	groups []string
}

// createToken creates a token for the user with email and returns the secret.
func createToken(e *env, db *postgres.DB, tid, email, name string, days int) (string, error) {
	return createTokenWith(e, db, tid, email, name, days, nil)
}

func createTokenWith(e *env, db *postgres.DB, tid, email, name string, days int, oidc *oidcSnapshot) (string, error) {
	if _, err := tokens.CheckName(name); err != nil {
		return "", err
	}
	exp, err := tokens.ExpiresAt(e.now, days)
	if err != nil {
		return "", err
	}
	secret := tokens.Generate()
	err = db.InTenant(e.ctx, tid, func(tx *postgres.Tx) error {
		u, err := tx.UserByEmail(e.ctx, email)
		if err != nil {
			return err
		}
		nt := postgres.NewToken{UserID: u.ID, Name: name, Secret: secret, ExpiresAt: exp}
		if oidc != nil {
			p, err := tx.IdentityProviderByIssuer(e.ctx, oidc.issuer)
			if err != nil {
				return err
			}
			nt.IdPID, nt.IdPGroups = &p.ID, oidc.groups
		}
		_, err = tx.CreateToken(e.ctx, nt, e.now, operator)
		return err
	})
	if err != nil {
		return "", err
	}
	return secret, nil
}

// cmdTokenRevoke: cltctl token revoke --tenant SLUG --id ID
func cmdTokenRevoke(e *env, args []string) error {
	fs := e.flags("token revoke")
	slug := fs.String("tenant", "", "tenant slug")
	id := fs.String("id", "", "token id (from cltctl token list)")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if err := need("tenant", *slug, "id", *id); err != nil {
		return err
	}
	if !tokenID.MatchString(*id) {
		return usageError{"--id is not a token id: use the ID column of cltctl token list"}
	}
	*id = strings.ToLower(*id) // ids are stored and compared as lower-case text
	if err := e.inTenant(*slug, func(tx *postgres.Tx) error {
		return tx.RevokeToken(e.ctx, *id, "", operator)
	}); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "token %s revoked\n", *id)
	return nil
}

// tokenID is the form of a token's id (a UUID).
var tokenID = regexp.MustCompile(`^[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}$`)

// cmdTokenList: cltctl token list --tenant SLUG [--email EMAIL]
func cmdTokenList(e *env, args []string) error {
	fs := e.flags("token list")
	slug := fs.String("tenant", "", "tenant slug")
	email := fs.String("email", "", "only this user's tokens")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if err := need("tenant", *slug); err != nil {
		return err
	}
	var list []codelotse.Token
	var err error
	err = e.inTenant(*slug, func(tx *postgres.Tx) error {
		uid := ""
		if *email != "" {
			u, err := tx.UserByEmail(e.ctx, *email)
			if err != nil {
				return err
			}
			uid = u.ID
		}
		list, err = tx.ListTokens(e.ctx, uid)
		return err
	})
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tUSER\tNAME\tTOKEN\tCREATED\tEXPIRES\tLAST USED\tSTATE")
	for _, t := range list {
		last := "never"
		if t.LastUsedAt != nil {
			last = t.LastUsedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.UserEmail, t.Name, t.Display(),
			t.CreatedAt.UTC().Format(time.RFC3339), t.ExpiresAt.UTC().Format(time.RFC3339), last, t.State(e.now))
	}
	return tw.Flush()
}
