package httpserver

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/ratelimit"
)

// Every access token of one grant draws on one per-token budget
// (ARCHITECTURE §6.1: no request escapes it): refreshing, which leaves the
// earlier access tokens valid until they expire, does not buy a fresh
// budget. Another grant, and the person's personal access token, keep
// their own.
func TestOAuthGrantSharesOneBudget(t *testing.T) {
	f := newOAuthFixture(t, func(c *Config) {
		c.Limiter = ratelimit.NewMemory()
		c.Limits.PerToken = ratelimit.Rule{Limit: 3, Period: time.Hour}
	})
	clientID, a := f.connect()
	call := func(tok string) int {
		st, _ := f.mcpCall("/t/acme/mcp", tok)
		return st
	}
	if st := call(a.AccessToken); st != http.StatusOK {
		t.Fatalf("first call: %d", st)
	}
	b := f.token(url.Values{"grant_type": {"refresh_token"}, "client_id": {clientID}, "refresh_token": {a.RefreshToken}})
	if b.Status != http.StatusOK {
		t.Fatalf("refresh: %+v", b)
	}
	for i, tok := range []string{b.AccessToken, a.AccessToken} {
		if st := call(tok); st != http.StatusOK {
			t.Fatalf("call %d within the grant's budget: %d", i+2, st)
		}
	}
	// The budget of 3 is spent, whichever of the grant's tokens asks.
	for name, tok := range map[string]string{"earlier": a.AccessToken, "refreshed": b.AccessToken} {
		if st := call(tok); st != http.StatusTooManyRequests {
			t.Errorf("%s access token past the grant's budget: %d, want 429", name, st)
		}
	}
	c := f.token(url.Values{"grant_type": {"refresh_token"}, "client_id": {clientID}, "refresh_token": {b.RefreshToken}})
	if st := call(c.AccessToken); st != http.StatusTooManyRequests {
		t.Errorf("a token refreshed after the budget was spent: %d, want 429", st)
	}
	// Another grant and the personal access token have budgets of their own.
	_, other := f.connect()
	if st := call(other.AccessToken); st != http.StatusOK {
		t.Errorf("another grant: %d", st)
	}
	if st := call(f.m.Secret); st != http.StatusOK {
		t.Errorf("the personal access token: %d", st)
	}
}
