package httpserver

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/codelotse/codelotse/pkg/authn"
	"github.com/codelotse/codelotse/pkg/codelotse"
)

// ctxKeys for cookie routes.
const (
	keyTenantID  = "tenant_id"
	keySlug      = "tenant_slug"
	keyPrincipal = "web_principal"
)

// crossOrigin refuses state-changing requests from other sites (Go's
// CrossOriginProtection: Sec-Fetch-Site, then Origin against Host). With
// SameSite=Lax session cookies this is the CSRF protection of every form.
func (s *Server) crossOrigin(next echo.HandlerFunc) echo.HandlerFunc {
	cop := http.NewCrossOriginProtection()
	return func(c echo.Context) error {
		if err := cop.Check(c.Request()); err != nil {
			s.cfg.Logger.Info("cross-origin request refused", "route", c.Path())
			return s.page(c, http.StatusForbidden, "Request refused", "This request came from another site and was refused. Go back to the page and try again.")
		}
		return next(c)
	}
}

// tenantSession resolves /t/:slug and the request's session in that tenant.
// It never reads an Authorization header: cookie routes have no token
// principal.
func (s *Server) tenantSession(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		slug := c.Param("slug")
		tid, err := s.cfg.DB.TenantIDBySlug(c.Request().Context(), slug)
		if codelotse.ErrorCode(err) == codelotse.NotFound {
			return s.page(c, http.StatusNotFound, "Not found", "There is no such organisation.")
		}
		if err != nil {
			return err
		}
		c.Set(keyTenantID, tid)
		c.Set(keySlug, slug)
		if s.cfg.Sessions != nil {
			p, err := s.cfg.Sessions.Read(c.Request().Context(), c.Request(), tid)
			if err != nil {
				return err
			}
			if p != nil {
				c.Set(keyPrincipal, p)
			}
		}
		return next(c)
	}
}

// signedIn requires a session with access to the tenant.
func (s *Server) signedIn(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		p := principal(c)
		if p == nil {
			return c.Redirect(http.StatusSeeOther, "/t/"+c.Get(keySlug).(string)+"/login")
		}
		if !p.Member {
			return s.page(c, http.StatusForbidden, "No access", "Your access to this organisation is not current. Sign in again to refresh it.")
		}
		return next(c)
	}
}

// adminOnly requires a tenant admin (or a break-glass session).
func (s *Server) adminOnly(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if p := principal(c); p == nil || !p.Admin {
			return s.page(c, http.StatusForbidden, "Admins only", "This page is for the organisation's admins.")
		}
		return next(c)
	}
}

func principal(c echo.Context) *authn.WebPrincipal {
	p, _ := c.Get(keyPrincipal).(*authn.WebPrincipal)
	return p
}

// pageData is what every page template gets.
type pageData struct {
	Title      string
	Slug       string
	User       string
	BreakGlass bool
	Admin      bool
	Flash      string
	Error      string
	Data       any
}

func (s *Server) data(c echo.Context, title string, d any) pageData {
	pd := pageData{Title: title, Data: d}
	if slug, ok := c.Get(keySlug).(string); ok {
		pd.Slug = slug
	}
	if p := principal(c); p != nil {
		pd.User, pd.BreakGlass, pd.Admin = p.Session.Email, p.Session.BreakGlass, p.Admin
	}
	return pd
}

// page renders a short message page.
func (s *Server) page(c echo.Context, status int, title, msg string) error {
	d := s.data(c, title, nil)
	d.Error = msg
	return s.render(c, status, "message.html", d)
}

// noStore keeps a response out of every cache (pages with secrets or
// per-user data).
func noStore(c echo.Context) {
	c.Response().Header().Set("Cache-Control", "no-store")
}

// formValue reads a trimmed form field.
func formValue(c echo.Context, name string) string { return strings.TrimSpace(c.FormValue(name)) }
