package httpserver

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// routes lists every route, grouped by guard. The paths are a contract:
// clients, docs and identity-provider registrations rely on them.
func (s *Server) routes() {
	e := s.echo

	// Public: no principal.
	e.GET("/", s.index)
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	e.GET("/.well-known/oauth-protected-resource", s.protectedResource)
	e.GET("/.well-known/oauth-protected-resource/mcp", s.protectedResource)
	e.GET("/static/*", s.static)
	if h := s.tel.MetricsHandler(); h != nil {
		e.GET("/metrics", echo.WrapHandler(h))
	}

	// Session (cookie) routes: pages under /t/:slug. They never read the
	// Authorization header; every state change passes the cross-origin check.
	e.GET("/auth/link", s.linkPage)
	e.POST("/auth/link", s.linkSignIn, s.crossOrigin)
	e.GET("/logout", s.logoutPage)
	e.POST("/logout", s.logout, s.crossOrigin)
	t := e.Group("/t/:slug", s.crossOrigin, s.tenantSession)
	t.GET("/login", s.login)
	t.GET("/mcp", s.mcpAccess, s.sseNotAllowed, s.signedIn)
	t.POST("/mcp/tokens", s.mcpCreateToken, s.signedIn)
	t.POST("/mcp/tokens/:id/revoke", s.mcpRevokeToken, s.signedIn)
	t.POST("/mcp/grants/:id/revoke", s.mcpRevokeGrant, s.signedIn)

	// Admin routes: tenant admins and break-glass sessions.
	t.GET("/admin", s.admin, s.signedIn, s.adminOnly)
	t.POST("/admin/mcp", s.adminSetMCP, s.signedIn, s.adminOnly)
	t.POST("/admin/idp", s.adminSaveIdP, s.signedIn, s.adminOnly)
	t.POST("/admin/mappings", s.adminAddMapping, s.signedIn, s.adminOnly)
	t.POST("/admin/mappings/:id/delete", s.adminDeleteMapping, s.signedIn, s.adminOnly)
	t.POST("/admin/tokens/:id/revoke", s.adminRevokeToken, s.signedIn, s.adminOnly)
	t.POST("/admin/oauth", s.adminSetOAuth, s.signedIn, s.adminOnly)
	t.POST("/admin/grants/:id/revoke", s.adminRevokeGrant, s.signedIn, s.adminOnly)

	// Sign-in callbacks (registered at GitHub and the identity providers).
	e.GET("/auth/github/callback", s.githubCallback)
	e.GET("/auth/oidc/callback", s.oidcCallback)

	// Webhook: GitHub deliveries, authenticated by their HMAC signature.
	e.POST("/webhooks/github", s.githubWebhook)

	// Bearer: a personal access token in the Authorization header; cookies
	// are ignored and no CSRF token is needed (ARCHITECTURE §4).
	e.POST("/mcp", s.mcpPost)
	e.GET("/mcp", methodNotAllowed)
	e.DELETE("/mcp", methodNotAllowed)
	// The same endpoint for one tenant: the resource of its OAuth
	// authorization server (personal access tokens of the tenant work too).
	e.POST("/t/:slug/mcp", s.tenantMCPPost)
	e.DELETE("/t/:slug/mcp", methodNotAllowed)

	// OAuth 2.1 authorization server of each tenant (ARCHITECTURE §4a):
	// issuer <PUBLIC_URL>/t/{slug}. Switched off by the operator, none of
	// it exists, so nothing advertises a flow that cannot finish.
	if s.cfg.OAuth.Enabled {
		e.GET("/.well-known/oauth-protected-resource/t/:slug/mcp", s.tenantProtectedResource)
		e.GET("/.well-known/oauth-authorization-server/t/:slug", s.authServerMetadata)
		e.GET("/.well-known/openid-configuration/t/:slug", s.authServerMetadata)
		e.GET("/t/:slug/.well-known/oauth-authorization-server", s.authServerMetadata)
		e.GET("/t/:slug/.well-known/openid-configuration", s.authServerMetadata)
		// The person's side: a cookie route like the other pages; the
		// consent form passes the cross-origin check of the group.
		t.GET("/oauth/authorize", s.oauthAuthorize)
		t.POST("/oauth/authorize", s.oauthDecide)
		// The client's side: no cookies, no principal; form bodies.
		e.POST("/t/:slug/oauth/token", s.oauthToken)
		e.POST("/t/:slug/oauth/revoke", s.oauthRevoke)
		if s.cfg.OAuth.DynamicRegistration {
			e.POST("/t/:slug/oauth/register", s.oauthRegister)
		}
	}
}

// methodNotAllowed answers GET and DELETE on the stateless MCP endpoint:
// there is no server-to-client stream and no session to delete.
func methodNotAllowed(c echo.Context) error {
	c.Response().Header().Set("Allow", "POST")
	return c.JSON(http.StatusMethodNotAllowed, map[string]any{
		"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": -32000, "message": "Method not allowed: this MCP endpoint is stateless; send JSON-RPC requests with POST."},
	})
}
