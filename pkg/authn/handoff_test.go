package authn

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHandoffSealing: a sealed token opens only with the same session
// cookie, never contains the token in the clear, and fails on tampering.
func TestHandoffSealing(t *testing.T) {
	s := &Sessions{}
	req := func(cookie string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if cookie != "" {
			r.AddCookie(&http.Cookie{Name: s.CookieName(), Value: cookie})
		}
		return r
	}
	secret := "clt_" + strings.Repeat("A", 43)
	mine := "00000000-0000-0000-0000-000000000001." + NewSecret()
	sealed, err := s.SealHandoff(req(mine), secret)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(sealed), secret) || strings.Contains(string(sealed), "AAAA") {
		t.Fatal("the sealed handoff contains the token")
	}
	if got, err := s.OpenHandoff(req(mine), sealed); err != nil || got != secret {
		t.Fatalf("same session: %q %v", got, err)
	}
	other := "00000000-0000-0000-0000-000000000001." + NewSecret()
	if _, err := s.OpenHandoff(req(other), sealed); err == nil {
		t.Error("another session opened the handoff")
	}
	if _, err := s.OpenHandoff(req(""), sealed); err == nil {
		t.Error("a request without a session opened the handoff")
	}
	sealed[len(sealed)-1] ^= 1
	if _, err := s.OpenHandoff(req(mine), sealed); err == nil {
		t.Error("a tampered handoff opened")
	}
	if _, err := s.SealHandoff(req(""), secret); err == nil {
		t.Error("sealed without a session cookie")
	}
}
