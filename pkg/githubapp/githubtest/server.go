// Package githubtest is a fake GitHub for tests: a real HTTP server (from
// net/http/httptest) that serves the GitHub App user-authorization flow,
// the REST endpoints CodeLotse reads at sign-in, and the GitHub App
// installation endpoints the worker syncs from, with the payload shapes,
// status codes, rate-limit headers and Link pagination of GitHub's REST API.
//
// Like GitHub Enterprise Server, one server serves both the web and the API:
// WebURL is the server root and APIURL is WebURL + "api/v3/". The API is
// also served at the root, as api.github.com does, so a client configured
// with the bare server URL works too.
//
// Served:
//
//	GET  /login/oauth/authorize                        redirects the signed-in user back with code and state
//	POST /login/oauth/access_token                     code + PKCE verifier → user token (JSON or form)
//	GET  /user                                         the authenticated user
//	GET  /user/emails                                  the user's emails, paginated
//	GET  /user/installations                           installations the user can reach, paginated
//	GET  /user/installations/{id}/repositories         repositories the user can reach, paginated, with permissions
//	GET  /user/memberships/orgs/{org}                  the user's membership in an organization
//
// and, for the GitHub App itself (an RS256 JWT signed with the key from
// AppPrivateKeyPEM, or one set with SetAppPublicKey) and its installations
// (installation tokens, which expire):
//
//	GET  /app/installations/{id}                       the installation and its account (JWT)
//	POST /app/installations/{id}/access_tokens         a new installation token (JWT)
//	GET  /installation/repositories                    the installation's repositories, paginated
//	GET  /repos/{owner}/{repo}/pulls                   pull requests: state, sort, direction; paginated
//	GET  /repos/{owner}/{repo}/pulls/{n}               one pull request
//	GET  /repos/{owner}/{repo}/pulls/{n}/reviews       reviews, paginated
//	GET  /repos/{owner}/{repo}/pulls/{n}/comments      review comments, paginated
//	GET  /repos/{owner}/{repo}/code-scanning/alerts    alerts by state (open without one), paginated;
//	                                                   403 or 404 when code scanning is off (SetCodeScanning)
//	GET  /repos/{owner}/{repo}/commits/{ref}           a commit; just its id with Accept: application/vnd.github.sha
//	GET  /repos/{owner}/{repo}/tarball[/{ref}]         302 to /_codeload/… with a short-lived token in the query
//	GET  /_codeload/{owner}/{repo}/legacy.tar.gz/{sha} the gzip tar: pax comment, top directory owner-repo-sha7/
//	GET  /orgs/{org}, /orgs/{org}/members              the organization and its members (members.go)
//	GET  /repos/{owner}/{repo}/collaborators           collaborators by affiliation, with permissions
//
// Content is configured with AddPullRequest, AddReview, AddReviewComment,
// AddCodeScanningAlert, SetCodeScanning, SetRepoFiles, SetBranchHead,
// SetMembership, SetPermission, SetTeam, SetBasePermission and
// RevokeInstallationPermission.
//
// It is a test helper: it logs nothing and keeps everything in memory. It
// is not a security boundary, though it checks what GitHub checks (client
// credentials, redirect URI, single-use codes, PKCE, bearer tokens) so that
// a client that gets those wrong fails its tests.
package githubtest

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Account types as GitHub spells them.
const (
	TypeUser         = "User"
	TypeOrganization = "Organization"
)

// Failure is an error answer the server gives instead of the real one.
type Failure int

const (
	// SecondaryRateLimit: 403 with GitHub's secondary-limit message and
	// Retry-After.
	SecondaryRateLimit Failure = iota + 1
	// TooManyRequests: 429 with Retry-After.
	TooManyRequests
	// PrimaryRateLimit: 403 with X-RateLimit-Remaining: 0 and
	// X-RateLimit-Reset.
	PrimaryRateLimit
	// BadCredentials: 401 "Bad credentials", as for a revoked token.
	BadCredentials
	// Forbidden: 403 "Resource not accessible by integration", as when the
	// app lacks a permission.
	Forbidden
	// ServerError: 502.
	ServerError
	// ConnectionReset: the connection is closed without an answer.
	ConnectionReset
)

