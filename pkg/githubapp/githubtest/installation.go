package githubtest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The app key is generated once per test binary: RSA key generation takes
// tens of milliseconds, and every Server would otherwise pay it.
var (
	appKeyOnce sync.Once
	appKey     *rsa.PrivateKey
)

func generatedAppKey() *rsa.PrivateKey {
	appKeyOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		appKey = k
	})
	return appKey
}

// AppPrivateKeyPEM returns the app's private key as GitHub hands it out
// (PKCS#1 PEM, "RSA PRIVATE KEY"), for GITHUB_APP_PRIVATE_KEY_FILE. The
// server accepts JWTs signed with it unless SetAppPublicKey says otherwise.
// It is a test key, shared by every Server in the test binary.
func (s *Server) AppPrivateKeyPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(generatedAppKey())})
}

// SetAppPublicKey makes the server accept app JWTs signed by key's private
// key instead of AppPrivateKeyPEM's, as when the app's key is rotated.
func (s *Server) SetAppPublicKey(key *rsa.PublicKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.appKey = key
}

// SetInstallationTokenLifetime sets how long installation tokens are valid
// (GitHub: one hour, the default).
func (s *Server) SetInstallationTokenLifetime(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokenLifetime = d
}

// ExpireInstallationTokens makes every installation token issued so far
// expired, as an hour passing would: the API answers 401 to them.
func (s *Server) ExpireInstallationTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	past := time.Now().Add(-time.Second)
	for _, t := range s.instTokens {
		t.expires = past
	}
}

// InstallationTokensIssued counts the tokens POST
// /app/installations/{id}/access_tokens has issued for the installation.
func (s *Server) InstallationTokensIssued(installationID int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokensIssued[installationID]
}

// IssueInstallationToken returns a valid installation token without the JWT
// exchange, for tests of the API reads alone. It is not counted by
// InstallationTokensIssued.
func (s *Server) IssueInstallationToken(installationID int64) string {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.installation(installationID) == nil {
		s.t.Fatalf("githubtest: IssueInstallationToken: no installation %d", installationID)
	}
	tok, _ := s.newInstallationToken(installationID)
	return tok
}

type instToken struct {
	installationID int64
	expires        time.Time
}

func (s *Server) newInstallationToken(installationID int64) (string, time.Time) {
	// ghs_ is GitHub's prefix for installation (server-to-server) tokens.
	tok := "ghs_" + randomString(36)
	expires := time.Now().Add(s.tokenLifetime)
	s.instTokens[tok] = &instToken{installationID: installationID, expires: expires}
	return tok, expires
}

// installationAPI serves the app and installation endpoints and reports
// whether it did. /repos/… is served here only for installation tokens;
// the user API keeps answering the rest.
func (s *Server) installationAPI(w http.ResponseWriter, r *http.Request, path string) bool {
	switch {
	case strings.HasPrefix(path, "/app/") || path == "/app":
		s.appAPI(w, r, path)
	case path == "/installation/repositories":
		if r.Method != http.MethodGet {
			writeJSON(w, http.StatusNotFound, notFound())
			return true
		}
		id, ok := s.authenticateInstallation(w, r)
		if !ok {
			return true
		}
		in := s.installation(id)
		var list []any
		for _, rid := range in.repoIDs {
			list = append(list, s.repoJSON(s.repos[rid], "pull"))
		}
		page, ok := s.paginate(w, r, list)
		if ok {
			writeJSON(w, http.StatusOK, map[string]any{"total_count": len(list), "repository_selection": "selected", "repositories": page})
		}
	case strings.HasPrefix(path, "/orgs/") && isInstallationToken(r):
		id, ok := s.authenticateInstallation(w, r)
		if !ok {
			return true
		}
		s.orgAPI(w, r, id, path)
	case strings.HasPrefix(path, "/repos/") && isInstallationToken(r):
		if r.Method != http.MethodGet {
			writeJSON(w, http.StatusNotFound, notFound())
			return true
		}
		id, ok := s.authenticateInstallation(w, r)
		if !ok {
			return true
		}
		s.repoAPI(w, r, id, path)
	default:
		return false
	}
	return true
}

func isInstallationToken(r *http.Request) bool {
	_, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	return strings.HasPrefix(strings.TrimSpace(tok), "ghs_")
}

