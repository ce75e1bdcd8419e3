package authn_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/authn"
	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/oauth"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
	"github.com/codelotse/codelotse/pkg/tokens"
)

// The resources (MCP endpoint URLs) an OAuth access token may be bound to.
const (
	acmeResource  = "http://127.0.0.1:8080/t/acme/mcp"
	otherResource = "http://127.0.0.1:8080/t/other/mcp"
)

var actor = postgres.Actor{Label: "test"}

// fixture is one migrated database with the tenants the bearer tests need.
// Every case makes its own user and token, so cases do not share state.
type fixture struct {
	t   *testing.T
	env *pgtest.Env
	// t0 is when the tokens are created and where the fake clock starts
	// (microseconds: what PostgreSQL stores).
	t0 time.Time
	// acme has MCP on; off has MCP off; noOAuth has MCP on and switches
	// OAuth clients off once it has issued an access token.
	acme, off, noOAuth string
	repo               int64 // a repository of acme
	// idp is an enabled OIDC provider of acme that maps group "eng" to
	// member of repo and "ops" to admin; idpOff is a disabled one with the
	// same mappings.
	idp, idpOff string
	n           atomic.Int64
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	f := &fixture{t: t, env: pgtest.New(t), t0: time.Now().UTC().Truncate(time.Microsecond)}
	for _, tn := range []struct {
		id   *string
		slug string
		mcp  bool
	}{{&f.acme, "acme", true}, {&f.off, "off", false}, {&f.noOAuth, "nooauth", true}} {
		created, err := f.env.Admin.CreateTenant(ctx, postgres.NewTenant{Slug: tn.slug, Name: tn.slug, MCPEnabled: tn.mcp}, "test")
		if err != nil {
			t.Fatal(err)
		}
		*tn.id = created.ID
	}
	f.in(f.acme, func(tx *postgres.Tx) error {
		r, err := tx.AddRepository(ctx, postgres.NewRepository{FullName: "acme/api"})
		if err != nil {
			return err
		}
		f.repo = r.ID
		for _, p := range []struct {
			id      *string
			issuer  string
			enabled bool
		}{{&f.idp, "https://idp.example.test", true}, {&f.idpOff, "https://old-idp.example.test", false}} {
			idp, err := tx.UpsertIdentityProvider(ctx, postgres.IdentityProvider{Issuer: p.issuer, ClientID: "c"}, actor)
			if err != nil {
				return err
			}
			*p.id = idp.ID
			for _, m := range []codelotse.GroupMapping{{Group: "eng", Role: codelotse.RoleMember, RepositoryID: &f.repo}, {Group: "ops", Role: codelotse.RoleAdmin}} {
				if err := tx.AddGroupMapping(ctx, idp.ID, m, actor); err != nil {
					return err
				}
			}
			if !p.enabled {
				if err := tx.SetIdentityProviderEnabled(ctx, idp.ID, false, actor); err != nil {
					return err
				}
			}
		}
		return nil
	})
	return f
}

// in runs fn in a tenant transaction as the runtime role, as the service
// and cltctl write these rows.
func (f *fixture) in(tenantID string, fn func(tx *postgres.Tx) error) {
	f.t.Helper()
	if err := f.env.App.InTenant(context.Background(), tenantID, fn); err != nil {
		f.t.Fatal(err)
	}
}

// admin runs one statement as the administrator: states that no service
// path produces on its own (a deleted user whose token is not revoked).
func (f *fixture) admin(sql string, args ...any) {
	f.t.Helper()
	if _, err := f.env.Admin.Pool.Exec(context.Background(), sql, args...); err != nil {
		f.t.Fatalf("%s: %v", sql, err)
	}
}

// holder is a user of a tenant and one token of theirs.
type holder struct {
	tenantID, userID, email string
	tokenID, secret         string
	expiresAt               time.Time
	// grantID is the OAuth grant of an access token ("" for a personal
	// access token): its rate-limit key.
	grantID string
}

