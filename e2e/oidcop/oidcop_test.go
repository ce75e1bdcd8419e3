//go:build e2e

package oidcop_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/codelotse/codelotse/e2e/oidcop"
	"github.com/codelotse/codelotse/pkg/oidc"
)

// redirectURL is the app's callback as registered at the provider. Nothing
// listens there: the tests stop at the redirect and read code and state.
const redirectURL = "http://127.0.0.1:9/auth/oidc/callback"

var alice = oidcop.User{
	Subject:       "alice-sub",
	Email:         "alice@example.com",
	EmailVerified: true,
	Name:          "Alice Example",
	Groups:        []string{"eng", "admins"},
}

// setup starts a provider with alice and returns it with the pkg/oidc
// settings a tenant would have for it.
func setup(t *testing.T, opts oidcop.Options) (*oidcop.Provider, oidc.Provider) {
	t.Helper()
	opts.RedirectURIs = append(opts.RedirectURIs, redirectURL)
	opts.Users = append(opts.Users, alice)
	op := oidcop.Start(t, opts)
	return op, oidc.Provider{
		Issuer:       op.Issuer(),
		ClientID:     op.ClientID(),
		ClientSecret: op.ClientSecret(),
		RedirectURL:  redirectURL,
	}
}

// flow is one sign-in's values, as the web layer keeps them in its session.
type flow struct {
	state, nonce, verifier string
	code                   string
}

// authorize starts a sign-in for subject and follows the provider's answer
// as a browser would, up to the redirect to the app, and returns the code.
// It insists that the authorization endpoint redirects straight to the app.
func authorize(t *testing.T, op *oidcop.Provider, c *oidc.Client, p oidc.Provider, subject string) flow {
	t.Helper()
	f := flow{state: oidc.NewState(), nonce: oidc.NewNonce(), verifier: oidc.NewVerifier()}
	authURL, err := c.AuthURL(context.Background(), p, f.state, f.nonce, f.verifier)
	if err != nil {
		t.Fatalf("AuthURL: %v", err)
	}
	op.SignInAs(subject)
	resp, err := noRedirects.Get(authURL)
	if err != nil {
		t.Fatalf("GET authorize: %v", err)
	}
	resp.Body.Close()
	f.code = callbackCode(t, resp, f.state)
	return f
}

