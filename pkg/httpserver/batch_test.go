package httpserver

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/authn"
	"github.com/codelotse/codelotse/pkg/mcpserver"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
	"github.com/codelotse/codelotse/pkg/ratelimit"
	"github.com/codelotse/codelotse/pkg/secretscan"
	"github.com/codelotse/codelotse/pkg/shape"
)

// rpcError decodes a JSON-RPC error answer.
func rpcError(t *testing.T, body []byte) (int, string) {
	t.Helper()
	var r struct {
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &r); err != nil || r.Error == nil {
		t.Fatalf("not a JSON-RPC error: %.200s", body)
	}
	return r.Error.Code, r.Error.Message
}

// TestBatchCannotEscapeBudgetOrCap: a batch of 400 get_file_contents calls
// (the attack) runs none of them: it is one request against the
// per-token budget and is answered with a small JSON-RPC error, so it can
// neither spend more of the budget nor return more than 32 KiB of tool text.
func TestBatchCannotEscapeBudgetOrCap(t *testing.T) {
	env := pgtest.New(t)
	m := seedMember(t, env, "acme/api")
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	bearer := &authn.Bearer{DB: env.App, Logger: logger}
	t.Cleanup(bearer.Wait)
	srv, err := New(Config{
		PublicURL: "http://127.0.0.1:8080", DB: env.App, Bearer: bearer, Logger: logger,
		MCP:     &mcpserver.Deps{DB: env.App, Shaper: shape.New(secretscan.New()), Logger: logger, SchemaCache: mcpserver.NewSchemaCache()},
		Limiter: ratelimit.NewMemory(), Limits: Limits{PerIP: ratelimit.Rule{Limit: 1000, Period: time.Minute}, PerToken: ratelimit.Rule{Limit: 3, Period: time.Minute}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var calls []string
	for i := range 400 {
		calls = append(calls, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"get_file_contents","arguments":{"repository":"acme/api","path":"main.go"}}}`, i+1))
	}
	batch := "[" + strings.Join(calls, ",") + "]"
	for _, version := range []string{"2025-03-26", "2025-06-18"} {
		req := mcpRequest(m.Secret, map[string]string{"Mcp-Protocol-Version": version})
		req.Body = io.NopCloser(strings.NewReader(batch))
		req.ContentLength = int64(len(batch))
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code != http.StatusBadRequest {
			t.Fatalf("%s: batch answered %d, want 400: %.300s", version, rec.Code, rec.Body)
		}
		code, msg := rpcError(t, rec.Body.Bytes())
		if code != -32600 || !strings.Contains(msg, "batches are not supported") {
			t.Errorf("%s: error %d %q", version, code, msg)
		}
		if rec.Body.Len() > 1024 || strings.Contains(rec.Body.String(), `"result"`) {
			t.Errorf("%s: the batch produced results (%d bytes)", version, rec.Body.Len())
		}
	}
	// Two batches spent two of the three requests of the token's budget:
	// one more passes, the next is refused.
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, mcpRequest(m.Secret, nil))
	if rec.Code != 200 {
		t.Fatalf("third request: %d", rec.Code)
	}
	rec = httptest.NewRecorder()
	srv.ServeHTTP(rec, mcpRequest(m.Secret, nil))
	if rec.Code != http.StatusTooManyRequests {
		t.Fatalf("fourth request with a budget of 3: %d, want 429", rec.Code)
	}
}

// TestWrongContentTypeIsAJSONRPC400: a wrong or missing Content-Type (or an
// Accept without JSON) is the client's mistake: 400 with a JSON-RPC body.
func TestWrongContentTypeIsAJSONRPC400(t *testing.T) {
	srv, secret := edgeFixture(t, nil, io.Discard)
	for _, h := range []map[string]string{
		{"Content-Type": "text/plain"},
		{"Content-Type": "application/x-www-form-urlencoded"},
		{"Content-Type": ""},
		{"Accept": "text/html"},
	} {
		rec := httptest.NewRecorder()
		req := mcpRequest(secret, h)
		for k, v := range h {
			if v == "" {
				req.Header.Del(k)
			}
		}
		srv.ServeHTTP(rec, req)
		if rec.Code != http.StatusBadRequest || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
			t.Errorf("%v: %d %s %.200s", h, rec.Code, rec.Header().Get("Content-Type"), rec.Body)
			continue
		}
		if code, _ := rpcError(t, rec.Body.Bytes()); code != -32600 {
			t.Errorf("%v: code %d", h, code)
		}
	}
}
