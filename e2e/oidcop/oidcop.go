// Package oidcop is a real OpenID Provider for tests, built on
// github.com/zitadel/oidc/v3's op package with an in-memory storage: discovery,
// a JWKS with an RSA key generated at start, the authorization endpoint
// (code flow, PKCE S256 required), the token endpoint (client_secret_basic
// or client_secret_post), userinfo, introspection and revocation.
//
// A test starts one per test with Start, registers the app's callback URL
// and some users, and signs in without a login form: SignInAs makes the next
// authorization request complete for that user, so the authorization
// endpoint redirects straight back to the redirect URI with code and state.
// Without it the browser lands on a tiny "sign in as" page with one button
// per user. Knobs make the provider misbehave the way real ones do: another
// groups claim name, no groups claim, groups as a single string, claims
// only at userinfo, an ID token for another audience.
//
// It is for tests only and must never be used as a real identity provider:
// anyone who can reach it can sign in as anyone, it serves plain http on
// loopback, and it keeps everything in memory. It lives in the e2e module so
// that zitadel/oidc never enters the shipped module's dependencies.
package oidcop

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"html/template"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/zitadel/oidc/v3/pkg/op"
)

// Paths on the provider. The authorization, token, userinfo and keys paths
// are op's defaults; discovery names them, so clients need only the issuer.
const (
	DiscoveryPath = "/.well-known/openid-configuration"
	AuthorizePath = "/authorize"
	TokenPath     = "/oauth/token"
	KeysPath      = "/keys"
	UserinfoPath  = "/userinfo"
	loginPath     = "/login"
	callbackPath  = AuthorizePath + "/callback"
)

// Options configures a provider at Start. Everything except RedirectURIs and
// Users can be changed later with the Provider's methods.
type Options struct {
	// ClientID of the one registered client; default "codelotse".
	ClientID string
	// ClientSecret of that client; default a fresh random value.
	ClientSecret string
	// RedirectURIs registered for the client; exact matches only. The app's
	// is <PUBLIC_URL>/auth/oidc/callback. More can be added with
	// AddRedirectURI once the app's port is known.
	RedirectURIs []string
	// GroupsClaim is the claim that carries the user's groups; default
	// "groups".
	GroupsClaim string
	// OmitGroups leaves the groups claim out everywhere, as a provider
	// without a groups mapper does.
	OmitGroups bool
	// ClaimsOnlyAtUserinfo keeps email, name and groups out of the ID token
	// and serves them at the userinfo endpoint only.
	ClaimsOnlyAtUserinfo bool
	// Users to add at start.
	Users []User
}

// User is someone who can sign in.
type User struct {
	Subject       string
	Email         string
	EmailVerified bool
	Name          string
	// Groups go into the groups claim as a JSON array (empty when nil).
	Groups []string
	// GroupsValue, when not nil, is sent as the groups claim instead of
	// Groups, verbatim: a single string, a number, anything a client must
	// cope with or refuse.
	GroupsValue any
}

// Provider is a running OpenID Provider. Its methods are safe to call from
// the test while requests are being served.
type Provider struct {
	t      testing.TB
	server *httptest.Server
	op     *op.Provider
	store  *storage
}

// Start runs a provider on a free loopback port until the test ends.
func Start(t testing.TB, opts Options) *Provider {
	t.Helper()
	if opts.ClientID == "" {
		opts.ClientID = "codelotse"
	}
	if opts.ClientSecret == "" {
		opts.ClientSecret = randomID()
	}
	if opts.GroupsClaim == "" {
		opts.GroupsClaim = "groups"
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatalf("oidcop: generate the signing key: %v", err)
	}
	s := &storage{
		users:        map[string]*User{},
		groupsClaim:  opts.GroupsClaim,
		omitGroups:   opts.OmitGroups,
		userinfoOnly: opts.ClaimsOnlyAtUserinfo,
		authRequests: map[string]*authRequest{},
		codes:        map[string]string{},
		tokens:       map[string]*accessToken{},
		key:          key,
		kid:          randomID(),
		requests:     map[string]int{},
	}
	s.client = client{id: opts.ClientID, secret: opts.ClientSecret, redirectURIs: slices.Clone(opts.RedirectURIs), store: s}
	for _, u := range opts.Users {
		s.users[u.Subject] = cloneUser(u)
	}

	p := &Provider{t: t, store: s}
	// The issuer contains the port, so the listener comes first and the
	// handler is set before the server accepts its first request.
	p.server = httptest.NewUnstartedServer(http.HandlerFunc(p.serveHTTP))
	issuer := "http://" + p.server.Listener.Addr().String()

	var cryptoKey [32]byte
	_, _ = rand.Read(cryptoKey[:])
	p.op, err = op.NewProvider(&op.Config{
		CryptoKey:      cryptoKey, // encrypts the opaque access tokens
		CodeMethodS256: true,
		AuthMethodPost: true,
	}, s, op.StaticIssuer(issuer),
		// http is allowed only because the issuer is on loopback.
		op.WithAllowInsecure(),
	)
	if err != nil {
		p.server.Close()
		t.Fatalf("oidcop: %v", err)
	}
	p.server.Start()
	t.Cleanup(p.server.Close)
	return p
}

