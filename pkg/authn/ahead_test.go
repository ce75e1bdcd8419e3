package authn_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/authn"
	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/postgres"
)

// TestAheadRefusesTheNextRequest: a token accepted once is let through
// provisionally on its cached facts, and every change that would refuse or
// narrow it — made after the provisional decision, while the request runs —
// is seen by that very request's confirmation, from the facts that rode
// along with its first read: the answer is withheld, the cache forgets the
// token, and authenticating again gives the refusal or the new grants.
// Unchanged tokens are confirmed, also when the request read nothing.
func TestAheadRefusesTheNextRequest(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	var clock fakeClock
	clock.set(f.t0.Add(time.Minute))
	b := &authn.Bearer{DB: f.env.App, Now: clock.now}
	t.Cleanup(b.Wait)

	n := 0
	// mapped is a group of its own mapped to f.repo, so removing it touches
	// no other case.
	mapped := func() string {
		n++
		g := fmt.Sprintf("team-%d", n)
		f.in(f.acme, func(tx *postgres.Tx) error {
			return tx.AddGroupMapping(ctx, f.idp, codelotse.GroupMapping{Group: g, Role: codelotse.RoleMember, RepositoryID: &f.repo}, actor)
		})
		return g
	}
	cases := []struct {
		name   string
		holder func() (holder, string) // the holder and the resource it uses
		change func(h holder)          // nil: nothing changes
		undo   func()                  // restores shared state
		// want is the fresh decision after the change: a failure reason,
		// or "" when the token is still accepted (with other grants).
		want string
		// noRead: the request reads nothing (tools/list), so the check
		// cannot ride along and Confirm looks the token up itself.
		noRead bool
	}{
		{name: "unchanged", holder: local(f)},
		{name: "unchanged, nothing read", holder: local(f), noRead: true},
		{name: "revoked", holder: local(f), want: "revoked", change: func(h holder) {
			f.in(f.acme, func(tx *postgres.Tx) error { return tx.RevokeToken(ctx, h.tokenID, "", actor) })
		}},
		{name: "revoked, nothing read", holder: local(f), want: "revoked", noRead: true, change: func(h holder) {
			f.in(f.acme, func(tx *postgres.Tx) error { return tx.RevokeToken(ctx, h.tokenID, "", actor) })
		}},
		{name: "token deleted", holder: local(f), want: "unknown", change: func(h holder) {
			f.admin(`DELETE FROM mcp_tokens WHERE id = $1`, h.tokenID)
		}},
		{name: "token's expiry moved into the past", holder: local(f), want: "expired", change: func(h holder) {
			f.admin(`UPDATE mcp_tokens SET expires_at = created_at + interval '1 second' WHERE id = $1`, h.tokenID)
		}},
		{name: "user deleted", holder: local(f), want: "revoked", change: func(h holder) {
			f.in(f.acme, func(tx *postgres.Tx) error { return tx.DeleteUser(ctx, h.email, actor) })
		}},
		{name: "user deleted, token not revoked", holder: local(f), want: "user_deleted", change: func(h holder) {
			f.admin(`UPDATE users SET deleted_at = now() WHERE id = $1`, h.userID)
		}},
		{name: "MCP switched off", holder: local(f), want: "mcp_disabled", change: func(holder) {
			f.in(f.acme, func(tx *postgres.Tx) error { _, err := tx.SetMCPEnabled(ctx, false, actor); return err })
		}, undo: func() {
			f.in(f.acme, func(tx *postgres.Tx) error { _, err := tx.SetMCPEnabled(ctx, true, actor); return err })
		}},
		{name: "identity provider disabled", holder: func() (holder, string) {
			return f.newHolder(f.acme, localMember, f.idp, mapped()), acmeResource
		}, want: "idp_disabled", change: func(holder) {
			f.in(f.acme, func(tx *postgres.Tx) error { return tx.SetIdentityProviderEnabled(ctx, f.idp, false, actor) })
		}, undo: func() {
			f.in(f.acme, func(tx *postgres.Tx) error { return tx.SetIdentityProviderEnabled(ctx, f.idp, true, actor) })
		}},
		{name: "OIDC mapping removed", holder: func() (holder, string) {
			return f.newHolder(f.acme, localMember, f.idp, mapped()), acmeResource
		}, want: "no_grants_no_mapping", change: func(h holder) {
			f.in(f.acme, func(tx *postgres.Tx) error {
				_, err := tx.RemoveGroupMappings(ctx, f.idp, fmt.Sprintf("team-%d", n), "", nil, actor)
				return err
			})
		}},
		{name: "OIDC group snapshot changed", holder: func() (holder, string) {
			return f.newHolder(f.acme, localMember, f.idp, mapped()), acmeResource
		}, want: "no_grants_no_mapping", change: func(h holder) {
			f.admin(`UPDATE mcp_tokens SET idp_groups = '{}' WHERE id = $1`, h.tokenID)
		}},
		{name: "repository access removed (grants narrow)", holder: local(f), want: "", change: func(h holder) {
			f.admin(`DELETE FROM repo_memberships WHERE user_id = $1`, h.userID)
		}},
		{name: "made an admin (grants widen)", holder: local(f), want: "", change: func(h holder) {
			f.in(f.acme, func(tx *postgres.Tx) error {
				return tx.RefreshMembership(ctx, h.userID, codelotse.RoleAdmin, codelotse.MembershipLocal, f.t0)
			})
		}},
		{name: "membership expired by an operator", holder: local(f), want: "no_grants_stale", change: func(h holder) {
			f.in(f.acme, func(tx *postgres.Tx) error { return tx.ExpireMembership(ctx, h.userID, actor) })
		}},
		{name: "OAuth clients switched off", holder: func() (holder, string) {
			return f.oauthHolder(f.acme, acmeResource), acmeResource
		}, want: "unknown", change: func(holder) {
			f.in(f.acme, func(tx *postgres.Tx) error { _, err := tx.SetOAuthEnabled(ctx, false, actor); return err })
		}, undo: func() {
			f.in(f.acme, func(tx *postgres.Tx) error { _, err := tx.SetOAuthEnabled(ctx, true, actor); return err })
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.undo != nil {
				t.Cleanup(tc.undo)
			}
			h, resource := tc.holder()
			header := "Bearer " + h.secret
			first, err := b.Authenticate(ctx, header, resource, "")
			if err != nil || first.Failure != nil || first.GrantFailure != nil {
				t.Fatalf("first request: %+v, %v", first, err)
			}
			res, p, err := b.AuthenticateAhead(ctx, header, resource, "")
			if err != nil {
				t.Fatal(err)
			}
			if p == nil {
				t.Fatal("a token accepted a moment ago was not let through provisionally")
			}
			if !sameGrants(res, first) {
				t.Fatalf("provisional %+v, want the first request's %+v", res, first)
			}
			if tc.change != nil {
				tc.change(h)
			}
			if !tc.noRead {
				// The request's first read, as a tool makes it.
				if _, err := f.env.App.Tenant(res.Principal.TenantID).RulesInForce(p.Context(ctx), nil); err != nil {
					t.Fatal(err)
				}
			}
			ok, err := p.Confirm(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if ok != (tc.change == nil) {
				t.Fatalf("Confirm = %v after change %v", ok, tc.change != nil)
			}
			again, p2, err := b.AuthenticateAhead(ctx, header, resource, "")
			if err != nil {
				t.Fatal(err)
			}
			if tc.change == nil {
				if p2 == nil || !sameGrants(again, first) {
					t.Errorf("unchanged token: pending %v, result %+v", p2 != nil, again)
				}
				return
			}
			// The cache forgot the token: this decision is on fresh facts.
			if p2 != nil {
				t.Fatal("a changed token was let through provisionally again")
			}
			got := reason(again.Failure)
			if got == "" {
				got = reason(again.GrantFailure)
			}
			if got != tc.want {
				t.Errorf("after the change: refused %q, want %q", got, tc.want)
			}
			if tc.want == "" && sameGrants(again, first) {
				t.Errorf("after the change the grants are still %+v", again.Grants)
			}
		})
	}

	// A token whose cached facts refuse it now (it expired since) is never
	// let through provisionally: refusals are decided on fresh facts.
	h, resource := local(f)()
	if _, err := b.Authenticate(ctx, "Bearer "+h.secret, resource, ""); err != nil {
		t.Fatal(err)
	}
	clock.set(h.expiresAt)
	res, p, err := b.AuthenticateAhead(ctx, "Bearer "+h.secret, resource, "")
	if err != nil || p != nil || reason(res.Failure) != "expired" {
		t.Errorf("expired token: pending %v, failure %q, %v", p != nil, reason(res.Failure), err)
	}
}

func local(f *fixture) func() (holder, string) {
	return func() (holder, string) { return f.newHolder(f.acme, localMember, ""), acmeResource }
}

func sameGrants(a, b authn.Result) bool {
	return a.Principal == b.Principal && fmt.Sprint(normal(a.Grants)) == fmt.Sprint(normal(b.Grants))
}
