//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

const unauthorizedBody = `{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Unauthorized"}}`

// post sends a raw JSON-RPC POST to /mcp.
func post(t *testing.T, s *stack, body string, headers map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.url+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

const listCall = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_repositories","arguments":{}}}`

var legacy = map[string]string{"Mcp-Protocol-Version": "2025-06-18"}

func with(h map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for a, b := range h {
		out[a] = b
	}
	return out
}

// TestBearerEdge covers the raw-HTTP contract of POST /mcp (ARCHITECTURE §4).
func TestBearerEdge(t *testing.T) {
	t.Parallel()
	s := newStack(t, "MCP_ALLOWED_ORIGINS=https://agent.example.com")
	s.cltctl("tenant", "create", "--slug", "acme", "--name", "Acme", "--mcp-enabled")
	s.cltctl("tenant", "create", "--slug", "quiet", "--name", "Quiet")
	for _, e := range []string{"dev", "gone", "stale", "revoked", "expired"} {
		s.cltctl("user", "add", "--tenant", "acme", "--email", e+"@acme.test")
	}
	s.cltctl("user", "add", "--tenant", "quiet", "--email", "dev@quiet.test")
	valid := s.token("acme", "dev@acme.test", "valid")
	gone := s.token("acme", "gone@acme.test", "gone")
	stale := s.token("acme", "stale@acme.test", "stale")
	revoked := s.token("acme", "revoked@acme.test", "revoked")
	expired := s.token("acme", "expired@acme.test", "expired")
	quiet := s.token("quiet", "dev@quiet.test", "off")

	// Revoke through the CLI, by the id it lists.
	for _, line := range strings.Split(s.cltctl("token", "list", "--tenant", "acme"), "\n") {
		if strings.Contains(line, "revoked@acme.test") {
			s.cltctl("token", "revoke", "--tenant", "acme", "--id", strings.Fields(line)[0])
		}
	}
	s.cltctl("user", "delete", "--tenant", "acme", "--email", "gone@acme.test")
	s.exec(`UPDATE mcp_tokens SET created_at = now() - interval '3 days', expires_at = now() - interval '1 second'
		WHERE user_id = (SELECT id FROM users WHERE email = 'expired@acme.test')`)
	// A GitHub-cached membership past 24 hours is stale; a local one (cltctl
	// user add) of the same age is not, since no sign-in could refresh it.
	s.exec(`UPDATE tenant_memberships SET source = 'github', refreshed_at = now() - interval '24 hours 1 minute'
		WHERE user_id = (SELECT id FROM users WHERE email = 'stale@acme.test')`)
	s.exec(`UPDATE tenant_memberships SET refreshed_at = now() - interval '8 days'
		WHERE user_id = (SELECT id FROM users WHERE email = 'dev@acme.test')`)

	// The root /mcp has no authorization server (issue 12: OAuth is per
	// tenant at /t/{slug}/mcp), so its 401 names no resource metadata.
	challenge := func(description string) string {
		return `Bearer realm="codelotse", error="invalid_token", error_description="` + description + `"`
	}
	missing := challenge("send the header Authorization: Bearer clt_... with a token from the MCP access page")
	malformed := challenge("the Authorization header must be Bearer followed by one space and the whole clt_ token")
	unknown := challenge("token not recognised: copy the whole token again, or create a new one on the MCP access page")
	refresh := challenge("sign in to CodeLotse to refresh access")

	for _, tc := range []struct {
		name    string
		headers map[string]string
		www     string
	}{
		{"missing", nil, missing},
		{"other scheme", map[string]string{"Authorization": "Basic " + valid}, malformed},
		{"malformed", map[string]string{"Authorization": "Bearer not-a-token"}, malformed},
		{"two spaces", map[string]string{"Authorization": "Bearer  " + valid}, malformed},
		{"truncated", map[string]string{"Authorization": "Bearer " + valid[:len(valid)-1]}, malformed},
		{"unknown", map[string]string{"Authorization": "Bearer clt_" + strings.Repeat("A", 43)}, unknown},
		{"cookie only", map[string]string{"Cookie": "session=" + valid}, missing},
		{"revoked", map[string]string{"Authorization": "Bearer " + revoked}, challenge("this token was revoked: create a new one on the MCP access page")},
		{"expired", map[string]string{"Authorization": "Bearer " + expired}, challenge("this token has expired: create a new one on the MCP access page")},
		// Deleting a user revokes their tokens in the same transaction
		// (issue 9), so the deleted user's token reads as revoked.
		{"user deleted", map[string]string{"Authorization": "Bearer " + gone}, challenge("this token was revoked: create a new one on the MCP access page")},
		{"MCP switched off", map[string]string{"Authorization": "Bearer " + quiet}, challenge("MCP access is switched off for this organisation: ask a tenant admin to switch it on")},
		{"stale GitHub membership", map[string]string{"Authorization": "Bearer " + stale}, refresh},
	} {
		t.Run("401 "+tc.name, func(t *testing.T) {
			resp, body := post(t, s, listCall, with(tc.headers, "Mcp-Protocol-Version", "2025-06-18"))
			if resp.StatusCode != 401 {
				t.Fatalf("status %d, want 401; body %s", resp.StatusCode, body)
			}
			if body != unauthorizedBody {
				t.Errorf("body = %s", body)
			}
			if got := resp.Header.Get("WWW-Authenticate"); got != tc.www {
				t.Errorf("WWW-Authenticate = %s\nwant %s", got, tc.www)
			}
		})
	}

	// MCP switched back on: the same token works at once; off again: 401.
	s.cltctl("tenant", "set-mcp", "--slug", "quiet", "--enabled=true")
	if resp, body := post(t, s, listCall, with(legacy, "Authorization", "Bearer "+quiet)); resp.StatusCode != 200 {
		t.Errorf("after switching MCP on: %d %s", resp.StatusCode, body)
	}
	s.cltctl("tenant", "set-mcp", "--slug", "quiet", "--enabled=false")
	if resp, _ := post(t, s, listCall, with(legacy, "Authorization", "Bearer "+quiet)); resp.StatusCode != 401 {
		t.Errorf("after switching MCP off: %d, want 401", resp.StatusCode)
	}

	auth := with(legacy, "Authorization", "Bearer "+valid)
	t.Run("valid token", func(t *testing.T) {
		resp, body := post(t, s, listCall, auth)
		if resp.StatusCode != 200 || !strings.Contains(body, "untrusted-data") {
			t.Fatalf("status %d body %s", resp.StatusCode, body)
		}
		// dev@acme.test was added by cltctl eight days ago: local access,
		// not a GitHub cache, and no 24-hour expiry is claimed.
		if !strings.Contains(body, `\"source\":\"local\"`) || strings.Contains(body, "github") || strings.Contains(body, "expires_at") {
			t.Errorf("access of a local member: %s", body)
		}
		if resp.Header.Get("Mcp-Session-Id") != "" {
			t.Error("stateless endpoint issued a session id")
		}
	})
	t.Run("403 foreign origin", func(t *testing.T) {
		resp, body := post(t, s, listCall, with(auth, "Origin", "https://evil.example"))
		if resp.StatusCode != 403 {
			t.Fatalf("status %d body %s", resp.StatusCode, body)
		}
		// A foreign origin is refused even without a token.
		resp, _ = post(t, s, listCall, with(legacy, "Origin", "https://evil.example"))
		if resp.StatusCode != 403 {
			t.Errorf("foreign origin without token: %d, want 403", resp.StatusCode)
		}
	})
	t.Run("own and allowed origins", func(t *testing.T) {
		for _, o := range []string{s.url, "https://agent.example.com", "HTTPS://AGENT.EXAMPLE.COM:443"} {
			if resp, body := post(t, s, listCall, with(auth, "Origin", o)); resp.StatusCode != 200 {
				t.Errorf("origin %s: %d %s", o, resp.StatusCode, body)
			}
		}
	})
	t.Run("405 GET and DELETE", func(t *testing.T) {
		for _, m := range []string{http.MethodGet, http.MethodDelete} {
			req, _ := http.NewRequest(m, s.url+"/mcp", nil)
			req.Header.Set("Authorization", "Bearer "+valid)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" {
				t.Errorf("%s: %d Allow=%q", m, resp.StatusCode, resp.Header.Get("Allow"))
			}
		}
	})
	t.Run("413 over 1 MiB", func(t *testing.T) {
		big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_repositories","arguments":{"query":"` + strings.Repeat("a", 1<<20) + `"}}}`
		resp, _ := post(t, s, big, auth)
		if resp.StatusCode != 413 {
			t.Errorf("status %d, want 413", resp.StatusCode)
		}
		// Chunked (no Content-Length) is caught while reading.
		req, _ := http.NewRequest(http.MethodPost, s.url+"/mcp", io.MultiReader(strings.NewReader(big)))
		req.ContentLength = -1
		req.Header.Set("Authorization", "Bearer "+valid)
		req.Header.Set("Content-Type", "application/json")
		r2, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r2.Body.Close()
		if r2.StatusCode != 413 {
			t.Errorf("chunked: status %d, want 413", r2.StatusCode)
		}
	})
	t.Run("202 notification", func(t *testing.T) {
		resp, body := post(t, s, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, auth)
		if resp.StatusCode != 202 || body != "" {
			t.Errorf("status %d body %q, want 202 and no body", resp.StatusCode, body)
		}
	})
	t.Run("protocol errors are JSON-RPC errors", func(t *testing.T) {
		resp, body := post(t, s, `{"jsonrpc":"2.0","id":7,"method":"no/such/method"}`, auth)
		var msg struct {
			Error *struct{ Code int } `json:"error"`
		}
		_ = json.Unmarshal([]byte(body), &msg)
		if msg.Error == nil || msg.Error.Code != -32601 {
			t.Errorf("unknown method: status %d body %s", resp.StatusCode, body)
		}
		if !strings.Contains(body, `"id":7`) {
			t.Errorf("unknown method error does not carry the request id: %s", body)
		}
		for in, want := range map[string]int{
			`{"jsonrpc":"2.0","id":8,`:          -32700,
			`{"id":9,"method":"ping"}`:          -32600,
			`"just a string"`:                   -32600,
			`{"jsonrpc":"1.0","method":"ping"}`: -32600,
		} {
			resp, body = post(t, s, in, auth)
			msg.Error = nil
			_ = json.Unmarshal([]byte(body), &msg)
			if resp.StatusCode != 400 || msg.Error == nil || msg.Error.Code != want {
				t.Errorf("%s: status %d body %s, want 400 and code %d", in, resp.StatusCode, body, want)
			}
		}
	})
	t.Run("protected resource metadata", func(t *testing.T) {
		// The root endpoint's metadata is absent (it would name no
		// authorization server); the tenant endpoint's is complete.
		for _, p := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"} {
			resp, err := http.Get(s.url + p)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 404 {
				t.Errorf("%s: %d, want 404", p, resp.StatusCode)
			}
		}
		resp, err := http.Get(s.url + "/.well-known/oauth-protected-resource/t/acme/mcp")
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		err = json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || doc["resource"] != s.url+"/t/acme/mcp" || fmt.Sprint(doc["authorization_servers"]) != "["+s.url+"/t/acme]" {
			t.Errorf("tenant metadata: %d %v %v", resp.StatusCode, err, doc)
		}
	})
	t.Run("health", func(t *testing.T) {
		for _, p := range []string{"/healthz", "/readyz"} {
			resp, err := http.Get(s.url + p)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("%s: %d", p, resp.StatusCode)
			}
		}
	})

	// /metrics serves the MCP metrics for Prometheus, without identities.
	resp, err := http.Get(s.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"mcp_server_operation_duration_seconds_bucket", `gen_ai_tool_name="list_repositories"`, `mcp_method_name="tools/call"`, "codelotse_mcp_auth_refused"} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	logs := s.logs.String()
	for _, tok := range []string{valid, gone, stale, revoked, expired, quiet} {
		if strings.Contains(logs, tok) {
			t.Error("a token appears in the API's logs")
		}
		if strings.Contains(string(metrics), tok[4:]) {
			t.Error("a token appears in /metrics")
		}
	}
}
