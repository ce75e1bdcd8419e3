// Package githubapp is CodeLotse's GitHub App, in its two roles
// (ARCHITECTURE §5, §7, §8):
//
// Sign-in (Client, SignIn): people sign in to the web interface with the
// GitHub App user-authorization flow (OAuth 2.0 with PKCE), and CodeLotse
// reads, once per sign-in, what it caches about them: their identity, the
// installations of the app they can reach, the repositories they can see
// through each, and their role in each installation's account. It speaks
// GitHub's OAuth endpoints through golang.org/x/oauth2 (GitHub has no
// OpenID Connect for this flow). The user access token lives only inside
// one SignIn call: it is never stored, returned, logged or put into an
// error. Callers tell failures apart with errors.Is(err, ErrSignInRejected)
// (start again, or fix the app settings) and errors.Is(err, ErrRateLimited).
//
// Sync (App, InstallationClient): the worker reads, as each installation,
// the repositories, pull requests, reviews, review comments, code-scanning
// alerts and code (tarballs, for codeindex.ReadTarball) of the tenant bound
// to it. The App signs RS256 JWTs with its private key, exchanges them for
// installation tokens, and caches those per installation for every client
// of the App. Only GETs are retried, at most five attempts and a minute of
// waiting per call and never past the context's deadline: 5xx answers and
// connection errors with exponential backoff and jitter, rate limits after
// GitHub's own Retry-After or X-RateLimit-Reset; a rate limit
// that cannot be waited out is returned as a *RateLimitError (matching
// ErrRateLimited) so the job can be snoozed until RetryAt. Listings follow
// every Link page up to a bound and fail past it rather than return a
// partial list. ErrNotInstalled and ErrAppRejected mark what needs an
// operator; codelotse error codes say the rest (NotFound: the repository or
// pull request is gone; Forbidden: a permission is missing; Unavailable:
// try again later; Invalid: the arguments).
//
// Both read the REST API through the types and error classification of
// github.com/google/go-github, pointed at GitHub.com, GitHub Enterprise
// Server or a test server (see the githubtest package), with the API URL
// used exactly as configured.
//
// Credentials never leave the API host: tokens are added by a transport
// that matches the API's scheme, host and port exactly, so a redirect to
// another host (codeload, a renamed repository's new home) carries none,
// and archive downloads are fetched without any. The package logs nothing
// at all, and no error text carries a token, a JWT, an authorization code,
// a PKCE verifier, the client secret, the private key, or a download URL
// (whose query is a token); errors carry a codelotse.Error code and a
// message for the person or operator who reads it.
package githubapp

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	"golang.org/x/oauth2"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// Defaults for GitHub.com. GitHub Enterprise Server uses https://HOST/ for
// the web and https://HOST/api/v3/ for the API.
const (
	DefaultAPIURL = "https://api.github.com/"
	DefaultWebURL = "https://github.com/"
)

// defaultMaxPages bounds every paginated listing. At 100 items a page it
// allows 10,000 installations or repositories per installation, far beyond
// a real user; a listing that goes further is more likely a misbehaving
// server than a real account, and stopping with an error is better than
// caching a silently truncated set of memberships.
const defaultMaxPages = 100

// perPage is GitHub's maximum page size; larger pages mean fewer requests
// and less exposure to secondary rate limits.
const perPage = 100

// defaultHTTPTimeout keeps a sign-in from hanging on a stalled GitHub when
// the caller's context has no deadline.
const defaultHTTPTimeout = 30 * time.Second

// Config configures a Client. Only apps/ reads the environment; it fills
// this struct from GITHUB_CLIENT_ID, GITHUB_CLIENT_SECRET, GITHUB_API_URL,
// GITHUB_WEB_URL and PUBLIC_URL.
type Config struct {
	// ClientID and ClientSecret are the GitHub App's OAuth credentials.
	ClientID, ClientSecret string
	// APIURL is the REST API root (GITHUB_API_URL): https://api.github.com/
	// by default, https://HOST/api/v3/ for GitHub Enterprise Server. It is
	// used as given, so a test server may serve the API at its root.
	APIURL string
	// WebURL is the web root (GITHUB_WEB_URL), https://github.com/ by
	// default; the OAuth endpoints live under WebURL/login/oauth/.
	WebURL string
	// RedirectURL is <PUBLIC_URL>/auth/github/callback and must match the
	// callback URL registered for the app.
	RedirectURL string
	// HTTPClient is used for every request to GitHub; nil means a client
	// with a 30 second timeout.
	HTTPClient *http.Client
}

