package githubtest

import (
	"archive/tar"
	"compress/gzip"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

const commitA = "1111111111111111111111111111111111111111"

// appServer is the sign-in fixture plus content for the installation API.
func appServer(t *testing.T) *Server {
	t.Helper()
	s := server(t)
	s.AddOrg(20, "other")
	s.AddInstallation(200, 20)
	s.AddRepo(200, Repo{ID: 2000, Name: "secret"})
	return s
}

func signJWT(t *testing.T, key *rsa.PrivateKey, alg string, claims map[string]any) string {
	t.Helper()
	h, _ := json.Marshal(map[string]string{"alg": alg, "typ": "JWT"})
	c, _ := json.Marshal(claims)
	input := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c)
	sum := sha256.Sum256([]byte(input))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func serverKey(t *testing.T, s *Server) *rsa.PrivateKey {
	t.Helper()
	block, _ := pem.Decode(s.AppPrivateKeyPEM())
	if block == nil || block.Type != "RSA PRIVATE KEY" {
		t.Fatalf("AppPrivateKeyPEM is not a PKCS#1 PEM key")
	}
	key, err := x509.ParsePKCS1PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func goodClaims(s *Server) map[string]any {
	now := time.Now().Unix()
	return map[string]any{"iat": now - 60, "exp": now + 540, "iss": s.AppID}
}

// do sends method path with the Authorization value and decodes the JSON
// answer into v.
func do(t *testing.T, s *Server, method, auth, path string, v any) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	c := s.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if v != nil {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
	return resp
}

func TestAppJWT(t *testing.T) {
	s := appServer(t)
	key := serverKey(t, s)
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	now := time.Now().Unix()
	with := func(k string, v any) map[string]any {
		c := goodClaims(s)
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	for _, tt := range []struct {
		name string
		auth string
		want int
	}{
		{"good", "Bearer " + signJWT(t, key, "RS256", goodClaims(s)), 200},
		{"iss as a string", "Bearer " + signJWT(t, key, "RS256", with("iss", "1")), 200},
		{"iss as the client ID", "Bearer " + signJWT(t, key, "RS256", with("iss", s.ClientID)), 200},
		{"another app", "Bearer " + signJWT(t, key, "RS256", with("iss", 2)), 401},
		{"another key", "Bearer " + signJWT(t, other, "RS256", goodClaims(s)), 401},
		{"expired", "Bearer " + signJWT(t, key, "RS256", with("exp", now-1)), 401},
		{"too long", "Bearer " + signJWT(t, key, "RS256", with("exp", now+700)), 401},
		{"no exp", "Bearer " + signJWT(t, key, "RS256", with("exp", nil)), 401},
		{"issued in the future", "Bearer " + signJWT(t, key, "RS256", with("iat", now+120)), 401},
		{"alg none", "Bearer " + strings.Join(strings.Split(signJWT(t, key, "none", goodClaims(s)), ".")[:2], ".") + ".", 401},
		{"token scheme", "token " + signJWT(t, key, "RS256", goodClaims(s)), 401},
		{"user token", "Bearer " + s.IssueToken(1), 401},
		{"nothing", "", 401},
	} {
		var body map[string]any
		resp := do(t, s, "GET", tt.auth, "/api/v3/app/installations/100", &body)
		if resp.StatusCode != tt.want {
			t.Errorf("%s: status %d, want %d (%v)", tt.name, resp.StatusCode, tt.want, body["message"])
		}
		if tt.want == 200 {
			hasKeys(t, "installation", body, "id", "account", "app_id", "target_type", "permissions", "suspended_at")
			if body["account"].(map[string]any)["login"] != "acme" {
				t.Errorf("account = %v", body["account"])
			}
		}
	}

	// A rotated key: only JWTs signed with the new one are accepted.
	s.SetAppPublicKey(&other.PublicKey)
	if resp := do(t, s, "GET", "Bearer "+signJWT(t, other, "RS256", goodClaims(s)), "/api/v3/app/installations/100", nil); resp.StatusCode != 200 {
		t.Errorf("rotated key: status %d", resp.StatusCode)
	}
	if resp := do(t, s, "GET", "Bearer "+signJWT(t, key, "RS256", goodClaims(s)), "/api/v3/app/installations/100", nil); resp.StatusCode != 401 {
		t.Errorf("old key after rotation: status %d", resp.StatusCode)
	}
}

func TestInstallationTokens(t *testing.T) {
	s := appServer(t)
	jwt := "Bearer " + signJWT(t, serverKey(t, s), "RS256", goodClaims(s))

	var tok struct {
		Token       string            `json:"token"`
		ExpiresAt   time.Time         `json:"expires_at"`
		Permissions map[string]string `json:"permissions"`
	}
	resp := do(t, s, "POST", jwt, "/api/v3/app/installations/100/access_tokens", &tok)
	if resp.StatusCode != http.StatusCreated || !strings.HasPrefix(tok.Token, "ghs_") || tok.Permissions["contents"] != "read" {
		t.Fatalf("access_tokens = %d %+v", resp.StatusCode, tok)
	}
	if d := time.Until(tok.ExpiresAt); d < 59*time.Minute || d > time.Hour {
		t.Errorf("token expires in %v, want an hour", d)
	}
	if n := s.InstallationTokensIssued(100); n != 1 {
		t.Errorf("InstallationTokensIssued = %d", n)
	}
	if resp := do(t, s, "GET", jwt, "/api/v3/app/installations/100/access_tokens", nil); resp.StatusCode != 404 {
		t.Errorf("GET access_tokens: %d", resp.StatusCode)
	}
	if resp := do(t, s, "POST", jwt, "/api/v3/app/installations/999/access_tokens", nil); resp.StatusCode != 404 {
		t.Errorf("unknown installation: %d", resp.StatusCode)
	}
	if resp := do(t, s, "POST", "token "+tok.Token, "/api/v3/app/installations/100/access_tokens", nil); resp.StatusCode != 401 {
		t.Errorf("an installation token cannot issue tokens: %d", resp.StatusCode)
	}

	// The token reads the installation's repositories and nothing else.
	var repos struct {
		TotalCount   int              `json:"total_count"`
		Repositories []map[string]any `json:"repositories"`
	}
	if resp := do(t, s, "GET", "token "+tok.Token, "/api/v3/installation/repositories", &repos); resp.StatusCode != 200 || repos.TotalCount != 3 {
		t.Fatalf("repositories = %d %+v", resp.StatusCode, repos)
	}
	hasKeys(t, "repository", repos.Repositories[0], "id", "full_name", "default_branch", "html_url", "private", "archived")
	if resp := do(t, s, "GET", "token "+tok.Token, "/api/v3/repos/other/secret/pulls", nil); resp.StatusCode != 404 {
		t.Errorf("another installation's repository: %d", resp.StatusCode)
	}
	if resp := do(t, s, "GET", "Bearer "+s.IssueToken(1), "/api/v3/installation/repositories", nil); resp.StatusCode != 401 {
		t.Errorf("a user token on /installation/repositories: %d", resp.StatusCode)
	}

	// Expiry, and a shorter lifetime.
	s.ExpireInstallationTokens()
	var body map[string]any
	if resp := do(t, s, "GET", "token "+tok.Token, "/api/v3/installation/repositories", &body); resp.StatusCode != 401 || body["message"] != "Bad credentials" {
		t.Errorf("expired token: %d %v", resp.StatusCode, body)
	}
	s.SetInstallationTokenLifetime(10 * time.Minute)
	do(t, s, "POST", jwt, "/api/v3/app/installations/100/access_tokens", &tok)
	if d := time.Until(tok.ExpiresAt); d > 10*time.Minute {
		t.Errorf("lifetime 10 minutes: expires in %v", d)
	}
	if other := s.IssueInstallationToken(200); other == tok.Token || !strings.HasPrefix(other, "ghs_") {
		t.Errorf("IssueInstallationToken = %q", other)
	}
	if n := s.InstallationTokensIssued(100); n != 2 {
		t.Errorf("InstallationTokensIssued = %d, want 2 (IssueInstallationToken is not counted)", n)
	}

	// A suspended installation gets no token, and its tokens stop working.
	s.SuspendInstallation(100)
	if resp := do(t, s, "POST", jwt, "/api/v3/app/installations/100/access_tokens", &body); resp.StatusCode != 403 || !strings.Contains(body["message"].(string), "suspended") {
		t.Errorf("suspended: %d %v", resp.StatusCode, body)
	}
	if resp := do(t, s, "GET", "token "+tok.Token, "/api/v3/installation/repositories", nil); resp.StatusCode != 403 {
		t.Errorf("suspended installation's token: %d", resp.StatusCode)
	}
}

func TestRepoPayloadShapes(t *testing.T) {
	s := appServer(t)
	tok := "token " + s.IssueInstallationToken(100)
	at := time.Date(2025, 5, 6, 7, 8, 9, 0, time.UTC)
	s.AddPullRequest(1000, PullRequest{Number: 7, Title: "Add x", Author: "octocat", Head: "feat/x", HeadSHA: commitA, CreatedAt: at})
	s.AddPullRequest(1000, PullRequest{Number: 8, Title: "Bump", Author: "dependabot[bot]", AuthorType: "Bot", State: "closed", Merged: true, CreatedAt: at, UpdatedAt: at.Add(time.Hour)})
	s.AddReview(1000, 7, Review{ID: 70, Author: "octocat", State: "APPROVED", Body: "ok", SubmittedAt: at})
	s.AddReview(1000, 7, Review{ID: 71, Author: "octocat", State: "PENDING"})
	s.AddReviewComment(1000, 7, ReviewComment{ID: 700, ReviewID: 70, Author: "octocat", Body: "b", Path: "a.go", DiffHunk: "@@", Line: 3, StartLine: 1, OriginalLine: 3})
	s.AddReviewComment(1000, 7, ReviewComment{ID: 701, ReviewID: 70, InReplyTo: 700, Author: "ghost", Body: "outdated", Path: "a.go", OriginalLine: 3})
	s.AddCodeScanningAlert(1000, CodeScanningAlert{Number: 1, RuleID: "go/x", RuleName: "X", RuleDescription: "d", RuleSeverity: "error", SecuritySeverityLevel: "high", Path: "a.go", StartLine: 2, EndLine: 3, Message: "m", CommitSHA: commitA})
	s.AddCodeScanningAlert(1000, CodeScanningAlert{Number: 2, State: "fixed", RuleID: "go/y"})

	var pulls []map[string]any
	do(t, s, "GET", tok, "/api/v3/repos/acme/api/pulls?state=all", &pulls)
	if len(pulls) != 2 {
		t.Fatalf("pulls = %v", pulls)
	}
	// sort=created, direction desc by default; equal times by number.
	p, merged := pulls[1], pulls[0]
	if p["number"] != 7.0 || merged["number"] != 8.0 {
		t.Fatalf("order = %v, %v", p["number"], merged["number"])
	}
	hasKeys(t, "pull", p, "number", "title", "state", "merged_at", "user", "base", "head", "html_url", "created_at", "updated_at", "closed_at", "draft")
	if p["merged_at"] != nil || p["state"] != "open" || p["html_url"] != s.WebURL+"acme/api/pull/7" || p["created_at"] != "2025-05-06T07:08:09Z" {
		t.Errorf("pull 7 = %v", p)
	}
	if h := p["head"].(map[string]any); h["ref"] != "feat/x" || h["sha"] != commitA {
		t.Errorf("head = %v", h)
	}
	if b := p["base"].(map[string]any); b["ref"] != "main" {
		t.Errorf("base = %v", b)
	}
	if u := p["user"].(map[string]any); u["login"] != "octocat" || u["type"] != "User" || u["id"] != 1.0 {
		t.Errorf("user = %v", u)
	}
	if merged["merged_at"] != "2025-05-06T08:08:09Z" || merged["state"] != "closed" || merged["user"].(map[string]any)["type"] != "Bot" {
		t.Errorf("pull 8 = %v", merged)
	}

	var reviews []map[string]any
	do(t, s, "GET", tok, "/api/v3/repos/acme/api/pulls/7/reviews", &reviews)
	if len(reviews) != 2 {
		t.Fatalf("reviews = %v", reviews)
	}
	hasKeys(t, "review", reviews[0], "id", "user", "body", "state", "commit_id", "submitted_at", "html_url")
	if reviews[0]["commit_id"] != commitA || reviews[0]["submitted_at"] != "2025-05-06T07:08:09Z" {
		t.Errorf("review = %v", reviews[0])
	}
	if _, ok := reviews[1]["submitted_at"]; ok {
		t.Errorf("a pending review has submitted_at: %v", reviews[1])
	}

	var comments []map[string]any
	do(t, s, "GET", tok, "/api/v3/repos/acme/api/pulls/7/comments", &comments)
	if len(comments) != 2 {
		t.Fatalf("comments = %v", comments)
	}
	hasKeys(t, "comment", comments[0], "id", "pull_request_review_id", "user", "body", "path", "diff_hunk", "line", "start_line",
		"original_line", "commit_id", "original_commit_id", "html_url", "created_at", "position")
	if _, ok := comments[0]["in_reply_to_id"]; ok {
		t.Errorf("a thread's first comment has in_reply_to_id: %v", comments[0])
	}
	if c := comments[0]; c["line"] != 3.0 || c["start_line"] != 1.0 || c["pull_request_review_id"] != 70.0 || c["commit_id"] != commitA {
		t.Errorf("comment 700 = %v", c)
	}
	if c := comments[1]; c["in_reply_to_id"] != 700.0 || c["line"] != nil || c["position"] != nil || c["original_line"] != 3.0 {
		t.Errorf("comment 701 = %v", c)
	}

	var alerts []map[string]any
	do(t, s, "GET", tok, "/api/v3/repos/acme/api/code-scanning/alerts", &alerts)
	if len(alerts) != 1 || alerts[0]["number"] != 1.0 {
		t.Fatalf("alerts without a state = %v, want the open one only", alerts)
	}
	a := alerts[0]
	hasKeys(t, "alert", a, "number", "state", "rule", "tool", "most_recent_instance", "html_url", "created_at", "updated_at")
	hasKeys(t, "rule", a["rule"].(map[string]any), "id", "name", "description", "severity", "security_severity_level")
	inst := a["most_recent_instance"].(map[string]any)
	loc := inst["location"].(map[string]any)
	if loc["path"] != "a.go" || loc["start_line"] != 2.0 || loc["end_line"] != 3.0 || inst["message"].(map[string]any)["text"] != "m" || inst["commit_sha"] != commitA || a["tool"].(map[string]any)["name"] != "CodeQL" {
		t.Errorf("alert = %v", a)
	}
	do(t, s, "GET", tok, "/api/v3/repos/acme/api/code-scanning/alerts?state=fixed", &alerts)
	if len(alerts) != 1 || alerts[0]["number"] != 2.0 || alerts[0]["rule"].(map[string]any)["security_severity_level"] != nil {
		t.Errorf("fixed alerts = %v", alerts)
	}
	for c, want := range map[CodeScanning]int{CodeScanningDisabled: 403, CodeScanningNoAnalysis: 404} {
		s.SetCodeScanning(1000, c)
		var body map[string]any
		if resp := do(t, s, "GET", tok, "/api/v3/repos/acme/api/code-scanning/alerts?state=open", &body); resp.StatusCode != want {
			t.Errorf("code scanning %d: status %d, want %d (%v)", c, resp.StatusCode, want, body)
		}
	}
}

func TestPullsSortAndPages(t *testing.T) {
	s := appServer(t)
	tok := "token " + s.IssueInstallationToken(100)
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, upd := range []int{5, 1, 9, 3} {
		state := "open"
		if i%2 == 1 {
			state = "closed"
		}
		s.AddPullRequest(1000, PullRequest{Number: i + 1, State: state, CreatedAt: base.Add(time.Duration(i) * time.Hour), UpdatedAt: base.Add(time.Duration(upd) * 24 * time.Hour)})
	}
	numbers := func(path string) []int {
		var pulls []struct {
			Number int `json:"number"`
		}
		do(t, s, "GET", tok, path, &pulls)
		var n []int
		for _, p := range pulls {
			n = append(n, p.Number)
		}
		return n
	}
	for path, want := range map[string][]int{
		"/api/v3/repos/acme/api/pulls":                                       {3, 1},
		"/api/v3/repos/acme/api/pulls?state=closed":                          {4, 2},
		"/api/v3/repos/acme/api/pulls?state=all&sort=updated":                {2, 4, 1, 3},
		"/api/v3/repos/acme/api/pulls?state=all&sort=updated&direction=desc": {3, 1, 4, 2},
		"/api/v3/repos/acme/api/pulls?state=all&direction=asc":               {1, 2, 3, 4},
	} {
		if got := numbers(path); !slices.Equal(got, want) {
			t.Errorf("%s = %v, want %v", path, got, want)
		}
	}
	s.SetMaxPerPage(3)
	resp := do(t, s, "GET", tok, "/api/v3/repos/acme/api/pulls?state=all&per_page=100", nil)
	if !strings.Contains(resp.Header.Get("Link"), `page=2&per_page=100&state=all>; rel="next"`) {
		t.Errorf("Link = %q", resp.Header.Get("Link"))
	}
	if got := numbers("/api/v3/repos/acme/api/pulls?state=all&per_page=100&page=2"); !slices.Equal(got, []int{1}) {
		t.Errorf("page 2 = %v", got)
	}
	var body map[string]any
	if resp := do(t, s, "GET", tok, "/api/v3/repos/acme/api/pulls?state=merged", &body); resp.StatusCode != 422 {
		t.Errorf("state=merged: %d", resp.StatusCode)
	}
}

func TestCommitsAndTarball(t *testing.T) {
	s := appServer(t)
	tok := "token " + s.IssueInstallationToken(100)
	var body map[string]any
	if resp := do(t, s, "GET", tok, "/api/v3/repos/acme/api/commits/main", &body); resp.StatusCode != 409 {
		t.Errorf("empty repository: %d %v", resp.StatusCode, body)
	}
	s.SetRepoFiles(1000, commitA, map[string]string{"README.md": "# api\n", "pkg/a/a.go": "package a\n", "pkg/b.go": "package pkg\n"})
	sha2 := strings.Repeat("2", 40)
	s.SetBranchHead(1000, "feature/x", sha2)

	do(t, s, "GET", tok, "/api/v3/repos/acme/api/commits/main", &body)
	if body["sha"] != commitA || body["commit"] == nil || body["html_url"] != s.WebURL+"acme/api/commit/"+commitA {
		t.Errorf("commit = %v", body)
	}
	for ref, want := range map[string]string{"main": commitA, "refs/heads/main": commitA, "feature/x": sha2, commitA[:7]: commitA} {
		req, _ := http.NewRequest("GET", s.APIURL+"repos/acme/api/commits/"+ref, nil)
		req.Header.Set("Authorization", tok)
		req.Header.Set("Accept", "application/vnd.github.sha")
		resp, err := s.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != want {
			t.Errorf("sha of %s = %q, want %s", ref, b, want)
		}
	}
	if resp := do(t, s, "GET", tok, "/api/v3/repos/acme/api/commits/nope", &body); resp.StatusCode != 422 {
		t.Errorf("unknown ref: %d", resp.StatusCode)
	}

	// The tarball redirects to a download URL with its own token.
	resp := do(t, s, "GET", tok, "/api/v3/repos/acme/api/tarball", nil)
	loc, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusFound || err != nil || !strings.HasPrefix(loc.Path, "/_codeload/acme/api/legacy.tar.gz/"+commitA) || loc.Query().Get("token") == "" {
		t.Fatalf("tarball = %d %v", resp.StatusCode, loc)
	}
	if resp := do(t, s, "GET", tok, "/api/v3/repos/acme/api/tarball/feature/x", nil); resp.StatusCode != 404 {
		t.Errorf("a branch whose commit has no files: %d", resp.StatusCode)
	}
	for _, r := range s.Requests() {
		if strings.Contains(r, loc.Query().Get("token")) {
			t.Errorf("request log shows the download token: %s", r)
		}
	}

	// The download needs no Authorization, only the URL.
	get := func(u string) *http.Response {
		t.Helper()
		r, err := s.Client().Get(u)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	dl := get(loc.String())
	defer dl.Body.Close()
	if dl.StatusCode != 200 || dl.Header.Get("Content-Type") != "application/x-gzip" {
		t.Fatalf("download = %d %s", dl.StatusCode, dl.Header.Get("Content-Type"))
	}
	zr, err := gzip.NewReader(dl.Body)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var names []string
	comment := ""
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			comment = h.PAXRecords["comment"]
			continue
		}
		names = append(names, h.Name)
		if h.Name == "acme-api-1111111/pkg/a/a.go" {
			b, _ := io.ReadAll(tr)
			if string(b) != "package a\n" {
				t.Errorf("a.go = %q", b)
			}
		}
	}
	want := []string{"acme-api-1111111/", "acme-api-1111111/README.md", "acme-api-1111111/pkg/", "acme-api-1111111/pkg/a/", "acme-api-1111111/pkg/a/a.go", "acme-api-1111111/pkg/b.go"}
	if comment != commitA || !slices.Equal(names, want) {
		t.Errorf("archive: comment %q, entries %q; want %q", comment, names, want)
	}

	bad := *loc
	bad.RawQuery = "token=wrong"
	if r := get(bad.String()); r.StatusCode != 404 {
		t.Errorf("wrong download token: %d", r.StatusCode)
	}
	r := get(strings.Replace(loc.String(), commitA, sha2, 1))
	r.Body.Close()
	if r.StatusCode != 404 {
		t.Errorf("token for another commit: %d", r.StatusCode)
	}
}

func TestInstallationFailures(t *testing.T) {
	s := appServer(t)
	tok := "token " + s.IssueInstallationToken(100)
	s.SetRepoFiles(1000, commitA, map[string]string{"a": "a"})
	s.FailNextOn("/repos/acme/api/pulls", TooManyRequests)
	s.FailNextOn("/app/installations/100/access_tokens", ServerError)
	s.FailNextOn("/_codeload/acme/api/legacy.tar.gz/"+commitA, SecondaryRateLimit)

	if resp := do(t, s, "GET", tok, "/api/v3/repos/acme/api/pulls", nil); resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("pulls: %d", resp.StatusCode)
	}
	if resp := do(t, s, "POST", "", "/api/v3/app/installations/100/access_tokens", nil); resp.StatusCode != 502 {
		t.Errorf("access_tokens: %d", resp.StatusCode)
	}
	loc := do(t, s, "GET", tok, "/api/v3/repos/acme/api/tarball/main", nil).Header.Get("Location")
	r, err := s.Client().Get(loc)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != 403 {
		t.Errorf("download: %d", r.StatusCode)
	}

	s.FailNextOn("/installation/repositories", ConnectionReset)
	req, _ := http.NewRequest("GET", s.APIURL+"installation/repositories", nil)
	req.Header.Set("Authorization", tok)
	c := s.Client()
	tr := c.Transport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true // so net/http cannot retry on a fresh connection
	c.Transport = tr
	if resp, err := c.Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("connection reset: got %d, want a transport error", resp.StatusCode)
	}
}
