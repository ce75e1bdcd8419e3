package githubapp

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/githubapp/githubtest"
)

const callback = "https://codelotse.test/auth/github/callback"

// IDs of the standard fixture.
const (
	alice   = 101 // owner of acme, owns her personal installation
	bob     = 102 // member of acme with push on acme/api
	carol   = 103 // outside collaborator on acme/web
	acme    = 201
	instAcm = 11 // acme's installation
	instAli = 12 // alice's personal installation
)

// fixture is a fake GitHub with one organization installation and one
// personal installation, and a client pointed at it the GitHub Enterprise
// Server way (API under /api/v3/).
func fixture(t *testing.T) (*githubtest.Server, *Client) {
	t.Helper()
	s := githubtest.New(t)
	s.SetCallbackURL(callback)
	s.AddUser(githubtest.User{ID: alice, Login: "alice", Name: "Alice Liddell", PublicEmail: "alice@example.com"})
	s.AddUser(githubtest.User{ID: bob, Login: "bob", Emails: []githubtest.Email{
		{Email: "bob@old.example", Verified: true},
		{Email: "bob@example.com", Primary: true, Verified: true, Visibility: "private"},
	}})
	s.AddUser(githubtest.User{ID: carol, Login: "carol", Name: "Carol"})
	s.AddOrg(acme, "acme")
	s.AddInstallation(instAcm, acme)
	s.AddRepo(instAcm, githubtest.Repo{ID: 1001, Name: "api", Private: true})
	s.AddRepo(instAcm, githubtest.Repo{ID: 1002, Name: "web", DefaultBranch: "trunk"})
	s.AddRepo(instAcm, githubtest.Repo{ID: 1003, Name: "secret-plans", Private: true})
	s.AddInstallation(instAli, alice)
	s.AddRepo(instAli, githubtest.Repo{ID: 2001, Name: "dotfiles"})
	s.SetMembership(alice, acme, "active", "admin")
	s.SetMembership(bob, acme, "active", "member")
	s.SetPermission(bob, 1001, "push")
	s.SetPermission(carol, 1002, "triage")
	return s, client(t, s, s.APIURL)
}

