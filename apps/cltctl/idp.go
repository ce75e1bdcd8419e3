package main

import (
	"fmt"
	"strings"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/oidc"
	"github.com/codelotse/codelotse/pkg/postgres"
)

// cmdIdPAdd: cltctl idp add --tenant SLUG --issuer URL --client-id ID --client-secret SECRET [--groups-claim NAME] [--scopes "openid email profile groups"]
func cmdIdPAdd(e *env, args []string) error {
	fs := e.flags("idp add")
	slug := fs.String("tenant", "", "tenant slug")
	issuer := fs.String("issuer", "", "OIDC issuer URL (discovery at ISSUER/.well-known/openid-configuration)")
	clientID := fs.String("client-id", "", "client id registered at the provider")
	secret := fs.String("client-secret", "", "client secret")
	claim := fs.String("groups-claim", "groups", "ID-token claim that lists the user's groups")
	scopes := fs.String("scopes", "openid email profile groups", "space-separated scopes to request")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if err := need("tenant", *slug, "issuer", *issuer, "client-id", *clientID, "client-secret", *secret); err != nil {
		return err
	}
	if err := oidc.CheckIssuer(strings.TrimRight(*issuer, "/")); err != nil {
		return usageError{"--issuer: " + err.Error()}
	}
	sc := strings.Fields(*scopes)
	if !contains(sc, "openid") {
		return usageError{"--scopes must include openid"}
	}
	iss := strings.TrimRight(*issuer, "/")
	return e.inTenant(*slug, func(tx *postgres.Tx) error {
		// An operator may keep a second provider on purpose (its tokens
		// keep working until it is disabled), unlike the admin page, which
		// edits the tenant's one provider. Web sign-in needs exactly one,
		// so adding another is said out loud.
		existing, err := tx.IdentityProviderByIssuer(e.ctx, "")
		another := err == nil && existing.Issuer != iss
		p, err := tx.UpsertIdentityProvider(e.ctx, postgres.IdentityProvider{Issuer: iss,
			ClientID: *clientID, ClientSecret: *secret, GroupsClaim: *claim, Scopes: sc}, operator)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "identity provider %s (%s) saved and enabled for %s\n", p.Issuer, p.ID, *slug)
		if another {
			fmt.Fprintf(e.stderr, "cltctl: note: %s now has two identity providers (%s and %s); web sign-in works only with exactly one. "+
				"To correct a mistyped issuer instead, use the admin page's provider form before anyone signs in.\n", *slug, existing.Issuer, p.Issuer)
		}
		return nil
	})
}

// cmdIdPEnable: cltctl idp disable|enable --tenant SLUG [--issuer URL]
func cmdIdPSetEnabled(enabled bool) func(e *env, args []string) error {
	return func(e *env, args []string) error {
		name := "idp disable"
		if enabled {
			name = "idp enable"
		}
		fs := e.flags(name)
		slug := fs.String("tenant", "", "tenant slug")
		issuer := fs.String("issuer", "", "issuer of the provider (needed when the tenant has several)")
		if err := parse(fs, args, 0); err != nil {
			return err
		}
		if err := need("tenant", *slug); err != nil {
			return err
		}
		return e.inTenant(*slug, func(tx *postgres.Tx) error {
			p, err := tx.IdentityProviderByIssuer(e.ctx, *issuer)
			if err != nil {
				return err
			}
			if err := tx.SetIdentityProviderEnabled(e.ctx, p.ID, enabled, operator); err != nil {
				return err
			}
			if enabled {
				fmt.Fprintf(e.stdout, "identity provider %s enabled\n", p.Issuer)
			} else {
				fmt.Fprintf(e.stdout, "identity provider %s disabled; its tokens no longer work\n", p.Issuer)
			}
			return nil
		})
	}
}

