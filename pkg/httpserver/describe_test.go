package httpserver

import (
	"strings"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/authn"
	"github.com/codelotse/codelotse/pkg/codelotse"
)

// TestFailureDescriptions: every refusal the bearer check can produce has an
// error_description a person can act on, in the characters RFC 6750 §3
// allows, naming no tenant, user or repository.
func TestFailureDescriptions(t *testing.T) {
	reasons := []string{"missing", "malformed", "unknown", "revoked", "expired", "user_deleted", "mcp_disabled", "idp_disabled",
		"no_grants_no_mapping", "no_grants_provider_disabled"}
	seen := map[string]string{}
	for _, r := range reasons {
		d := failureDescription(&authn.Failure{Reason: r})
		if d == "" {
			t.Errorf("%s: no description", r)
			continue
		}
		for _, c := range d {
			// error_description = 1*( %x20-21 / %x23-5B / %x5D-7E )
			if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
				t.Errorf("%s: %q has a character RFC 6750 forbids: %q", r, d, c)
			}
		}
		if strings.Contains(d, "%") || strings.Contains(d, "{") {
			t.Errorf("%s: %q looks like a template", r, d)
		}
		seen[r] = d
	}
	// The states a holder must tell apart get different words.
	for _, pair := range [][2]string{{"unknown", "revoked"}, {"revoked", "expired"}, {"expired", "mcp_disabled"}} {
		if seen[pair[0]] == seen[pair[1]] {
			t.Errorf("%s and %s share the description %q", pair[0], pair[1], seen[pair[0]])
		}
	}
	if got := failureDescription(&authn.Failure{Reason: "no_grants_stale", Refresh: true}); got != refreshDescription {
		t.Errorf("stale membership: %q", got)
	}
}

// TestExpiringSoon: a fresh 7-day token is not "expires soon"; one with a
// day left is; revoked and expired tokens never are.
func TestExpiringSoon(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	revoked := now
	list := []codelotse.Token{
		{ID: "fresh", ExpiresAt: now.Add(7 * 24 * time.Hour), CreatedAt: now},
		{ID: "three-days", ExpiresAt: now.Add(72 * time.Hour), CreatedAt: now.Add(-4 * 24 * time.Hour)},
		{ID: "one-day", ExpiresAt: now.Add(24 * time.Hour), CreatedAt: now.Add(-6 * 24 * time.Hour)},
		{ID: "revoked", ExpiresAt: now.Add(time.Hour), CreatedAt: now.Add(-time.Hour), RevokedAt: &revoked},
	}
	want := map[string]bool{"fresh": false, "three-days": false, "one-day": true, "revoked": false}
	for _, r := range tokenRows(list, now) {
		if r.ExpiringSoon != want[r.ID] {
			t.Errorf("%s: expiring soon = %v, want %v", r.ID, r.ExpiringSoon, want[r.ID])
		}
	}
}
