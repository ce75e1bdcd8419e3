package githubapp

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// ErrAppRejected is matched (errors.Is) when GitHub answered 401 to the
// app's JSON Web Token, or to an installation token it had just issued:
// the app ID or the private key is wrong, or the clock is off by minutes.
// Retrying will not help until an operator fixes the configuration.
var ErrAppRejected = errors.New("GitHub rejected the GitHub App's credentials")

// ErrNotInstalled is matched (errors.Is) when the installation no longer
// exists (404) or is suspended (403): the account removed or suspended the
// app, and the tenant's sync cannot run until it is installed again.
var ErrNotInstalled = errors.New("the GitHub App is not installed")

// Installation tokens and app JWTs, as GitHub documents them.
const (
	// jwtBackdate is how far in the past a JWT's iat is put, so that a
	// GitHub clock slightly behind ours still accepts it.
	jwtBackdate = 60 * time.Second
	// jwtLifetime is exp - iat. GitHub refuses an exp more than ten
	// minutes ahead of its clock.
	jwtLifetime = 10 * time.Minute
	// tokenRefreshMargin: a cached installation token is replaced this
	// long before it expires (they live an hour), so a request never
	// starts with a token that expires while a long listing is paged.
	tokenRefreshMargin = 5 * time.Minute
	// minKeyBits: GitHub issues 2048-bit keys; anything smaller is not
	// GitHub's and not safe.
	minKeyBits = 2048
)

// AppConfig configures an App. Only apps/ reads the environment; it fills
// this struct from GITHUB_APP_ID, GITHUB_APP_PRIVATE_KEY_FILE (the file's
// contents) and GITHUB_API_URL.
type AppConfig struct {
	// AppID is the GitHub App's numeric ID.
	AppID int64
	// PrivateKeyPEM is the app's private key as GitHub hands it out: an RSA
	// key in PEM, PKCS#1 ("RSA PRIVATE KEY") or PKCS#8 ("PRIVATE KEY").
	PrivateKeyPEM []byte
	// APIURL is the REST API root: https://api.github.com/ by default,
	// https://HOST/api/v3/ for GitHub Enterprise Server, or a test
	// server's root. It is used as given.
	APIURL string
	// HTTPClient sends every request; nil means http.DefaultTransport. Its
	// Timeout, if any, applies to API requests (which the App bounds
	// itself anyway) but not to archive downloads, which may rightly take
	// longer than any per-request timeout and are bounded by the context,
	// a stall timeout and a size limit instead.
	HTTPClient *http.Client
}

// App is a GitHub App acting as itself (with a JWT signed by its private
// key) and as its installations (with installation tokens). It is safe for
// concurrent use; one App should serve the whole process, so that every
// InstallationClient shares its token cache and its knowledge of GitHub's
// rate limits.
type App struct {
	id     int64
	key    *rsa.PrivateKey
	apiURL *url.URL
	// follow follows redirects; noFollow hands them back, so that a
	// redirect to another host (an archive download) is fetched without
	// credentials; download follows them without the caller's Timeout,
	// for archive streams. All add credentials for the API host only.
	follow, noFollow, download *http.Client

	clock    clock
	retry    retryPolicy
	maxPages int
	// maxArchive and archiveIdle bound archive downloads; see Archive.
	maxArchive  int64
	archiveIdle time.Duration

	// appLimit holds rate limits met by requests made as the app.
	appLimit limiter
	// etags keeps listing pages for conditional requests (etag.go).
	etags *etagCache
	mu    sync.Mutex
	insts map[int64]*installationState
}

// installationState is what an App remembers about one installation,
// shared by every InstallationClient for it.
type installationState struct {
	// minting is a one-slot semaphore held while a token is being issued,
	// so that concurrent requests wait for one new token (or their
	// context) instead of each asking GitHub for its own.
	minting chan struct{}

	mu        sync.Mutex
	token     string
	refreshAt time.Time

	// limit holds rate limits met with this installation's tokens: GitHub
	// counts them per installation.
	limit limiter
}