// User is a GitHub user.
type User struct {
	ID    int64
	Login string
	Name  string
	// PublicEmail is the profile email /user shows; empty shows null.
	PublicEmail string
	// Emails are what /user/emails lists.
	Emails []Email
}

// Email is one entry of /user/emails.
type Email struct {
	Email    string
	Primary  bool
	Verified bool
	// Visibility is "public", "private" or empty (null), as GitHub shows
	// for non-primary emails.
	Visibility string
}

// Repo is a repository of an installation's account.
type Repo struct {
	ID   int64
	Name string
	// DefaultBranch defaults to "main".
	DefaultBranch string
	Private       bool
	Archived      bool
}

// Server is the fake GitHub. Configure it from the test goroutine; it is
// safe for the requests it serves to run concurrently.
type Server struct {
	// URL is the server root without a trailing slash: http://127.0.0.1:PORT.
	URL string
	// WebURL is URL + "/" (GITHUB_WEB_URL); APIURL is URL + "/api/v3/"
	// (GITHUB_API_URL), the GitHub Enterprise Server layout.
	WebURL, APIURL string
	// ClientID and ClientSecret are the app credentials the OAuth endpoints
	// accept.
	ClientID, ClientSecret string
	// AppID is reported as app_id on installations.
	AppID int64

	t   testing.TB
	srv *httptest.Server

	mu               sync.Mutex
	maxPerPage       int
	retryAfter       time.Duration
	callbackURL      string
	tokenErrorStatus int
	users            map[int64]*User
	orgs             map[int64]string // org ID → login
	installations    []*installation
	repos            map[int64]*repo
	perms            map[[2]int64]string // (user ID, repo ID) → permission
	memberships      map[[2]int64]membership
	signedIn         int64
	deny             bool
	codes            map[string]*grant
	tokens           map[string]int64 // token → user ID
	failures         []failure
	requests         []string

	// The GitHub App side; see installation.go and repos.go.
	appKey         *rsa.PublicKey // nil: the key of AppPrivateKeyPEM
	tokenLifetime  time.Duration
	instTokens     map[string]*instToken // installation token → grant
	tokensIssued   map[int64]int         // installation ID → tokens issued
	pulls          map[int64][]*PullRequest
	reviews        map[pullKey][]*Review
	comments       map[pullKey][]*ReviewComment
	alerts         map[int64][]*CodeScanningAlert
	codeScanning   map[int64]CodeScanning
	commits        map[int64]map[string]map[string]string // repo → sha → path → content
	heads          map[int64]map[string]string            // repo → branch → sha
	codeloadTokens map[string]*codeloadGrant

	notModified int
	// graphQLOff makes the GraphQL endpoint answer 404, as on an old
	// GitHub Enterprise Server.
	graphQLOff bool

	// Teams and base permissions; see members.go.
	teams     map[string]*team // "org/slug" → team
	basePerms map[int64]string // organization → base permission
}

type installation struct {
	id        int64
	accountID int64
	suspended bool
	repoIDs   []int64
	// revoked are organization permissions the installation lacks.
	revoked map[string]bool
}

type repo struct {
	Repo
	installationID int64
}

type membership struct {
	state, role string
}

type grant struct {
	userID      int64
	redirectURI string
	challenge   string
	expires     time.Time
}

type failure struct {
	path string // "" matches any API path
	kind Failure
}