// Issuer is the provider's issuer, http://127.0.0.1:PORT with no trailing
// slash; discovery is at Issuer()+"/.well-known/openid-configuration".
func (p *Provider) Issuer() string { return p.server.URL }

// ClientID and ClientSecret are the registered client's credentials.
func (p *Provider) ClientID() string { return p.store.client.id }

func (p *Provider) ClientSecret() string { return p.store.client.secret }

// AddRedirectURI registers one more redirect URI for the client.
func (p *Provider) AddRedirectURI(uri string) {
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	if !slices.Contains(p.store.client.redirectURIs, uri) {
		p.store.client.redirectURIs = append(p.store.client.redirectURIs, uri)
	}
}

// AddUser adds a user, or replaces the one with the same subject.
func (p *Provider) AddUser(u User) {
	p.t.Helper()
	if u.Subject == "" {
		p.t.Fatalf("oidcop: AddUser: empty subject")
	}
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	p.store.users[u.Subject] = cloneUser(u)
}

// SignInAs makes the next authorization request complete for subject at
// once: the authorization endpoint redirects straight to the redirect URI
// with code and state, with no login page. It applies to one request.
func (p *Provider) SignInAs(subject string) {
	p.t.Helper()
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	if _, ok := p.store.users[subject]; !ok {
		p.t.Fatalf("oidcop: SignInAs(%q): no such user", subject)
	}
	p.store.signInAs = subject
}

// SetGroupsClaim renames the groups claim in tokens issued from now on.
func (p *Provider) SetGroupsClaim(name string) {
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	p.store.groupsClaim = name
}

// OmitGroups leaves the groups claim out (true) or puts it back (false).
func (p *Provider) OmitGroups(omit bool) {
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	p.store.omitGroups = omit
}

// ClaimsOnlyAtUserinfo moves email, name and groups out of the ID token to
// the userinfo endpoint (true), or back (false).
func (p *Provider) ClaimsOnlyAtUserinfo(only bool) {
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	p.store.userinfoOnly = only
}

// SetUserGroups replaces a user's groups (and clears any GroupsValue), as an
// administrator changing memberships at the provider would.
func (p *Provider) SetUserGroups(subject string, groups []string) {
	p.t.Helper()
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	u, ok := p.store.users[subject]
	if !ok {
		p.t.Fatalf("oidcop: SetUserGroups(%q): no such user", subject)
	}
	u.Groups, u.GroupsValue = slices.Clone(groups), nil
}

// SetUserGroupsValue sends v verbatim as the user's groups claim.
func (p *Provider) SetUserGroupsValue(subject string, v any) {
	p.t.Helper()
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	u, ok := p.store.users[subject]
	if !ok {
		p.t.Fatalf("oidcop: SetUserGroupsValue(%q): no such user", subject)
	}
	u.GroupsValue = v
}

// SetIDTokenAudience makes the token endpoint answer from now on with an
// ID token whose aud claim is exactly aud and whose azp is aud[0], signed
// with the provider's key and otherwise as issued (issuer, subject, nonce,
// expiry): a genuine token minted for another application, as an attacker
// who holds one would substitute it. No arguments restores normal tokens.
func (p *Provider) SetIDTokenAudience(aud ...string) {
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	p.store.audience = slices.Clone(aud)
}

// Requests reports how many requests were made to path (for example
// DiscoveryPath), so a test can check a client's caching.
func (p *Provider) Requests(path string) int {
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	return p.store.requests[path]
}

