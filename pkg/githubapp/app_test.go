package githubapp

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
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
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/githubapp/githubtest"
)

// The installation every sync test reads: organization acme (10),
// installation 100, repositories acme/api (1000) and acme/web (1001).
const (
	acmeID  = 10
	instID  = 100
	apiRepo = 1000
	webRepo = 1001
)

// fakeClock runs the retry loop and the token cache without waiting:
// Sleep records the wait and moves the clock on.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	slept []time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.slept = append(c.slept, d)
	c.now = c.now.Add(d)
	return nil
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) Slept() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.slept...)
}

func appServer(t *testing.T) *githubtest.Server {
	t.Helper()
	s := githubtest.New(t)
	s.AddOrg(acmeID, "acme")
	s.AddInstallation(instID, acmeID)
	s.AddRepo(instID, githubtest.Repo{ID: apiRepo, Name: "api", Private: true})
	s.AddRepo(instID, githubtest.Repo{ID: webRepo, Name: "web", DefaultBranch: "trunk", Archived: true})
	return s
}

// newApp returns an App for s with a fake clock.
func newApp(t *testing.T, s *githubtest.Server, apiURL string, hc *http.Client) (*App, *fakeClock) {
	t.Helper()
	if hc == nil {
		hc = s.Client()
	}
	a, err := NewApp(AppConfig{AppID: s.AppID, PrivateKeyPEM: s.AppPrivateKeyPEM(), APIURL: apiURL, HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	clk := &fakeClock{now: time.Now()}
	a.clock = clk
	return a, clk
}

func appFixture(t *testing.T) (*githubtest.Server, *App, *fakeClock) {
	t.Helper()
	s := appServer(t)
	a, clk := newApp(t, s, s.APIURL, nil)
	return s, a, clk
}

// count counts the served requests that start with prefix.
func count(s *githubtest.Server, prefix string) int {
	n := 0
	for _, r := range s.Requests() {
		if strings.HasPrefix(r, prefix) {
			n++
		}
	}
	return n
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func TestNewAppValidatesConfig(t *testing.T) {
	s := githubtest.New(t)
	good := s.AppPrivateKeyPEM()
	block, _ := pem.Decode(good)
	rsaKey, err := x509.ParsePKCS1PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(rsaKey)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecDER, _ := x509.MarshalPKCS8PrivateKey(ecKey)
	smallKey, _ := rsa.GenerateKey(rand.Reader, 1024)
	encrypted := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-128-CBC,00"}, Bytes: block.Bytes})
	// A fragment of the key body: no error may quote it.
	keyText := string(good[40:80])

	tests := []struct {
		name string
		cfg  AppConfig
		want string
	}{
		{"no app id", AppConfig{PrivateKeyPEM: good}, "app ID"},
		{"no key", AppConfig{AppID: 1}, "PEM"},
		{"not PEM", AppConfig{AppID: 1, PrivateKeyPEM: []byte("ghp_not-a-key")}, "PEM"},
		{"corrupt PKCS#1", AppConfig{AppID: 1, PrivateKeyPEM: pemBlock("RSA PRIVATE KEY", block.Bytes[:100])}, "PKCS#1"},
		{"corrupt PKCS#8", AppConfig{AppID: 1, PrivateKeyPEM: pemBlock("PRIVATE KEY", block.Bytes[:100])}, "PKCS#8"},
		{"EC key", AppConfig{AppID: 1, PrivateKeyPEM: pemBlock("PRIVATE KEY", ecDER)}, "not an RSA key"},
		{"certificate", AppConfig{AppID: 1, PrivateKeyPEM: pemBlock("CERTIFICATE", []byte("x"))}, `"CERTIFICATE"`},
		{"small key", AppConfig{AppID: 1, PrivateKeyPEM: pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(smallKey))}, "1024 bits"},
		{"encrypted key", AppConfig{AppID: 1, PrivateKeyPEM: encrypted}, "encrypted"},
		{"bad API URL", AppConfig{AppID: 1, PrivateKeyPEM: good, APIURL: "ftp://ghe.example/api/v3/"}, "http"},
		{"API URL with credentials", AppConfig{AppID: 1, PrivateKeyPEM: good, APIURL: "https://x:hunter2@ghe.example/api/v3/"}, "credentials"}, // gitleaks:allow (a fake password: the test refuses URLs with credentials)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewApp(tt.cfg)
			if err == nil {
				t.Fatal("NewApp accepted the config")
			}
			if codelotse.ErrorCode(err) != codelotse.Invalid || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v (code %s), want invalid mentioning %q", err, codelotse.ErrorCode(err), tt.want)
			}
			if strings.Contains(err.Error(), keyText) || strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error quotes a secret: %v", err)
			}
		})
	}

	for name, key := range map[string][]byte{"PKCS#1": good, "PKCS#8": pemBlock("PRIVATE KEY", pkcs8)} {
		a, err := NewApp(AppConfig{AppID: 7, PrivateKeyPEM: key})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if a.apiURL.String() != DefaultAPIURL {
			t.Errorf("default API URL = %s", a.apiURL)
		}
		for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
			if out := fmt.Sprintf(format, a); strings.Contains(out, "PRIVATE") || strings.Contains(out, rsaKey.D.String()[:20]) {
				t.Errorf("%s shows the key: %s", format, out)
			}
		}
	}
	if a, err := NewApp(AppConfig{AppID: 7, PrivateKeyPEM: good, APIURL: "https://ghe.example/api/v3"}); err != nil || a.apiURL.String() != "https://ghe.example/api/v3/" {
		t.Errorf("GHES API URL: %v, %v", a, err)
	}
}

