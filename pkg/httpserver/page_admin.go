package httpserver

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/oidc"
	"github.com/codelotse/codelotse/pkg/postgres"
)

type adminPage struct {
	MCPEnabled bool
	IdP        *postgres.IdentityProvider
	Mappings   []mappingRow
	Repos      []string
	Tokens     []tokenRow
	Audit      []auditRow
	// GitHub is set for a tenant bound to a GitHub App installation: how
	// its members' access is kept fresh.
	GitHub *githubFreshness
	// OAuth clients: the tenant's switch and every grant (issue 12).
	OAuth        bool
	OAuthEnabled bool
	Grants       []grantRow
	// The audit log's filter (GET ?action=&actor=) and its choices.
	AuditFilter          postgres.AuditFilter
	AuditActions, Actors []string
	Members              []memberRow
}

// githubFreshness is what the admin page says about the membership
// caches of a GitHub tenant.
type githubFreshness struct {
	// State: "ok", "missing_permission", or "never" (no refresh yet).
	State, Detail, Finished, LastOK string
	Members, Repositories           int
}

// memberRow is a user on the admin page's members view.
type memberRow struct {
	Email, Name, Role, Access, Identity, Age, Since string
	Repos                                           int
}

type mappingRow = postgres.GroupMappingRow

type auditRow struct {
	When, Actor, Action, Target, Details string
}

func (s *Server) loadAdminPage(ctx context.Context, tid string, filter postgres.AuditFilter) (adminPage, error) {
	pg := adminPage{AuditFilter: filter}
	err := s.cfg.DB.InTenant(ctx, tid, func(tx *postgres.Tx) error {
		t, err := tx.GetTenant(ctx)
		if err != nil {
			return err
		}
		pg.MCPEnabled = t.MCPEnabled
		g, err := tx.GetTenantGitHub(ctx)
		if err != nil {
			return err
		}
		if g.InstallationID != nil {
			st, err := tx.GetMembershipRefresh(ctx)
			if err != nil {
				return err
			}
			pg.GitHub = &githubFreshness{State: "never"}
			if st != nil {
				pg.GitHub = &githubFreshness{State: st.State, Detail: st.Detail, Finished: stamp(st.FinishedAt),
					Members: st.Members, Repositories: st.Repositories}
				if st.LastOKAt != nil {
					pg.GitHub.LastOK = stamp(*st.LastOKAt)
				}
			}
		}
		if p, err := tx.IdentityProviderByIssuer(ctx, ""); err == nil {
			pg.IdP = &p
		} else if codelotse.ErrorCode(err) != codelotse.NotFound && codelotse.ErrorCode(err) != codelotse.Invalid {
			return err
		}
		if pg.Mappings, err = tx.ListGroupMappings(ctx); err != nil {
			return err
		}
		if pg.Repos, err = tx.RepositoryNames(ctx); err != nil {
			return err
		}
		list, err := tx.ListTokens(ctx, "")
		if err != nil {
			return err
		}
		pg.Tokens = tokenRows(list, time.Now())
		if pg.OAuth = s.cfg.OAuth.Enabled; pg.OAuth {
			if pg.OAuthEnabled, err = tx.OAuthEnabled(ctx); err != nil {
				return err
			}
			grants, err := tx.ListGrants(ctx, "")
			if err != nil {
				return err
			}
			pg.Grants = grantRows(grants, time.Now())
		}
		events, err := tx.ListAuditFiltered(ctx, filter, 100)
		if err != nil {
			return err
		}
		if pg.AuditActions, pg.Actors, err = tx.AuditFacets(ctx); err != nil {
			return err
		}
		members, err := tx.ListMembers(ctx)
		if err != nil {
			return err
		}
		now := time.Now()
		for _, m := range members {
			pg.Members = append(pg.Members, memberView(m, now))
		}
		for _, e := range events {
			var details []string
			for k, v := range e.Details {
				details = append(details, fmt.Sprintf("%s=%v", k, v))
			}
			sort.Strings(details) // maps have no order; the page should
			pg.Audit = append(pg.Audit, auditRow{When: e.CreatedAt.UTC().Format("2006-01-02 15:04:05 UTC"), Actor: e.Actor,
				Action: e.Action, Target: e.Target, Details: strings.Join(details, ", ")})
		}
		return nil
	})
	return pg, err
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }

// admin is GET /t/:slug/admin.
func (s *Server) admin(c echo.Context) error {
	filter := postgres.AuditFilter{Action: strings.TrimSpace(c.QueryParam("action")), Actor: strings.TrimSpace(c.QueryParam("actor"))}
	pg, err := s.loadAdminPage(c.Request().Context(), c.Get(keyTenantID).(string), filter)
	if err != nil {
		return err
	}
	noStore(c)
	d := s.data(c, "Admin", pg)
	// Only known notices are shown: the query string is the visitor's to
	// edit, and the page must not repeat text an attacker put in a link.
	d.Flash = adminNotices[c.QueryParam("done")]
	return s.render(c, http.StatusOK, "admin.html", d)
}