// NewApp validates cfg and returns an App. The error never quotes the key.
func NewApp(cfg AppConfig) (*App, error) {
	if cfg.AppID <= 0 {
		return nil, codelotse.Errorf(codelotse.Invalid, "the GitHub App needs its numeric app ID (GITHUB_APP_ID)")
	}
	key, err := parsePrivateKey(cfg.PrivateKeyPEM)
	if err != nil {
		return nil, err
	}
	if cfg.APIURL == "" {
		cfg.APIURL = DefaultAPIURL
	}
	apiURL, err := baseURL("GitHub API URL", cfg.APIURL)
	if err != nil {
		return nil, err
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	transport := &authTransport{origin: apiURL, base: base}
	follow := &http.Client{
		Transport: transport,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			// net/http's own limit, as an error the retry loop can tell
			// from a network failure: a redirect loop is not retried.
			if len(via) >= 10 {
				return errRedirectLoop
			}
			if hc.CheckRedirect != nil {
				return hc.CheckRedirect(req, via)
			}
			return nil
		},
		Timeout: hc.Timeout,
	}
	noFollow := &http.Client{
		Transport:     transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	download := &http.Client{Transport: transport, CheckRedirect: follow.CheckRedirect}
	return &App{
		id:          cfg.AppID,
		key:         key,
		apiURL:      apiURL,
		follow:      follow,
		noFollow:    noFollow,
		download:    download,
		clock:       realClock{},
		retry:       defaultRetry,
		maxPages:    syncMaxPages,
		maxArchive:  MaxArchiveBytes,
		archiveIdle: archiveIdleTimeout,
		insts:       map[int64]*installationState{},
		etags:       newETagCache(maxETagBytes),
	}, nil
}

// parsePrivateKey reads GitHub's PEM private key. Errors describe the
// problem without quoting any of the file.
func parsePrivateKey(pemBytes []byte) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, codelotse.Errorf(codelotse.Invalid, "the GitHub App private key (GITHUB_APP_PRIVATE_KEY_FILE) is not in PEM format")
	}
	if _, encrypted := block.Headers["Proc-Type"]; encrypted {
		return nil, codelotse.Errorf(codelotse.Invalid, "the GitHub App private key is encrypted; use the unencrypted key GitHub issued")
	}
	var key *rsa.PrivateKey
	switch block.Type {
	case "RSA PRIVATE KEY":
		k, err := x509.ParsePKCS1PrivateKey(block.Bytes)
		if err != nil {
			return nil, codelotse.Errorf(codelotse.Invalid, "the GitHub App private key is not a valid PKCS#1 RSA key")
		}
		key = k
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, codelotse.Errorf(codelotse.Invalid, "the GitHub App private key is not a valid PKCS#8 key")
		}
		rk, ok := k.(*rsa.PrivateKey)
		if !ok {
			return nil, codelotse.Errorf(codelotse.Invalid, "the GitHub App private key is not an RSA key; GitHub Apps sign with RS256")
		}
		key = rk
	default:
		return nil, codelotse.Errorf(codelotse.Invalid, "the GitHub App private key is a PEM %q block, not an RSA private key", block.Type)
	}
	if key.N.BitLen() < minKeyBits {
		return nil, codelotse.Errorf(codelotse.Invalid, "the GitHub App private key has %d bits; at least %d are needed", key.N.BitLen(), minKeyBits)
	}
	return key, nil
}