// authenticateInstallation accepts "token T" or "Bearer T" for an
// unexpired installation token of an installation that is not suspended.
func (s *Server) authenticateInstallation(w http.ResponseWriter, r *http.Request) (int64, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") && !strings.EqualFold(scheme, "token") {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "Requires authentication", "documentation_url": "https://docs.github.com/rest", "status": "401"})
		return 0, false
	}
	t, ok := s.instTokens[strings.TrimSpace(tok)]
	if !ok || !time.Now().Before(t.expires) || s.installation(t.installationID) == nil {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest", "status": "401"})
		return 0, false
	}
	if s.installation(t.installationID).suspended {
		writeJSON(w, http.StatusForbidden, map[string]any{"message": "This installation has been suspended", "documentation_url": "https://docs.github.com/rest", "status": "403"})
		return 0, false
	}
	return t.installationID, true
}

// appAPI serves /app/… to the app's JWT.
func (s *Server) appAPI(w http.ResponseWriter, r *http.Request, path string) {
	if msg := s.verifyJWT(r); msg != "" {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"message": msg, "documentation_url": "https://docs.github.com/rest", "status": "401"})
		return
	}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) < 3 || parts[1] != "installations" {
		writeJSON(w, http.StatusNotFound, notFound())
		return
	}
	id, err := strconv.ParseInt(parts[2], 10, 64)
	in := s.installation(id)
	if err != nil || in == nil {
		writeJSON(w, http.StatusNotFound, notFound())
		return
	}
	switch {
	case len(parts) == 3 && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, s.installationJSON(in))
	case len(parts) == 4 && parts[3] == "access_tokens" && r.Method == http.MethodPost:
		if in.suspended {
			writeJSON(w, http.StatusForbidden, map[string]any{"message": "This installation has been suspended", "documentation_url": "https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app", "status": "403"})
			return
		}
		tok, expires := s.newInstallationToken(id)
		s.tokensIssued[id]++
		writeJSON(w, http.StatusCreated, map[string]any{
			"token":      tok,
			"expires_at": expires.UTC().Format(time.RFC3339),
			"permissions": map[string]string{
				"metadata": "read", "contents": "read", "pull_requests": "read", "security_events": "read",
			},
			"repository_selection": "selected",
		})
	default:
		writeJSON(w, http.StatusNotFound, notFound())
	}
}

// verifyJWT checks the app's JWT as GitHub does and returns GitHub's
// message for what is wrong, or "".
func (s *Server) verifyJWT(r *http.Request) string {
	const undecodable = "A JSON web token could not be decoded"
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "A JSON web token could not be decoded"
	}
	parts := strings.Split(strings.TrimSpace(tok), ".")
	if len(parts) != 3 {
		return undecodable
	}
	var header struct {
		Alg string `json:"alg"`
	}
	if !decodeSegment(parts[0], &header) || header.Alg != "RS256" {
		return undecodable
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return undecodable
	}
	key := s.appKey
	if key == nil {
		key = &generatedAppKey().PublicKey
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if rsa.VerifyPKCS1v15(key, crypto.SHA256, sum[:], sig) != nil {
		return undecodable
	}
	var claims struct {
		IssuedAt  json.Number `json:"iat"`
		ExpiresAt json.Number `json:"exp"`
		Issuer    any         `json:"iss"`
	}
	if !decodeSegment(parts[1], &claims) {
		return undecodable
	}
	iat, err1 := claims.IssuedAt.Int64()
	exp, err2 := claims.ExpiresAt.Int64()
	now := time.Now().Unix()
	switch {
	case err1 != nil:
		return "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued"
	case err2 != nil || exp <= now:
		return "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires"
	case exp > now+600:
		return "'Expiration time' claim ('exp') is too far in the future"
	case iat > now+60:
		return "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued"
	}
	// GitHub takes the app ID as a number or a string (or the client ID).
	iss := fmt.Sprint(claims.Issuer)
	if iss != strconv.FormatInt(s.AppID, 10) && iss != s.ClientID {
		return "Integration not found"
	}
	return ""
}

func decodeSegment(seg string, v any) bool {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return false
	}
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.UseNumber()
	return d.Decode(v) == nil
}
