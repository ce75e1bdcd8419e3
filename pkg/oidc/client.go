package oidc

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/codelotse/codelotse/pkg/safehttp"
)

// DefaultGroupsClaim and DefaultScopes apply when a Provider leaves
// GroupsClaim or Scopes empty; they match what `cltctl idp add` stores.
const DefaultGroupsClaim = "groups"

// DefaultScopes returns the scopes requested when a Provider has none.
// "groups" is not a standard scope, but several providers (Dex, Keycloak
// with a client scope, Authentik) only send the claim when it is asked for,
// and the others ignore unknown scopes.
func DefaultScopes() []string { return []string{"openid", "email", "profile", "groups"} }

// DiscoveryTTL is how long an issuer's discovery document is used before it
// is fetched again. Signing keys are not bound to it: go-oidc's remote key set
// fetches them again as soon as a token names a key it does not know, which
// is how providers rotate keys.
const DiscoveryTTL = time.Hour

// DefaultTimeout bounds each request to a provider when NewClient is given
// no http.Client, so a provider that hangs fails the sign-in instead of
// holding the request.
const DefaultTimeout = 10 * time.Second

// Provider is a tenant's identity provider as configured by its
// administrator, plus the callback URL of this deployment.
type Provider struct {
	// Issuer is the provider's issuer identifier, exactly as its discovery
	// document states it (go-oidc refuses a mismatch, trailing slash
	// included). It must be https, or http on a loopback address for
	// development and tests.
	Issuer       string
	ClientID     string
	ClientSecret string
	// GroupsClaim names the claim that carries the user's groups; empty
	// means DefaultGroupsClaim. A name that is not a top-level claim is
	// looked up as a dotted path into nested objects ("realm_access.roles").
	GroupsClaim string
	// Scopes to request; empty means DefaultScopes. "openid" is added if
	// missing, since without it there is no ID token.
	Scopes []string
	// RedirectURL is <PUBLIC_URL>/auth/oidc/callback, registered with the
	// provider. It must be the same in AuthURL and Finish.
	RedirectURL string
}

func (p Provider) groupsClaim() string {
	if p.GroupsClaim == "" {
		return DefaultGroupsClaim
	}
	return p.GroupsClaim
}

func (p Provider) scopes() []string {
	if len(p.Scopes) == 0 {
		return DefaultScopes()
	}
	if slices.Contains(p.Scopes, gooidc.ScopeOpenID) {
		return slices.Clone(p.Scopes)
	}
	return append([]string{gooidc.ScopeOpenID}, p.Scopes...)
}

// validate refuses settings that would fail later in a less legible way, or
// that would send the user's code and our client secret in clear text:
// plain http only where httpOK says so for the issuer's host.
func (p Provider) validate(httpOK func(host string) bool) error {
	switch {
	case p.Issuer == "":
		return fail(ErrConfig, "the provider has no issuer")
	case p.ClientID == "":
		return fail(ErrConfig, "the provider has no client id")
	case p.RedirectURL == "":
		return fail(ErrConfig, "no redirect URL")
	}
	u, err := url.Parse(p.Issuer)
	if err != nil || u.Host == "" {
		return fail(ErrConfig, "the issuer "+p.Issuer+" is not an absolute URL")
	}
	if u.Scheme != "https" && !(u.Scheme == "http" && httpOK(u.Hostname())) {
		return fail(ErrConfig, "the issuer "+p.Issuer+" must use https (plain http is allowed only in development, when the server allows it)")
	}
	return nil
}

// CheckIssuer is the rule for an issuer an admin or operator saves: an
// absolute https URL (plain http only on a loopback host, for a development
// provider), without user name, password, query or fragment, which no
// issuer has (OpenID Connect Discovery 1.0 §3) and which discovery at
// ISSUER/.well-known/openid-configuration would mangle.
func CheckIssuer(issuer string) error {
	u, err := url.Parse(issuer)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		return errors.New("the issuer must be an absolute https URL such as https://login.example.com")
	case u.Scheme == "http" && !isLoopback(u.Hostname()):
		return errors.New("the issuer must use https (plain http only on this machine's loopback)")
	case u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(issuer, "#"):
		return errors.New("the issuer must not have a user name, password, query or fragment")
	case strings.ContainsFunc(issuer, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return errors.New("the issuer must not contain spaces or control characters")
	}
	return nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Client signs users in with any number of providers. It is safe for
// concurrent use; one per process is enough, so that the discovery cache is
// shared by every tenant with the same issuer.
type Client struct {
	http *http.Client
	ttl  time.Duration
	now  func() time.Time
	// httpOK says whether a plain-http issuer on host is acceptable.
	httpOK func(host string) bool

	mu      sync.Mutex
	issuers map[string]*issuerEntry
}

// issuerEntry caches one issuer's discovery. lock is a one-slot semaphore
// rather than a mutex so that a caller waiting for another's fetch still
// honours its own context.
type issuerEntry struct {
	lock    chan struct{}
	found   *discovered
	fetched time.Time
}

// discovered is what a sign-in needs from an issuer's discovery document.
// provider carries go-oidc's remote key set, so keeping it keeps the keys.
type discovered struct {
	provider  *gooidc.Provider
	authStyle oauth2.AuthStyle
}

// Options configures the production client of New.
type Options struct {
	// AllowPrivate lists address ranges a provider may resolve to although
	// safehttp refuses them (a local provider in development and tests).
	// Empty in production.
	AllowPrivate []netip.Prefix
	// AllowHTTP permits plain-http issuers (development only).
	AllowHTTP bool
}

// New returns the client the service uses: every request to a provider
// (discovery, signing keys, token exchange, userinfo) goes through
// pkg/safehttp, so an issuer typed by a tenant admin can never make the
// service connect to its loopback, its private network, link-local or
// metadata addresses, and plain http is refused unless o allows it.
func New(o Options) *Client {
	c := NewClient(safehttp.NewClient(safehttp.Options{Allow: o.AllowPrivate, AllowHTTP: o.AllowHTTP, Timeout: DefaultTimeout}))
	c.httpOK = func(string) bool { return o.AllowHTTP }
	return c
}

// NewClient returns a Client that talks to providers with httpClient, or
// with an http.Client limited to DefaultTimeout when httpClient is nil. It
// trusts the transport it is given and accepts plain http on loopback only:
// it is for tests and tools that run their own provider; the service uses
// New.
func NewClient(httpClient *http.Client) *Client {
	if httpClient == nil {
		httpClient = &http.Client{Timeout: DefaultTimeout}
	}
	return &Client{http: httpClient, ttl: DiscoveryTTL, now: time.Now, issuers: map[string]*issuerEntry{}, httpOK: isLoopback}
}

// AuthURL starts a sign-in: it discovers the provider (cached) and returns
// the authorization URL to redirect the browser to, carrying state, nonce
// and the PKCE S256 challenge of verifier. The caller keeps all three in
// its session for Finish.
func (c *Client) AuthURL(ctx context.Context, p Provider, state, nonce, verifier string) (string, error) {
	if err := p.validate(c.httpOK); err != nil {
		return "", err
	}
	if state == "" || nonce == "" {
		return "", fail(ErrConfig, "state and nonce must not be empty")
	}
	if err := checkVerifier(verifier); err != nil {
		return "", err
	}
	d, err := c.discover(ctx, p.Issuer)
	if err != nil {
		return "", err
	}
	return d.config(p).AuthCodeURL(state, gooidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier)), nil
}

