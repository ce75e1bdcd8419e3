package httpserver

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/shape"
	"github.com/codelotse/codelotse/pkg/tokens"
)

// tokenRow is a token as the pages list it.
type tokenRow struct {
	ID, Name, Display, User, State string
	Created, Expires, LastUsed     string
	ExpiringSoon, Active           bool
}

// expiringSoon is how close to its expiry a token is marked "expires soon":
// two days, time to make a new one, and never the whole life of a fresh
// 7-day token (the old bound of 7 days marked every new default token).
const expiringSoon = 48 * time.Hour

func tokenRows(list []codelotse.Token, now time.Time) []tokenRow {
	out := make([]tokenRow, 0, len(list))
	for _, t := range list {
		// Sanitized for names stored before CheckName dropped invisible
		// and bidirectional characters.
		r := tokenRow{ID: t.ID, Name: shape.Sanitize(t.Name), Display: t.Display(), User: t.UserEmail, State: t.State(now),
			Created: t.CreatedAt.UTC().Format("2006-01-02 15:04 UTC"), Expires: t.ExpiresAt.UTC().Format("2006-01-02"), LastUsed: "never"}
		if t.LastUsedAt != nil {
			r.LastUsed = t.LastUsedAt.UTC().Format("2006-01-02 15:04 UTC")
		}
		r.Active = r.State == "active"
		r.ExpiringSoon = r.Active && t.ExpiresAt.Sub(now) < expiringSoon
		out = append(out, r)
	}
	return out
}

// mcpPage is the data of the MCP access page.
type mcpPage struct {
	MCPEnabled  bool
	Tokens      []tokenRow
	ActiveCount int
	Max         int
	AtLimit     bool
	GitHub      bool // access follows a GitHub sign-in (24 hours)
	Local       bool // access granted by an operator (cltctl), no expiry
	BreakGlass  bool
	MinDays     int
	MaxDays     int
	DefaultDays int
	Endpoint    string
	// Created is set only in the response that creates a token.
	Created *createdToken
	// OAuth clients connected by this person (each counts as one entry
	// toward the active limit) and the endpoint OAuth clients paste.
	OAuth    bool
	Grants   []grantRow
	OAuthURL string
}

type createdToken struct {
	Name, Secret, Claude, Cursor, VSCode string
	CursorRows, VSCodeRows               int
}

func (s *Server) loadMCPPage(c echo.Context) (mcpPage, error) {
	p := principal(c)
	tid := c.Get(keyTenantID).(string)
	pg := mcpPage{Max: tokens.MaxActive, MinDays: tokens.MinExpiryDays, MaxDays: tokens.MaxExpiryDays, DefaultDays: tokens.DefaultExpiryDays,
		BreakGlass: p.Session.BreakGlass, Endpoint: s.cfg.PublicURL + "/mcp"}
	if m := p.Session.Membership; p.Session.IdPID == "" && !p.Session.BreakGlass && m != nil {
		pg.GitHub, pg.Local = m.Source != codelotse.MembershipLocal, m.Source == codelotse.MembershipLocal
	}
	err := s.cfg.DB.InTenant(c.Request().Context(), tid, func(tx *postgres.Tx) error {
		t, err := tx.GetTenant(c.Request().Context())
		if err != nil {
			return err
		}
		pg.MCPEnabled = t.MCPEnabled
		list, err := tx.ListTokens(c.Request().Context(), p.Session.UserID)
		if err != nil {
			return err
		}
		pg.Tokens = tokenRows(list, time.Now())
		grants, err := tx.ListGrants(c.Request().Context(), p.Session.UserID)
		pg.Grants = grantRows(grants, time.Now())
		return err
	})
	pg.OAuth, pg.OAuthURL = s.cfg.OAuth.Enabled, s.resource(c.Get(keySlug).(string))
	for _, t := range pg.Tokens {
		if t.Active {
			pg.ActiveCount++
		}
	}
	for _, g := range pg.Grants {
		if g.Active {
			pg.ActiveCount++
		}
	}
	pg.AtLimit = pg.ActiveCount >= tokens.MaxActive
	return pg, err
}

// mcpAccess is GET /t/:slug/mcp. With ?created=ID it shows, once, the token
// that the POST before it created (the token handoff): the handoff is
// deleted as it is read, so a reload shows a notice and creates nothing.
func (s *Server) mcpAccess(c echo.Context) error {
	var created *createdToken
	var gone bool
	if id := c.QueryParam("created"); id != "" {
		p := principal(c)
		tid := c.Get(keyTenantID).(string)
		var sealed []byte
		var name string
		var found bool
		err := s.cfg.DB.InTenant(c.Request().Context(), tid, func(tx *postgres.Tx) error {
			var err error
			sealed, name, found, err = tx.TakeTokenHandoff(c.Request().Context(), p.Session.ID, id)
			return err
		})
		if err != nil {
			return err
		}
		if found {
			// A handoff that no longer opens (the session cookie changed in
			// between) is as gone as one already shown.
			if secret, err := s.cfg.Sessions.OpenHandoff(c.Request(), sealed); err == nil {
				created = &createdToken{Name: name, Secret: secret}
			}
		}
		gone = created == nil
	}
	pg, err := s.loadMCPPage(c)
	if err != nil {
		return err
	}
	if created != nil {
		pg.Created = snippets(created.Name, created.Secret, pg.Endpoint)
	}
	d := s.data(c, "MCP access", pg)
	switch {
	case created != nil:
		d.Flash = "Token created. Copy it now: it is shown only once."
	case gone:
		d.Error = "That token was already shown once and cannot be shown again. If you did not copy it, revoke it below and create a new one."
	}
	noStore(c)
	return s.render(c, http.StatusOK, "mcp.html", d)
}

