package oidc

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

// TestServiceClientIsSSRFSafe: the service's client (New) refuses plain
// http issuers unless allowed, refuses issuers that resolve to loopback
// (the stand-in for private, link-local and metadata addresses, all refused
// by pkg/safehttp at connect time), and reaches a local provider only when
// its range is allowed.
func TestServiceClientIsSSRFSafe(t *testing.T) {
	f := newFakeProvider(t)
	ctx := context.Background()
	auth := func(c *Client, p Provider) error {
		_, err := c.AuthURL(ctx, p, NewState(), NewNonce(), NewVerifier())
		return err
	}
	if err := auth(New(Options{}), f.provider()); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "https") {
		t.Errorf("strict client, http issuer: %v, want an https configuration error", err)
	}
	if err := auth(New(Options{AllowHTTP: true}), f.provider()); !errors.Is(err, ErrProvider) || !strings.Contains(err.Error(), "does not connect to") {
		t.Errorf("http allowed, loopback issuer: %v, want a refused address", err)
	}
	f.set(func() { f.discovery = 0 })
	tls := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { f.discovery++ }))
	defer tls.Close()
	p := f.provider()
	p.Issuer = tls.URL
	if err := auth(New(Options{}), p); !errors.Is(err, ErrProvider) || !strings.Contains(err.Error(), "does not connect to") {
		t.Errorf("strict client, https issuer on loopback: %v, want a refused address", err)
	}
	if f.discovery != 0 {
		t.Error("a refused issuer was contacted")
	}
	local := New(Options{AllowHTTP: true, AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	if err := auth(local, f.provider()); err != nil {
		t.Errorf("allowed local provider: %v", err)
	}
}
