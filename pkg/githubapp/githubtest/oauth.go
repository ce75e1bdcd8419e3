package githubtest

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// codeLifetime is how long GitHub accepts an authorization code.
const codeLifetime = 10 * time.Minute

// authorize is GET /login/oauth/authorize. GitHub shows a consent page the
// first time; the fake behaves like a user who already authorized the app.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	q := r.URL.Query()
	if q.Get("client_id") != s.ClientID {
		// GitHub shows a 404 page for an unknown client.
		http.Error(w, "githubtest: unknown client_id", http.StatusNotFound)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	redirectURI := q.Get("redirect_uri")
	switch {
	case redirectURI == "" && s.callbackURL == "":
		http.Error(w, "githubtest: no redirect_uri and no callback URL registered (SetCallbackURL)", http.StatusBadRequest)
		return
	case redirectURI == "":
		redirectURI = s.callbackURL
	case s.callbackURL != "" && redirectURI != s.callbackURL:
		http.Error(w, "githubtest: the redirect_uri is not associated with this application", http.StatusBadRequest)
		return
	}
	target, err := url.Parse(redirectURI)
	if err != nil || !target.IsAbs() {
		http.Error(w, "githubtest: redirect_uri must be an absolute URL", http.StatusBadRequest)
		return
	}
	challenge, method := q.Get("code_challenge"), q.Get("code_challenge_method")
	switch {
	case challenge == "":
		// GitHub makes PKCE optional; CodeLotse always sends it, so the
		// fake insists, and a client that forgets it fails its tests.
		http.Error(w, "githubtest: code_challenge is required", http.StatusBadRequest)
		return
	case method != "S256":
		http.Error(w, "githubtest: code_challenge_method must be S256", http.StatusBadRequest)
		return
	}
	if s.signedIn == 0 {
		http.Error(w, "githubtest: nobody is signed in to GitHub; call SignInAs first", http.StatusForbidden)
		return
	}

	back := target.Query()
	if s.deny {
		back.Set("error", "access_denied")
		back.Set("error_description", "The user has denied your application access.")
		back.Set("error_uri", "https://docs.github.com/apps/managing-oauth-apps/troubleshooting-authorization-request-errors/#access-denied")
	} else {
		code := hex.EncodeToString([]byte(randomString(10)))
		s.codes[code] = &grant{
			userID:      s.signedIn,
			redirectURI: redirectURI,
			challenge:   challenge,
			expires:     time.Now().Add(codeLifetime),
		}
		back.Set("code", code)
	}
	if st := q.Get("state"); st != "" {
		back.Set("state", st)
	}
	target.RawQuery = back.Encode()
	http.Redirect(w, r, target.String(), http.StatusFound)
}

// accessToken is POST /login/oauth/access_token.
func (s *Server) accessToken(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, "githubtest: bad form", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	status := s.tokenErrorStatus
	clientID, clientSecret, basic := r.BasicAuth()
	if !basic {
		clientID, clientSecret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if clientID != s.ClientID || subtle.ConstantTimeCompare([]byte(clientSecret), []byte(s.ClientSecret)) != 1 {
		tokenError(w, r, status, "incorrect_client_credentials", "The client_id and/or client_secret passed are incorrect.",
			"https://docs.github.com/apps/managing-oauth-apps/troubleshooting-oauth-app-access-token-request-errors/#incorrect-client-credentials")
		return
	}

	code := r.PostForm.Get("code")
	g, ok := s.codes[code]
	// A code is good for one attempt: GitHub and RFC 6749 refuse reuse, and
	// burning it on a failed attempt stops verifier guessing.
	delete(s.codes, code)
	if !ok || time.Now().After(g.expires) {
		tokenError(w, r, status, "bad_verification_code", "The code passed is incorrect or expired.",
			"https://docs.github.com/apps/managing-oauth-apps/troubleshooting-oauth-app-access-token-request-errors/#bad-verification-code")
		return
	}
	if ru := r.PostForm.Get("redirect_uri"); ru != "" && ru != g.redirectURI {
		tokenError(w, r, status, "redirect_uri_mismatch", "The redirect_uri MUST match the registered callback URL for this application.",
			"https://docs.github.com/apps/managing-oauth-apps/troubleshooting-authorization-request-errors/#redirect-uri-mismatch2")
		return
	}
	verifier := r.PostForm.Get("code_verifier")
	sum := sha256.Sum256([]byte(verifier))
	if verifier == "" || subtle.ConstantTimeCompare([]byte(base64.RawURLEncoding.EncodeToString(sum[:])), []byte(g.challenge)) != 1 {
		tokenError(w, r, status, "bad_verification_code", "The code_verifier does not match the code_challenge supplied in the authorization request for PKCE.",
			"https://docs.github.com/apps/managing-oauth-apps/troubleshooting-oauth-app-access-token-request-errors/#bad-verification-code")
		return
	}

	token := s.newToken(g.userID)
	fields := [][2]string{{"access_token", token}, {"token_type", "bearer"}, {"scope", ""}}
	writeTokenResponse(w, r, http.StatusOK, fields)
}

// tokenError answers like GitHub: status 200 (unless SetTokenErrorStatus
// says otherwise) with error, error_description and error_uri.
func tokenError(w http.ResponseWriter, r *http.Request, status int, code, description, uri string) {
	writeTokenResponse(w, r, status, [][2]string{{"error", code}, {"error_description", description}, {"error_uri", uri}})
}

// writeTokenResponse answers in JSON when the client asks for it, and
// form-encoded otherwise, as GitHub does.
func writeTokenResponse(w http.ResponseWriter, r *http.Request, status int, fields [][2]string) {
	w.Header().Set("Cache-Control", "no-store")
	if strings.Contains(r.Header.Get("Accept"), "application/json") {
		m := make(map[string]string, len(fields))
		for _, f := range fields {
			m[f[0]] = f[1]
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(m)
		return
	}
	v := url.Values{}
	for _, f := range fields {
		v.Set(f[0], f[1])
	}
	w.Header().Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(v.Encode()))
}