// membership says how a holder's tenant membership is cached.
type membership struct {
	none   bool // no cached membership at all
	source string
	role   codelotse.Role
	// age is how long before t0 the membership was refreshed.
	age time.Duration
}

var localMember = membership{source: codelotse.MembershipLocal, role: codelotse.RoleMember}

// newHolder creates a user with membership m (and repository access to
// f.repo) and a personal access token; idpID and groups make it a token
// created in an OIDC session.
func (f *fixture) newHolder(tenantID string, m membership, idpID string, groups ...string) holder {
	f.t.Helper()
	ctx := context.Background()
	h := holder{tenantID: tenantID, email: fmt.Sprintf("user%d@example.test", f.n.Add(1)), secret: tokens.Generate()}
	f.in(tenantID, func(tx *postgres.Tx) error {
		u, err := tx.UpsertLocalUser(ctx, h.email, "", codelotse.RoleMember, f.t0)
		if err != nil {
			return err
		}
		h.userID = u.ID
		if m.none {
			// The membership row is deleted once this transaction
			// committed (below).
		} else if err := tx.RefreshMembership(ctx, u.ID, m.role, m.source, f.t0.Add(-m.age)); err != nil {
			return err
		}
		if tenantID == f.acme {
			if err := tx.GrantRepository(ctx, u.ID, f.repo); err != nil {
				return err
			}
		}
		exp, err := tokens.ExpiresAt(f.t0, 30)
		if err != nil {
			return err
		}
		nt := postgres.NewToken{UserID: u.ID, Name: "t", Secret: h.secret, ExpiresAt: exp}
		if idpID != "" {
			nt.IdPID, nt.IdPGroups = &idpID, groups
		}
		tk, err := tx.CreateToken(ctx, nt, f.t0, actor)
		h.tokenID, h.expiresAt = tk.ID, tk.ExpiresAt
		return err
	})
	if m.none {
		f.admin(`DELETE FROM tenant_memberships WHERE tenant_id = $1 AND user_id = $2`, tenantID, h.userID)
	}
	return h
}

// oauthHolder is a local member of tenantID with an OAuth access token
// issued for resource through the authorization-code flow.
func (f *fixture) oauthHolder(tenantID, resource string) holder {
	f.t.Helper()
	ctx := context.Background()
	h := f.newHolder(tenantID, localMember, "")
	h.secret = tokens.Generate()
	verifier := strings.Repeat("v", 43)
	sum := sha256.Sum256([]byte(verifier))
	code := oauth.NewCode()
	client := oauth.Client{ClientID: oauth.NewClientID(), Name: "Editor", RedirectURIs: []string{"http://127.0.0.1:9/cb"}}
	f.in(tenantID, func(tx *postgres.Tx) error {
		if err := tx.RegisterClient(ctx, client, f.t0); err != nil {
			return err
		}
		c, _, err := tx.GetOAuthClient(ctx, client.ClientID)
		if err != nil {
			return err
		}
		if err := tx.CreateOAuthCode(ctx, postgres.NewCode{Hash: oauth.Hash(code), UserID: h.userID, ClientRef: c.Ref,
			RedirectURI: client.RedirectURIs[0], Challenge: base64.RawURLEncoding.EncodeToString(sum[:]), Resource: resource}, f.t0); err != nil {
			return err
		}
		_, oerr, err := tx.ExchangeOAuthCode(ctx, postgres.CodeExchange{CodeHash: oauth.Hash(code), ClientID: client.ClientID,
			RedirectURI: client.RedirectURIs[0], Verifier: verifier, Access: h.secret, Refresh: oauth.NewRefreshToken(), Now: f.t0})
		if oerr != nil {
			return oerr
		}
		if err != nil {
			return err
		}
		return nil
	})
	if err := f.env.Admin.Pool.QueryRow(ctx, `SELECT id::text, expires_at, oauth_grant_id::text FROM mcp_tokens WHERE tenant_id = $1 AND token_hash = $2`,
		tenantID, tokens.Hash(h.secret)).Scan(&h.tokenID, &h.expiresAt, &h.grantID); err != nil {
		f.t.Fatal(err)
	}
	if tenantID == f.noOAuth {
		// After issuing: the switch also stops tokens issued before it.
		f.in(tenantID, func(tx *postgres.Tx) error {
			_, err := tx.SetOAuthEnabled(ctx, false, actor)
			return err
		})
	}
	return h
}

