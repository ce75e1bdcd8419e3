package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/secretscan"
	"github.com/codelotse/codelotse/pkg/shape"
)

var update = flag.Bool("update", false, "rewrite golden files")

// recorder keeps the raw HTTP response bodies of tools/list calls.
type recorder struct {
	mu     sync.Mutex
	bodies [][]byte
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var reqBody []byte
	if req.Body != nil {
		reqBody, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || !bytes.Contains(reqBody, []byte(`"tools/list"`)) {
		return resp, err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body = io.NopCloser(bytes.NewReader(body))
	r.mu.Lock()
	r.bodies = append(r.bodies, body)
	r.mu.Unlock()
	return resp, nil
}

// testServer serves the MCP endpoint, as the API does, for a fixed caller
// without authentication (tools/list reads no data).
func testServer(t *testing.T) *httptest.Server {
	t.Helper()
	deps := &Deps{Shaper: shape.New(secretscan.New()), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), SchemaCache: NewSchemaCache()}
	h := NewEndpoint(deps, nil)
	caller := Caller{Principal: codelotse.Principal{TenantID: "t", UserID: "u", Kind: "token"}, Grants: codelotse.Grants{Source: "github"}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(WithCaller(r.Context(), caller)))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func listToolsRaw(t *testing.T, srv *httptest.Server, version string) (json.RawMessage, []*mcp.Tool, string) {
	t.Helper()
	rec := &recorder{}
	client := mcp.NewClient(&mcp.Implementation{Name: "golden", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: srv.URL, HTTPClient: &http.Client{Transport: rec}, DisableStandaloneSSE: true, MaxRetries: -1,
	}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.bodies) != 1 {
		t.Fatalf("recorded %d tools/list responses", len(rec.bodies))
	}
	var msg struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(rec.bodies[0], &msg); err != nil {
		t.Fatal(err)
	}
	return msg.Result, res.Tools, cs.InitializeResult().ProtocolVersion
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, got, "", "  "); err != nil {
		t.Fatal(err)
	}
	pretty.WriteByte('\n')
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, pretty.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./pkg/mcpserver -update to create it)", err)
	}
	if !bytes.Equal(pretty.Bytes(), want) {
		t.Errorf("%s differs from the golden file; if the change is intended, run go test ./pkg/mcpserver -run Golden -update\n--- got ---\n%s", path, pretty.String())
	}
}

// TestGoldenToolsList pins tools/list in both protocol eras and every tool's
// input schema, and keeps the whole list small: it is sent to every agent
// on every connection and costs context.
func TestGoldenToolsList(t *testing.T) {
	srv := testServer(t)
	for _, era := range []struct{ ask, want, file string }{
		{"2026-07-28", "2026-07-28", "tools_list_2026-07-28.json"},
		{"2025-06-18", "2025-06-18", "tools_list_2025-06-18.json"},
	} {
		raw, tools, version := listToolsRaw(t, srv, era.ask)
		if version != era.want {
			t.Fatalf("negotiated %s, want %s", version, era.want)
		}
		golden(t, era.file, raw)
		if len(raw) > 10*1024 {
			t.Errorf("tools/list (%s) is %d bytes; keep it under 10 KB", era.want, len(raw))
		}
		if len(tools) != 7 {
			t.Errorf("%d tools, want 7", len(tools))
		}
		for _, tl := range tools {
			schema, err := json.Marshal(tl.InputSchema)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("schemas", tl.Name+".json"), schema)
		}
	}
}

var sentenceEnd = regexp.MustCompile(`[.!?](\s|$)`)

// TestToolContracts checks ARCHITECTURE §6.2 for every tool.
func TestToolContracts(t *testing.T) {
	for _, tl := range tools() {
		d := tl.def()
		if n := len(sentenceEnd.FindAllString(d.Description, -1)); n < 1 || n > 3 {
			t.Errorf("%s: description has %d sentences, want 1-3", d.Name, n)
		}
		if !strings.Contains(d.Description, "Call ") && !strings.Contains(d.Description, "call ") && !strings.Contains(d.Description, "Use ") {
			t.Errorf("%s: description does not say what to call next", d.Name)
		}
		a := d.Annotations
		if a == nil || !a.ReadOnlyHint || !a.IdempotentHint || a.OpenWorldHint == nil || *a.OpenWorldHint || a.DestructiveHint != nil || d.Title == "" {
			t.Errorf("%s: annotations %+v", d.Name, a)
		}
		var schema map[string]any
		if err := json.Unmarshal(tl.schema, &schema); err != nil {
			t.Fatalf("%s: schema: %v", d.Name, err)
		}
		if schema["additionalProperties"] != false {
			t.Errorf("%s: schema allows additional properties", d.Name)
		}
	}
}
