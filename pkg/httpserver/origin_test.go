package httpserver

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/codelotse/codelotse/pkg/authn"
)

// TestLoopbackOriginAliases: on a loopback PUBLIC_URL, localhost,
// 127.0.0.1 and [::1] with the same scheme and port are the service's own
// origin; every other origin (another port, another scheme, a rebinding
// host) is refused, and non-loopback deployments accept only their own
// origin. An accepted Origin goes on to authentication (401 without a
// token); a refused one stops at 403 before anything else runs.
func TestLoopbackOriginAliases(t *testing.T) {
	for _, tc := range []struct {
		publicURL, origin string
		allowed           bool
	}{
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080", true},
		{"http://127.0.0.1:8080", "http://localhost:8080", true},
		{"http://127.0.0.1:8080", "http://LOCALHOST:8080", true},
		{"http://127.0.0.1:8080", "http://[::1]:8080", true},
		{"http://localhost:8080", "http://127.0.0.1:8080", true},
		{"http://[::1]:8080/", "http://localhost:8080", true},
		{"http://localhost", "http://127.0.0.1", true},
		{"http://localhost", "http://127.0.0.1:80", true},
		{"http://127.0.0.1:8080", "http://localhost:8081", false},
		{"http://127.0.0.1:8080", "http://localhost", false},
		{"http://127.0.0.1:8080", "https://localhost:8080", false},
		{"http://127.0.0.1:8080", "http://127.0.0.2:8080", false},
		{"http://127.0.0.1:8080", "http://evil.example.com", false},
		{"http://127.0.0.1:8080", "http://localhost.evil.example.com:8080", false},
		{"http://127.0.0.1:8080", "null", false},
		{"https://codelotse.example.com", "https://codelotse.example.com", true},
		{"https://codelotse.example.com", "https://localhost", false},
		{"https://codelotse.example.com", "https://127.0.0.1", false},
		{"https://codelotse.example.com", "http://codelotse.example.com", false},
		{"http://192.168.1.5:8080", "http://localhost:8080", false},
	} {
		srv, err := New(Config{PublicURL: tc.publicURL, Bearer: &authn.Bearer{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", tc.origin)
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		want := http.StatusForbidden
		if tc.allowed {
			want = http.StatusUnauthorized
		}
		if rec.Code != want {
			t.Errorf("PUBLIC_URL %s, Origin %s: status %d, want %d (%s)", tc.publicURL, tc.origin, rec.Code, want, rec.Body)
		}
	}
}