var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// callbackCode checks that resp redirects to the app's callback with the
// state of this sign-in and returns the code.
func callbackCode(t *testing.T, resp *http.Response, state string) string {
	t.Helper()
	if resp.StatusCode != http.StatusFound {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("authorize answered %s, want a redirect to the app: %s", resp.Status, body)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	if got := loc.Scheme + "://" + loc.Host + loc.Path; got != redirectURL {
		t.Fatalf("redirected to %s, want the app's callback %s", got, redirectURL)
	}
	q := loc.Query()
	if q.Get("error") != "" {
		t.Fatalf("provider answered error %s: %s", q.Get("error"), q.Get("error_description"))
	}
	if q.Get("state") != state {
		t.Fatalf("state = %q, want the one sent", q.Get("state"))
	}
	if q.Get("code") == "" {
		t.Fatal("no code in the redirect")
	}
	return q.Get("code")
}

func finish(c *oidc.Client, p oidc.Provider, f flow) (oidc.Claims, error) {
	return c.Finish(context.Background(), p, f.code, f.verifier, f.nonce)
}

// assertClean fails if err mentions any of the flow's secrets.
func assertClean(t *testing.T, err error, p oidc.Provider, f flow) {
	t.Helper()
	for name, v := range map[string]string{"code": f.code, "verifier": f.verifier, "client secret": p.ClientSecret} {
		if strings.Contains(err.Error(), v) || strings.Contains(err.Error(), url.QueryEscape(v)) {
			t.Errorf("error contains the %s: %v", name, err)
		}
	}
}

func TestSignIn(t *testing.T) {
	op, p := setup(t, oidcop.Options{})
	c := oidc.NewClient(nil)
	claims, err := finish(c, p, authorize(t, op, c, p, alice.Subject))
	if err != nil {
		t.Fatalf("Finish: %v", err)
	}
	want := oidc.Claims{Subject: alice.Subject, Email: alice.Email, Name: alice.Name, EmailVerified: true, Groups: alice.Groups}
	if !equalClaims(claims, want) {
		t.Errorf("claims = %+v, want %+v", claims, want)
	}
}

func equalClaims(a, b oidc.Claims) bool {
	return a.Subject == b.Subject && a.Email == b.Email && a.Name == b.Name &&
		a.EmailVerified == b.EmailVerified && slices.Equal(a.Groups, b.Groups) && (a.Groups == nil) == (b.Groups == nil)
}

func TestChangedGroupsAtNextSignIn(t *testing.T) {
	op, p := setup(t, oidcop.Options{})
	c := oidc.NewClient(nil)
	op.SetUserGroups(alice.Subject, []string{"support"})
	claims, err := finish(c, p, authorize(t, op, c, p, alice.Subject))
	if err != nil {
		t.Fatalf("Finish: %v", err)
	}
	if !slices.Equal(claims.Groups, []string{"support"}) {
		t.Errorf("groups = %q, want [support]", claims.Groups)
	}
}

func TestWrongNonce(t *testing.T) {
	op, p := setup(t, oidcop.Options{})
	c := oidc.NewClient(nil)
	f := authorize(t, op, c, p, alice.Subject)
	f.nonce = oidc.NewNonce() // the session's nonce is not the one in the token
	_, err := finish(c, p, f)
	if !errors.Is(err, oidc.ErrIDToken) {
		t.Fatalf("err = %v, want ErrIDToken", err)
	}
	assertClean(t, err, p, f)
}

func TestWrongVerifier(t *testing.T) {
	op, p := setup(t, oidcop.Options{})
	c := oidc.NewClient(nil)
	f := authorize(t, op, c, p, alice.Subject)
	f.verifier = oidc.NewVerifier()
	_, err := finish(c, p, f)
	if !errors.Is(err, oidc.ErrExchange) {
		t.Fatalf("err = %v, want ErrExchange", err)
	}
	if !strings.Contains(err.Error(), "invalid_grant") {
		t.Errorf("err = %v, want the provider's error code in it", err)
	}
	assertClean(t, err, p, f)
}

func TestCodeWorksOnce(t *testing.T) {
	op, p := setup(t, oidcop.Options{})
	c := oidc.NewClient(nil)
	f := authorize(t, op, c, p, alice.Subject)
	if _, err := finish(c, p, f); err != nil {
		t.Fatalf("first Finish: %v", err)
	}
	_, err := finish(c, p, f)
	if !errors.Is(err, oidc.ErrExchange) {
		t.Fatalf("second Finish: err = %v, want ErrExchange", err)
	}
	assertClean(t, err, p, f)
}

func TestWrongClientSecret(t *testing.T) {
	op, p := setup(t, oidcop.Options{})
	c := oidc.NewClient(nil)
	f := authorize(t, op, c, p, alice.Subject)
	p.ClientSecret = "not-the-secret-at-all"
	_, err := finish(c, p, f)
	if !errors.Is(err, oidc.ErrExchange) {
		t.Fatalf("err = %v, want ErrExchange", err)
	}
	assertClean(t, err, p, f)
}

func TestAudience(t *testing.T) {
	t.Run("token for another client", func(t *testing.T) {
		op, p := setup(t, oidcop.Options{})
		c := oidc.NewClient(nil)
		op.SetIDTokenAudience("another-app")
		f := authorize(t, op, c, p, alice.Subject)
		_, err := finish(c, p, f)
		if !errors.Is(err, oidc.ErrIDToken) {
			t.Fatalf("err = %v, want ErrIDToken", err)
		}
		assertClean(t, err, p, f)
	})
	t.Run("several audiences, issued to another client", func(t *testing.T) {
		// Names us as an audience, but azp says it was issued to an-api.
		op, p := setup(t, oidcop.Options{})
		c := oidc.NewClient(nil)
		op.SetIDTokenAudience("an-api", p.ClientID)
		f := authorize(t, op, c, p, alice.Subject)
		_, err := finish(c, p, f)
		if !errors.Is(err, oidc.ErrIDToken) {
			t.Fatalf("err = %v, want ErrIDToken", err)
		}
	})
	t.Run("several audiences, issued to us", func(t *testing.T) {
		// Core §3.1.3.7 allows extra audiences when azp names the client.
		op, p := setup(t, oidcop.Options{})
		c := oidc.NewClient(nil)
		op.SetIDTokenAudience(p.ClientID, "an-api")
		if _, err := finish(c, p, authorize(t, op, c, p, alice.Subject)); err != nil {
			t.Fatalf("Finish: %v", err)
		}
	})
}

func TestMissingGroupsClaim(t *testing.T) {
	for _, tc := range []struct {
		name        string
		opts        oidcop.Options
		groupsClaim string // configured in CodeLotse
		wantClaim   string
	}{
		{name: "provider sends none", opts: oidcop.Options{OmitGroups: true}, wantClaim: "groups"},
		{name: "provider sends none, not even at userinfo", opts: oidcop.Options{OmitGroups: true, ClaimsOnlyAtUserinfo: true}, wantClaim: "groups"},
		{name: "provider sends another claim", opts: oidcop.Options{}, groupsClaim: "roles", wantClaim: "roles"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op, p := setup(t, tc.opts)
			p.GroupsClaim = tc.groupsClaim
			c := oidc.NewClient(nil)
			_, err := finish(c, p, authorize(t, op, c, p, alice.Subject))
			if !errors.Is(err, oidc.ErrNoGroupsClaim) {
				t.Fatalf("err = %v, want ErrNoGroupsClaim", err)
			}
			var gce *oidc.GroupsClaimError
			if !errors.As(err, &gce) || gce.Claim != tc.wantClaim {
				t.Fatalf("err = %#v, want a GroupsClaimError naming %q", err, tc.wantClaim)
			}
			if !strings.Contains(err.Error(), `"`+tc.wantClaim+`"`) {
				t.Errorf("message %q does not name the claim", err)
			}
		})
	}
}

