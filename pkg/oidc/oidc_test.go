package oidc

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

// These tests cover what needs no signed ID token. The whole flow against a
// real OpenID Provider (signatures, nonce, audience, userinfo) is tested in
// e2e/oidcop, which keeps the provider library out of this module.

func TestParseGroups(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		ok   bool
	}{
		{`["a","b"]`, []string{"a", "b"}, true},
		{`["a","","b","a"]`, []string{"a", "b"}, true},
		{`[]`, []string{}, true},
		{`"admins"`, []string{"admins"}, true},
		{`"a,b"`, []string{"a,b"}, true}, // one group with a comma, not two
		{`""`, []string{}, true},
		{`null`, []string{}, true},
		{` [ "x" ] `, []string{"x"}, true},
		{`42`, nil, false},
		{`true`, nil, false},
		{`[1,2]`, nil, false},
		{`["a",["b"]]`, nil, false},
		{`{"a":"b"}`, nil, false},
		{``, nil, false},
	} {
		got, ok := parseGroups(json.RawMessage(tc.in))
		if ok != tc.ok || !slices.Equal(got, tc.want) || (ok && got == nil) {
			t.Errorf("parseGroups(%s) = %#v, %v; want %#v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestLookupClaim(t *testing.T) {
	raw := map[string]json.RawMessage{}
	if err := json.Unmarshal([]byte(`{
		"groups": ["top"],
		"realm_access": {"roles": ["r1"], "deep": {"x": "y"}},
		"https://example.com/groups": ["namespaced"],
		"flat": "not an object"
	}`), &raw); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, want string
		found      bool
	}{
		{"groups", `["top"]`, true},
		{"realm_access.roles", `["r1"]`, true},
		{"realm_access.deep.x", `"y"`, true},
		{"https://example.com/groups", `["namespaced"]`, true},
		{"realm_access.missing", "", false},
		{"flat.x", "", false},
		{"missing", "", false},
	} {
		got, found := lookupClaim(raw, tc.name)
		if found != tc.found || string(got) != tc.want {
			t.Errorf("lookupClaim(%q) = %s, %v; want %s, %v", tc.name, got, found, tc.want, tc.found)
		}
	}
	if len(raw) != 4 {
		t.Errorf("lookupClaim changed the claims: %d keys, want 4", len(raw))
	}
}

func TestReadProfile(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Claims
	}{
		{`{"email":"a@x","email_verified":true,"name":"A B"}`, Claims{Email: "a@x", EmailVerified: true, Name: "A B"}},
		{`{"email":"a@x","email_verified":"true","given_name":"A","family_name":"B"}`, Claims{Email: "a@x", EmailVerified: true, Name: "A B"}},
		{`{"email":"a@x","email_verified":"false","preferred_username":"ab"}`, Claims{Email: "a@x", Name: "ab"}},
		{`{"email":42,"name":["x"]}`, Claims{}},
	} {
		raw := map[string]json.RawMessage{}
		if err := json.Unmarshal([]byte(tc.in), &raw); err != nil {
			t.Fatal(err)
		}
		var got Claims
		hasEmail := readProfile(raw, &got)
		if got.Email != tc.want.Email || got.EmailVerified != tc.want.EmailVerified || got.Name != tc.want.Name || hasEmail != (tc.want.Email != "") {
			t.Errorf("readProfile(%s) = %+v, %v; want %+v", tc.in, got, hasEmail, tc.want)
		}
	}
}

func TestRedact(t *testing.T) {
	secret := "abc+def/ghi"
	got := redact("got "+secret+" and "+url.QueryEscape(secret)+" and abc", secret, "abc", "")
	if strings.Contains(got, "def") || strings.Count(got, "[redacted]") != 2 {
		t.Errorf("redact = %q", got)
	}
	long := redact(strings.Repeat("é", 400))
	if len(long) > maxDetail+len("…") || !strings.HasSuffix(long, "…") || !strings.HasPrefix(long, "é") {
		t.Errorf("long detail not cut on a rune boundary: %d bytes", len(long))
	}
}

func TestRandomValues(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range []func() string{NewState, NewNonce, NewVerifier} {
		for range 50 {
			v := f()
			if len(v) != 43 {
				t.Fatalf("%q: %d characters, want 43 (32 bytes, base64url)", v, len(v))
			}
			if _, err := base64.RawURLEncoding.DecodeString(v); err != nil {
				t.Fatalf("%q is not base64url: %v", v, err)
			}
			if err := checkVerifier(v); err != nil {
				t.Fatalf("%q is not a valid PKCE verifier: %v", v, err)
			}
			if seen[v] {
				t.Fatalf("%q returned twice", v)
			}
			seen[v] = true
		}
	}
}

