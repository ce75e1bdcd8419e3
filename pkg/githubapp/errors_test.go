package githubapp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/githubapp/githubtest"
)

// TestErrorsCarryNoSecrets runs every failure the fake GitHub can produce
// and checks that no error string, nor the user-facing message, contains
// the code, the verifier, the client secret or a user token.
func TestErrorsCarryNoSecrets(t *testing.T) {
	failures := []githubtest.Failure{
		githubtest.SecondaryRateLimit, githubtest.TooManyRequests, githubtest.PrimaryRateLimit,
		githubtest.BadCredentials, githubtest.ServerError,
	}
	paths := []string{"/user", "/user/installations", "/user/memberships/orgs/acme", "/user/installations/11/repositories"}
	check := func(t *testing.T, err error, secrets ...string) {
		t.Helper()
		if err == nil {
			t.Fatal("no error")
		}
		for _, text := range []string{err.Error(), codelotse.ErrorMessage(err), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
			if strings.Contains(text, "ghu_") {
				t.Errorf("error shows a user token: %s", text)
			}
			for _, s := range secrets {
				if strings.Contains(text, s) {
					t.Errorf("error shows %q: %s", s, text)
				}
			}
		}
	}
	for _, f := range failures {
		for _, p := range paths {
			t.Run(fmt.Sprintf("failure %d on %s", f, p), func(t *testing.T) {
				s, c := fixture(t)
				s.FailNextOn(p, f)
				code, verifier := authorize(t, s, c, alice)
				_, _, err := c.SignIn(context.Background(), code, verifier)
				check(t, err, code, verifier, s.ClientSecret)
			})
		}
	}
	t.Run("bad code", func(t *testing.T) {
		s, c := fixture(t)
		_, verifier := authorize(t, s, c, alice)
		_, _, err := c.SignIn(context.Background(), "feedfacefeedfaceabcd", verifier)
		check(t, err, "feedfacefeedfaceabcd", verifier, s.ClientSecret)
	})
	t.Run("wrong verifier", func(t *testing.T) {
		s, c := fixture(t)
		code, verifier := authorize(t, s, c, alice)
		wrong := NewVerifier()
		_, _, err := c.SignIn(context.Background(), code, wrong)
		check(t, err, code, verifier, wrong, s.ClientSecret)
	})
}

// TestErrorsRedactEchoedSecrets uses a misbehaving server that echoes what
// it was sent into its error messages: the error must still not carry it.
func TestErrorsRedactEchoedSecrets(t *testing.T) {
	const token = "ghu_echoedTokenValue0123456789abcdefgh"
	mux := http.NewServeMux()
	var tokenStatus int
	mux.HandleFunc("POST /login/oauth/access_token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		if tokenStatus != 0 {
			w.WriteHeader(tokenStatus)
			_ = json.NewEncoder(w).Encode(map[string]string{
				"error":             "bad_verification_code",
				"error_description": "code " + r.PostForm.Get("code") + " verifier " + r.PostForm.Get("code_verifier") + " secret " + r.PostForm.Get("client_secret"),
			})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"access_token": token, "token_type": "bearer"})
	})
	mux.HandleFunc("GET /user", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_ = json.NewEncoder(w).Encode(map[string]string{"message": "you sent " + r.Header.Get("Authorization")})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c, err := New(Config{
		ClientID: "id", ClientSecret: "s3cr3t-client-secret",
		APIURL: srv.URL, WebURL: srv.URL, RedirectURL: callback,
	})
	if err != nil {
		t.Fatal(err)
	}
	const code, verifier = "c0dec0dec0dec0dec0de", "v3rifier-v3rifier-v3rifier-v3rifier-v3rifier"

	_, _, err = c.SignIn(context.Background(), code, verifier)
	if err == nil || !strings.Contains(err.Error(), "500") {
		t.Fatalf("err = %v, want the 500 from /user", err)
	}
	if strings.Contains(err.Error(), token) {
		t.Errorf("error shows the token: %v", err)
	}

	for _, status := range []int{http.StatusOK, http.StatusBadRequest} {
		tokenStatus = status
		_, _, err = c.SignIn(context.Background(), code, verifier)
		if !errors.Is(err, ErrSignInRejected) {
			t.Fatalf("status %d: err = %v, want ErrSignInRejected", status, err)
		}
		for _, s := range []string{code, verifier, "s3cr3t-client-secret"} {
			if strings.Contains(err.Error(), s) {
				t.Errorf("status %d: error shows %q: %v", status, s, err)
			}
		}
	}
}