func TestCustomGroupsClaim(t *testing.T) {
	op, p := setup(t, oidcop.Options{GroupsClaim: "roles"})
	p.GroupsClaim = "roles"
	c := oidc.NewClient(nil)
	claims, err := finish(c, p, authorize(t, op, c, p, alice.Subject))
	if err != nil {
		t.Fatalf("Finish: %v", err)
	}
	if !slices.Equal(claims.Groups, alice.Groups) {
		t.Errorf("groups = %q, want %q", claims.Groups, alice.Groups)
	}

	// Renamed at the provider and not in CodeLotse: the next sign-in says so.
	op.SetGroupsClaim("teams")
	_, err = finish(c, p, authorize(t, op, c, p, alice.Subject))
	var gce *oidc.GroupsClaimError
	if !errors.As(err, &gce) || gce.Claim != "roles" {
		t.Fatalf("after renaming at the provider: err = %v, want the claim \"roles\" missing", err)
	}
}

func TestGroupsShapes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		value   any
		want    []string
		wantErr error
	}{
		{name: "single string", value: "admins", want: []string{"admins"}},
		{name: "empty array", value: []string{}, want: []string{}},
		{name: "null", value: json0{}, want: []string{}},
		{name: "number", value: 42, wantErr: oidc.ErrInvalidGroupsClaim},
		{name: "array of numbers", value: []int{1, 2}, wantErr: oidc.ErrInvalidGroupsClaim},
		{name: "object", value: map[string]string{"a": "b"}, wantErr: oidc.ErrInvalidGroupsClaim},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op, p := setup(t, oidcop.Options{})
			op.SetUserGroupsValue(alice.Subject, tc.value)
			c := oidc.NewClient(nil)
			claims, err := finish(c, p, authorize(t, op, c, p, alice.Subject))
			if tc.wantErr != nil {
				var gce *oidc.GroupsClaimError
				if !errors.Is(err, tc.wantErr) || !errors.As(err, &gce) || gce.Claim != "groups" {
					t.Fatalf("err = %v, want %v naming \"groups\"", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Finish: %v", err)
			}
			if claims.Groups == nil || !slices.Equal(claims.Groups, tc.want) {
				t.Errorf("groups = %#v, want %#v", claims.Groups, tc.want)
			}
		})
	}
}

// json0 marshals as JSON null. A nil interface would mean "use Groups".
type json0 struct{}

func (json0) MarshalJSON() ([]byte, error) { return []byte("null"), nil }

func TestClaimsOnlyAtUserinfo(t *testing.T) {
	op, p := setup(t, oidcop.Options{ClaimsOnlyAtUserinfo: true})
	c := oidc.NewClient(nil)
	claims, err := finish(c, p, authorize(t, op, c, p, alice.Subject))
	if err != nil {
		t.Fatalf("Finish: %v", err)
	}
	want := oidc.Claims{Subject: alice.Subject, Email: alice.Email, Name: alice.Name, EmailVerified: true, Groups: alice.Groups}
	if !equalClaims(claims, want) {
		t.Errorf("claims = %+v, want %+v", claims, want)
	}
	if n := op.Requests(oidcop.UserinfoPath); n != 1 {
		t.Errorf("userinfo requests = %d, want 1", n)
	}

	// With everything in the ID token, userinfo is not asked.
	op.ClaimsOnlyAtUserinfo(false)
	if _, err := finish(c, p, authorize(t, op, c, p, alice.Subject)); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	if n := op.Requests(oidcop.UserinfoPath); n != 1 {
		t.Errorf("userinfo requests = %d after a sign-in with a complete ID token, want still 1", n)
	}
}