// New starts a server that t closes when it ends.
func New(t testing.TB) *Server {
	t.Helper()
	s := &Server{
		ClientID:         "Iv1.githubtest",
		ClientSecret:     "githubtest-client-secret-" + randomString(20),
		AppID:            1,
		t:                t,
		maxPerPage:       100,
		retryAfter:       60 * time.Second,
		tokenErrorStatus: http.StatusOK,
		users:            map[int64]*User{},
		orgs:             map[int64]string{},
		repos:            map[int64]*repo{},
		perms:            map[[2]int64]string{},
		memberships:      map[[2]int64]membership{},
		codes:            map[string]*grant{},
		tokens:           map[string]int64{},
		tokenLifetime:    time.Hour,
		instTokens:       map[string]*instToken{},
		tokensIssued:     map[int64]int{},
		pulls:            map[int64][]*PullRequest{},
		reviews:          map[pullKey][]*Review{},
		comments:         map[pullKey][]*ReviewComment{},
		alerts:           map[int64][]*CodeScanningAlert{},
		codeScanning:     map[int64]CodeScanning{},
		commits:          map[int64]map[string]map[string]string{},
		heads:            map[int64]map[string]string{},
		codeloadTokens:   map[string]*codeloadGrant{},
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	t.Cleanup(s.srv.Close)
	s.URL = s.srv.URL
	s.WebURL = s.URL + "/"
	s.APIURL = s.URL + "/api/v3/"
	return s
}

// Client returns a new HTTP client for the server. Each call returns its
// own copy, so changing one (say, its CheckRedirect) affects no other.
func (s *Server) Client() *http.Client {
	c := *s.srv.Client()
	return &c
}

// AddUser adds a user account.
func (s *Server) AddUser(u User) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checkNewAccount(u.ID, u.Login)
	u.Emails = slices.Clone(u.Emails)
	s.users[u.ID] = &u
}

// AddOrg adds an organization account.
func (s *Server) AddOrg(id int64, login string) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checkNewAccount(id, login)
	s.orgs[id] = login
}

func (s *Server) checkNewAccount(id int64, login string) {
	s.t.Helper()
	if id <= 0 || login == "" {
		s.t.Fatalf("githubtest: an account needs an id > 0 and a login")
	}
	if _, ok := s.users[id]; ok {
		s.t.Fatalf("githubtest: account id %d already exists", id)
	}
	if _, ok := s.orgs[id]; ok {
		s.t.Fatalf("githubtest: account id %d already exists", id)
	}
	if _, ok := s.accountByLogin(login); ok {
		s.t.Fatalf("githubtest: account login %q already exists", login)
	}
}

// AddInstallation installs the app on an account added with AddUser or
// AddOrg.
func (s *Server) AddInstallation(id, accountID int64) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, _, ok := s.account(accountID); !ok {
		s.t.Fatalf("githubtest: AddInstallation(%d): no account %d", id, accountID)
	}
	if s.installation(id) != nil {
		s.t.Fatalf("githubtest: installation %d already exists", id)
	}
	s.installations = append(s.installations, &installation{id: id, accountID: accountID})
}

// SuspendInstallation marks an installation suspended (suspended_at set).
func (s *Server) SuspendInstallation(id int64) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.installation(id)
	if in == nil {
		s.t.Fatalf("githubtest: SuspendInstallation: no installation %d", id)
	}
	in.suspended = true
}

// AddRepo adds a repository owned by the installation's account and
// selected for the installation.
func (s *Server) AddRepo(installationID int64, r Repo) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.installation(installationID)
	if in == nil {
		s.t.Fatalf("githubtest: AddRepo: no installation %d", installationID)
	}
	if r.ID <= 0 || r.Name == "" {
		s.t.Fatalf("githubtest: a repository needs an id > 0 and a name")
	}
	if _, ok := s.repos[r.ID]; ok {
		s.t.Fatalf("githubtest: repository %d already exists", r.ID)
	}
	if r.DefaultBranch == "" {
		r.DefaultBranch = "main"
	}
	s.repos[r.ID] = &repo{Repo: r, installationID: installationID}
	in.repoIDs = append(in.repoIDs, r.ID)
}

// RenameRepo gives a repository another name (GitHub redirects the old
// one; this fake does not).
func (s *Server) RenameRepo(id int64, name string) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mustRepo("RenameRepo", id).Name = name
}

// DeleteRepo deletes a repository: gone from its installation and from
// GitHub.
func (s *Server) DeleteRepo(id int64) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.installation(s.mustRepo("DeleteRepo", id).installationID)
	in.repoIDs = slices.DeleteFunc(in.repoIDs, func(x int64) bool { return x == id })
	delete(s.repos, id)
}

// permissions lists GitHub's repository permissions, lowest first.
var permissions = []string{"pull", "triage", "push", "maintain", "admin"}