// lastUsed reads a token's last_used_at as the administrator.
func (f *fixture) lastUsed(tokenID string) *time.Time {
	f.t.Helper()
	var at *time.Time
	if err := f.env.Admin.Pool.QueryRow(context.Background(), `SELECT last_used_at FROM mcp_tokens WHERE id = $1`, tokenID).Scan(&at); err != nil {
		f.t.Fatal(err)
	}
	return at
}

// TestBearerRefusals: every reason a bearer token is refused, each next to
// the closest token that is accepted, on a real database as the runtime
// role. A refused token is never recorded as used; an accepted one is.
func TestBearerRefusals(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)

	type want struct {
		failure, grantFailure string
		refresh               bool
		grants                codelotse.Grants // checked when both failures are empty
	}
	localGrants := codelotse.Grants{RepoIDs: []int64{f.repo}, Source: codelotse.MembershipLocal, AsOf: f.t0}
	cases := []struct {
		name string
		// holder makes the token (nil: none is stored).
		holder func() holder
		// header is the Authorization header (default "Bearer <secret>").
		header   func(h holder) string
		resource string        // default acmeResource
		tenant   func() string // a tenant-scoped endpoint's slug, default none
		now      func(h holder) time.Time
		want     want
	}{
		{name: "missing", header: func(holder) string { return "" }, want: want{failure: "missing"}},
		{name: "malformed: not a clt_ token", header: func(holder) string { return "Bearer ghp_" + strings.Repeat("a", 36) }, want: want{failure: "malformed"}},
		{name: "malformed: truncated", holder: func() holder { return f.newHolder(f.acme, localMember, "") },
			header: func(h holder) string { return "Bearer " + h.secret[:len(h.secret)-1] }, want: want{failure: "malformed"}},
		{name: "malformed: another scheme", holder: func() holder { return f.newHolder(f.acme, localMember, "") },
			header: func(h holder) string { return "Basic " + h.secret }, want: want{failure: "malformed"}},
		{name: "malformed: no scheme", holder: func() holder { return f.newHolder(f.acme, localMember, "") },
			header: func(h holder) string { return h.secret }, want: want{failure: "malformed"}},
		{name: "malformed: two spaces", holder: func() holder { return f.newHolder(f.acme, localMember, "") },
			header: func(h holder) string { return "Bearer  " + h.secret }, want: want{failure: "malformed"}},
		{name: "accepted: scheme in any case", holder: func() holder { return f.newHolder(f.acme, localMember, "") },
			header: func(h holder) string { return "bEARER " + h.secret }, want: want{grants: localGrants}},
		{name: "unknown", header: func(holder) string { return "Bearer " + tokens.Generate() }, want: want{failure: "unknown"}},
		{name: "wrong tenant", holder: func() holder { return f.newHolder(f.acme, localMember, "") },
			tenant: func() string { return "nooauth" }, want: want{failure: "wrong_tenant"}},
		{name: "accepted: its own tenant's endpoint", holder: func() holder { return f.newHolder(f.acme, localMember, "") },
			tenant: func() string { return "acme" }, want: want{grants: localGrants}},
		{name: "revoked", holder: func() holder {
			h := f.newHolder(f.acme, localMember, "")
			f.in(f.acme, func(tx *postgres.Tx) error { return tx.RevokeToken(ctx, h.tokenID, "", actor) })
			return h
		}, want: want{failure: "revoked"}},
		{name: "revoked by deleting the user", holder: func() holder {
			h := f.newHolder(f.acme, localMember, "")
			f.in(f.acme, func(tx *postgres.Tx) error { return tx.DeleteUser(ctx, h.email, actor) })
			return h
		}, want: want{failure: "revoked"}},
		{name: "expired: at its expiry", holder: func() holder { return f.newHolder(f.acme, localMember, "") },
			now: func(h holder) time.Time { return h.expiresAt }, want: want{failure: "expired"}},
		{name: "accepted: just before its expiry", holder: func() holder { return f.newHolder(f.acme, localMember, "") },
			now: func(h holder) time.Time { return h.expiresAt.Add(-time.Microsecond) }, want: want{grants: localGrants}},
		{name: "user deleted, token not revoked", holder: func() holder {
			// DeleteUser revokes the tokens in the same transaction; the
			// authenticator still refuses a deleted user's token on its own.
			h := f.newHolder(f.acme, localMember, "")
			f.admin(`UPDATE users SET deleted_at = now() WHERE id = $1`, h.userID)
			return h
		}, want: want{failure: "user_deleted"}},
		{name: "MCP disabled for the tenant", holder: func() holder { return f.newHolder(f.off, localMember, "") }, want: want{failure: "mcp_disabled"}},
		{name: "identity provider disabled", holder: func() holder { return f.newHolder(f.acme, localMember, f.idpOff, "eng") },
			want: want{failure: "idp_disabled"}},
		{name: "OIDC: no group mapped", holder: func() holder { return f.newHolder(f.acme, localMember, f.idp, "sales") },
			want: want{grantFailure: "no_grants_no_mapping"}},
		{name: "OIDC: no groups at all", holder: func() holder { return f.newHolder(f.acme, localMember, f.idp) },
			want: want{grantFailure: "no_grants_no_mapping"}},
		{name: "accepted: OIDC group mapped to a repository", holder: func() holder { return f.newHolder(f.acme, localMember, f.idp, "eng", "sales") },
			want: want{grants: codelotse.Grants{RepoIDs: []int64{f.repo}, Source: "oidc", Groups: []string{"eng", "sales"}}}},
		{name: "accepted: OIDC group mapped to admin", holder: func() holder { return f.newHolder(f.acme, localMember, f.idp, "ops") },
			want: want{grants: codelotse.Grants{Admin: true, Source: "oidc", Groups: []string{"ops"}}}},
		{name: "GitHub membership older than a day", holder: func() holder {
			return f.newHolder(f.acme, membership{source: "github", role: codelotse.RoleMember, age: codelotse.GrantMaxAge + time.Second}, "")
		}, want: want{grantFailure: "no_grants_stale", refresh: true}},
		{name: "GitHub membership ages past a day", holder: func() holder {
			return f.newHolder(f.acme, membership{source: "github", role: codelotse.RoleMember}, "")
		}, now: func(holder) time.Time { return f.t0.Add(codelotse.GrantMaxAge + time.Second) }, want: want{grantFailure: "no_grants_stale", refresh: true}},
		{name: "no cached membership", holder: func() holder { return f.newHolder(f.acme, membership{none: true}, "") },
			want: want{grantFailure: "no_grants_stale", refresh: true}},
		{name: "local membership expired by an operator", holder: func() holder {
			h := f.newHolder(f.acme, localMember, "")
			f.in(f.acme, func(tx *postgres.Tx) error { return tx.ExpireMembership(ctx, h.userID, actor) })
			return h
		}, want: want{grantFailure: "no_grants_stale", refresh: true}},
		{name: "accepted: GitHub membership within the day", holder: func() holder {
			return f.newHolder(f.acme, membership{source: "github", role: codelotse.RoleAdmin, age: codelotse.GrantMaxAge - time.Hour}, "")
		}, want: want{grants: codelotse.Grants{Admin: true, Source: "github", AsOf: f.t0.Add(-codelotse.GrantMaxAge + time.Hour)}}},
		{name: "OAuth: at another resource", holder: func() holder { return f.oauthHolder(f.acme, acmeResource) },
			resource: otherResource, want: want{failure: "unknown"}},
		{name: "accepted: OAuth at its resource", holder: func() holder { return f.oauthHolder(f.acme, acmeResource) },
			want: want{grants: localGrants}},
		{name: "OAuth: clients switched off", holder: func() holder { return f.oauthHolder(f.noOAuth, acmeResource) },
			want: want{failure: "unknown"}},
		{name: "accepted: a personal token ignores the resource", holder: func() holder { return f.newHolder(f.acme, localMember, "") },
			resource: otherResource, want: want{grants: localGrants}},
	}
	var refused, accepted []holder
	var clock fakeClock
	b := &authn.Bearer{DB: f.env.App, Now: clock.now}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var h holder
			if tc.holder != nil {
				h = tc.holder()
			}
			header := "Bearer " + h.secret
			if tc.header != nil {
				header = tc.header(h)
			} else if h.secret == "" {
				t.Fatal("case has neither a holder nor a header")
			}
			resource, tenant, now := acmeResource, "", f.t0.Add(time.Minute)
			if tc.resource != "" {
				resource = tc.resource
			}
			if tc.tenant != nil {
				tenant = tc.tenant()
			}
			if tc.now != nil {
				now = tc.now(h)
			}
			clock.set(now)
			res, err := b.Authenticate(ctx, header, resource, tenant)
			if err != nil {
				t.Fatal(err)
			}
			if got := reason(res.Failure); got != tc.want.failure {
				t.Errorf("Failure = %q, want %q", got, tc.want.failure)
			}
			if got := reason(res.GrantFailure); got != tc.want.grantFailure {
				t.Errorf("GrantFailure = %q, want %q", got, tc.want.grantFailure)
			}
			if res.GrantFailure != nil && res.GrantFailure.Refresh != tc.want.refresh {
				t.Errorf("Refresh = %v, want %v", res.GrantFailure.Refresh, tc.want.refresh)
			}
			if res.Failure != nil {
				// A refused token names no one and has no rate-limit key.
				if !reflect.DeepEqual(res.Principal, codelotse.Principal{}) || res.Digest != "" {
					t.Errorf("refused, yet principal %+v digest %q", res.Principal, res.Digest)
				}
			} else {
				// Both the accepted and the grantless token are someone: the
				// caller rate-limits by Digest before answering the latter.
				wantP := codelotse.Principal{TenantID: h.tenantID, UserID: h.userID, TokenID: h.tokenID, Kind: "token"}
				if res.Principal != wantP {
					t.Errorf("principal %+v, want %+v", res.Principal, wantP)
				}
				want := h.tenantID + ":" + hex.EncodeToString(tokens.Hash(h.secret))
				if h.grantID != "" {
					want = h.tenantID + ":grant:" + h.grantID // the grant's budget
				}
				if res.Digest != want || strings.Contains(res.Digest, h.secret) {
					t.Errorf("digest %q, want %q", res.Digest, want)
				}
			}
			if res.Failure == nil && res.GrantFailure == nil {
				if !reflect.DeepEqual(normal(res.Grants), normal(tc.want.grants)) {
					t.Errorf("grants %+v, want %+v", res.Grants, tc.want.grants)
				}
			} else if !reflect.DeepEqual(res.Grants, codelotse.Grants{}) {
				t.Errorf("refused, yet grants %+v", res.Grants)
			}
			if h.tokenID != "" && (res.Failure != nil || res.GrantFailure != nil) {
				refused = append(refused, h)
			} else if h.tokenID != "" {
				accepted = append(accepted, h)
			}
		})
	}
	b.Wait()
	for _, h := range refused {
		if at := f.lastUsed(h.tokenID); at != nil {
			t.Errorf("refused token %s was recorded as used at %v", h.tokenID, at)
		}
	}
	for _, h := range accepted {
		if f.lastUsed(h.tokenID) == nil {
			t.Errorf("accepted token %s was not recorded as used", h.tokenID)
		}
	}
}