// cmdIdPMap: cltctl idp map --tenant SLUG --group G --role admin|member [--repo OWNER/NAME] [--issuer URL]
func cmdIdPMap(e *env, args []string) error {
	fs := e.flags("idp map")
	slug := fs.String("tenant", "", "tenant slug")
	group := fs.String("group", "", "group name as the provider sends it")
	role := fs.String("role", "", "admin or member")
	repo := fs.String("repo", "", "OWNER/NAME the group may view (members)")
	issuer := fs.String("issuer", "", "issuer of the provider (needed when the tenant has several)")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if err := need("tenant", *slug, "group", *group, "role", *role); err != nil {
		return err
	}
	if err := displayName("group", *group); err != nil {
		return err
	}
	r, err := roleFlag(*role)
	if err != nil {
		return err
	}
	return e.inTenant(*slug, func(tx *postgres.Tx) error {
		p, repoID, err := providerAndRepo(e, tx, *issuer, *repo)
		if err != nil {
			return err
		}
		m := codelotse.GroupMapping{Group: *group, Role: r, RepositoryID: repoID}
		if err := tx.AddGroupMapping(e.ctx, p.ID, m, operator); err != nil {
			return err
		}
		target := "no repository"
		if *repo != "" {
			target = *repo
		}
		fmt.Fprintf(e.stdout, "group %q maps to %s (%s)\n", *group, r, target)
		return nil
	})
}

// cmdIdPUnmap: cltctl idp unmap --tenant SLUG --group G [--role R] [--repo OWNER/NAME] [--issuer URL]
func cmdIdPUnmap(e *env, args []string) error {
	fs := e.flags("idp unmap")
	slug := fs.String("tenant", "", "tenant slug")
	group := fs.String("group", "", "group name")
	role := fs.String("role", "", "only the mapping with this role")
	repo := fs.String("repo", "", "only the mapping of this repository")
	issuer := fs.String("issuer", "", "issuer of the provider (needed when the tenant has several)")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if err := need("tenant", *slug, "group", *group); err != nil {
		return err
	}
	if *role != "" {
		if _, err := roleFlag(*role); err != nil {
			return err
		}
	}
	return e.inTenant(*slug, func(tx *postgres.Tx) error {
		p, repoID, err := providerAndRepo(e, tx, *issuer, *repo)
		if err != nil {
			return err
		}
		n, err := tx.RemoveGroupMappings(e.ctx, p.ID, *group, *role, repoID, operator)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "removed %d mapping(s) of group %q; it applies to every token at its next request\n", n, *group)
		return nil
	})
}

// cmdMembershipRefresh: cltctl membership refresh --tenant SLUG --email EMAIL [--role admin|member]
func cmdMembershipRefresh(e *env, args []string) error {
	fs := e.flags("membership refresh")
	slug := fs.String("tenant", "", "tenant slug")
	email := fs.String("email", "", "user email")
	role := fs.String("role", "", "new role (default: keep)")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if err := need("tenant", *slug, "email", *email); err != nil {
		return err
	}
	return e.inTenant(*slug, func(tx *postgres.Tx) error {
		u, err := tx.UserByEmail(e.ctx, *email)
		if err != nil {
			return err
		}
		// Without --role the current role stays; a user without a
		// membership row becomes a member. A failing read is an error, not
		// a member.
		r := codelotse.RoleMember
		if *role == "" {
			current, found, err := tx.MembershipRole(e.ctx, u.ID)
			if err != nil {
				return err
			}
			if found {
				r = current
			}
		} else if r, err = roleFlag(*role); err != nil {
			return err
		}
		if err := tx.SetLocalMembership(e.ctx, u, r, e.now, operator); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "membership of %s set by the operator (%s, local): it lasts until changed or expired\n", *email, r)
		return nil
	})
}

// cmdMembershipExpire: cltctl membership expire --tenant SLUG --email EMAIL
func cmdMembershipExpire(e *env, args []string) error {
	fs := e.flags("membership expire")
	slug := fs.String("tenant", "", "tenant slug")
	email := fs.String("email", "", "user email")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if err := need("tenant", *slug, "email", *email); err != nil {
		return err
	}
	return e.inTenant(*slug, func(tx *postgres.Tx) error {
		u, err := tx.UserByEmail(e.ctx, *email)
		if err != nil {
			return err
		}
		if err := tx.ExpireMembership(e.ctx, u.ID, operator); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "membership of %s expired; their tokens answer 401 until they sign in again\n", *email)
		return nil
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// providerAndRepo resolves the --issuer and optional --repo flags of the
// mapping commands.
func providerAndRepo(e *env, tx *postgres.Tx, issuer, repo string) (postgres.IdentityProvider, *int64, error) {
	p, err := tx.IdentityProviderByIssuer(e.ctx, issuer)
	if err != nil || repo == "" {
		return p, nil, err
	}
	rp, err := tx.RepositoryByName(e.ctx, repo)
	if err != nil {
		return p, nil, err
	}
	return p, &rp.ID, nil
}
