package githubapp

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

func TestNewValidatesConfig(t *testing.T) {
	good := Config{ClientID: "id", ClientSecret: "secret", RedirectURL: "https://codelotse.example/auth/github/callback"}
	tests := []struct {
		name   string
		change func(*Config)
	}{
		{"no client id", func(c *Config) { c.ClientID = "" }},
		{"no client secret", func(c *Config) { c.ClientSecret = "" }},
		{"no redirect URL", func(c *Config) { c.RedirectURL = "" }},
		{"relative redirect URL", func(c *Config) { c.RedirectURL = "/auth/github/callback" }},
		{"API URL not http", func(c *Config) { c.APIURL = "ftp://ghe.example/api/v3/" }},
		{"API URL relative", func(c *Config) { c.APIURL = "ghe.example/api/v3/" }},
		{"API URL with query", func(c *Config) { c.APIURL = "https://ghe.example/api/v3/?x=1" }},
		{"API URL with credentials", func(c *Config) { c.APIURL = "https://user:hunter2@ghe.example/api/v3/" }}, // gitleaks:allow (a fake password: the test refuses URLs with credentials)
		{"web URL without host", func(c *Config) { c.WebURL = "https:///" }},
		{"web URL unparsable", func(c *Config) { c.WebURL = "https://ghe example/%zz" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := good
			tt.change(&cfg)
			_, err := New(cfg)
			if err == nil {
				t.Fatal("New accepted the config")
			}
			if codelotse.ErrorCode(err) != codelotse.Invalid {
				t.Errorf("code = %s, want invalid (%v)", codelotse.ErrorCode(err), err)
			}
			if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "secret") && tt.name != "no client secret" {
				t.Errorf("error repeats a credential: %v", err)
			}
		})
	}

	c, err := New(good)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.apiURL.String(); got != DefaultAPIURL {
		t.Errorf("default API URL = %s", got)
	}
	if got := c.oauth.Endpoint.TokenURL; got != "https://github.com/login/oauth/access_token" {
		t.Errorf("token URL = %s", got)
	}
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		if s := fmt.Sprintf(format, c); strings.Contains(s, "secret") {
			t.Errorf("%s shows the secret: %s", format, s)
		}
	}
}

func TestNewKeepsGHESPaths(t *testing.T) {
	c, err := New(Config{
		ClientID: "id", ClientSecret: "secret",
		APIURL:      "https://ghe.example/api/v3", // no trailing slash
		WebURL:      "https://ghe.example",
		RedirectURL: "https://codelotse.example/auth/github/callback",
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.apiURL.String(), "https://ghe.example/api/v3/"; got != want {
		t.Errorf("API URL = %s, want %s", got, want)
	}
	if got, want := c.api("t").BaseURL.String(), "https://ghe.example/api/v3/"; got != want {
		t.Errorf("go-github BaseURL = %s, want %s", got, want)
	}
	if got, want := c.oauth.Endpoint.AuthURL, "https://ghe.example/login/oauth/authorize"; got != want {
		t.Errorf("authorize URL = %s, want %s", got, want)
	}
}

func TestAuthCodeURL(t *testing.T) {
	c, err := New(Config{
		ClientID: "Iv1.abc", ClientSecret: "secret",
		WebURL:      "https://ghe.example/",
		RedirectURL: "https://codelotse.example/auth/github/callback",
	})
	if err != nil {
		t.Fatal(err)
	}
	verifier := NewVerifier()
	if len(verifier) < 43 {
		t.Fatalf("verifier %q is shorter than RFC 7636's 43 characters", verifier)
	}
	raw := c.AuthCodeURL("state-123", verifier)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if got := u.Scheme + "://" + u.Host + u.Path; got != "https://ghe.example/login/oauth/authorize" {
		t.Errorf("endpoint = %s", got)
	}
	sum := sha256.Sum256([]byte(verifier))
	want := map[string]string{
		"client_id":             "Iv1.abc",
		"redirect_uri":          "https://codelotse.example/auth/github/callback",
		"state":                 "state-123",
		"response_type":         "code",
		"code_challenge":        base64.RawURLEncoding.EncodeToString(sum[:]),
		"code_challenge_method": "S256",
	}
	q := u.Query()
	for k, v := range want {
		if q.Get(k) != v {
			t.Errorf("%s = %q, want %q", k, q.Get(k), v)
		}
	}
	if strings.Contains(raw, verifier) {
		t.Error("the URL carries the verifier itself")
	}
	if strings.Contains(raw, "secret") {
		t.Error("the URL carries the client secret")
	}
}