func client(t *testing.T, s *githubtest.Server, apiURL string) *Client {
	t.Helper()
	c, err := New(Config{
		ClientID:     s.ClientID,
		ClientSecret: s.ClientSecret,
		APIURL:       apiURL,
		WebURL:       s.WebURL,
		RedirectURL:  callback,
		HTTPClient:   s.Client(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// authorize runs the browser half of the flow for userID and returns the
// code and the verifier the web layer would have kept.
func authorize(t *testing.T, s *githubtest.Server, c *Client, userID int64) (code, verifier string) {
	t.Helper()
	s.SignInAs(userID)
	verifier = NewVerifier()
	code, state, err := s.Authorize(c.AuthCodeURL("st4te", verifier))
	if err != nil {
		t.Fatal(err)
	}
	if state != "st4te" || code == "" {
		t.Fatalf("callback got code %q state %q", code, state)
	}
	return code, verifier
}

func signIn(t *testing.T, s *githubtest.Server, c *Client, userID int64) (Identity, []Installation, error) {
	t.Helper()
	code, verifier := authorize(t, s, c, userID)
	return c.SignIn(context.Background(), code, verifier)
}

func TestSignIn(t *testing.T) {
	s, c := fixture(t)
	id, insts, err := signIn(t, s, c, alice)
	if err != nil {
		t.Fatal(err)
	}
	wantID := Identity{UserID: alice, Login: "alice", Name: "Alice Liddell", Email: "alice@example.com"}
	if id != wantID {
		t.Errorf("identity = %+v, want %+v", id, wantID)
	}
	web := s.WebURL
	want := []Installation{
		{ID: instAcm, AccountID: acme, AccountLogin: "acme", AccountType: "Organization", Role: "admin", Repos: []Repo{
			{ID: 1001, FullName: "acme/api", DefaultBranch: "main", URL: web + "acme/api", Private: true, Permission: "admin"},
			{ID: 1002, FullName: "acme/web", DefaultBranch: "trunk", URL: web + "acme/web", Permission: "admin"},
			{ID: 1003, FullName: "acme/secret-plans", DefaultBranch: "main", URL: web + "acme/secret-plans", Private: true, Permission: "admin"},
		}},
		{ID: instAli, AccountID: alice, AccountLogin: "alice", AccountType: "User", Role: "admin", Repos: []Repo{
			{ID: 2001, FullName: "alice/dotfiles", DefaultBranch: "main", URL: web + "alice/dotfiles", Permission: "admin"},
		}},
	}
	if !reflect.DeepEqual(insts, want) {
		t.Errorf("installations:\n got %+v\nwant %+v", insts, want)
	}

	// Every API read went through the configured /api/v3/ root, and the
	// code was exchanged on the web host.
	reqs := strings.Join(s.Requests(), "\n")
	for _, p := range []string{
		"POST /login/oauth/access_token",
		"GET /api/v3/user",
		"GET /api/v3/user/installations?per_page=100",
		"GET /api/v3/user/memberships/orgs/acme",
		"GET /api/v3/user/installations/11/repositories?per_page=100",
		"GET /api/v3/user/installations/12/repositories?per_page=100",
	} {
		if !strings.Contains(reqs, p) {
			t.Errorf("no request %q in\n%s", p, reqs)
		}
	}
	if strings.Contains(reqs, "/user/emails") {
		t.Error("read /user/emails although /user had a public email")
	}
}

func TestSignInAPIAtServerRoot(t *testing.T) {
	// api.github.com serves the API at the root; a test server may too.
	s, _ := fixture(t)
	c := client(t, s, s.URL)
	id, insts, err := signIn(t, s, c, bob)
	if err != nil {
		t.Fatal(err)
	}
	if id.UserID != bob || len(insts) != 1 {
		t.Fatalf("got %+v %+v", id, insts)
	}
	for _, r := range s.Requests() {
		if strings.Contains(r, "/api/v3") {
			t.Errorf("request %q went to /api/v3 although APIURL is the root", r)
		}
	}
}

func TestSignInPKCE(t *testing.T) {
	s, c := fixture(t)
	code, verifier := authorize(t, s, c, alice)

	_, insts, err := c.SignIn(context.Background(), code, NewVerifier())
	if !errors.Is(err, ErrSignInRejected) {
		t.Fatalf("wrong verifier: err = %v, want ErrSignInRejected", err)
	}
	if codelotse.ErrorCode(err) != codelotse.Forbidden || insts != nil {
		t.Errorf("wrong verifier: code %s, installations %v", codelotse.ErrorCode(err), insts)
	}
	// The failed attempt used the code up, so even the right verifier
	// cannot redeem it now.
	if _, _, err := c.SignIn(context.Background(), code, verifier); !errors.Is(err, ErrSignInRejected) {
		t.Fatalf("reused code: err = %v, want ErrSignInRejected", err)
	}

	code, verifier = authorize(t, s, c, alice)
	if _, _, err := c.SignIn(context.Background(), code, verifier); err != nil {
		t.Fatalf("right verifier: %v", err)
	}
}

func TestSignInArguments(t *testing.T) {
	_, c := fixture(t)
	for _, args := range [][2]string{{"", "v"}, {"c", ""}} {
		_, _, err := c.SignIn(context.Background(), args[0], args[1])
		if codelotse.ErrorCode(err) != codelotse.Invalid {
			t.Errorf("SignIn(%q, %q): err = %v, want invalid", args[0], args[1], err)
		}
	}
}

func TestSignInEmail(t *testing.T) {
	tests := []struct {
		name  string
		user  githubtest.User
		setup func(*githubtest.Server)
		want  string
	}{
		{
			name: "public email",
			user: githubtest.User{PublicEmail: "pub@example.com", Emails: []githubtest.Email{{Email: "primary@example.com", Primary: true, Verified: true}}},
			want: "pub@example.com",
		},
		{
			name: "verified primary from /user/emails",
			user: githubtest.User{Emails: []githubtest.Email{
				{Email: "other@example.com", Verified: true},
				{Email: "primary@example.com", Primary: true, Verified: true, Visibility: "private"},
			}},
			want: "primary@example.com",
		},
		{
			name: "unverified primary is not used",
			user: githubtest.User{Emails: []githubtest.Email{
				{Email: "verified@example.com", Verified: true},
				{Email: "primary@example.com", Primary: true},
			}},
			want: "",
		},
		{
			name: "primary on a later page",
			user: githubtest.User{Emails: []githubtest.Email{
				{Email: "a@example.com", Verified: true},
				{Email: "b@example.com", Verified: true},
				{Email: "c@example.com", Verified: true},
				{Email: "primary@example.com", Primary: true, Verified: true},
			}},
			setup: func(s *githubtest.Server) { s.SetMaxPerPage(1) },
			want:  "primary@example.com",
		},
		{
			name:  "app without the email permission",
			user:  githubtest.User{Emails: []githubtest.Email{{Email: "primary@example.com", Primary: true, Verified: true}}},
			setup: func(s *githubtest.Server) { s.FailNextOn("/user/emails", githubtest.Forbidden) },
			want:  "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := githubtest.New(t)
			s.SetCallbackURL(callback)
			u := tt.user
			u.ID, u.Login = 7, "dana"
			s.AddUser(u)
			if tt.setup != nil {
				tt.setup(s)
			}
			c := client(t, s, s.APIURL)
			id, insts, err := signIn(t, s, c, 7)
			if err != nil {
				t.Fatal(err)
			}
			if id.Email != tt.want {
				t.Errorf("email = %q, want %q", id.Email, tt.want)
			}
			if id.UserID != 7 || id.Login != "dana" || len(insts) != 0 {
				t.Errorf("identity %+v, installations %+v", id, insts)
			}
		})
	}
}

func TestSignInFollowsPages(t *testing.T) {
	s := githubtest.New(t)
	s.SetCallbackURL(callback)
	s.SetMaxPerPage(2)
	s.AddUser(githubtest.User{ID: 1, Login: "erin"})
	// Five organizations with an installation each (three pages), and the
	// first has seven repositories (four pages).
	for i := int64(1); i <= 5; i++ {
		s.AddOrg(100+i, fmt.Sprintf("org%d", i))
		s.AddInstallation(i, 100+i)
		s.SetMembership(1, 100+i, "active", "member")
		s.AddRepo(i, githubtest.Repo{ID: 1000 * i, Name: "only"})
		s.SetPermission(1, 1000*i, "pull")
	}
	for j := int64(1); j <= 6; j++ {
		s.AddRepo(1, githubtest.Repo{ID: 1000 + j, Name: fmt.Sprintf("r%d", j)})
		s.SetPermission(1, 1000+j, "push")
	}
	c := client(t, s, s.APIURL)
	_, insts, err := signIn(t, s, c, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(insts) != 5 {
		t.Fatalf("got %d installations, want 5", len(insts))
	}
	for i, in := range insts {
		if in.ID != int64(i+1) {
			t.Errorf("installation %d has id %d; order lost", i, in.ID)
		}
	}
	if got := len(insts[0].Repos); got != 7 {
		t.Errorf("first installation has %d repositories, want 7", got)
	}
	seen := map[int64]bool{}
	for _, r := range insts[0].Repos {
		if seen[r.ID] {
			t.Errorf("repository %d listed twice", r.ID)
		}
		seen[r.ID] = true
	}

	count := func(prefix string) int {
		n := 0
		for _, r := range s.Requests() {
			path, _, _ := strings.Cut(r, "?")
			if path == prefix {
				n++
			}
		}
		return n
	}
	if n := count("GET /api/v3/user/installations"); n != 3 {
		t.Errorf("%d requests for installations, want 3 pages", n)
	}
	if n := count("GET /api/v3/user/installations/1/repositories"); n != 4 {
		t.Errorf("%d requests for repositories, want 4 pages", n)
	}
}

func TestSignInStopsAtPageLimit(t *testing.T) {
	s := githubtest.New(t)
	s.SetCallbackURL(callback)
	s.SetMaxPerPage(1)
	s.AddUser(githubtest.User{ID: 1, Login: "erin"})
	for i := int64(1); i <= 4; i++ {
		s.AddInstallation(i, 1)
	}
	c := client(t, s, s.APIURL)
	c.maxPages = 3
	id, insts, err := signIn(t, s, c, 1)
	if err == nil {
		t.Fatalf("read %d installations past the page limit", len(insts))
	}
	if codelotse.ErrorCode(err) != codelotse.Unavailable || !strings.Contains(err.Error(), "more than 3 pages") {
		t.Errorf("err = %v", err)
	}
	if id != (Identity{}) || insts != nil {
		t.Errorf("partial result returned: %+v %+v", id, insts)
	}

	c.maxPages = 4
	if _, insts, err := signIn(t, s, c, 1); err != nil || len(insts) != 4 {
		t.Fatalf("exactly at the limit: %d installations, %v", len(insts), err)
	}
}

func TestSignInRoles(t *testing.T) {
	tests := []struct {
		name      string
		setup     func(s *githubtest.Server)
		wantRole  string
		wantRepos []string // full name:permission
	}{
		{
			name:      "organization owner",
			setup:     func(s *githubtest.Server) { s.SetMembership(1, acme, "active", "admin") },
			wantRole:  "admin",
			wantRepos: []string{"acme/api:admin", "acme/web:admin"},
		},
		{
			name: "organization member",
			setup: func(s *githubtest.Server) {
				s.SetMembership(1, acme, "active", "member")
				s.SetPermission(1, 1002, "maintain")
			},
			wantRole:  "member",
			wantRepos: []string{"acme/web:maintain"},
		},
		{
			name: "pending owner is not an admin yet",
			setup: func(s *githubtest.Server) {
				s.SetMembership(1, acme, "pending", "admin")
				s.SetPermission(1, 1001, "pull")
			},
			wantRole:  "member",
			wantRepos: []string{"acme/api:pull"},
		},
		{
			name:      "outside collaborator (membership 404)",
			setup:     func(s *githubtest.Server) { s.SetPermission(1, 1001, "triage") },
			wantRole:  "member",
			wantRepos: []string{"acme/api:triage"},
		},
		{
			name: "app cannot read memberships (403)",
			setup: func(s *githubtest.Server) {
				s.SetMembership(1, acme, "active", "admin")
				s.FailNextOn("/user/memberships/orgs/acme", githubtest.Forbidden)
			},
			wantRole:  "member",
			wantRepos: []string{"acme/api:admin", "acme/web:admin"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := githubtest.New(t)
			s.SetCallbackURL(callback)
			s.AddUser(githubtest.User{ID: 1, Login: "frank"})
			s.AddOrg(acme, "acme")
			s.AddInstallation(instAcm, acme)
			s.AddRepo(instAcm, githubtest.Repo{ID: 1001, Name: "api"})
			s.AddRepo(instAcm, githubtest.Repo{ID: 1002, Name: "web"})
			tt.setup(s)
			_, insts, err := signIn(t, s, client(t, s, s.APIURL), 1)
			if err != nil {
				t.Fatal(err)
			}
			if len(insts) != 1 {
				t.Fatalf("got %d installations, want 1", len(insts))
			}
			if insts[0].Role != tt.wantRole {
				t.Errorf("role = %q, want %q", insts[0].Role, tt.wantRole)
			}
			var repos []string
			for _, r := range insts[0].Repos {
				repos = append(repos, r.FullName+":"+r.Permission)
			}
			if !reflect.DeepEqual(repos, tt.wantRepos) {
				t.Errorf("repos = %v, want %v", repos, tt.wantRepos)
			}
		})
	}
}

func TestSignInUserAccountRole(t *testing.T) {
	s, c := fixture(t)
	// carol collaborates on alice's personal repository: she reaches the
	// installation but is not its account, so she is a member.
	s.SetPermission(carol, 2001, "push")
	_, insts, err := signIn(t, s, c, carol)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]Installation{}
	for _, in := range insts {
		got[in.ID] = in
	}
	if in := got[instAli]; in.Role != "member" || in.AccountType != "User" || len(in.Repos) != 1 || in.Repos[0].Permission != "push" {
		t.Errorf("alice's installation for carol: %+v", in)
	}
	if in := got[instAcm]; in.Role != "member" || len(in.Repos) != 1 || in.Repos[0].FullName != "acme/web" || in.Repos[0].Permission != "triage" {
		t.Errorf("acme's installation for carol: %+v", in)
	}
	for _, r := range s.Requests() {
		if strings.Contains(r, "/user/memberships/orgs/alice") {
			t.Error("asked for an organization membership in a user account")
		}
	}

	_, insts, err = signIn(t, s, c, alice)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range insts {
		if in.ID == instAli && in.Role != "admin" {
			t.Errorf("alice in her own account: role %q, want admin", in.Role)
		}
	}
}

func TestSignInSkipsSuspendedInstallations(t *testing.T) {
	s, c := fixture(t)
	s.SuspendInstallation(instAcm)
	_, insts, err := signIn(t, s, c, alice)
	if err != nil {
		t.Fatal(err)
	}
	if len(insts) != 1 || insts[0].ID != instAli {
		t.Errorf("installations = %+v, want only the personal one", insts)
	}
}

func TestSignInRateLimited(t *testing.T) {
	tests := []struct {
		failure       githubtest.Failure
		path          string
		wantStatus    int
		wantSecondary bool
	}{
		{githubtest.SecondaryRateLimit, "/user", 403, true},
		{githubtest.SecondaryRateLimit, "/user/installations/11/repositories", 403, true},
		{githubtest.TooManyRequests, "/user/installations", 429, true},
		{githubtest.TooManyRequests, "/user/memberships/orgs/acme", 429, true},
		{githubtest.PrimaryRateLimit, "/user/installations/12/repositories", 403, false},
		{githubtest.PrimaryRateLimit, "/user/memberships/orgs/acme", 403, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d on %s", tt.wantStatus, tt.path), func(t *testing.T) {
			s, c := fixture(t)
			s.SetRetryAfter(90 * time.Second)
			s.FailNextOn(tt.path, tt.failure)
			start := time.Now()
			id, insts, err := signIn(t, s, c, alice)
			if !errors.Is(err, ErrRateLimited) {
				t.Fatalf("err = %v, want ErrRateLimited", err)
			}
			if errors.Is(err, ErrSignInRejected) {
				t.Error("a rate limit also reads as a rejected sign-in")
			}
			var rl *RateLimitError
			if !errors.As(err, &rl) {
				t.Fatalf("no *RateLimitError in %v", err)
			}
			if rl.Status != tt.wantStatus || rl.Secondary != tt.wantSecondary {
				t.Errorf("status %d secondary %v, want %d %v", rl.Status, rl.Secondary, tt.wantStatus, tt.wantSecondary)
			}
			// X-RateLimit-Reset has whole-second precision.
			if lo, hi := start.Add(88*time.Second), time.Now().Add(91*time.Second); rl.RetryAt.Before(lo) || rl.RetryAt.After(hi) {
				t.Errorf("RetryAt = %v, want about 90s from %v", rl.RetryAt, start)
			}
			if codelotse.ErrorCode(err) != codelotse.Unavailable {
				t.Errorf("code = %s, want unavailable", codelotse.ErrorCode(err))
			}
			if msg := codelotse.ErrorMessage(err); !strings.Contains(msg, "rate limiting") {
				t.Errorf("user message = %q", msg)
			}
			if !strings.Contains(err.Error(), tt.path) {
				t.Errorf("error %q does not say which call failed", err)
			}
			if id != (Identity{}) || insts != nil {
				t.Errorf("partial result returned: %+v %+v", id, insts)
			}
		})
	}
}

func TestSignInRejected(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(s *githubtest.Server, c *Client)
		badCode  bool
		wantCode codelotse.Code
	}{
		{name: "bad code, GitHub's 200 with an error", badCode: true, wantCode: codelotse.Forbidden},
		{
			name:     "bad code, 401",
			setup:    func(s *githubtest.Server, _ *Client) { s.SetTokenErrorStatus(401) },
			badCode:  true,
			wantCode: codelotse.Forbidden,
		},
		{
			name:     "bad code, 400",
			setup:    func(s *githubtest.Server, _ *Client) { s.SetTokenErrorStatus(400) },
			badCode:  true,
			wantCode: codelotse.Forbidden,
		},
		{
			name:     "token refused by the API (401)",
			setup:    func(s *githubtest.Server, _ *Client) { s.FailNextOn("/user/installations", githubtest.BadCredentials) },
			wantCode: codelotse.Forbidden,
		},
		{
			name:     "wrong client secret",
			setup:    func(_ *githubtest.Server, c *Client) { c.oauth.ClientSecret = "not-the-secret" },
			wantCode: codelotse.Unavailable,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, c := fixture(t)
			if tt.setup != nil {
				tt.setup(s, c)
			}
			code, verifier := authorize(t, s, c, alice)
			if tt.badCode {
				code = "0123456789abcdef0123"
			}
			id, insts, err := c.SignIn(context.Background(), code, verifier)
			if !errors.Is(err, ErrSignInRejected) {
				t.Fatalf("err = %v, want ErrSignInRejected", err)
			}
			if errors.Is(err, ErrRateLimited) {
				t.Error("a rejection also reads as a rate limit")
			}
			if got := codelotse.ErrorCode(err); got != tt.wantCode {
				t.Errorf("code = %s, want %s", got, tt.wantCode)
			}
			if msg := codelotse.ErrorMessage(err); !strings.HasPrefix(msg, "GitHub rejected the sign-in") {
				t.Errorf("user message = %q", msg)
			}
			if id != (Identity{}) || insts != nil {
				t.Errorf("partial result returned: %+v %+v", id, insts)
			}
		})
	}
}

func TestSignInGitHubDown(t *testing.T) {
	s, c := fixture(t)
	s.FailNextOn("/user/installations/12/repositories", githubtest.ServerError)
	_, insts, err := signIn(t, s, c, alice)
	if err == nil || errors.Is(err, ErrRateLimited) || errors.Is(err, ErrSignInRejected) {
		t.Fatalf("err = %v, want a plain failure", err)
	}
	if codelotse.ErrorCode(err) != codelotse.Unavailable || insts != nil {
		t.Errorf("code %s, installations %v", codelotse.ErrorCode(err), insts)
	}
	if !strings.Contains(err.Error(), "502") {
		t.Errorf("error %q does not give GitHub's status", err)
	}
}

func TestSignInCanceled(t *testing.T) {
	s, c := fixture(t)
	code, verifier := authorize(t, s, c, alice)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := c.SignIn(ctx, code, verifier)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}