// checkVerifier enforces RFC 7636's verifier syntax here, because a provider
// that receives a bad one answers only at the token endpoint, after the user
// has already signed in.
func checkVerifier(v string) error {
	if len(v) < 43 || len(v) > 128 {
		return fail(ErrConfig, "the PKCE verifier must be 43 to 128 characters (use NewVerifier)")
	}
	for _, r := range v {
		if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune("-._~", r)) {
			return fail(ErrConfig, "the PKCE verifier has a character outside RFC 7636's set (use NewVerifier)")
		}
	}
	return nil
}

func (d *discovered) config(p Provider) *oauth2.Config {
	ep := d.provider.Endpoint()
	ep.AuthStyle = d.authStyle
	return &oauth2.Config{
		ClientID:     p.ClientID,
		ClientSecret: p.ClientSecret,
		Endpoint:     ep,
		RedirectURL:  p.RedirectURL,
		Scopes:       p.scopes(),
	}
}

// discover returns the issuer's cached discovery, fetching it when it is
// missing or older than the TTL. Concurrent callers for one issuer wait for a
// single fetch. When a refresh fails the previous document is kept: endpoints
// rarely move, and a provider's brief outage of its discovery endpoint should
// not stop sign-ins that would otherwise work.
func (c *Client) discover(ctx context.Context, issuer string) (*discovered, error) {
	c.mu.Lock()
	e := c.issuers[issuer]
	if e == nil {
		e = &issuerEntry{lock: make(chan struct{}, 1)}
		c.issuers[issuer] = e
	}
	c.mu.Unlock()

	select {
	case e.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, fail(ErrProvider, "discovery of "+issuer+": "+ctx.Err().Error())
	}
	defer func() { <-e.lock }()

	if e.found != nil && c.now().Sub(e.fetched) < c.ttl {
		return e.found, nil
	}
	d, err := c.fetchDiscovery(ctx, issuer)
	if err != nil {
		if e.found != nil {
			return e.found, nil
		}
		return nil, err
	}
	e.found, e.fetched = d, c.now()
	return d, nil
}

func (c *Client) fetchDiscovery(ctx context.Context, issuer string) (*discovered, error) {
	// The HTTP client travels in the context: go-oidc keeps it for the
	// provider's key set, and oauth2 reads it from the same key.
	provider, err := gooidc.NewProvider(gooidc.ClientContext(ctx, c.http), issuer)
	if safehttp.IsForbidden(err) {
		return nil, fail(ErrProvider, "discovery of "+issuer+": the issuer resolves to an address this server does not connect to (loopback, private, link-local or metadata)")
	}
	if err != nil {
		return nil, fail(ErrProvider, "discovery of "+issuer+": "+err.Error())
	}
	var meta struct {
		AuthMethods []string `json:"token_endpoint_auth_methods_supported"`
	}
	if err := provider.Claims(&meta); err != nil {
		return nil, fail(ErrProvider, "discovery of "+issuer+": "+err.Error())
	}
	ep := provider.Endpoint()
	if ep.AuthURL == "" || ep.TokenURL == "" {
		return nil, fail(ErrProvider, "discovery of "+issuer+" names no authorization or token endpoint")
	}
	return &discovered{provider: provider, authStyle: authStyle(meta.AuthMethods)}, nil
}

// authStyle picks how the client secret is sent from what the provider
// advertises. Leaving it to oauth2's auto-detection would, on any refused
// exchange, send the same code a second time with the other style; a
// provider that treats a code as used after one attempt then reports the
// wrong cause.
func authStyle(methods []string) oauth2.AuthStyle {
	switch {
	// Discovery 1.0 §3: when absent, the default is client_secret_basic.
	case len(methods) == 0, slices.Contains(methods, "client_secret_basic"):
		return oauth2.AuthStyleInHeader
	case slices.Contains(methods, "client_secret_post"):
		return oauth2.AuthStyleInParams
	default:
		return oauth2.AuthStyleAutoDetect
	}
}