func TestValidate(t *testing.T) {
	ok := Provider{Issuer: "https://idp.example.com", ClientID: "c", RedirectURL: "https://app/auth/oidc/callback"}
	for _, issuer := range []string{"https://idp.example.com", "https://idp.example.com/realms/x", "http://127.0.0.1:5556", "http://localhost:8080", "http://[::1]:9000"} {
		p := ok
		p.Issuer = issuer
		if err := p.validate(isLoopback); err != nil {
			t.Errorf("issuer %s: %v", issuer, err)
		}
	}
	for name, p := range map[string]Provider{
		"http elsewhere": {Issuer: "http://idp.example.com", ClientID: "c", RedirectURL: "r"},
		"http private":   {Issuer: "http://10.0.0.5", ClientID: "c", RedirectURL: "r"},
		"not a URL":      {Issuer: "idp.example.com", ClientID: "c", RedirectURL: "r"},
		"no issuer":      {ClientID: "c", RedirectURL: "r"},
		"no client":      {Issuer: "https://idp.example.com", RedirectURL: "r"},
		"no redirect":    {Issuer: "https://idp.example.com", ClientID: "c"},
	} {
		if err := p.validate(isLoopback); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: err = %v, want ErrConfig", name, err)
		}
	}
}

func TestAuthStyle(t *testing.T) {
	for _, tc := range []struct {
		methods []string
		want    oauth2.AuthStyle
	}{
		{nil, oauth2.AuthStyleInHeader},
		{[]string{"client_secret_post", "client_secret_basic"}, oauth2.AuthStyleInHeader},
		{[]string{"client_secret_post"}, oauth2.AuthStyleInParams},
		{[]string{"private_key_jwt"}, oauth2.AuthStyleAutoDetect},
	} {
		if got := authStyle(tc.methods); got != tc.want {
			t.Errorf("authStyle(%q) = %v, want %v", tc.methods, got, tc.want)
		}
	}
}

// fakeProvider serves discovery and a token endpoint whose answer the test
// sets, and counts requests. It cannot sign tokens; e2e/oidcop can.
type fakeProvider struct {
	*httptest.Server
	mu         sync.Mutex
	discovery  int
	failDisco  bool
	tokenReqs  []*http.Request
	tokenForms []url.Values
	tokenCode  int
	tokenBody  string
}