// SetPermission gives a user an explicit permission on a repository:
// "pull", "triage", "push", "maintain" or "admin"; "" removes it. The owner
// of a personal account and the active admins of an organization have
// admin on every repository of the account without it.
func (s *Server) SetPermission(userID, repoID int64, perm string) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.users[userID]; !ok {
		s.t.Fatalf("githubtest: SetPermission: no user %d", userID)
	}
	if _, ok := s.repos[repoID]; !ok {
		s.t.Fatalf("githubtest: SetPermission: no repository %d", repoID)
	}
	if perm == "" {
		delete(s.perms, [2]int64{userID, repoID})
		return
	}
	if !slices.Contains(permissions, perm) {
		s.t.Fatalf("githubtest: SetPermission: unknown permission %q", perm)
	}
	s.perms[[2]int64{userID, repoID}] = perm
}

// SetMembership makes a user a member of an organization: state "active"
// or "pending", role "admin" (owner) or "member". An empty state removes
// the membership, after which /user/memberships/orgs/{org} answers 404.
func (s *Server) SetMembership(userID, orgID int64, state, role string) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.users[userID]; !ok {
		s.t.Fatalf("githubtest: SetMembership: no user %d", userID)
	}
	if _, ok := s.orgs[orgID]; !ok {
		s.t.Fatalf("githubtest: SetMembership: no organization %d", orgID)
	}
	if state == "" {
		delete(s.memberships, [2]int64{userID, orgID})
		return
	}
	if state != "active" && state != "pending" || role != "admin" && role != "member" {
		s.t.Fatalf("githubtest: SetMembership: state must be active or pending and role admin or member, not %q/%q", state, role)
	}
	s.memberships[[2]int64{userID, orgID}] = membership{state: state, role: role}
}

// SignInAs makes the user the one signed in to the fake GitHub's web
// interface, so GET /login/oauth/authorize approves the app for them and
// redirects at once, as GitHub does for a user who has authorized the app
// before. A browser test calls it before it clicks "Sign in with GitHub".
func (s *Server) SignInAs(userID int64) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.users[userID]; !ok {
		s.t.Fatalf("githubtest: SignInAs: no user %d", userID)
	}
	s.signedIn = userID
	s.deny = false
}

// DenyAuthorization makes the signed-in user decline the app: authorize
// redirects back with error=access_denied and the state.
func (s *Server) DenyAuthorization() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deny = true
}

// SetCallbackURL registers the app's callback URL. When set, authorize and
// access_token refuse any other redirect_uri, and authorize uses it when
// the request has none.
func (s *Server) SetCallbackURL(u string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.callbackURL = u
}