func TestDiscoveryAndKeysCached(t *testing.T) {
	op, p := setup(t, oidcop.Options{})
	c := oidc.NewClient(nil)
	for i := 0; i < 3; i++ {
		if _, err := finish(c, p, authorize(t, op, c, p, alice.Subject)); err != nil {
			t.Fatalf("sign-in %d: %v", i, err)
		}
	}
	// Other tenants with the same issuer share the cache.
	other := p
	other.ClientID = "another-tenants-client"
	if _, err := c.AuthURL(context.Background(), other, oidc.NewState(), oidc.NewNonce(), oidc.NewVerifier()); err != nil {
		t.Fatal(err)
	}
	if n := op.Requests(oidcop.DiscoveryPath); n != 1 {
		t.Errorf("discovery requests = %d, want 1", n)
	}
	if n := op.Requests(oidcop.KeysPath); n != 1 {
		t.Errorf("key set requests = %d, want 1", n)
	}
	if n := op.Requests(oidcop.TokenPath); n != 3 {
		t.Errorf("token requests = %d, want 3", n)
	}
}

func TestConcurrentFirstSignInsDiscoverOnce(t *testing.T) {
	op, p := setup(t, oidcop.Options{})
	c := oidc.NewClient(nil)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			_, err := c.AuthURL(context.Background(), p, oidc.NewState(), oidc.NewNonce(), oidc.NewVerifier())
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := op.Requests(oidcop.DiscoveryPath); n != 1 {
		t.Errorf("discovery requests = %d, want 1", n)
	}
}

func TestProviderUnreachable(t *testing.T) {
	_, p := setup(t, oidcop.Options{})
	p.Issuer = "http://127.0.0.1:9" // discard port: nothing answers
	_, err := oidc.NewClient(nil).AuthURL(context.Background(), p, oidc.NewState(), oidc.NewNonce(), oidc.NewVerifier())
	if !errors.Is(err, oidc.ErrProvider) {
		t.Fatalf("err = %v, want ErrProvider", err)
	}
}

// TestLoginPage signs in the way a browser test that does not call SignInAs
// would: the provider shows one button per user, and the button returns to
// the app with code and state.
func TestLoginPage(t *testing.T) {
	op, p := setup(t, oidcop.Options{})
	op.AddUser(oidcop.User{Subject: "bob-sub", Email: "bob@example.com", Name: "Bob", Groups: []string{"ops"}})
	c := oidc.NewClient(nil)
	f := flow{state: oidc.NewState(), nonce: oidc.NewNonce(), verifier: oidc.NewVerifier()}
	authURL, err := c.AuthURL(context.Background(), p, f.state, f.nonce, f.verifier)
	if err != nil {
		t.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), redirectURL) {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	resp, err := browser.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`name="id" value="([^"]+)"`).FindSubmatch(page)
	if resp.StatusCode != http.StatusOK || m == nil || !strings.Contains(string(page), `id="signin-bob-sub"`) {
		t.Fatalf("login page: %s\n%s", resp.Status, page)
	}
	resp, err = browser.PostForm(op.Issuer()+"/login", url.Values{"id": {string(m[1])}, "subject": {"bob-sub"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	f.code = callbackCode(t, resp, f.state)
	claims, err := finish(c, p, f)
	if err != nil {
		t.Fatalf("Finish: %v", err)
	}
	if claims.Subject != "bob-sub" || !slices.Equal(claims.Groups, []string{"ops"}) || claims.EmailVerified {
		t.Errorf("claims = %+v, want bob, [ops], email not verified", claims)
	}
}

// TestRedirectURIMustBeRegistered: the provider refuses a callback it does
// not know, as a real one does, so a test with the wrong PUBLIC_URL fails
// at the provider rather than somewhere later.
func TestRedirectURIMustBeRegistered(t *testing.T) {
	op, p := setup(t, oidcop.Options{})
	p.RedirectURL = "http://127.0.0.1:9/elsewhere"
	authURL, err := oidc.NewClient(nil).AuthURL(context.Background(), p, oidc.NewState(), oidc.NewNonce(), oidc.NewVerifier())
	if err != nil {
		t.Fatal(err)
	}
	op.SignInAs(alice.Subject)
	resp, err := noRedirects.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusFound && strings.HasPrefix(resp.Header.Get("Location"), p.RedirectURL) {
		t.Fatalf("provider redirected to an unregistered redirect URI: %s", resp.Header.Get("Location"))
	}

	op.AddRedirectURI(p.RedirectURL)
	c := oidc.NewClient(nil)
	f := flow{state: oidc.NewState(), nonce: oidc.NewNonce(), verifier: oidc.NewVerifier()}
	authURL, err = c.AuthURL(context.Background(), p, f.state, f.nonce, f.verifier)
	if err != nil {
		t.Fatal(err)
	}
	op.SignInAs(alice.Subject)
	resp, err = noRedirects.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, p.RedirectURL+"?") {
		t.Fatalf("after AddRedirectURI: %s to %q, want a redirect to %s", resp.Status, loc, p.RedirectURL)
	}
}