func TestAppJWT(t *testing.T) {
	s := githubtest.New(t)
	a, err := NewApp(AppConfig{AppID: 4242, PrivateKeyPEM: s.AppPrivateKeyPEM()})
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now().Unix()
	tok, err := a.jwt()
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("JWT has %d parts", len(parts))
	}
	decode := func(seg string, v any) {
		t.Helper()
		b, err := base64.RawURLEncoding.DecodeString(seg)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatal(err)
		}
	}
	var header map[string]string
	decode(parts[0], &header)
	if header["alg"] != "RS256" || header["typ"] != "JWT" {
		t.Errorf("header = %v", header)
	}
	var claims struct {
		IAT int64  `json:"iat"`
		EXP int64  `json:"exp"`
		ISS string `json:"iss"`
	}
	decode(parts[1], &claims)
	if claims.ISS != "4242" {
		t.Errorf("iss = %q", claims.ISS)
	}
	if d := before - claims.IAT; d < 59 || d > 62 {
		t.Errorf("iat is %d s before now, want 60", d)
	}
	if claims.EXP-claims.IAT != 600 || claims.EXP > time.Now().Unix()+600 {
		t.Errorf("exp %d, iat %d: want exp = iat + 10 min, at most 10 min ahead", claims.EXP, claims.IAT)
	}
	block, _ := pem.Decode(s.AppPrivateKeyPEM())
	key, _ := x509.ParsePKCS1PrivateKey(block.Bytes)
	sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(&key.PublicKey, crypto.SHA256, sum[:], sig); err != nil {
		t.Errorf("signature does not verify: %v", err)
	}
}

func TestAccount(t *testing.T) {
	s, a, _ := appFixture(t)
	id, login, err := a.Installation(instID).Account(context.Background())
	if err != nil || id != acmeID || login != "acme" {
		t.Fatalf("Account = %d, %q, %v", id, login, err)
	}
	// The account is read as the app: no installation token is needed.
	if n := s.InstallationTokensIssued(instID); n != 0 {
		t.Errorf("%d installation tokens issued for Account", n)
	}

	_, _, err = a.Installation(999).Account(context.Background())
	if !errors.Is(err, ErrNotInstalled) || codelotse.ErrorCode(err) != codelotse.NotFound {
		t.Errorf("unknown installation: err = %v (code %s), want ErrNotInstalled, not found", err, codelotse.ErrorCode(err))
	}
	if _, _, err := a.Installation(0).Account(context.Background()); codelotse.ErrorCode(err) != codelotse.Invalid {
		t.Errorf("installation 0: err = %v", err)
	}
}