// mcpCreateToken is POST /t/:slug/mcp/tokens. It creates the token and a
// sealed one-time handoff in one transaction and redirects (303) to the GET
// that shows the token once (post/redirect/get): a reload of that page, or
// of the browser's history, never posts again.
func (s *Server) mcpCreateToken(c echo.Context) error {
	p := principal(c)
	tid := c.Get(keyTenantID).(string)
	fail := func(status int, msg string) error {
		pg, err := s.loadMCPPage(c)
		if err != nil {
			return err
		}
		d := s.data(c, "MCP access", pg)
		d.Error = msg
		noStore(c)
		return s.render(c, status, "mcp.html", d)
	}
	if p.Session.BreakGlass {
		return fail(http.StatusForbidden, "Break-glass sessions cannot create tokens.")
	}
	name, err := tokens.CheckName(c.FormValue("name"))
	if err != nil {
		return fail(http.StatusBadRequest, "Give the token a name of 1 to 100 characters.")
	}
	days := tokens.DefaultExpiryDays
	if v := formValue(c, "expires_days"); v != "" {
		// 0 is out of range here (ExpiresAt reads it as "the default").
		if days, err = strconv.Atoi(v); err != nil || days == 0 {
			return fail(http.StatusBadRequest, "Expiry must be a number of days from 1 to 90.")
		}
	}
	now := time.Now()
	exp, err := tokens.ExpiresAt(now, days)
	if err != nil {
		return fail(http.StatusBadRequest, "Expiry must be a number of days from 1 to 90.")
	}
	secret := tokens.Generate()
	sealed, err := s.cfg.Sessions.SealHandoff(c.Request(), secret)
	if err != nil {
		return err // the session guard let this request in, so its cookie is there
	}
	var handoff string
	err = s.cfg.DB.InTenant(c.Request().Context(), tid, func(tx *postgres.Tx) error {
		nt := postgres.NewToken{UserID: p.Session.UserID, Name: name, Secret: secret, ExpiresAt: exp}
		if p.Session.IdPID != "" {
			// Tokens of an OIDC session carry its provider and groups.
			nt.IdPID, nt.IdPGroups = &p.Session.IdPID, p.Session.IdPGroups
		}
		t, err := tx.CreateToken(c.Request().Context(), nt, now, postgres.Actor{UserID: p.Session.UserID, Label: p.Session.Email})
		if err != nil {
			return err
		}
		handoff, err = tx.CreateTokenHandoff(c.Request().Context(), p.Session.ID, t.ID, sealed)
		return err
	})
	if codelotse.ErrorCode(err) == codelotse.Conflict || codelotse.ErrorCode(err) == codelotse.Invalid {
		return fail(http.StatusConflict, codelotse.ErrorMessage(err))
	}
	if err != nil {
		return err
	}
	noStore(c)
	return c.Redirect(http.StatusSeeOther, "/t/"+c.Get(keySlug).(string)+"/mcp?created="+handoff)
}

// snippets are ready-to-paste configurations for the common clients. The
// VS Code file keeps the token out: it declares a promptString input that
// VS Code asks for once and keeps in its secret storage, since
// .vscode/mcp.json is often committed.
func snippets(name, secret, endpoint string) *createdToken {
	cursor, _ := json.MarshalIndent(map[string]any{"mcpServers": map[string]any{"codelotse": map[string]any{
		"url": endpoint, "headers": map[string]string{"Authorization": "Bearer " + secret}}}}, "", "  ")
	vscode, _ := json.MarshalIndent(map[string]any{
		"inputs": []any{map[string]any{"type": "promptString", "id": vscodeInput, "description": "CodeLotse token", "password": true}},
		"servers": map[string]any{"codelotse": map[string]any{
			"type": "http", "url": endpoint, "headers": map[string]string{"Authorization": "Bearer ${input:" + vscodeInput + "}"}}}}, "", "  ")
	ct := &createdToken{Name: name, Secret: secret,
		Claude: `claude mcp add --transport http codelotse ` + endpoint + ` --header "Authorization: Bearer ` + secret + `"`,
		Cursor: string(cursor), VSCode: string(vscode)}
	// Each box is as tall as its text, so no last line is cut off.
	ct.CursorRows, ct.VSCodeRows = lines(ct.Cursor), lines(ct.VSCode)
	return ct
}

// vscodeInput is the id of the VS Code input that holds the token.
const vscodeInput = "codelotse-token"

// lines is the rows of a snippet box: its lines, plus one for the
// horizontal scrollbar that a long line brings.
func lines(s string) int { return strings.Count(s, "\n") + 2 }

// mcpRevokeToken is POST /t/:slug/mcp/tokens/:id/revoke (own tokens only).
func (s *Server) mcpRevokeToken(c echo.Context) error {
	p := principal(c)
	tid := c.Get(keyTenantID).(string)
	err := s.cfg.DB.InTenant(c.Request().Context(), tid, func(tx *postgres.Tx) error {
		return tx.RevokeToken(c.Request().Context(), c.Param("id"), p.Session.UserID, postgres.Actor{UserID: p.Session.UserID, Label: p.Session.Email})
	})
	if codelotse.ErrorCode(err) == codelotse.NotFound {
		return s.page(c, http.StatusNotFound, "Not found", "No such token of yours.")
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/t/"+c.Get(keySlug).(string)+"/mcp")
}