// adminNotices are the notices the admin page shows after a change, by the
// key its redirect carries in done=.
var adminNotices = map[string]string{
	"mcp-on":          "MCP switched on.",
	"mcp-off":         "MCP switched off.",
	"idp-saved":       "Identity provider saved.",
	"mapping-added":   "Mapping added.",
	"mapping-removed": "Mapping removed.",
	"token-revoked":   "Token revoked.",
	"grant-revoked":   "Connected client revoked.",
	"oauth-on":        "OAuth clients switched on.",
	"oauth-off":       "OAuth clients switched off.",
}

// switchValue reads a switch's form field, which the page sends as one of
// two values: anything else is a malformed request, not "off".
func switchValue(c echo.Context, name, on, off string) (bool, error) {
	switch c.FormValue(name) {
	case on:
		return true, nil
	case off:
		return false, nil
	}
	return false, codelotse.Errorf(codelotse.Invalid, "The switch was sent without a valid value (%s or %s). Nothing was changed.", on, off)
}

// adminDo runs an admin change and returns to the page with a notice (a key
// of adminNotices), or re-renders it with the error.
func (s *Server) adminDo(c echo.Context, done string, fn func(ctx context.Context, tx *postgres.Tx, actor postgres.Actor) error) error {
	p := principal(c)
	tid := c.Get(keyTenantID).(string)
	actor := postgres.Actor{UserID: p.Session.UserID, Label: p.Session.Email}
	if p.Session.BreakGlass {
		actor.Label = p.Session.Email + " (break-glass)"
	}
	err := s.cfg.DB.InTenant(c.Request().Context(), tid, func(tx *postgres.Tx) error {
		return fn(c.Request().Context(), tx, actor)
	})
	if err != nil {
		code := codelotse.ErrorCode(err)
		if code == codelotse.Internal || code == codelotse.Unavailable {
			return err
		}
		pg, lerr := s.loadAdminPage(c.Request().Context(), tid, postgres.AuditFilter{})
		if lerr != nil {
			return lerr
		}
		d := s.data(c, "Admin", pg)
		d.Error = codelotse.ErrorMessage(err)
		noStore(c)
		return s.render(c, http.StatusBadRequest, "admin.html", d)
	}
	return c.Redirect(http.StatusSeeOther, "/t/"+c.Get(keySlug).(string)+"/admin?done="+url.QueryEscape(done))
}

// adminSetMCP is POST /t/:slug/admin/mcp.
func (s *Server) adminSetMCP(c echo.Context) error {
	on, bad := switchValue(c, "enabled", "true", "false")
	msg := "mcp-off"
	if on {
		msg = "mcp-on"
	}
	return s.adminDo(c, msg, func(ctx context.Context, tx *postgres.Tx, a postgres.Actor) error {
		if bad != nil {
			return bad
		}
		_, err := tx.SetMCPEnabled(ctx, on, a)
		return err
	})
}

// adminSaveIdP is POST /t/:slug/admin/idp.
func (s *Server) adminSaveIdP(c echo.Context) error {
	issuer := strings.TrimRight(formValue(c, "issuer"), "/")
	clientID := formValue(c, "client_id")
	secret := c.FormValue("client_secret")
	claim := formValue(c, "groups_claim")
	scopes := strings.Fields(c.FormValue("scopes"))
	enabled := c.FormValue("enabled") == "true"
	return s.adminDo(c, "idp-saved", func(ctx context.Context, tx *postgres.Tx, a postgres.Actor) error {
		chars := utf8.RuneCountInString
		if chars(issuer) > maxIdPField || chars(clientID) > maxIdPField || chars(secret) > maxIdPField || chars(claim) > 200 ||
			len(scopes) > 20 || chars(strings.Join(scopes, " ")) > maxIdPField {
			return codelotse.Errorf(codelotse.Invalid, "The issuer, client id, client secret and scopes are at most %d characters (at most 20 scopes), the groups claim 200.", maxIdPField)
		}
		if err := oidc.CheckIssuer(issuer); err != nil {
			return codelotse.Errorf(codelotse.Invalid, "%s.", capitalize(err.Error()))
		}
		if clientID == "" {
			return codelotse.Errorf(codelotse.Invalid, "The client id is required.")
		}
		existing, err := tx.IdentityProviderByIssuer(ctx, "")
		if err != nil && codelotse.ErrorCode(err) != codelotse.NotFound {
			return err
		}
		if err == nil && existing.Issuer != issuer {
			// This page edits the tenant's one provider: another issuer
			// corrects it (a typo) rather than adding a second provider,
			// which left the tenant with two and nobody able to sign in.
			if err := tx.ChangeIdentityProviderIssuer(ctx, existing.ID, issuer, a); err != nil {
				return err
			}
			existing.Issuer = issuer
		}
		if secret == "" {
			if err != nil {
				return codelotse.Errorf(codelotse.Invalid, "The client secret is required for a new provider.")
			}
			secret = existing.ClientSecret // blank keeps the stored secret
		}
		if len(scopes) == 0 {
			scopes = []string{"openid", "email", "profile", "groups"}
		}
		if !contains(scopes, "openid") {
			return codelotse.Errorf(codelotse.Invalid, "The scopes must include openid.")
		}
		p, err := tx.UpsertIdentityProvider(ctx, postgres.IdentityProvider{Issuer: issuer, ClientID: clientID, ClientSecret: secret, GroupsClaim: claim, Scopes: scopes}, a)
		if err != nil {
			return err
		}
		if !enabled {
			return tx.SetIdentityProviderEnabled(ctx, p.ID, false, a)
		}
		return nil
	})
}

