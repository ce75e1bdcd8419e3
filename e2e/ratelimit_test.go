//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
)

func redisURL() string {
	for _, k := range []string{"TEST_REDIS_URL", "REDIS_URL"} {
		if v := os.Getenv(k); v != "" {
			return v
		}
	}
	return "redis://127.0.0.1:6379/0"
}

func check429(t *testing.T, resp *http.Response, body string) {
	t.Helper()
	if resp.StatusCode != 429 {
		t.Fatalf("status %d, want 429: %s", resp.StatusCode, body)
	}
	ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || ra < 1 || ra > 60 {
		t.Errorf("Retry-After = %q", resp.Header.Get("Retry-After"))
	}
	if !strings.Contains(body, `"code":-32000`) || !strings.Contains(body, "retry after") {
		t.Errorf("429 body = %s", body)
	}
}

// TestRateLimits: the 121st call of a token in a minute gets 429 with
// Retry-After while a second token is unaffected; a flood of invalid tokens
// from one address hits the per-IP limit.
func TestRateLimits(t *testing.T) {
	s := newStack(t, "MCP_RATE_PER_IP=200")
	s.cltctl("tenant", "create", "--slug", "acme", "--name", "Acme", "--mcp-enabled")
	s.cltctl("user", "add", "--tenant", "acme", "--email", "dev@acme.test")
	first := s.token("acme", "dev@acme.test", "first")
	second := s.token("acme", "dev@acme.test", "second")
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	for i := 1; i <= 120; i++ {
		if resp, body := post(t, s, ping, with(legacy, "Authorization", "Bearer "+first)); resp.StatusCode != 200 {
			t.Fatalf("call %d: %d %s", i, resp.StatusCode, body)
		}
	}
	resp, body := post(t, s, ping, with(legacy, "Authorization", "Bearer "+first))
	check429(t, resp, body)
	if resp, body := post(t, s, ping, with(legacy, "Authorization", "Bearer "+second)); resp.StatusCode != 200 {
		t.Errorf("second token after the first was limited: %d %s", resp.StatusCode, body)
	}

	// The per-IP limit (200 here) catches a flood of invalid tokens: 78
	// requests remain of this address's budget after the 122 above.
	var last *http.Response
	var lastBody string
	for i := 0; i < 100; i++ {
		last, lastBody = post(t, s, ping, with(legacy, "Authorization", "Bearer clt_"+strings.Repeat("x", 43)))
		if last.StatusCode == 429 {
			break
		}
		if last.StatusCode != 401 {
			t.Fatalf("invalid token: %d", last.StatusCode)
		}
	}
	check429(t, last, lastBody)
}

// TestRateLimitSharedAcrossReplicas: two API processes sharing Redis
// enforce one per-token budget.
func TestRateLimitSharedAcrossReplicas(t *testing.T) {
	redis := redisURL()
	s := newStack(t, "REDIS_URL="+redis, "MCP_RATE_PER_TOKEN=20")
	second := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	s.startAPI(second, &syncBuffer{})
	s.cltctl("tenant", "create", "--slug", "acme", "--name", "Acme", "--mcp-enabled")
	s.cltctl("user", "add", "--tenant", "acme", "--email", "dev@acme.test")
	tok := s.token("acme", "dev@acme.test", "shared")
	allowed, limited := 0, 0
	for i := 0; i < 40; i++ {
		url := s.url
		if i%2 == 1 {
			url = second
		}
		req, _ := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		switch resp.StatusCode {
		case 200:
			allowed++
		case 429:
			limited++
		default:
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	if allowed != 20 || limited != 20 {
		t.Errorf("two replicas allowed %d and limited %d of 40 calls; want one budget of 20", allowed, limited)
	}
}
