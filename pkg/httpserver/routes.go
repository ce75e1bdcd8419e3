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

	// Bearer: a personal access token in the Authorization header; cookies
	// are ignored and no CSRF token is needed (ARCHITECTURE §4).
	e.POST("/mcp", s.mcpPost)
	e.GET("/mcp", methodNotAllowed)
	e.DELETE("/mcp", methodNotAllowed)
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
