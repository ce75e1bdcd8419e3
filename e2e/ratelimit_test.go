//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
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

// spendUntilLimited sends requests until one is refused with 429 and
// checks how many were allowed against the budget: exactly `limit` requests
// plus at most the refills that the elapsed time bought (one every
// period/limit). The budgets are tiny (a refill every several seconds), so an
// ordinary run sees exactly `limit`; a slow run is still judged correctly,
// never by whether it was fast enough. used is what the key had spent before.
func spendUntilLimited(t *testing.T, what string, limit, used int, send func() (*http.Response, string)) {
	t.Helper()
	interval := time.Minute / time.Duration(limit)
	start := time.Now()
	allowed := used
	for {
		resp, body := send()
		if resp.StatusCode == 429 {
			check429(t, resp, body)
			break
		}
		allowed++
		refills := int(time.Since(start) / interval)
		if allowed > limit+refills+1 {
			t.Fatalf("%s: %d requests allowed in %s, budget %d a minute", what, allowed, time.Since(start), limit)
		}
	}
	if allowed < limit {
		t.Errorf("%s: refused after %d requests, budget %d a minute", what, allowed, limit)
	}
}

// TestRateLimits: a token that spends its budget gets 429 with Retry-After
// while a second token is unaffected; a flood of invalid tokens from one
// address hits the per-IP limit. The budgets are tiny (3 a minute per token,
// 8 per address) so refills during the test are rare and accounted for; the
// production defaults (120, 600) and the algorithm's arithmetic are tested
// with a fake clock in pkg/ratelimit.
func TestRateLimits(t *testing.T) {
	t.Parallel()
	const perToken, perIP = 3, 8
	s := newStack(t, fmt.Sprintf("MCP_RATE_PER_TOKEN=%d", perToken), fmt.Sprintf("MCP_RATE_PER_IP=%d", perIP))
	s.cltctl("tenant", "create", "--slug", "acme", "--name", "Acme", "--mcp-enabled")
	s.cltctl("user", "add", "--tenant", "acme", "--email", "dev@acme.test")
	first := s.token("acme", "dev@acme.test", "first")
	second := s.token("acme", "dev@acme.test", "second")
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	calls := 0
	spendUntilLimited(t, "per token", perToken, 0, func() (*http.Response, string) {
		calls++
		resp, body := post(t, s, ping, with(legacy, "Authorization", "Bearer "+first))
		if resp.StatusCode != 200 && resp.StatusCode != 429 {
			t.Fatalf("call %d: %d %s", calls, resp.StatusCode, body)
		}
		return resp, body
	})
	calls++
	if resp, body := post(t, s, ping, with(legacy, "Authorization", "Bearer "+second)); resp.StatusCode != 200 {
		t.Errorf("second token after the first was limited: %d %s", resp.StatusCode, body)
	}

	// The per-IP limit catches a flood of invalid tokens; every request so
	// far (allowed or refused per token) was counted against this address.
	spendUntilLimited(t, "per address", perIP, calls, func() (*http.Response, string) {
		resp, body := post(t, s, ping, with(legacy, "Authorization", "Bearer clt_"+strings.Repeat("x", 43)))
		if resp.StatusCode != 401 && resp.StatusCode != 429 {
			t.Fatalf("invalid token: %d %s", resp.StatusCode, body)
		}
		return resp, body
	})
}

// TestRateLimitSharedAcrossReplicas: two API processes sharing Redis
// enforce one per-token budget.
func TestRateLimitSharedAcrossReplicas(t *testing.T) {
	t.Parallel()
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