func TestInstallationTokenCachedAndRefreshed(t *testing.T) {
	s, a, clk := appFixture(t)
	ctx := context.Background()
	c := a.Installation(instID)
	for range 3 {
		if _, err := c.Repositories(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.HeadCommit(ctx, "acme/api", "main"); codelotse.ErrorCode(err) != codelotse.Conflict {
		t.Fatalf("HeadCommit on an empty repository: %v", err)
	}
	// Another client of the same App shares the token.
	if _, err := a.Installation(instID).Repositories(ctx); err != nil {
		t.Fatal(err)
	}
	if n := s.InstallationTokensIssued(instID); n != 1 {
		t.Fatalf("%d tokens issued for 5 calls, want 1 (cached)", n)
	}

	// Tokens live an hour; the cache replaces them five minutes early.
	clk.Advance(54 * time.Minute)
	if _, err := c.Repositories(ctx); err != nil {
		t.Fatal(err)
	}
	if n := s.InstallationTokensIssued(instID); n != 1 {
		t.Errorf("after 54 minutes: %d tokens issued, want 1", n)
	}
	clk.Advance(2 * time.Minute)
	if _, err := c.Repositories(ctx); err != nil {
		t.Fatal(err)
	}
	if n := s.InstallationTokensIssued(instID); n != 2 {
		t.Errorf("after 56 minutes: %d tokens issued, want 2 (refreshed)", n)
	}

	// A token GitHub no longer accepts (expired early, or revoked) is
	// replaced once, and the request succeeds.
	s.ExpireInstallationTokens()
	if _, err := c.Repositories(ctx); err != nil {
		t.Fatalf("after the token expired: %v", err)
	}
	if n := s.InstallationTokensIssued(instID); n != 3 {
		t.Errorf("after a 401: %d tokens issued, want 3", n)
	}

	// A token GitHub issues with less than the margin left is used, not
	// kept.
	s.SetInstallationTokenLifetime(4 * time.Minute)
	s.ExpireInstallationTokens()
	for range 2 {
		if _, err := c.Repositories(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.InstallationTokensIssued(instID); n != 5 {
		t.Errorf("short-lived tokens: %d issued, want 5", n)
	}
}

func TestInstallationTokenMintedOnceConcurrently(t *testing.T) {
	s, a, _ := appFixture(t)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Go(func() {
			_, err := a.Installation(instID).Repositories(context.Background())
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
	if n := s.InstallationTokensIssued(instID); n != 1 {
		t.Errorf("%d tokens issued for 20 concurrent calls, want 1", n)
	}
}

func TestInstallationSuspendedOrGone(t *testing.T) {
	s, a, _ := appFixture(t)
	s.SuspendInstallation(instID)
	_, err := a.Installation(instID).Repositories(context.Background())
	if !errors.Is(err, ErrNotInstalled) || codelotse.ErrorCode(err) != codelotse.Forbidden || !strings.Contains(err.Error(), "suspended") {
		t.Errorf("suspended: err = %v (code %s)", err, codelotse.ErrorCode(err))
	}
	_, err = a.Installation(12345).Repositories(context.Background())
	if !errors.Is(err, ErrNotInstalled) || codelotse.ErrorCode(err) != codelotse.NotFound {
		t.Errorf("gone: err = %v (code %s)", err, codelotse.ErrorCode(err))
	}
}

func TestAppCredentialsRejected(t *testing.T) {
	s := appServer(t)
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	s.SetAppPublicKey(&other.PublicKey) // the key was rotated on GitHub
	a, _ := newApp(t, s, s.APIURL, nil)
	for name, call := range map[string]func() error{
		"Account":      func() error { _, _, err := a.Installation(instID).Account(context.Background()); return err },
		"Repositories": func() error { _, err := a.Installation(instID).Repositories(context.Background()); return err },
	} {
		err := call()
		if !errors.Is(err, ErrAppRejected) || codelotse.ErrorCode(err) != codelotse.Unavailable {
			t.Errorf("%s: err = %v, want ErrAppRejected", name, err)
		}
		if strings.Contains(err.Error(), "eyJ") || strings.Contains(codelotse.ErrorMessage(err), "eyJ") {
			t.Errorf("%s: error shows a JWT: %v", name, err)
		}
	}
	// Each was tried once: a new JWT would be refused the same way.
	if n := count(s, "POST /api/v3/app/installations/100/access_tokens"); n != 1 {
		t.Errorf("%d token requests, want 1", n)
	}
	// A JWT for another app id is refused too.
	s2 := appServer(t)
	b, err := NewApp(AppConfig{AppID: s2.AppID + 1, PrivateKeyPEM: s2.AppPrivateKeyPEM(), APIURL: s2.APIURL, HTTPClient: s2.Client()})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Installation(instID).Account(context.Background()); !errors.Is(err, ErrAppRejected) || !strings.Contains(err.Error(), "Integration not found") {
		t.Errorf("wrong app id: err = %v", err)
	}
}

// TestErrorsCarryNoCredentials uses a server that echoes the request's
// Authorization header into every error message.
func TestErrorsCarryNoCredentials(t *testing.T) {
	const token = "ghs_echoedInstallationToken0123456789ab"
	var jwt string
	var status int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		auth := r.Header.Get("Authorization")
		if r.URL.Path == "/app/installations/1/access_tokens" {
			jwt = strings.TrimPrefix(auth, "Bearer ")
			w.WriteHeader(http.StatusCreated)
			_, _ = fmt.Fprintf(w, `{"token":%q,"expires_at":%q}`, token, time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
			return
		}
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"message": "you sent " + auth})
	}))
	t.Cleanup(srv.Close)
	s := githubtest.New(t)
	for _, st := range []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusBadGateway, http.StatusTooManyRequests} {
		status = st
		a, err := NewApp(AppConfig{AppID: 1, PrivateKeyPEM: s.AppPrivateKeyPEM(), APIURL: srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		a.clock = &fakeClock{now: time.Now()}
		_, err = a.Installation(1).Repositories(context.Background())
		if err == nil {
			t.Fatalf("status %d: no error", st)
		}
		var ce *codelotse.Error
		errors.As(err, &ce)
		for _, text := range []string{err.Error(), codelotse.ErrorMessage(err), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err), ce.Error(), ce.Message} {
			if strings.Contains(text, token) || jwt != "" && strings.Contains(text, jwt) {
				t.Errorf("status %d: error shows a credential: %s", st, text)
			}
		}
		if !strings.Contains(err.Error(), fmt.Sprint(st)) {
			t.Errorf("status %d: error does not say which: %v", st, err)
		}
	}
}

// TestTokenStaysOnAPIHostForReads follows an API redirect to another host
// (as for a renamed repository): the installation token must not go along.
func TestTokenStaysOnAPIHostForReads(t *testing.T) {
	var leaked []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a := r.Header.Get("Authorization"); a != "" {
			leaked = append(leaked, a)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprint(w, `{"total_count":1,"repositories":[{"id":5,"full_name":"acme/moved"}]}`)
	}))
	t.Cleanup(other.Close)
	var sawToken bool
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/app/installations/1/access_tokens":
			w.WriteHeader(http.StatusCreated)
			_, _ = fmt.Fprintf(w, `{"token":"ghs_redirectTest0123456789","expires_at":%q}`, time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
		default:
			sawToken = r.Header.Get("Authorization") == "token ghs_redirectTest0123456789"
			http.Redirect(w, r, other.URL+r.URL.RequestURI(), http.StatusMovedPermanently)
		}
	}))
	t.Cleanup(api.Close)
	s := githubtest.New(t)
	a, err := NewApp(AppConfig{AppID: 1, PrivateKeyPEM: s.AppPrivateKeyPEM(), APIURL: api.URL})
	if err != nil {
		t.Fatal(err)
	}
	repos, err := a.Installation(1).Repositories(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !sawToken || len(repos) != 1 || repos[0].FullName != "acme/moved" {
		t.Fatalf("token seen %v, repos %+v", sawToken, repos)
	}
	if len(leaked) > 0 {
		t.Errorf("the token went to the redirect target: %q", leaked)
	}
}

func TestSameOrigin(t *testing.T) {
	base := mustURL(t, "https://api.github.com/")
	for raw, want := range map[string]bool{
		"https://api.github.com/repos":         true,
		"https://API.github.com:443/repos":     true,
		"http://api.github.com/repos":          false,
		"https://api.github.com:8443/repos":    false,
		"https://codeload.api.github.com/x":    false,
		"https://api.github.com.evil.example/": false,
	} {
		if got := sameOrigin(mustURL(t, raw), base); got != want {
			t.Errorf("sameOrigin(%s) = %v, want %v", raw, got, want)
		}
	}
}
