package httpserver

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/codelotse/codelotse/pkg/mcpserver"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
)

// TestToolDuringOutageAnswers503: when the database drops the connection
// after authentication (a PostgreSQL restart under a running request), the
// tool call is answered 503 with Retry-After and a JSON-RPC error that says
// to retry, never a 500 or an in-band "Internal error"; the next call, on a
// fresh connection, succeeds.
func TestToolDuringOutageAnswers503(t *testing.T) {
	env := pgtest.New(t)
	secret := seedMember(t, env, "acme/api").Secret
	ctx := context.Background()
	// The tools read through a pool of their own, of one connection, so the
	// test can end exactly that session while authentication keeps working.
	toolDB, err := postgres.OpenURL(ctx, env.AppURL+"&pool_max_conns=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(toolDB.Close)
	srv, _ := quietServer(t, env, func(c *Config) { c.MCP.DB = toolDB })

	// The session is ended right after its last use: the pool checks a
	// connection idle for more than a second before handing it out, but one
	// busy a moment ago (the normal case under load) goes out unchecked.
	// pg_terminate_backend with a timeout returns once the session is gone,
	// as every session is after pg_ctl restart -m fast.
	var pid int
	if err := toolDB.Pool.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Admin.Pool.Exec(ctx, "SELECT pg_terminate_backend($1, 5000)", pid); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, mcpRequest(secret, nil))
	if rec.Code != 503 {
		t.Fatalf("status %d, want 503: %s", rec.Code, rec.Body)
	}
	if rec.Header().Get("Retry-After") != "1" {
		t.Errorf("Retry-After %q, want 1", rec.Header().Get("Retry-After"))
	}
	var body struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("body %q: %v", rec.Body, err)
	}
	if body.JSONRPC != "2.0" || string(body.ID) != "1" || body.Error.Code != mcpserver.CodeUnavailable || body.Error.Message != mcpserver.UnavailableMessage {
		t.Errorf("body %s", rec.Body)
	}

	rec = httptest.NewRecorder()
	srv.ServeHTTP(rec, mcpRequest(secret, nil))
	if rec.Code != 200 {
		t.Fatalf("after the outage: status %d, want 200: %s", rec.Code, rec.Body)
	}
	var ok struct {
		Result struct {
			IsError bool `json:"isError"`
		} `json:"result"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &ok); err != nil || ok.Result.IsError {
		t.Errorf("after the outage: %s", rec.Body)
	}
}
