package httpserver

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/codelotse/codelotse/pkg/mcpserver"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
	"github.com/codelotse/codelotse/pkg/tokens"
)

// TestMCPShedsPastItsBound: with every slot taken by requests in progress,
// the next /mcp request is answered at once with 503, Retry-After and a
// JSON-RPC error that says to retry — before authentication (a bad token
// is not even looked at) — and the slots come back when requests finish.
// A malformed body or a foreign Origin is answered as before, without a
// slot: the slot is taken only for work that may reach the database.
// The slots are held by the test itself, so nothing depends on timing.
func TestMCPShedsPastItsBound(t *testing.T) {
	env := pgtest.New(t)
	secret := seedMember(t, env, "acme/api").Secret
	srv, _ := quietServer(t, env, func(c *Config) { c.MaxConcurrentMCP = 2 })
	if cap(srv.mcpSlots) != 2 {
		t.Fatalf("%d slots, want 2", cap(srv.mcpSlots))
	}
	// Two requests in progress.
	srv.mcpSlots <- struct{}{}
	srv.mcpSlots <- struct{}{}
	for _, token := range []string{secret, tokens.Generate()} {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, mcpRequest(token, nil))
		if rec.Code != 503 || rec.Header().Get("Retry-After") != "1" {
			t.Fatalf("status %d, Retry-After %q; want 503 and 1: %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
		}
		var body struct {
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Error.Code != mcpserver.CodeUnavailable || body.Error.Message != BusyMessage {
			t.Errorf("body %s (%v)", rec.Body, err)
		}
	}
	// What the edge refuses before the slot is its usual answer.
	bad := mcpRequest(secret, map[string]string{"Origin": "https://evil.example"})
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, bad)
	if rec.Code != 403 {
		t.Errorf("foreign Origin with every slot taken: status %d, want 403", rec.Code)
	}
	// One finishes: requests are served again, one after another, each
	// giving its slot back.
	<-srv.mcpSlots
	for i := 0; i < 3; i++ {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, mcpRequest(secret, nil))
		if rec.Code != 200 {
			t.Fatalf("request %d: status %d: %s", i, rec.Code, rec.Body)
		}
	}
	if n := len(srv.mcpSlots); n != 1 {
		t.Errorf("%d slots taken after the requests finished, want the test's 1", n)
	}
	// The default applies when the operator sets nothing.
	def, _ := quietServer(t, env, nil)
	if cap(def.mcpSlots) != DefaultMaxConcurrentMCP {
		t.Errorf("default %d slots, want %d", cap(def.mcpSlots), DefaultMaxConcurrentMCP)
	}
}