// Client signs people in with one GitHub App. It holds no per-user state
// and is safe for concurrent use.
type Client struct {
	oauth    oauth2.Config
	apiURL   *url.URL
	webURL   *url.URL
	http     *http.Client
	maxPages int
}

// New validates cfg and returns a Client.
func New(cfg Config) (*Client, error) {
	if cfg.ClientID == "" {
		return nil, codelotse.Errorf(codelotse.Invalid, "GitHub sign-in needs the app's client ID")
	}
	if cfg.ClientSecret == "" {
		return nil, codelotse.Errorf(codelotse.Invalid, "GitHub sign-in needs the app's client secret")
	}
	if cfg.APIURL == "" {
		cfg.APIURL = DefaultAPIURL
	}
	if cfg.WebURL == "" {
		cfg.WebURL = DefaultWebURL
	}
	apiURL, err := baseURL("GitHub API URL", cfg.APIURL)
	if err != nil {
		return nil, err
	}
	webURL, err := baseURL("GitHub web URL", cfg.WebURL)
	if err != nil {
		return nil, err
	}
	if cfg.RedirectURL == "" {
		return nil, codelotse.Errorf(codelotse.Invalid, "GitHub sign-in needs a redirect URL (<PUBLIC_URL>/auth/github/callback)")
	}
	if _, err := absoluteURL("GitHub redirect URL", cfg.RedirectURL); err != nil {
		return nil, err
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: defaultHTTPTimeout}
	}
	return &Client{
		oauth: oauth2.Config{
			ClientID:     cfg.ClientID,
			ClientSecret: cfg.ClientSecret,
			RedirectURL:  cfg.RedirectURL,
			Endpoint: oauth2.Endpoint{
				AuthURL:  webURL.JoinPath("login/oauth/authorize").String(),
				TokenURL: webURL.JoinPath("login/oauth/access_token").String(),
				// GitHub documents the credentials as form parameters.
				// Naming the style avoids x/oauth2's auto-detection, which
				// retries a failed exchange a second way and so would send
				// the one-time code twice.
				AuthStyle: oauth2.AuthStyleInParams,
			},
			// A GitHub App's user token carries the app's permissions,
			// not OAuth scopes, so none are requested.
		},
		apiURL:   apiURL,
		webURL:   webURL,
		http:     hc,
		maxPages: defaultMaxPages,
	}, nil
}

// AuthCodeURL is the GitHub App user-authorization URL to send the browser
// to. state is echoed back to the callback; verifier is the PKCE code
// verifier the caller keeps (in the pending sign-in, never in the URL) and
// passes to SignIn; only its S256 challenge is sent.
func (c *Client) AuthCodeURL(state, verifier string) string {
	return c.oauth.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier))
}

// NewVerifier returns a fresh PKCE code verifier (32 random bytes,
// base64url, as RFC 7636 recommends), so callers need not import x/oauth2.
func NewVerifier() string {
	return oauth2.GenerateVerifier()
}

// baseURL parses an absolute http(s) URL without query or fragment and
// gives it a trailing slash, so relative paths resolve beneath it: the API
// paths under /api/v3/ on GitHub Enterprise Server, at the root on
// api.github.com and on a test server.
func baseURL(what, raw string) (*url.URL, error) {
	u, err := absoluteURL(what, raw)
	if err != nil {
		return nil, err
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, codelotse.Errorf(codelotse.Invalid, "%s %q must not have a query or fragment", what, raw)
	}
	if u.Path == "" || u.Path[len(u.Path)-1] != '/' {
		u.Path += "/"
		if u.RawPath != "" {
			u.RawPath += "/"
		}
	}
	return u, nil
}

func absoluteURL(what, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, codelotse.Errorf(codelotse.Invalid, "%s %q is not a URL", what, raw)
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, codelotse.Errorf(codelotse.Invalid, "%s %q must be an absolute http or https URL", what, raw)
	}
	if u.User != nil {
		// Credentials in a URL end up in logs and error messages.
		return nil, codelotse.Errorf(codelotse.Invalid, "%s must not contain credentials", what)
	}
	return u, nil
}

// String and GoString keep the client secret out of %v and %#v: a Client
// printed by accident shows only where it points.
func (c *Client) String() string {
	return fmt.Sprintf("githubapp.Client{api: %s, web: %s}", c.apiURL, c.webURL)
}

func (c *Client) GoString() string { return c.String() }