func newFakeProvider(t *testing.T) *fakeProvider {
	f := &fakeProvider{tokenCode: http.StatusOK, tokenBody: `{"access_token":"at-0123456789","token_type":"Bearer"}`}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		switch r.URL.Path {
		case "/.well-known/openid-configuration":
			f.discovery++
			if f.failDisco {
				http.Error(w, "<html>"+strings.Repeat("down ", 500)+"</html>", http.StatusBadGateway)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"issuer":%q,"authorization_endpoint":%q,"token_endpoint":%q,"jwks_uri":%q,
				"id_token_signing_alg_values_supported":["RS256"],"token_endpoint_auth_methods_supported":["client_secret_basic"]}`,
				f.URL, f.URL+"/authorize?tenant=x", f.URL+"/token", f.URL+"/keys")
		case "/token":
			_ = r.ParseForm()
			f.tokenReqs = append(f.tokenReqs, r)
			f.tokenForms = append(f.tokenForms, r.PostForm)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(f.tokenCode)
			fmt.Fprint(w, f.tokenBody)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(f.Close)
	return f
}

// set changes the fake's behaviour under its lock.
func (f *fakeProvider) set(change func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change()
}

func (f *fakeProvider) provider() Provider {
	return Provider{Issuer: f.URL, ClientID: "client-1", ClientSecret: "s3cret-value", RedirectURL: "https://app.example.com/auth/oidc/callback"}
}

func TestAuthURL(t *testing.T) {
	f := newFakeProvider(t)
	c := NewClient(nil)
	state, nonce, verifier := NewState(), NewNonce(), NewVerifier()
	raw, err := c.AuthURL(context.Background(), f.provider(), state, nonce, verifier)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(verifier))
	q := u.Query()
	for k, want := range map[string]string{
		"tenant":                "x", // the endpoint's own query survives
		"response_type":         "code",
		"client_id":             "client-1",
		"redirect_uri":          "https://app.example.com/auth/oidc/callback",
		"scope":                 "openid email profile groups",
		"state":                 state,
		"nonce":                 nonce,
		"code_challenge_method": "S256",
		"code_challenge":        base64.RawURLEncoding.EncodeToString(sum[:]),
	} {
		if got := q.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if u.Path != "/authorize" || q.Has("code_verifier") || strings.Contains(raw, "s3cret") {
		t.Errorf("authorization URL %s", raw)
	}

	p := f.provider()
	p.Scopes = []string{"email", "roles"}
	raw, err = c.AuthURL(context.Background(), p, state, nonce, verifier)
	if err != nil {
		t.Fatal(err)
	}
	u, _ = url.Parse(raw)
	if got := u.Query().Get("scope"); got != "openid email roles" {
		t.Errorf("scope = %q, want openid added", got)
	}
}

func TestAuthURLRefusesBadInput(t *testing.T) {
	f := newFakeProvider(t)
	c := NewClient(nil)
	p := f.provider()
	for name, args := range map[string][3]string{
		"no state":        {"", NewNonce(), NewVerifier()},
		"no nonce":        {NewState(), "", NewVerifier()},
		"short verifier":  {NewState(), NewNonce(), "abc"},
		"bad verifier":    {NewState(), NewNonce(), strings.Repeat("a", 42) + "/"},
		"empty verifier":  {NewState(), NewNonce(), ""},
		"verifier 129 ch": {NewState(), NewNonce(), strings.Repeat("a", 129)},
	} {
		if _, err := c.AuthURL(context.Background(), p, args[0], args[1], args[2]); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: err = %v, want ErrConfig", name, err)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.discovery != 0 {
		t.Errorf("bad input still caused %d discovery requests", f.discovery)
	}
}

func TestDiscoveryCache(t *testing.T) {
	f := newFakeProvider(t)
	now := time.Unix(1_700_000_000, 0)
	c := NewClient(nil)
	c.now = func() time.Time { return now }
	authURL := func() error {
		_, err := c.AuthURL(context.Background(), f.provider(), NewState(), NewNonce(), NewVerifier())
		return err
	}
	count := func() int {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.discovery
	}
	steps := []struct {
		name      string
		advance   time.Duration
		fail      bool
		wantCount int
		wantErr   bool
	}{
		{name: "first sign-in discovers", wantCount: 1},
		{name: "second is cached", advance: time.Minute, wantCount: 1},
		{name: "after the TTL it refreshes", advance: DiscoveryTTL, wantCount: 2},
		{name: "a failed refresh keeps the old document", advance: DiscoveryTTL, fail: true, wantCount: 3},
		{name: "and is retried next time", fail: true, wantCount: 4},
		{name: "until it works", wantCount: 5},
		{name: "then it is cached again", wantCount: 5},
	}
	for _, s := range steps {
		now = now.Add(s.advance)
		f.set(func() { f.failDisco = s.fail })
		if err := authURL(); (err != nil) != s.wantErr {
			t.Fatalf("%s: err = %v", s.name, err)
		}
		if got := count(); got != s.wantCount {
			t.Fatalf("%s: %d discovery requests, want %d", s.name, got, s.wantCount)
		}
	}
}

func TestDiscoveryFailure(t *testing.T) {
	f := newFakeProvider(t)
	f.set(func() { f.failDisco = true })
	_, err := NewClient(nil).AuthURL(context.Background(), f.provider(), NewState(), NewNonce(), NewVerifier())
	if !errors.Is(err, ErrProvider) {
		t.Fatalf("err = %v, want ErrProvider", err)
	}
	if len(err.Error()) > 500 {
		t.Errorf("error carries the whole error page: %d bytes", len(err.Error()))
	}

	p := f.provider()
	p.Issuer += "/" // discovery names the issuer without the slash
	f.set(func() { f.failDisco = false })
	_, err = NewClient(nil).AuthURL(context.Background(), p, NewState(), NewNonce(), NewVerifier())
	if !errors.Is(err, ErrProvider) || !strings.Contains(err.Error(), "issuer") {
		t.Fatalf("issuer mismatch: err = %v, want ErrProvider naming the issuer", err)
	}
}

func TestFinishExchangeErrors(t *testing.T) {
	code, verifier := "code-0123456789abcdef", NewVerifier()
	for _, tc := range []struct {
		name       string
		status     int
		body       string
		want       error
		wantDetail string
	}{
		{
			name:   "provider refuses and echoes the code",
			status: http.StatusBadRequest,
			body:   fmt.Sprintf(`{"error":"invalid_grant","error_description":"code %s was already used; verifier %s"}`, code, verifier),
			want:   ErrExchange, wantDetail: "invalid_grant",
		},
		{
			name:   "provider answers an HTML page",
			status: http.StatusBadGateway,
			body:   "<html>" + strings.Repeat("x", 5000) + code + "</html>",
			want:   ErrExchange, wantDetail: "502",
		},
		{
			name:   "no ID token",
			status: http.StatusOK,
			body:   `{"access_token":"at-0123456789","token_type":"Bearer"}`,
			want:   ErrIDToken, wantDetail: "openid",
		},
		{
			name:   "ID token is garbage",
			status: http.StatusOK,
			body:   `{"access_token":"at-0123456789","token_type":"Bearer","id_token":"eyJhbGciOiJSUzI1NiJ9.not-json-at-all.sig"}`,
			want:   ErrIDToken,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeProvider(t)
			f.set(func() { f.tokenCode, f.tokenBody = tc.status, tc.body })
			p := f.provider()
			_, err := NewClient(nil).Finish(context.Background(), p, code, verifier, NewNonce())
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.wantDetail) {
				t.Errorf("err = %v, want it to mention %q", err, tc.wantDetail)
			}
			for _, secret := range []string{code, verifier, p.ClientSecret, "at-0123456789", "not-json-at-all"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error contains %q: %v", secret, err)
				}
			}
			if len(err.Error()) > 500 {
				t.Errorf("error is %d bytes long", len(err.Error()))
			}

			// One token request, with the client secret in the Authorization
			// header as discovery advertises, the verifier and the redirect URL.
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.tokenReqs) != 1 {
				t.Fatalf("%d token requests, want 1 (no second try with the same code)", len(f.tokenReqs))
			}
			id, secret, ok := f.tokenReqs[0].BasicAuth()
			form := f.tokenForms[0]
			if !ok || id != p.ClientID || secret != p.ClientSecret || form.Get("client_secret") != "" {
				t.Errorf("client authentication: basic %v %q, form %v", ok, id, form)
			}
			if form.Get("code") != code || form.Get("code_verifier") != verifier || form.Get("redirect_uri") != p.RedirectURL ||
				form.Get("grant_type") != "authorization_code" {
				t.Errorf("token request form: %v", form)
			}
		})
	}
}

func TestFinishRefusesBadInput(t *testing.T) {
	f := newFakeProvider(t)
	c := NewClient(nil)
	for name, args := range map[string][3]string{
		"no code":      {"", NewVerifier(), NewNonce()},
		"no nonce":     {"code", NewVerifier(), ""},
		"bad verifier": {"code", "short", NewNonce()},
	} {
		if _, err := c.Finish(context.Background(), f.provider(), args[0], args[1], args[2]); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: err = %v, want ErrConfig", name, err)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.tokenReqs) != 0 {
		t.Errorf("bad input still reached the token endpoint")
	}
}

func TestCheckAuthorizedParty(t *testing.T) {
	for _, tc := range []struct {
		claims string
		aud    []string
		ok     bool
	}{
		{`{}`, []string{"me"}, true},
		{`{"azp":"me"}`, []string{"me"}, true},
		{`{"azp":"me"}`, []string{"me", "api"}, true},
		{`{}`, []string{"me", "api"}, false},
		{`{"azp":"other"}`, []string{"me"}, false},
		{`{"azp":7}`, []string{"me"}, false},
	} {
		raw := map[string]json.RawMessage{}
		_ = json.Unmarshal([]byte(tc.claims), &raw)
		err := checkAuthorizedParty(raw, tc.aud, "me")
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrIDToken)) {
			t.Errorf("%s aud %q: err = %v, want ok %v", tc.claims, tc.aud, err, tc.ok)
		}
	}
}

func TestGroupsClaimError(t *testing.T) {
	err := error(&GroupsClaimError{Claim: "groups", Problem: ErrNoGroupsClaim})
	if !errors.Is(err, ErrNoGroupsClaim) || errors.Is(err, ErrInvalidGroupsClaim) {
		t.Errorf("errors.Is wrong for %v", err)
	}
	if got := err.Error(); got != `oidc: the identity provider did not send the groups claim "groups"` {
		t.Errorf("message = %q", got)
	}
	err = &GroupsClaimError{Claim: "roles", Problem: ErrInvalidGroupsClaim}
	if !errors.Is(err, ErrInvalidGroupsClaim) || !strings.Contains(err.Error(), `"roles"`) {
		t.Errorf("invalid claim error = %v", err)
	}
}