// SetMaxPerPage caps the page size below GitHub's 100, so a few records
// span several pages and the Link headers get exercised.
func (s *Server) SetMaxPerPage(n int) {
	s.t.Helper()
	if n < 1 || n > 100 {
		s.t.Fatalf("githubtest: SetMaxPerPage(%d): want 1..100", n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maxPerPage = n
}

// SetRetryAfter sets the wait that rate-limit failures announce (default
// one minute).
func (s *Server) SetRetryAfter(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retryAfter = d
}

// SetTokenErrorStatus sets the HTTP status of access_token errors. GitHub
// answers 200 with an "error" field (the default); 400 or 401 imitate a
// strict OAuth server or a proxy in front of GitHub Enterprise Server.
func (s *Server) SetTokenErrorStatus(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokenErrorStatus = status
}

// FailNext makes the next API request, whatever its path, fail with f.
// Calls queue up: two calls fail the next two requests.
func (s *Server) FailNext(f Failure) {
	s.FailNextOn("", f)
}

// FailNextOn makes the next API request to path fail with f. path is
// GitHub's path without /api/v3, e.g. "/user/memberships/orgs/acme" or
// "/user/installations/7/repositories".
func (s *Server) FailNextOn(path string, f Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, failure{path: path, kind: f})
}

// IssueToken returns a valid user token for userID without the OAuth
// dance, for tests of API reads alone.
func (s *Server) IssueToken(userID int64) string {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.users[userID]; !ok {
		s.t.Fatalf("githubtest: IssueToken: no user %d", userID)
	}
	return s.newToken(userID)
}

// Requests lists the requests served so far as "METHOD /path?query", in
// order. Headers, and so tokens, are not recorded.
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Authorize plays the browser's part of the authorization step: it GETs
// authURL (the client's AuthCodeURL) without following the redirect and
// returns the code and state from the callback URL GitHub redirects to.
func (s *Server) Authorize(authURL string) (code, state string, err error) {
	c := s.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Get(authURL)
	if err != nil {
		return "", "", err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		return "", "", fmt.Errorf("githubtest: authorize answered %s", resp.Status)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		return "", "", err
	}
	q := loc.Query()
	if e := q.Get("error"); e != "" {
		return "", q.Get("state"), fmt.Errorf("githubtest: authorize redirected with error %s", e)
	}
	return q.Get("code"), q.Get("state"), nil
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	logged := r.URL.RequestURI()
	if strings.HasPrefix(r.URL.Path, codeloadPrefix) {
		logged = r.URL.Path // the query is the download's token
	}
	s.requests = append(s.requests, r.Method+" "+logged)
	s.mu.Unlock()
	switch {
	case strings.HasPrefix(r.URL.Path, codeloadPrefix):
		s.codeload(w, r)
	case r.URL.Path == "/login/oauth/authorize":
		s.authorize(w, r)
	case r.URL.Path == "/login/oauth/access_token":
		s.accessToken(w, r)
	case r.Method == http.MethodGet:
		s.conditional(w, r)
	case r.Method == http.MethodPost && s.isGraphQL(r.URL.Path):
		s.graphql(w, r)
	default:
		s.api(w, r)
	}
}

// conditional serves a GET of the REST API as GitHub does conditional
// requests: every 200 answer carries a weak ETag of its body, and a request
// whose If-None-Match names the current one gets 304 Not Modified without a
// body (GitHub does not count those against the rate limit).
func (s *Server) conditional(w http.ResponseWriter, r *http.Request) {
	rec := &recorder{header: http.Header{}, status: http.StatusOK, w: w}
	s.api(rec, r)
	h := w.Header()
	for k, v := range rec.header {
		h[k] = v
	}
	if rec.status == http.StatusOK && !rec.hijacked {
		sum := sha256.Sum256(rec.body.Bytes())
		etag := `W/"` + hex.EncodeToString(sum[:16]) + `"`
		h.Set("ETag", etag)
		if inm := r.Header.Get("If-None-Match"); inm != "" && strings.TrimPrefix(inm, "W/") == strings.TrimPrefix(etag, "W/") {
			s.mu.Lock()
			s.notModified++
			s.mu.Unlock()
			h.Del("Content-Type")
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	if rec.hijacked {
		return
	}
	w.WriteHeader(rec.status)
	_, _ = w.Write(rec.body.Bytes())
}

// NotModified counts the 304 answers given to conditional requests.
func (s *Server) NotModified() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.notModified
}

// recorder buffers an answer so conditional can compute its ETag. It
// passes a hijack (FailNext(ConnectionReset)) through to the connection.
type recorder struct {
	header   http.Header
	status   int
	body     bytes.Buffer
	wrote    bool
	hijacked bool
	w        http.ResponseWriter
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(status int) {
	if !r.wrote {
		r.status, r.wrote = status, true
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.body.Write(b)
}

func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := r.w.(http.Hijacker)
	if !ok {
		return nil, nil, http.ErrNotSupported
	}
	r.hijacked = true
	return hj.Hijack()
}

// account returns an account's login and type.
func (s *Server) account(id int64) (login, typ string, ok bool) {
	if u, ok := s.users[id]; ok {
		return u.Login, TypeUser, true
	}
	if l, ok := s.orgs[id]; ok {
		return l, TypeOrganization, true
	}
	return "", "", false
}

// accountByLogin finds an account by login, case-insensitively as GitHub
// does.
func (s *Server) accountByLogin(login string) (int64, bool) {
	for id, u := range s.users {
		if strings.EqualFold(u.Login, login) {
			return id, true
		}
	}
	for id, l := range s.orgs {
		if strings.EqualFold(l, login) {
			return id, true
		}
	}
	return 0, false
}

func (s *Server) installation(id int64) *installation {
	for _, in := range s.installations {
		if in.id == id {
			return in
		}
	}
	return nil
}

func (s *Server) newToken(userID int64) string {
	// ghu_ is GitHub's prefix for user-to-server tokens of a GitHub App.
	tok := "ghu_" + randomString(36)
	s.tokens[tok] = userID
	return tok
}

const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

func randomString(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
