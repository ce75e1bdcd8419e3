package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/codelotse/codelotse/apps/internal/config"
	"github.com/codelotse/codelotse/pkg/oidc"
)

// TestAPIIdentityProviderClientIsSSRFSafe: the client the API hands to the
// sign-in pages refuses an issuer on a loopback address unless the operator
// allowed the range (and plain http) — the same request a tenant admin's
// issuer would make.
func TestAPIIdentityProviderClientIsSSRFSafe(t *testing.T) {
	var hits int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": "http://" + r.Host, "authorization_endpoint": "http://" + r.Host + "/auth",
			"token_endpoint": "http://" + r.Host + "/token", "jwks_uri": "http://" + r.Host + "/keys"})
	}))
	defer srv.Close()
	p := oidc.Provider{Issuer: srv.URL, ClientID: "c", ClientSecret: "s", RedirectURL: "http://127.0.0.1:8080/auth/oidc/callback"}

	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	strict, err := config.Load(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newOIDCClient(strict).AuthURL(context.Background(), p, "st", "no", "verifier-verifier-verifier-verifier-verifier"); err == nil {
		t.Fatal("default settings: an issuer on 127.0.0.1 was used")
	}
	if hits != 0 {
		t.Fatalf("default settings: the loopback issuer was contacted %d times", hits)
	}
	dev, err := config.Load(env(map[string]string{"OIDC_ALLOW_PRIVATE_CIDRS": "127.0.0.0/8", "OIDC_ALLOW_HTTP": "true"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newOIDCClient(dev).AuthURL(context.Background(), p, "st", "no", "verifier-verifier-verifier-verifier-verifier"); err != nil {
		t.Fatalf("development settings: %v", err)
	}
}
