package oauth

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

func challengeOf(v string) string {
	s := sha256.Sum256([]byte(v))
	return base64.RawURLEncoding.EncodeToString(s[:])
}

func TestVerifyPKCE(t *testing.T) {
	v := strings.Repeat("a", 43)
	c := challengeOf(v)
	for _, tc := range []struct {
		name, verifier, challenge string
		want                      bool
	}{
		{"match", v, c, true},
		{"rfc7636 appendix B", "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk", "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", true},
		{"wrong verifier", strings.Repeat("b", 43), c, false},
		{"missing verifier", "", c, false},
		{"short verifier", "abc", challengeOf("abc"), false},
		{"too long verifier", strings.Repeat("a", 129), challengeOf(strings.Repeat("a", 129)), false},
		{"reserved characters", strings.Repeat("a", 42) + "+", challengeOf(strings.Repeat("a", 42) + "+"), false},
		// plain: the challenge is the verifier itself; never accepted.
		{"plain method", v, v, false},
		{"empty challenge", v, "", false},
	} {
		if got := VerifyPKCE(tc.verifier, tc.challenge); got != tc.want {
			t.Errorf("%s: VerifyPKCE = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSecretFormats(t *testing.T) {
	r, c := NewRefreshToken(), NewCode()
	if !ValidRefreshToken(r) || ValidCode(r) || !strings.HasPrefix(r, "clr_") || len(r) != 47 {
		t.Fatalf("refresh token %q has the wrong shape", r)
	}
	if !ValidCode(c) || ValidRefreshToken(c) || !strings.HasPrefix(c, "clc_") {
		t.Fatalf("code %q has the wrong shape", c)
	}
	if ValidRefreshToken("clt_"+r[4:]) || ValidRefreshToken(r[:46]) || ValidRefreshToken("") {
		t.Fatal("a malformed refresh token was accepted")
	}
	if NewRefreshToken() == r || NewCode() == c {
		t.Fatal("secrets repeat")
	}
	if id := NewClientID(); !strings.HasPrefix(id, "cld_") || IsMetadataURL(id) {
		t.Fatalf("client id %q", id)
	}
}

func TestCheckRedirectURI(t *testing.T) {
	for _, tc := range []struct {
		uri string
		ok  bool
	}{
		{"https://app.example.com/callback", true},
		{"http://127.0.0.1:8080/callback", true},
		{"http://127.0.0.1/callback", true},
		{"http://[::1]:3000/cb", true},
		{"http://localhost:3000/cb", true},
		{"cursor://anysphere.cursor-retrieval/oauth/callback", true},
		{"http://example.com/callback", false},
		{"http://10.0.0.1/callback", false},
		{"https://app.example.com/cb#frag", false},
		{"https://user:pw@app.example.com/cb", false},
		{"https://trusted.example@evil.example/cb", false},
		{"http://user@127.0.0.1/cb", false},
		{"javascript:alert(1)", false},
		{"data:text/html,hi", false},
		{"/relative", false},
		{"", false},
	} {
		if e := CheckRedirectURI(tc.uri); (e == nil) != tc.ok {
			t.Errorf("CheckRedirectURI(%q) = %v, want ok=%v", tc.uri, e, tc.ok)
		}
	}
}

func TestMatchRedirectURI(t *testing.T) {
	reg := []string{"http://127.0.0.1/callback", "https://app.example.com/cb", "http://localhost:9999/cb?x=1"}
	for _, tc := range []struct {
		got  string
		want bool
	}{
		{"https://app.example.com/cb", true},
		{"http://127.0.0.1/callback", true},
		// RFC 8252: loopback redirect URIs may use any port.
		{"http://127.0.0.1:51234/callback", true},
		{"http://localhost:1234/cb?x=1", true},
		{"http://127.0.0.1:51234/other", false},
		{"http://127.0.0.1:51234/callback?extra=1", false},
		{"http://[::1]:51234/callback", false}, // a different loopback host than registered
		{"https://app.example.com:8443/cb", false},
		{"https://app.example.com/cb/", false},
		{"https://evil.example.com/cb", false},
		{"http://app.example.com/cb", false},
		{"", false},
	} {
		if got := MatchRedirectURI(reg, tc.got); got != tc.want {
			t.Errorf("MatchRedirectURI(%q) = %v, want %v", tc.got, got, tc.want)
		}
	}
}

func TestCheckClientIDURL(t *testing.T) {
	for _, tc := range []struct {
		u  string
		ok bool
	}{
		{"https://client.example.com/oauth/client.json", true},
		{"https://client.example.com:8443/c", true},
		{"http://client.example.com/c", false},
		{"https://client.example.com", false},
		{"https://client.example.com/", false},
		{"https://user:pw@client.example.com/c", false},
		{"https://client.example.com/c#x", false},
		{"https://client.example.com/a/../c", false},
		{"cld_abc", false},
	} {
		if e := CheckClientIDURL(tc.u); (e == nil) != tc.ok {
			t.Errorf("CheckClientIDURL(%q) = %v, want ok=%v", tc.u, e, tc.ok)
		}
	}
}

func TestParseMetadataDocument(t *testing.T) {
	id := "https://client.example.com/client.json"
	for _, tc := range []struct {
		name, body string
		ok         bool
	}{
		{"good", `{"client_id":"` + id + `","client_name":"Claude Code","redirect_uris":["http://127.0.0.1/callback"],"grant_types":["authorization_code","refresh_token"],"token_endpoint_auth_method":"none"}`, true},
		{"other client_id", `{"client_id":"https://evil.example.com/c","redirect_uris":["http://127.0.0.1/cb"]}`, false},
		{"no redirect uris", `{"client_id":"` + id + `"}`, false},
		{"bad redirect", `{"client_id":"` + id + `","redirect_uris":["http://evil.example.com/cb"]}`, false},
		{"secret", `{"client_id":"` + id + `","redirect_uris":["http://127.0.0.1/cb"],"client_secret":"x"}`, false},
		{"confidential", `{"client_id":"` + id + `","redirect_uris":["http://127.0.0.1/cb"],"token_endpoint_auth_method":"client_secret_basic"}`, false},
		{"no code grant", `{"client_id":"` + id + `","redirect_uris":["http://127.0.0.1/cb"],"grant_types":["client_credentials"]}`, false},
		{"not json", `<html>`, false},
	} {
		c, e := ParseMetadataDocument(id, []byte(tc.body))
		if (e == nil) != tc.ok {
			t.Errorf("%s: err = %v, want ok=%v", tc.name, e, tc.ok)
		}
		if e != nil && e.Code != ErrInvalidClient {
			t.Errorf("%s: code = %s", tc.name, e.Code)
		}
		if tc.ok && (c.DisplayName() != "Claude Code" || ClientHost(c.ClientID) != "client.example.com") {
			t.Errorf("%s: client = %+v", tc.name, c)
		}
	}
	c, _ := ParseMetadataDocument(id, []byte(`{"client_id":"`+id+`","client_name":"  a\u0007b  ","redirect_uris":["http://127.0.0.1/cb"]}`))
	if c.Name != "ab" {
		t.Errorf("control characters kept in name: %q", c.Name)
	}
	// A right-to-left override and invisible characters would make the
	// consent page show another client's name.
	c, _ = ParseMetadataDocument(id, []byte(`{"client_id":"`+id+`","client_name":"Claude\u202e\u200b\u2066 Desktop\u00ad","redirect_uris":["http://127.0.0.1/cb"]}`))
	if c.Name != "Claude Desktop" {
		t.Errorf("invisible or bidirectional characters kept in name: %q", c.Name)
	}
}

func TestCheckRegistration(t *testing.T) {
	good := Registration{ClientName: "Tool", RedirectURIs: []string{"http://127.0.0.1:3000/cb"}, GrantTypes: []string{"authorization_code", "refresh_token"}, TokenEndpointAuthMethod: "none"}
	if _, e := CheckRegistration("cld_x", good); e != nil {
		t.Fatalf("good registration refused: %v", e)
	}
	for name, r := range map[string]Registration{
		"secret auth":    {RedirectURIs: good.RedirectURIs, TokenEndpointAuthMethod: "client_secret_basic"},
		"no redirect":    {},
		"implicit grant": {RedirectURIs: good.RedirectURIs, GrantTypes: []string{"implicit"}},
		"token response": {RedirectURIs: good.RedirectURIs, ResponseTypes: []string{"token"}},
		"other scope":    {RedirectURIs: good.RedirectURIs, Scope: "admin"},
	} {
		if _, e := CheckRegistration("cld_x", r); e == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestAuthRequestCheck(t *testing.T) {
	const res = "https://cl.example.com/t/acme/mcp"
	good := AuthRequest{ResponseType: "code", ClientID: "cld_x", RedirectURI: "http://127.0.0.1/cb", State: "s",
		CodeChallenge: challengeOf(strings.Repeat("v", 50)), CodeChallengeMethod: "S256", Resource: res, Scope: "mcp:read"}
	if e := good.Check(res); e != nil {
		t.Fatalf("good request refused: %v", e)
	}
	for _, tc := range []struct {
		name string
		mod  func(*AuthRequest)
		code string
	}{
		{"token response type", func(r *AuthRequest) { r.ResponseType = "token" }, ErrUnsupportedResponseType},
		{"missing challenge", func(r *AuthRequest) { r.CodeChallenge = "" }, ErrInvalidRequest},
		{"plain", func(r *AuthRequest) { r.CodeChallengeMethod = "plain" }, ErrInvalidRequest},
		{"no method", func(r *AuthRequest) { r.CodeChallengeMethod = "" }, ErrInvalidRequest},
		{"bad challenge", func(r *AuthRequest) { r.CodeChallenge = "short" }, ErrInvalidRequest},
		{"missing resource", func(r *AuthRequest) { r.Resource = "" }, ErrInvalidTarget},
		{"other tenant resource", func(r *AuthRequest) { r.Resource = "https://cl.example.com/t/other/mcp" }, ErrInvalidTarget},
		{"root resource", func(r *AuthRequest) { r.Resource = "https://cl.example.com/mcp" }, ErrInvalidTarget},
		{"scope", func(r *AuthRequest) { r.Scope = "repo" }, ErrInvalidScope},
	} {
		r := good
		tc.mod(&r)
		e := r.Check(res)
		if e == nil || e.Code != tc.code {
			t.Errorf("%s: got %v, want %s", tc.name, e, tc.code)
		}
	}
	c := Client{ClientID: "cld_x", RedirectURIs: []string{"http://127.0.0.1/cb"}}
	if e := good.CheckRedirect(c); e != nil {
		t.Errorf("registered redirect refused: %v", e)
	}
	bad := good
	bad.RedirectURI = "https://evil.example.com/cb"
	if e := bad.CheckRedirect(c); e == nil {
		t.Error("unregistered redirect accepted")
	}
	if _, e := ParseAuthRequest(url.Values{"state": {"a", "b"}}); e == nil {
		t.Error("repeated parameter accepted")
	}
}

func TestRedirectURL(t *testing.T) {
	got := RedirectURL("http://127.0.0.1:5/cb?keep=1", url.Values{"code": {"c"}}, "st&ate", "https://cl.example.com/t/acme")
	u, _ := url.Parse(got)
	q := u.Query()
	if q.Get("keep") != "1" || q.Get("code") != "c" || q.Get("state") != "st&ate" || q.Get("iss") != "https://cl.example.com/t/acme" {
		t.Fatalf("redirect %s", got)
	}
}

func TestCacheFor(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		h    http.Header
		want time.Duration
	}{
		{http.Header{}, 5 * time.Minute},
		{http.Header{"Cache-Control": {"public, max-age=600"}}, 10 * time.Minute},
		{http.Header{"Cache-Control": {"max-age=9999999"}}, 24 * time.Hour},
		{http.Header{"Cache-Control": {"no-store"}}, 0},
		{http.Header{"Cache-Control": {"no-cache"}}, 0},
		{http.Header{"Expires": {now.Add(time.Hour).Format(http.TimeFormat)}}, time.Hour},
		{http.Header{"Expires": {"0"}}, 0},
	} {
		if got := CacheFor(tc.h, now); got != tc.want {
			t.Errorf("CacheFor(%v) = %v, want %v", tc.h, got, tc.want)
		}
	}
}

func TestIsJSONMediaType(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/json":                       true,
		"application/json; charset=utf-8":        true,
		"Application/JSON":                       true,
		"application/vnd.example.client+json":    true,
		"application/oauth-client-metadata+json": true,
		"":                                       false,
		"text/plain":                             false,
		"text/plain; charset=utf-8":              false,
		"text/json":                              false,
		"text/html":                              false,
		"application/jsonx":                      false,
		"application/+json":                      false,
		"application/json-seq":                   false,
		"application/octet-stream":               false,
		"application/json; charset":              false, // not a media type
	} {
		if got := IsJSONMediaType(ct); got != want {
			t.Errorf("IsJSONMediaType(%q) = %v, want %v", ct, got, want)
		}
	}
}