func TestRateLimitClassification(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	response := func(status int, h map[string]string, body string) (*github.Response, error) {
		hr := &http.Response{
			StatusCode: status,
			Header:     http.Header{},
			Body:       io.NopCloser(strings.NewReader(body)),
			Request:    &http.Request{Method: "GET", URL: &url.URL{Scheme: "https", Host: "api.github.com", Path: "/user"}},
		}
		for k, v := range h {
			hr.Header.Set(k, v)
		}
		return &github.Response{Response: hr}, github.CheckResponse(hr)
	}
	tests := []struct {
		name          string
		status        int
		header        map[string]string
		body          string
		wantLimited   bool
		wantSecondary bool
		wantRetryAt   time.Time
	}{
		{
			name: "secondary limit told only by its message", status: 403,
			header:      map[string]string{"Retry-After": "30"},
			body:        `{"message":"You have exceeded a secondary rate limit and have been temporarily blocked.","documentation_url":"https://docs.github.com/en/rest/using-the-rest-api/troubleshooting"}`,
			wantLimited: true, wantSecondary: true, wantRetryAt: now.Add(30 * time.Second),
		},
		{
			name: "429 with X-RateLimit-Reset only", status: 429,
			header:      map[string]string{"X-RateLimit-Reset": fmt.Sprint(now.Add(5 * time.Minute).Unix())},
			body:        `{"message":"Too Many Requests"}`,
			wantLimited: true, wantSecondary: true, wantRetryAt: now.Add(5 * time.Minute),
		},
		{
			name: "429 with Retry-After as a date", status: 429,
			header:      map[string]string{"Retry-After": now.Add(2 * time.Minute).Format(http.TimeFormat)},
			wantLimited: true, wantSecondary: true, wantRetryAt: now.Add(2 * time.Minute),
		},
		{
			name: "429 without a hint waits a minute", status: 429,
			wantLimited: true, wantSecondary: true, wantRetryAt: now.Add(time.Minute),
		},
		{
			name: "403 with the primary limit exhausted", status: 403,
			header:      map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": fmt.Sprint(now.Add(10 * time.Minute).Unix())},
			body:        `{"message":"API rate limit exceeded for user ID 1."}`,
			wantLimited: true, wantRetryAt: now.Add(10 * time.Minute),
		},
		{
			name: "403 for a missing permission", status: 403,
			header: map[string]string{"X-RateLimit-Remaining": "4000"},
			body:   `{"message":"Resource not accessible by integration"}`,
		},
		{name: "404", status: 404, body: `{"message":"Not Found"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := response(tt.status, tt.header, tt.body)
			rl := rateLimit(resp, err, now)
			if (rl != nil) != tt.wantLimited {
				t.Fatalf("rate limited = %v, want %v", rl != nil, tt.wantLimited)
			}
			if rl == nil {
				if errors.Is(apiError("GET /user", resp, err, now), ErrRateLimited) {
					t.Error("apiError reports a rate limit")
				}
				return
			}
			if rl.Secondary != tt.wantSecondary || rl.Status != tt.status || !rl.RetryAt.Equal(tt.wantRetryAt) {
				t.Errorf("got %+v, want secondary %v status %d retry at %v", rl, tt.wantSecondary, tt.status, tt.wantRetryAt)
			}
			if !errors.Is(apiError("GET /user", resp, err, now), ErrRateLimited) {
				t.Error("apiError hides the rate limit")
			}
		})
	}
}

// TestTokenStaysOnAPIHost follows GitHub's API to a redirect onto another
// host: the user token must not travel with it.
func TestTokenStaysOnAPIHost(t *testing.T) {
	var leaked []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a := r.Header.Get("Authorization"); a != "" {
			leaked = append(leaked, a)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id": 5, "login": "mallory"}`)
	}))
	t.Cleanup(other.Close)
	var sawToken bool
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/login/oauth/access_token":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"access_token":"ghu_redirectTest0123456789abcdefghij","token_type":"bearer"}`)
		case "/user":
			sawToken = r.Header.Get("Authorization") == "Bearer ghu_redirectTest0123456789abcdefghij"
			http.Redirect(w, r, other.URL+"/user", http.StatusFound)
		case "/user/emails":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `[]`)
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"total_count":0,"installations":[]}`)
		}
	}))
	t.Cleanup(api.Close)
	c, err := New(Config{ClientID: "id", ClientSecret: "secret", APIURL: api.URL, WebURL: api.URL, RedirectURL: callback})
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := c.SignIn(context.Background(), "code", NewVerifier())
	if err != nil {
		t.Fatal(err)
	}
	if !sawToken {
		t.Error("the API host did not get the token")
	}
	if id.Login != "mallory" {
		t.Fatalf("redirect not followed: %+v", id)
	}
	if len(leaked) > 0 {
		t.Errorf("the token went to the redirect target: %q", leaked)
	}
}
