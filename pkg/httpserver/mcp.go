package httpserver

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/codelotse/codelotse/pkg/authn"
	"github.com/codelotse/codelotse/pkg/mcpserver"
)

// unauthorizedBody is the exact JSON-RPC body of every 401 (ARCHITECTURE §4).
const unauthorizedBody = `{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Unauthorized"}}`

// refreshDescription is the error_description when a web sign-in would
// restore access (stale or missing GitHub membership cache).
const refreshDescription = "sign in to CodeLotse to refresh access"

// mcpPost is POST /mcp, in the order of checks of ARCHITECTURE §4: body
// size and Origin, (rate limit), token, grants; then a fresh MCP server for
// this request only, behind a request that carries none of the client's
// credentials.
func (s *Server) mcpPost(c echo.Context) error {
	r := c.Request()
	w := c.Response()

	// 1. Body over 1 MiB → 413; a foreign Origin → 403.
	if r.ContentLength > MaxBodyBytes {
		return jsonRPCError(c, http.StatusRequestEntityTooLarge, -32600, "Request body too large: the limit is 1 MiB.")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return jsonRPCError(c, http.StatusRequestEntityTooLarge, -32600, "Request body too large: the limit is 1 MiB.")
		}
		return jsonRPCError(c, http.StatusBadRequest, -32700, "Could not read the request body.")
	}
	if o := r.Header.Get("Origin"); o != "" && !s.originAllowed(o) {
		return jsonRPCError(c, http.StatusForbidden, -32000, "Forbidden: requests from this origin are not allowed.")
	}

	// 3, 4, 6. Token, its state, the tenant switch, grants.
	p, g, failure, err := s.cfg.Bearer.Authenticate(r.Context(), r.Header.Get("Authorization"))
	if err != nil {
		s.cfg.Logger.Error("authenticating a token failed", "err", err)
		return jsonRPCError(c, http.StatusServiceUnavailable, -32603, "Service unavailable; try again shortly.")
	}
	if failure != nil {
		s.cfg.Logger.Info("bearer request refused", "reason", failure.Reason)
		return s.unauthorized(c, failure)
	}

	// Only Accept, Content-Type, Last-Event-ID and Mcp-* reach the SDK:
	// never Authorization, Cookie or anything else the client sent.
	inner := r.Clone(mcpserver.WithServer(r.Context(), mcpserver.New(s.cfg.MCP, p, g)))
	inner.Header = sdkHeaders(r.Header)
	inner.Body = io.NopCloser(bytes.NewReader(body))
	inner.ContentLength = int64(len(body))
	s.mcp.ServeHTTP(w, inner)
	return nil
}

// sdkHeaders keeps only the headers the MCP SDK needs.
func sdkHeaders(h http.Header) http.Header {
	out := http.Header{}
	for k, v := range h {
		ck := http.CanonicalHeaderKey(k)
		if ck == "Accept" || ck == "Content-Type" || ck == "Last-Event-Id" || strings.HasPrefix(ck, "Mcp-") {
			out[ck] = v
		}
	}
	return out
}

func (s *Server) originAllowed(o string) bool {
	n, err := origin(o)
	return err == nil && s.origins[n]
}

// unauthorized writes the 401 of ARCHITECTURE §4.
func (s *Server) unauthorized(c echo.Context, f *authn.Failure) error {
	v := `Bearer realm="codelotse", error="invalid_token"`
	if f.Refresh {
		v += fmt.Sprintf(`, error_description=%q`, refreshDescription)
	}
	v += fmt.Sprintf(`, resource_metadata=%q`, s.cfg.PublicURL+"/.well-known/oauth-protected-resource/mcp")
	c.Response().Header().Set("WWW-Authenticate", v)
	return c.Blob(http.StatusUnauthorized, "application/json", []byte(unauthorizedBody))
}

// jsonRPCError answers with a JSON-RPC error body and an HTTP status.
func jsonRPCError(c echo.Context, status, code int, msg string) error {
	return c.JSON(status, map[string]any{
		"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": code, "message": msg},
	})
}
