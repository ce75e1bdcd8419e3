package httpserver

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/authn"
	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/mcpserver"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
	"github.com/codelotse/codelotse/pkg/ratelimit"
	"github.com/codelotse/codelotse/pkg/secretscan"
	"github.com/codelotse/codelotse/pkg/shape"
	"github.com/codelotse/codelotse/pkg/telemetry"
	"github.com/codelotse/codelotse/pkg/tokens"
)

// member is a seeded tenant "acme" (MCP on) with member dev@acme.test,
// granted repos (each with a rule), and one valid token.
type member struct {
	TenantID, UserID, TokenID, Secret string
}

func seedMember(t testing.TB, env *pgtest.Env, repos ...string) member {
	t.Helper()
	ctx := context.Background()
	tn, err := env.Admin.CreateTenant(ctx, postgres.NewTenant{Slug: "acme", Name: "Acme", MCPEnabled: true}, "test")
	if err != nil {
		t.Fatal(err)
	}
	m := member{TenantID: tn.ID, Secret: tokens.Generate()}
	err = env.Admin.InTenant(ctx, tn.ID, func(tx *postgres.Tx) error {
		u, err := tx.UpsertLocalUser(ctx, "dev@acme.test", "", codelotse.RoleMember, time.Now())
		if err != nil {
			return err
		}
		m.UserID = u.ID
		for _, name := range repos {
			r, err := tx.AddRepository(ctx, postgres.NewRepository{FullName: name})
			if err != nil {
				return err
			}
			if err := tx.GrantRepository(ctx, u.ID, r.ID); err != nil {
				return err
			}
			if _, err := tx.UpsertRule(ctx, &r.ID, codelotse.Rule{Key: "k", Title: "Rule of " + name, Severity: codelotse.SeverityHigh, Instructions: "Check the thing carefully."}); err != nil {
				return err
			}
		}
		exp, _ := tokens.ExpiresAt(time.Now(), 30)
		tk, err := tx.CreateToken(ctx, postgres.NewToken{UserID: u.ID, Name: "t", Secret: m.Secret, ExpiresAt: exp}, time.Now(), postgres.Actor{Label: "test"})
		m.TokenID = tk.ID
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// quietServer is a server on env with the MCP endpoint, the default limits
// and no logs; adjust (optional) changes its Config before it is built.
// The bearer's background writes are waited for when the test ends.
func quietServer(t testing.TB, env *pgtest.Env, adjust func(*Config)) (*Server, *authn.Bearer) {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	bearer := &authn.Bearer{DB: env.App, Logger: logger}
	t.Cleanup(bearer.Wait)
	cfg := Config{
		PublicURL: "http://127.0.0.1:8080", DB: env.App, Bearer: bearer, Logger: logger,
		MCP:    &mcpserver.Deps{DB: env.App, Shaper: shape.New(secretscan.New()), Logger: logger, SchemaCache: mcpserver.NewSchemaCache()},
		Limits: DefaultLimits,
	}
	if adjust != nil {
		adjust(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return srv, bearer
}

// edgeFixture is a server on a real database with one valid token.
func edgeFixture(t *testing.T, limiter ratelimit.Limiter, logs io.Writer) (*Server, string) {
	t.Helper()
	env := pgtest.New(t)
	secret := seedMember(t, env).Secret
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	bearer := &authn.Bearer{DB: env.App, Logger: logger}
	t.Cleanup(bearer.Wait)
	srv, err := New(Config{
		PublicURL: "http://127.0.0.1:8080", DB: env.App, Bearer: bearer, Logger: logger,
		MCP:     &mcpserver.Deps{DB: env.App, Shaper: shape.New(secretscan.New()), Logger: logger, SchemaCache: mcpserver.NewSchemaCache()},
		Limiter: limiter, Limits: DefaultLimits,
	})
	if err != nil {
		t.Fatal(err)
	}
	return srv, secret
}

func mcpRequest(token string, extra map[string]string) *http.Request {
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_repositories","arguments":{}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range extra {
		req.Header.Set(k, v)
	}
	return req
}

type failingLimiter struct{}

func (failingLimiter) Allow(context.Context, string, ratelimit.Rule) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, errors.New("redis: connection refused")
}

// TestLimiterFailureFailsOpen: a broken limiter is logged and never turns
// into a refusal or a 500.
func TestLimiterFailureFailsOpen(t *testing.T) {
	var logs bytes.Buffer
	srv, secret := edgeFixture(t, failingLimiter{}, &logs)
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, mcpRequest(secret, nil))
	if rec.Code != 200 {
		t.Fatalf("status %d with a failing limiter, want 200: %s", rec.Code, rec.Body)
	}
	if !strings.Contains(logs.String(), "rate limiter failed") {
		t.Error("the limiter failure was not logged")
	}
	if strings.Contains(logs.String(), secret) {
		t.Error("the token appears in the logs")
	}
}

// TestTelemetryCarriesNoIdentity: spans, metrics and logs of real requests
// (success, tool error, 401, 429) contain no token, token digest, tenant,
// user or token id, while the MCP attributes are there.
func TestTelemetryCarriesNoIdentity(t *testing.T) {
	var logs bytes.Buffer
	env := pgtest.New(t)
	ctx := context.Background()
	m := seedMember(t, env)
	secret := m.Secret
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	tel, rec := telemetry.NewRecorded()
	bearer := &authn.Bearer{DB: env.App, Logger: logger}
	defer bearer.Wait()
	srv, err := New(Config{
		PublicURL: "http://127.0.0.1:8080", DB: env.App, Bearer: bearer, Logger: logger, Telemetry: tel,
		MCP:     &mcpserver.Deps{DB: env.App, Shaper: shape.New(secretscan.New()), Logger: logger, SchemaCache: mcpserver.NewSchemaCache()},
		Limiter: ratelimit.NewMemory(), Limits: Limits{PerIP: ratelimit.Rule{Limit: 1000, Period: time.Minute}, PerToken: ratelimit.Rule{Limit: 3, Period: time.Minute}},
	})
	if err != nil {
		t.Fatal(err)
	}
	do := func(req *http.Request) int {
		rr := httptest.NewRecorder()
		srv.ServeHTTP(rr, req)
		return rr.Code
	}
	if code := do(mcpRequest(secret, nil)); code != 200 {
		t.Fatalf("tools/call: %d", code)
	}
	bad := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_rules","arguments":{"repository":"x/y"}}}`))
	bad.Header = mcpRequest(secret, nil).Header
	do(bad)
	do(mcpRequest(tokens.Generate(), nil)) // 401 unknown
	do(mcpRequest(secret, nil))
	if code := do(mcpRequest(secret, nil)); code != 429 {
		t.Fatalf("fourth call with a limit of 3: %d", code)
	}
	bearer.Wait()

	dump := rec.Dump(ctx)
	for _, want := range []string{"mcp.method.name=tools/call", "gen_ai.tool.name=list_repositories", "gen_ai.tool.name=get_rules",
		"error.type=tool_error", "mcp.protocol.version=2025-06-18", "reason=unknown", "limit=token", `span "tools/call list_repositories"`} {
		if !strings.Contains(dump, want) {
			t.Errorf("telemetry lacks %q:\n%s", want, dump)
		}
	}
	digest := hex.EncodeToString(tokens.Hash(secret))
	for _, bad := range []string{secret, secret[4:], digest, m.TenantID, m.UserID, m.TokenID, "dev@acme.test", "acme"} {
		if strings.Contains(dump, bad) {
			t.Errorf("telemetry contains an identity (%.12s…):\n%s", bad, dump)
		}
		if bad != "acme" && bad != m.TenantID && strings.Contains(logs.String(), bad) && bad != m.TokenID {
			t.Errorf("logs contain %.12s…", bad)
		}
	}
}
