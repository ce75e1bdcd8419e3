package authn

import (
	"encoding/hex"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/tokens"
)

// The rate-limit key of an OAuth access token is its grant, so the access
// tokens of one grant (a refresh leaves the earlier ones valid) share one
// budget; a personal access token's key is its own digest.
func TestDigestOfAnOAuthTokenIsItsGrant(t *testing.T) {
	now := time.Now()
	facts := func(grant *string) postgres.TokenFacts {
		return postgres.TokenFacts{TokenID: "tok", TenantID: "ten", UserID: "u", ExpiresAt: now.Add(time.Hour),
			UserActive: true, MCPEnabled: true, OAuthGrantID: grant, TenantSlug: "acme"}
	}
	g1, g2 := "grant-1", "grant-2"
	h1, h2, h3 := tokens.Hash(tokens.Generate()), tokens.Hash(tokens.Generate()), tokens.Hash(tokens.Generate())
	a, b, other := decide(facts(&g1), true, h1, "", now), decide(facts(&g1), true, h2, "", now), decide(facts(&g2), true, h3, "", now)
	if a.Digest == "" || a.Digest != b.Digest {
		t.Errorf("two access tokens of one grant: digests %q and %q, want one", a.Digest, b.Digest)
	}
	if other.Digest == a.Digest {
		t.Errorf("another grant shares the digest %q", a.Digest)
	}
	pat := decide(facts(nil), true, h1, "", now)
	if want := "ten:" + hex.EncodeToString(h1); pat.Digest != want {
		t.Errorf("personal access token digest %q, want %q", pat.Digest, want)
	}
}