// adminAddMapping is POST /t/:slug/admin/mappings.
func (s *Server) adminAddMapping(c echo.Context) error {
	group, role, repo := formValue(c, "group"), formValue(c, "role"), formValue(c, "repository")
	return s.adminDo(c, "mapping-added", func(ctx context.Context, tx *postgres.Tx, a postgres.Actor) error {
		p, err := tx.IdentityProviderByIssuer(ctx, "")
		if err != nil {
			return codelotse.Errorf(codelotse.Invalid, "Configure the identity provider first.")
		}
		r, err := codelotse.ParseRole(role)
		if err != nil {
			return codelotse.Errorf(codelotse.Invalid, "Choose the role admin or member.")
		}
		if group == "" {
			return codelotse.Errorf(codelotse.Invalid, "The group is required.")
		}
		m := codelotse.GroupMapping{Group: group, Role: r}
		if repo != "" {
			rp, err := tx.RepositoryByName(ctx, repo)
			if err != nil {
				return codelotse.Errorf(codelotse.Invalid, "Unknown repository %s.", repo)
			}
			m.RepositoryID = &rp.ID
		}
		return tx.AddGroupMapping(ctx, p.ID, m, a)
	})
}

// adminDeleteMapping is POST /t/:slug/admin/mappings/:id/delete.
func (s *Server) adminDeleteMapping(c echo.Context) error {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil {
		return s.page(c, http.StatusNotFound, "Not found", "No such mapping.")
	}
	return s.adminDo(c, "mapping-removed", func(ctx context.Context, tx *postgres.Tx, a postgres.Actor) error {
		group, err := tx.DeleteGroupMapping(ctx, id)
		if err != nil {
			return err
		}
		return tx.AuditMappingRemoved(ctx, group, a)
	})
}

// adminRevokeToken is POST /t/:slug/admin/tokens/:id/revoke (any token).
func (s *Server) adminRevokeToken(c echo.Context) error {
	id := c.Param("id")
	return s.adminDo(c, "token-revoked", func(ctx context.Context, tx *postgres.Tx, a postgres.Actor) error {
		return tx.RevokeToken(ctx, id, "", a)
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

// issuerAllowed accepts https issuers, and http only on loopback (a
// development provider): the server fetches the issuer's discovery
// document, so an admin must not be able to point it at internal plain-http
// services.
// maxIdPField bounds the identity provider's settings on the admin page
// (a URL of 2,000 characters is already far longer than any issuer).
const maxIdPField = 2000

// capitalize starts a sentence.
func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// memberView renders a member: where their access comes from and how old
// it is (a GitHub membership is valid for 24 hours after the last sign-in;
// a local one, written by an operator, does not age).
func memberView(m postgres.Member, now time.Time) memberRow {
	r := memberRow{Email: m.Email, Name: m.Name, Role: string(m.Role), Identity: m.Identity, Repos: m.Repos, Age: "—", Since: "—"}
	if r.Role == "" {
		r.Role = "—"
	}
	switch {
	case m.Source == "":
		r.Access = "none (groups or break-glass)"
	case m.RefreshedAt == nil || !m.RefreshedAt.After(codelotse.MembershipExpired):
		r.Access = m.Source + ", expired"
	case m.Source == codelotse.MembershipLocal:
		r.Access = "local (set by an operator, no expiry)"
	case now.Sub(*m.RefreshedAt) > codelotse.GrantMaxAge:
		r.Access = "GitHub, stale: signs in again to refresh"
	default:
		r.Access = "GitHub, valid for 24 h after sign-in"
	}
	if m.RefreshedAt != nil && m.RefreshedAt.After(codelotse.MembershipExpired) {
		r.Since = m.RefreshedAt.UTC().Format("2006-01-02 15:04 UTC")
		r.Age = age(now.Sub(*m.RefreshedAt))
	}
	return r
}

// age is a duration as a person reads it: minutes, hours or days.
func age(d time.Duration) string {
	switch {
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h", int(d.Hours()))
	default:
		return fmt.Sprintf("%d days", int(d.Hours()/24))
	}
}
