package httpserver

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codelotse/codelotse/pkg/authn"
	"github.com/codelotse/codelotse/pkg/mcpserver"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
	"github.com/codelotse/codelotse/pkg/secretscan"
	"github.com/codelotse/codelotse/pkg/shape"
)

// BenchmarkToolsCall measures one tools/call over HTTP end to end — bearer
// authentication, grants, RLS reads, the tool and result shaping — against
// a bare go-sdk stateless server answering a trivial tool (the anchor of
// ../shared/bench: a fresh server per request, seven tools), in the same
// run. See docs/benchmarks.md.
func BenchmarkToolsCall(b *testing.B) {
	env := pgtest.New(b)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	secret := seedMember(b, env, "acme/api", "acme/web", "acme/cli").Secret

	bearer := &authn.Bearer{DB: env.App, Logger: quiet}
	srv, err := New(Config{
		PublicURL: "http://127.0.0.1", DB: env.App, Bearer: bearer, Logger: quiet,
		MCP: &mcpserver.Deps{DB: env.App, Shaper: shape.New(secretscan.New()), Logger: quiet, SchemaCache: mcpserver.NewSchemaCache()},
	})
	if err != nil {
		b.Fatal(err)
	}
	ours := httptest.NewServer(srv)
	defer ours.Close()
	anchor := httptest.NewServer(anchorHandler())
	defer anchor.Close()

	for _, tc := range []struct {
		name, url, body, token string
	}{
		{"anchor-go-fresh/echo", anchor.URL + "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`, ""},
		{"codelotse/list_repositories", ours.URL + "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_repositories","arguments":{}}}`, secret},
		{"codelotse/get_rules", ours.URL + "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_rules","arguments":{"repository":"acme/api"}}}`, secret},
	} {
		b.Run(tc.name, func(b *testing.B) {
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			post := func() {
				req, _ := http.NewRequest(http.MethodPost, tc.url, strings.NewReader(tc.body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
				if tc.token != "" {
					req.Header.Set("Authorization", "Bearer "+tc.token)
				}
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || !strings.Contains(string(body), `"result"`) || strings.Contains(string(body), `"isError":true`) {
					b.Fatalf("status %d: %s", resp.StatusCode, body)
				}
			}
			post() // warm up connections and caches
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					post()
				}
			})
		})
	}
	bearer.Wait()
}

// anchorHandler is ../shared/bench/anchor-go in "fresh" mode: a new
// go-sdk server with seven typed tools per request, a shared schema cache.
func anchorHandler() http.Handler {
	type echoIn struct {
		Text string `json:"text" jsonschema:"text to return"`
	}
	type anyIn struct {
		Repo  string `json:"repo,omitempty"`
		Query string `json:"query,omitempty"`
		Limit int    `json:"limit,omitempty"`
	}
	cache := mcp.NewSchemaCache()
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true}
	newServer := func() *mcp.Server {
		s := mcp.NewServer(&mcp.Implementation{Name: "anchor-go", Version: "0.0.0"}, &mcp.ServerOptions{SchemaCache: cache})
		mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Returns its argument as text.", Annotations: ro},
			func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
			})
		for _, name := range []string{"list_repositories", "get_pull_request_review", "search_findings", "get_rules", "get_fix_prompt", "search_code"} {
			mcp.AddTool(s, &mcp.Tool{Name: name, Description: "Anchor tool.", Annotations: ro},
				func(_ context.Context, _ *mcp.CallToolRequest, in anyIn) (*mcp.CallToolResult, any, error) {
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "[]"}}}, nil, nil
				})
		}
		return s
	}
	type key struct{}
	h := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server { return r.Context().Value(key{}).(*mcp.Server) },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), key{}, newServer())))
	})
}
