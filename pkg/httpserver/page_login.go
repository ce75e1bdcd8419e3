package httpserver

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// login is GET /t/:slug/login: start sign-in with the tenant's identity
// provider, or GitHub for a GitHub tenant.
func (s *Server) login(c echo.Context) error {
	if p := principal(c); p != nil && p.Member {
		return c.Redirect(http.StatusSeeOther, "/t/"+c.Get(keySlug).(string)+"/mcp")
	}
	return s.page(c, http.StatusServiceUnavailable, "Sign-in not configured", "This organisation has no sign-in configured yet. Ask an operator for a sign-in link.")
}

// githubCallback is GET /auth/github/callback.
func (s *Server) githubCallback(c echo.Context) error {
	return s.page(c, http.StatusServiceUnavailable, "Sign-in not configured", "GitHub sign-in is not configured on this server.")
}

// oidcCallback is GET /auth/oidc/callback.
func (s *Server) oidcCallback(c echo.Context) error {
	return s.page(c, http.StatusServiceUnavailable, "Sign-in not configured", "OIDC sign-in is not configured on this server.")
}