func cloneUser(u User) *User {
	u.Groups = slices.Clone(u.Groups)
	return &u
}

func (p *Provider) serveHTTP(w http.ResponseWriter, r *http.Request) {
	p.store.mu.Lock()
	p.store.requests[r.URL.Path]++
	p.store.mu.Unlock()

	switch r.URL.Path {
	case loginPath:
		p.login(w, r)
	case AuthorizePath:
		p.authorize(w, r)
	case TokenPath:
		p.token(w, r)
	default:
		p.op.ServeHTTP(w, r)
	}
}

// authorize lets op handle the request and, when op answers with a redirect
// to its own callback (a request SignInAs completed), follows that redirect
// on the server, so the browser goes straight back to the client.
func (p *Provider) authorize(w http.ResponseWriter, r *http.Request) {
	rec := httptest.NewRecorder()
	p.op.ServeHTTP(rec, r)
	loc, err := url.Parse(rec.Header().Get("Location"))
	if rec.Code == http.StatusFound && err == nil && loc.Path == callbackPath {
		next := r.Clone(r.Context())
		next.Method = http.MethodGet
		next.URL = &url.URL{Path: callbackPath, RawQuery: loc.RawQuery}
		next.RequestURI = next.URL.RequestURI()
		next.Body, next.ContentLength, next.Form, next.PostForm = http.NoBody, 0, nil, nil
		next.Header.Del("Content-Type")
		p.op.ServeHTTP(w, next)
		return
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = io.Copy(w, rec.Body)
}

// token lets op answer the token request and, when SetIDTokenAudience is
// in force, swaps the ID token for one with that audience.
func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	p.store.mu.Lock()
	aud := slices.Clone(p.store.audience)
	p.store.mu.Unlock()
	if len(aud) == 0 {
		p.op.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	p.op.ServeHTTP(rec, r)
	body := rec.Body.Bytes()
	if rec.Code == http.StatusOK {
		var err error
		if body, err = p.reissue(body, aud); err != nil {
			http.Error(w, "oidcop: re-issuing the ID token: "+err.Error(), http.StatusInternalServerError)
			return
		}
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.Header().Del("Content-Length")
	w.WriteHeader(rec.Code)
	_, _ = w.Write(body)
}

// reissue replaces the id_token in a token response with one for aud.
func (p *Provider) reissue(body []byte, aud []string) ([]byte, error) {
	var resp map[string]any
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, err
	}
	raw, _ := resp["id_token"].(string)
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return nil, errors.New("no compact JWS id_token in the response")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, err
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		return nil, err
	}
	claims["aud"], claims["azp"] = aud, aud[0]
	if payload, err = json.Marshal(claims); err != nil {
		return nil, err
	}
	signer, err := op.SignerFromKey(signingKey{key: p.store.key, kid: p.store.kid})
	if err != nil {
		return nil, err
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		return nil, err
	}
	if resp["id_token"], err = jws.CompactSerialize(); err != nil {
		return nil, err
	}
	return json.Marshal(resp)
}

var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>Test provider: sign in</title></head>
<body><h1>Sign in as</h1>
<form method="post" action="/login"><input type="hidden" name="id" value="{{.ID}}">
{{range .Users}}<p><button type="submit" name="subject" value="{{.Subject}}" id="signin-{{.Subject}}">{{.Name}} &lt;{{.Email}}&gt;</button></p>
{{else}}<p>No users: call AddUser.</p>{{end}}
</form></body></html>`))

// login is the "sign in as" page, for tests that click through instead of
// calling SignInAs: GET shows one button per user, POST completes the
// authorization request and returns to op's callback.
func (p *Provider) login(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	id := r.Form.Get("id")
	if r.Method == http.MethodPost {
		if err := p.store.completeAuthRequest(id, r.PostForm.Get("subject")); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		http.Redirect(w, r, callbackPath+"?id="+url.QueryEscape(id), http.StatusFound)
		return
	}
	p.store.mu.Lock()
	users := make([]User, 0, len(p.store.users))
	for _, u := range p.store.users {
		users = append(users, *u)
	}
	p.store.mu.Unlock()
	slices.SortFunc(users, func(a, b User) int { return strings.Compare(a.Subject, b.Subject) })
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = loginPage.Execute(w, struct {
		ID    string
		Users []User
	}{id, users})
}