func reason(f *authn.Failure) string {
	if f == nil {
		return ""
	}
	return f.Reason
}

// normal makes grants comparable: times in UTC, empty slices nil.
func normal(g codelotse.Grants) codelotse.Grants {
	g.AsOf = g.AsOf.UTC()
	if len(g.RepoIDs) == 0 {
		g.RepoIDs = nil
	}
	if len(g.Groups) == 0 {
		g.Groups = nil
	}
	return g
}

// fakeClock is the authenticator's clock; background touches may run while
// a test moves it.
type fakeClock struct{ at atomic.Pointer[time.Time] }

func (c *fakeClock) set(t time.Time) { c.at.Store(&t) }
func (c *fakeClock) now() time.Time  { return *c.at.Load() }

// TestBearerTouchThrottle: last_used_at is written on a token's first use,
// not again within a minute (whether the minute is known from the stored
// value or from this process's memory of its own write), and again after
// it.
//
// The authenticator's clock is fake, and the database writes its own
// now(), so the test sets the stored last_used_at before each request
// (as the administrator) to what that request is meant to read: a value
// from the fake clock's timeline, all of which lies well before the
// database's clock, so that the UPDATE's own "older than a minute" guard
// never hides what the authenticator decided. A touch is seen as the stored
// value changing to the database's time.
func TestBearerTouchThrottle(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	// The fake clock runs from base; longAgo is a stored use that neither
	// check finds recent.
	base := f.t0.Add(-time.Hour)
	longAgo := base.Add(-time.Hour)
	type step struct {
		at time.Duration // the fake clock, after base
		// stored is written as last_used_at before the request (nil:
		// left as the previous request left it).
		stored  *time.Time
		touched bool // whether the request writes last_used_at
	}
	cases := []struct {
		name  string
		steps []step
	}{
		// One process: after its first write it remembers the time, even
		// when the stored value it reads is older (a request that read
		// the token before the write landed).
		{name: "first use, then this process's memory", steps: []step{
			{at: 0, touched: true},
			{at: 30 * time.Second, stored: &longAgo, touched: false},
			{at: 59 * time.Second, stored: &longAgo, touched: false},
			{at: time.Minute, stored: &longAgo, touched: true},
			{at: time.Minute + time.Second, stored: &longAgo, touched: false},
			{at: 2*time.Minute - time.Microsecond, stored: &longAgo, touched: false},
			{at: 2 * time.Minute, stored: &longAgo, touched: true},
		}},
		// A fresh process: the stored value alone says within the minute.
		{name: "stored use by another process", steps: []step{
			{at: 30 * time.Second, stored: &base, touched: false},
			{at: time.Minute - time.Microsecond, stored: &base, touched: false},
			{at: time.Minute, stored: &base, touched: true},
		}},
		{name: "stored use long ago", steps: []step{
			{at: 0, stored: &longAgo, touched: true},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// A fresh authenticator per case: a fresh process's memory.
			var clock fakeClock
			b := &authn.Bearer{DB: f.env.App, Now: clock.now}
			// A membership from before the fake clock's timeline.
			h := f.newHolder(f.acme, membership{source: codelotse.MembershipLocal, role: codelotse.RoleMember, age: 3 * time.Hour}, "")
			for i, s := range tc.steps {
				if s.stored != nil {
					f.admin(`UPDATE mcp_tokens SET last_used_at = $2 WHERE id = $1`, h.tokenID, *s.stored)
				}
				before := f.lastUsed(h.tokenID)
				clock.set(base.Add(s.at))
				res, err := b.Authenticate(ctx, "Bearer "+h.secret, acmeResource, "")
				if err != nil || res.Failure != nil || res.GrantFailure != nil {
					t.Fatalf("step %d: %v %+v %+v", i, err, res.Failure, res.GrantFailure)
				}
				b.Wait()
				after := f.lastUsed(h.tokenID)
				if got := !reflect.DeepEqual(before, after); got != s.touched {
					t.Errorf("step %d (clock +%v): last_used_at %s → %s; touched = %v, want %v", i, s.at, show(before), show(after), got, s.touched)
				}
			}
		})
	}
}

func show(at *time.Time) string {
	if at == nil {
		return "NULL"
	}
	return at.UTC().Format(time.RFC3339Nano)
}