// jwt signs a JSON Web Token for the app (RS256), as GitHub requires for
// the /app endpoints: issued a minute in the past to allow for clock drift,
// expiring ten minutes later, issued by the app ID. It is signed per use;
// RSA signing costs a millisecond and the app authenticates only to issue
// installation tokens and to read installations.
func (a *App) jwt() (string, error) {
	now := time.Now()
	header := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`))
	claims, err := json.Marshal(struct {
		IssuedAt  int64  `json:"iat"`
		ExpiresAt int64  `json:"exp"`
		Issuer    string `json:"iss"`
	}{
		IssuedAt:  now.Add(-jwtBackdate).Unix(),
		ExpiresAt: now.Add(-jwtBackdate + jwtLifetime).Unix(),
		Issuer:    strconv.FormatInt(a.id, 10),
	})
	if err != nil {
		return "", err
	}
	signingInput := header + "." + base64.RawURLEncoding.EncodeToString(claims)
	sum := sha256.Sum256([]byte(signingInput))
	sig, err := rsa.SignPKCS1v15(rand.Reader, a.key, crypto.SHA256, sum[:])
	if err != nil {
		return "", codelotse.Wrap(codelotse.Internal, errors.New("githubapp: cannot sign the app JWT"), "CodeLotse could not sign in to GitHub as the GitHub App")
	}
	return signingInput + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// appCredential authenticates as the app itself.
type appCredential struct{ a *App }

func (c appCredential) authorization(context.Context) (header, secret string, err error) {
	jwt, err := c.a.jwt()
	if err != nil {
		return "", "", err
	}
	return "Bearer " + jwt, jwt, nil
}

// rejected: a fresh JWT carries the same claims and key, so a 401 to one
// is final.
func (appCredential) rejected(string) bool { return false }

// InstallationClient reads GitHub as one installation of the app. It is
// cheap to create and safe for concurrent use; all clients of an App share
// its token cache.
type InstallationClient struct {
	app *App
	id  int64
	st  *installationState
}

// Installation returns a client acting as installation id. Installation
// tokens (POST /app/installations/{id}/access_tokens, authenticated with
// the app's JWT) are issued on first use and cached per installation until
// five minutes before they expire, shared by every client of the App.
func (a *App) Installation(id int64) *InstallationClient {
	if id <= 0 {
		return &InstallationClient{app: a, id: id}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	st, ok := a.insts[id]
	if !ok {
		st = &installationState{minting: make(chan struct{}, 1)}
		a.insts[id] = st
	}
	return &InstallationClient{app: a, id: id, st: st}
}

// valid reports a client made for an impossible installation id.
func (c *InstallationClient) valid() error {
	if c.st == nil {
		return codelotse.Errorf(codelotse.Invalid, "GitHub installation id %d is not valid", c.id)
	}
	return nil
}

func (c *InstallationClient) authorization(ctx context.Context) (header, secret string, err error) {
	tok, err := c.token(ctx)
	if err != nil {
		return "", "", err
	}
	return "token " + tok, tok, nil
}

// rejected forgets a token GitHub answered 401 to (revoked, or expired
// early), so that the retry gets a new one.
func (c *InstallationClient) rejected(tok string) bool {
	c.st.mu.Lock()
	defer c.st.mu.Unlock()
	if c.st.token == tok {
		c.st.token = ""
	}
	return true
}

// token returns a cached installation token or issues a new one.
func (c *InstallationClient) token(ctx context.Context) (string, error) {
	if tok := c.st.cached(c.app.clock.Now()); tok != "" {
		return tok, nil
	}
	select {
	case c.st.minting <- struct{}{}:
	case <-ctx.Done():
		return "", interrupted(fmt.Sprintf("POST /app/installations/%d/access_tokens", c.id), ctx.Err())
	}
	defer func() { <-c.st.minting }()
	// Whoever held the semaphore before may have just issued one.
	if tok := c.st.cached(c.app.clock.Now()); tok != "" {
		return tok, nil
	}
	tok, refreshAt, err := c.app.issueToken(ctx, c.id)
	if err != nil {
		return "", err
	}
	c.st.mu.Lock()
	c.st.token, c.st.refreshAt = tok, refreshAt
	c.st.mu.Unlock()
	return tok, nil
}

func (st *installationState) cached(now time.Time) string {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.token != "" && now.Before(st.refreshAt) {
		return st.token
	}
	return ""
}

// issueToken asks GitHub for an installation token. It is a POST and is
// not retried: a failed attempt fails the sync job, which River retries.
func (a *App) issueToken(ctx context.Context, id int64) (token string, refreshAt time.Time, err error) {
	op := fmt.Sprintf("POST /app/installations/%d/access_tokens", id)
	resp, body, err := a.do(ctx, &request{
		op:     op,
		method: http.MethodPost,
		url:    a.apiURL.ResolveReference(&url.URL{Path: fmt.Sprintf("app/installations/%d/access_tokens", id)}).String(),
		cred:   appCredential{a},
		limit:  &a.appLimit,
		follow: true,
	})
	if err != nil {
		return "", time.Time{}, installationError(id, err)
	}
	var it github.InstallationToken
	if err := json.Unmarshal(body, &it); err != nil || it.GetToken() == "" {
		return "", time.Time{}, codelotse.Wrap(codelotse.Unavailable, fmt.Errorf("githubapp: %s: the answer has no token", op),
			"GitHub did not issue an installation token; try again in a moment")
	}
	token = it.GetToken()
	// GitHub's expires_at is on GitHub's clock. Measured against its Date
	// header, the lifetime is independent of how far our clock is off.
	now := a.clock.Now()
	lifetime := time.Hour
	if exp := it.GetExpiresAt().Time; !exp.IsZero() {
		serverNow := time.Now()
		if d, err := http.ParseTime(resp.Header.Get("Date")); err == nil {
			serverNow = d
		}
		lifetime = exp.Sub(serverNow)
	}
	// A token that lives less than the margin is used for this request
	// and not kept: the next request asks for another.
	return token, now.Add(lifetime - tokenRefreshMargin), nil
}

// Account reads the installation's account with the app's JWT
// (GET /app/installations/{id}). Tenants are bound to the account by its
// id, never its login, because logins can be renamed and reused.
func (c *InstallationClient) Account(ctx context.Context) (accountID int64, login string, err error) {
	if err := c.valid(); err != nil {
		return 0, "", err
	}
	op := fmt.Sprintf("GET /app/installations/%d", c.id)
	var in github.Installation
	if err := c.app.getJSON(ctx, &request{
		op:    op,
		url:   c.app.apiURL.ResolveReference(&url.URL{Path: fmt.Sprintf("app/installations/%d", c.id)}).String(),
		cred:  appCredential{c.app},
		limit: &c.app.appLimit,
	}, &in); err != nil {
		return 0, "", installationError(c.id, err)
	}
	acct := in.GetAccount()
	if acct.GetID() == 0 || acct.GetLogin() == "" {
		return 0, "", codelotse.Wrap(codelotse.Unavailable, fmt.Errorf("githubapp: %s: the installation has no account", op),
			"GitHub returned an incomplete installation; try again in a moment")
	}
	return acct.GetID(), acct.GetLogin(), nil
}

// installationError marks the answers that mean the installation is gone
// or suspended.
func installationError(id int64, err error) error {
	var se *statusError
	if !errors.As(err, &se) {
		return err
	}
	switch {
	case se.Status == http.StatusNotFound:
		return codelotse.Wrap(codelotse.NotFound, fmt.Errorf("%w (installation %d): %w", ErrNotInstalled, id, err),
			fmt.Sprintf("the GitHub App is no longer installed (installation %d)", id))
	case se.Status == http.StatusForbidden && strings.Contains(strings.ToLower(se.Message), "suspended"):
		return codelotse.Wrap(codelotse.Forbidden, fmt.Errorf("%w (installation %d is suspended): %w", ErrNotInstalled, id, err),
			fmt.Sprintf("the GitHub App's installation %d is suspended", id))
	}
	return err
}

// String and GoString keep the private key out of %v and %#v.
func (a *App) String() string {
	return fmt.Sprintf("githubapp.App{id: %d, api: %s}", a.id, a.apiURL)
}

func (a *App) GoString() string { return a.String() }
