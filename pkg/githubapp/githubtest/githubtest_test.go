package githubtest

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
)

const callback = "https://codelotse.test/auth/github/callback"

func server(t *testing.T) *Server {
	t.Helper()
	s := New(t)
	s.SetCallbackURL(callback)
	s.AddUser(User{ID: 1, Login: "octocat", Name: "The Octocat", Emails: []Email{
		{Email: "octocat@example.com", Primary: true, Verified: true, Visibility: "public"},
		{Email: "old@example.com", Verified: true},
	}})
	s.AddOrg(10, "acme")
	s.AddInstallation(100, 10)
	s.AddRepo(100, Repo{ID: 1000, Name: "api", Private: true})
	s.AddRepo(100, Repo{ID: 1001, Name: "web"})
	s.AddRepo(100, Repo{ID: 1002, Name: "docs"})
	s.SetMembership(1, 10, "active", "member")
	s.SetPermission(1, 1000, "push")
	s.SetPermission(1, 1001, "pull")
	s.SetPermission(1, 1002, "maintain")
	return s
}

// get fetches path with the token and decodes the JSON answer.
func get(t *testing.T, s *Server, auth, path string, v any) *http.Response {
	t.Helper()
	req, err := http.NewRequest("GET", s.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if v != nil {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
	return resp
}

func keys(m map[string]any) []string {
	var k []string
	for key := range m {
		k = append(k, key)
	}
	slices.Sort(k)
	return k
}

func hasKeys(t *testing.T, what string, m map[string]any, want ...string) {
	t.Helper()
	for _, k := range want {
		if _, ok := m[k]; !ok {
			t.Errorf("%s has no %q (keys %v)", what, k, keys(m))
		}
	}
}

func TestPayloadShapes(t *testing.T) {
	s := server(t)
	tok := "Bearer " + s.IssueToken(1)

	var user map[string]any
	get(t, s, tok, "/api/v3/user", &user)
	hasKeys(t, "user", user, "login", "id", "node_id", "type", "name", "email", "html_url", "site_admin")
	if user["login"] != "octocat" || user["id"] != float64(1) || user["email"] != nil || user["type"] != "User" {
		t.Errorf("user = %v", user)
	}

	var emails []map[string]any
	get(t, s, tok, "/api/v3/user/emails", &emails)
	if len(emails) != 2 {
		t.Fatalf("emails = %v", emails)
	}
	hasKeys(t, "email", emails[0], "email", "primary", "verified", "visibility")
	if emails[0]["primary"] != true || emails[0]["visibility"] != "public" || emails[1]["visibility"] != nil {
		t.Errorf("emails = %v", emails)
	}

	var insts struct {
		TotalCount    int              `json:"total_count"`
		Installations []map[string]any `json:"installations"`
	}
	get(t, s, tok, "/api/v3/user/installations", &insts)
	if insts.TotalCount != 1 || len(insts.Installations) != 1 {
		t.Fatalf("installations = %+v", insts)
	}
	in := insts.Installations[0]
	hasKeys(t, "installation", in, "id", "account", "app_id", "target_id", "target_type", "permissions", "repository_selection", "suspended_at")
	acct := in["account"].(map[string]any)
	if in["id"] != float64(100) || in["app_id"] != float64(s.AppID) || acct["login"] != "acme" || acct["id"] != float64(10) || acct["type"] != "Organization" {
		t.Errorf("installation = %v", in)
	}

	var repos struct {
		TotalCount   int              `json:"total_count"`
		Repositories []map[string]any `json:"repositories"`
	}
	get(t, s, tok, "/api/v3/user/installations/100/repositories", &repos)
	if repos.TotalCount != 3 || len(repos.Repositories) != 3 {
		t.Fatalf("repositories = %+v", repos)
	}
	r := repos.Repositories[0]
	hasKeys(t, "repository", r, "id", "name", "full_name", "owner", "private", "html_url", "default_branch", "permissions")
	if r["full_name"] != "acme/api" || r["private"] != true || r["default_branch"] != "main" {
		t.Errorf("repository = %v", r)
	}
	wantPerms := []map[string]any{
		{"admin": false, "maintain": false, "push": true, "triage": true, "pull": true},
		{"admin": false, "maintain": false, "push": false, "triage": false, "pull": true},
		{"admin": false, "maintain": true, "push": true, "triage": true, "pull": true},
	}
	for i, want := range wantPerms {
		if got := repos.Repositories[i]["permissions"]; !reflect.DeepEqual(got, want) {
			t.Errorf("%s permissions = %v, want %v", repos.Repositories[i]["full_name"], got, want)
		}
	}

	var m map[string]any
	get(t, s, tok, "/api/v3/user/memberships/orgs/ACME", &m)
	hasKeys(t, "membership", m, "url", "state", "role", "organization_url", "organization", "user")
	if m["state"] != "active" || m["role"] != "member" || m["organization"].(map[string]any)["login"] != "acme" || m["user"].(map[string]any)["login"] != "octocat" {
		t.Errorf("membership = %v", m)
	}
}

func TestAPIAuthAndRoots(t *testing.T) {
	s := server(t)
	tok := s.IssueToken(1)
	for _, tt := range []struct {
		auth, path string
		want       int
	}{
		{"Bearer " + tok, "/api/v3/user", 200},
		{"token " + tok, "/api/v3/user", 200},
		{"Bearer " + tok, "/user", 200}, // api.github.com layout
		{"", "/api/v3/user", 401},
		{"Bearer ghu_unknown", "/api/v3/user", 401},
		{"Basic " + tok, "/api/v3/user", 401},
		{"Bearer " + tok, "/api/v3/user/memberships/orgs/nope", 404},
		{"Bearer " + tok, "/api/v3/user/memberships/orgs/octocat", 404}, // a user, not an org
		{"Bearer " + tok, "/api/v3/user/installations/999/repositories", 404},
		{"Bearer " + tok, "/api/v3/repos/acme/api", 404},
	} {
		var body map[string]any
		resp := get(t, s, tt.auth, tt.path, &body)
		if resp.StatusCode != tt.want {
			t.Errorf("%q %s: status %d, want %d", strings.SplitN(tt.auth, " ", 2)[0], tt.path, resp.StatusCode, tt.want)
		}
		if tt.want != 200 && body["message"] == nil {
			t.Errorf("%s: error without a message: %v", tt.path, body)
		}
		if resp.Header.Get("X-RateLimit-Remaining") == "" {
			t.Errorf("%s: no rate-limit headers", tt.path)
		}
	}
}

func TestPaginationLinks(t *testing.T) {
	s := server(t)
	s.SetMaxPerPage(1)
	tok := "Bearer " + s.IssueToken(1)

	var page struct {
		Repositories []struct {
			ID int64 `json:"id"`
		} `json:"repositories"`
	}
	resp := get(t, s, tok, "/api/v3/user/installations/100/repositories?per_page=100&page=2", &page)
	if len(page.Repositories) != 1 || page.Repositories[0].ID != 1001 {
		t.Fatalf("page 2 = %+v", page)
	}
	links := map[string]string{}
	for _, part := range strings.Split(resp.Header.Get("Link"), ",") {
		target, rel, _ := strings.Cut(strings.TrimSpace(part), "; ")
		links[rel] = strings.Trim(target, "<>")
	}
	for rel, wantPage := range map[string]string{`rel="next"`: "3", `rel="prev"`: "1", `rel="last"`: "3", `rel="first"`: "1"} {
		u, err := url.Parse(links[rel])
		if err != nil || u.Path != "/api/v3/user/installations/100/repositories" || u.Query().Get("page") != wantPage || u.Query().Get("per_page") != "100" {
			t.Errorf("%s = %q, want page %s", rel, links[rel], wantPage)
		}
	}

	resp = get(t, s, tok, "/api/v3/user/installations/100/repositories?per_page=100&page=3", &page)
	if strings.Contains(resp.Header.Get("Link"), `rel="next"`) {
		t.Errorf("last page links onward: %s", resp.Header.Get("Link"))
	}
}

func TestFailures(t *testing.T) {
	s := server(t)
	tok := "Bearer " + s.IssueToken(1)
	s.FailNextOn("/user/emails", TooManyRequests)
	s.FailNext(SecondaryRateLimit)

	var body map[string]any
	resp := get(t, s, tok, "/api/v3/user", &body)
	if resp.StatusCode != 403 || resp.Header.Get("Retry-After") != "60" || !strings.Contains(body["message"].(string), "secondary rate limit") {
		t.Errorf("secondary limit: %d %v %v", resp.StatusCode, resp.Header, body)
	}
	if resp := get(t, s, tok, "/api/v3/user", nil); resp.StatusCode != 200 {
		t.Errorf("second /user: %d, want 200 (the failure is used up)", resp.StatusCode)
	}
	if resp := get(t, s, tok, "/api/v3/user/emails", nil); resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("/user/emails: %d, want 429 with Retry-After", resp.StatusCode)
	}
	s.FailNext(PrimaryRateLimit)
	if resp := get(t, s, tok, "/api/v3/user", nil); resp.StatusCode != 403 || resp.Header.Get("X-RateLimit-Remaining") != "0" || resp.Header.Get("X-RateLimit-Reset") == "" {
		t.Errorf("primary limit: %d %v", resp.StatusCode, resp.Header)
	}
}

// authorizeURL is what a client's AuthCodeURL would produce.
func authorizeURL(s *Server, verifier, state string) string {
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{
		"client_id":             {s.ClientID},
		"redirect_uri":          {callback},
		"response_type":         {"code"},
		"state":                 {state},
		"code_challenge":        {base64.RawURLEncoding.EncodeToString(sum[:])},
		"code_challenge_method": {"S256"},
	}
	return s.WebURL + "login/oauth/authorize?" + q.Encode()
}

func exchange(t *testing.T, s *Server, form url.Values, accept string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest("POST", s.WebURL+"login/oauth/access_token", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

func TestOAuth(t *testing.T) {
	s := server(t)
	const verifier = "a-verifier-of-at-least-forty-three-characters-long"

	if _, _, err := s.Authorize(authorizeURL(s, verifier, "x")); err == nil {
		t.Error("authorize succeeded with nobody signed in")
	}
	s.SignInAs(1)

	form := func(code string) url.Values {
		return url.Values{"client_id": {s.ClientID}, "client_secret": {s.ClientSecret}, "code": {code}, "redirect_uri": {callback}, "code_verifier": {verifier}}
	}

	// JSON when asked for.
	code, state, err := s.Authorize(authorizeURL(s, verifier, "st"))
	if err != nil || state != "st" || len(code) != 20 {
		t.Fatalf("authorize: code %q state %q err %v", code, state, err)
	}
	status, ctype, body := exchange(t, s, form(code), "application/json")
	var tok map[string]string
	if err := json.Unmarshal([]byte(body), &tok); err != nil || status != 200 || !strings.HasPrefix(ctype, "application/json") {
		t.Fatalf("JSON exchange: %d %s %s", status, ctype, body)
	}
	if !strings.HasPrefix(tok["access_token"], "ghu_") || tok["token_type"] != "bearer" {
		t.Errorf("token response = %v", tok)
	}
	if resp := get(t, s, "Bearer "+tok["access_token"], "/api/v3/user", nil); resp.StatusCode != 200 {
		t.Errorf("issued token refused: %d", resp.StatusCode)
	}

	// The code is single-use.
	status, _, body = exchange(t, s, form(code), "application/json")
	if status != 200 || !strings.Contains(body, `"error":"bad_verification_code"`) {
		t.Errorf("reused code: %d %s", status, body)
	}

	// Form-encoded by default.
	code, _, _ = s.Authorize(authorizeURL(s, verifier, "st"))
	status, ctype, body = exchange(t, s, form(code), "")
	v, _ := url.ParseQuery(body)
	if status != 200 || !strings.HasPrefix(ctype, "application/x-www-form-urlencoded") || !strings.HasPrefix(v.Get("access_token"), "ghu_") || v.Get("token_type") != "bearer" {
		t.Errorf("form exchange: %d %s %s", status, ctype, body)
	}

	// Refusals, each with a fresh code.
	for _, tt := range []struct {
		name   string
		change func(url.Values)
		want   string
	}{
		{"wrong verifier", func(f url.Values) { f.Set("code_verifier", "another-verifier-of-at-least-forty-three-chars") }, "bad_verification_code"},
		{"no verifier", func(f url.Values) { f.Del("code_verifier") }, "bad_verification_code"},
		{"wrong secret", func(f url.Values) { f.Set("client_secret", "nope") }, "incorrect_client_credentials"},
		{"wrong client", func(f url.Values) { f.Set("client_id", "nope") }, "incorrect_client_credentials"},
		{"other redirect", func(f url.Values) { f.Set("redirect_uri", "https://evil.test/cb") }, "redirect_uri_mismatch"},
	} {
		code, _, _ := s.Authorize(authorizeURL(s, verifier, "st"))
		f := form(code)
		tt.change(f)
		status, _, body := exchange(t, s, f, "application/json")
		if status != 200 || !strings.Contains(body, `"error":"`+tt.want+`"`) {
			t.Errorf("%s: %d %s, want error %s", tt.name, status, body, tt.want)
		}
	}

	s.SetTokenErrorStatus(401)
	if status, _, _ := exchange(t, s, form("nope"), "application/json"); status != 401 {
		t.Errorf("SetTokenErrorStatus(401): got %d", status)
	}

	s.DenyAuthorization()
	if _, state, err := s.Authorize(authorizeURL(s, verifier, "st")); err == nil || !strings.Contains(err.Error(), "access_denied") || state != "st" {
		t.Errorf("denied: state %q err %v", state, err)
	}
}

func TestAuthorizeChecksRequest(t *testing.T) {
	s := server(t)
	s.SignInAs(1)
	good := authorizeURL(s, "a-verifier-of-at-least-forty-three-characters-long", "st")
	for _, tt := range []struct {
		name string
		edit func(url.Values)
	}{
		{"unknown client", func(q url.Values) { q.Set("client_id", "nope") }},
		{"unregistered redirect", func(q url.Values) { q.Set("redirect_uri", "https://evil.test/cb") }},
		{"no PKCE", func(q url.Values) { q.Del("code_challenge") }},
		{"plain PKCE", func(q url.Values) { q.Set("code_challenge_method", "plain") }},
	} {
		u, _ := url.Parse(good)
		q := u.Query()
		tt.edit(q)
		u.RawQuery = q.Encode()
		if _, _, err := s.Authorize(u.String()); err == nil {
			t.Errorf("%s: authorize redirected", tt.name)
		}
	}

	// A browser following the redirect lands on the callback with the code.
	u, _ := url.Parse(good)
	q := u.Query()
	q.Del("redirect_uri") // GitHub falls back to the registered callback
	u.RawQuery = q.Encode()
	c := s.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Get(u.String())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc.String(), callback+"?") || loc.Query().Get("code") == "" || loc.Query().Get("state") != "st" {
		t.Errorf("redirect = %d %s", resp.StatusCode, loc)
	}
}

func TestRequestsLogHasNoTokens(t *testing.T) {
	s := server(t)
	tok := s.IssueToken(1)
	get(t, s, "Bearer "+tok, "/api/v3/user", nil)
	for _, r := range s.Requests() {
		if strings.Contains(r, tok) {
			t.Errorf("request log shows the token: %s", r)
		}
	}
	if got := s.Requests(); len(got) != 1 || got[0] != "GET /api/v3/user" {
		t.Errorf("requests = %v", got)
	}
}
