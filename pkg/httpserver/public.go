package httpserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io/fs"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/codelotse/codelotse/web"
)

func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// readyz reports whether the database answers as the runtime role.
func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	if err := s.cfg.DB.Ping(ctx); err != nil {
		s.cfg.Logger.Warn("readiness check failed", "err", err)
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "database unavailable"})
	}
	// A reachable database with a missing or older schema cannot serve:
	// every query would fail. Run cltctl migrate before routing traffic.
	pending, err := s.cfg.DB.PendingMigrations(ctx)
	if err != nil {
		s.cfg.Logger.Warn("readiness check failed", "err", err)
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "schema missing: run cltctl migrate"})
	}
	if len(pending) > 0 {
		s.cfg.Logger.Warn("readiness check failed: migrations pending", "pending", pending)
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "schema not migrated: run cltctl migrate"})
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}

func (s *Server) index(c echo.Context) error {
	return s.render(c, http.StatusOK, "index.html", map[string]any{
		"Title":  "MCP",
		"MCPURL": s.cfg.PublicURL + "/mcp",
	})
}

// render executes a page template inside the layout.
func (s *Server) render(c echo.Context, status int, page string, data any) error {
	t, err := s.templates.Clone()
	if err != nil {
		return err
	}
	if _, err := t.ParseFS(web.Templates, "templates/"+page); err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", data); err != nil {
		return err
	}
	h := c.Response().Header()
	if h.Get("Content-Security-Policy") == "" { // a page may widen form-action (the OAuth consent page)
		h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
	}
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	return c.HTMLBlob(status, buf.Bytes())
}

func (s *Server) static(c echo.Context) error {
	sub, err := fs.Sub(web.Static, "static")
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "public, max-age=300")
	http.StripPrefix("/static/", http.FileServer(http.FS(sub))).ServeHTTP(c.Response(), c.Request())
	return nil
}

func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
