package config

import (
	"strings"
	"testing"
	"time"
)

// TestEdgeSettings: the issue-9 settings parse, and mistakes in them stop
// the program with a message that names the setting.
func TestEdgeSettings(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	c, err := Load(env(map[string]string{"CURSOR_KEY": strings.Repeat("k", 32), "OIDC_ALLOW_PRIVATE_CIDRS": "127.0.0.0/8, ::1", "OIDC_ALLOW_HTTP": "true",
		"LOGIN_RATE_PER_IP": "5", "WEBHOOK_RATE_PER_IP": "0"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.CursorKey) != 32 || len(c.OIDCAllowPrivate) != 2 || !c.OIDCAllowHTTP || c.LoginRatePerIP != 5 || c.WebhookRatePerIP != 0 {
		t.Errorf("parsed %+v", c)
	}
	d, err := Load(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if d.CursorKey != nil || d.OIDCAllowPrivate != nil || d.OIDCAllowHTTP || d.LoginRatePerIP != 30 || d.WebhookRatePerIP != 600 {
		t.Errorf("defaults %+v", d)
	}
	for name, kv := range map[string]map[string]string{
		"CURSOR_KEY":               {"CURSOR_KEY": "short"},
		"OIDC_ALLOW_PRIVATE_CIDRS": {"OIDC_ALLOW_PRIVATE_CIDRS": "10.0.0.0/33"},
		"OIDC_ALLOW_HTTP":          {"OIDC_ALLOW_HTTP": "maybe"},
		"LOGIN_RATE_PER_IP":        {"LOGIN_RATE_PER_IP": "-1"},
		"WEBHOOK_RATE_PER_IP":      {"WEBHOOK_RATE_PER_IP": "x"},
	} {
		if _, err := Load(env(kv)); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestMembershipRefreshInterval(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"", time.Hour, true},
		{"15m", 15 * time.Minute, true},
		{"2s", 2 * time.Second, true},
		{"0", 0, true},
		{"500ms", 0, false},
		{"24h", 0, false},
		{"-1h", 0, false},
		{"hourly", 0, false},
	} {
		got, err := MembershipRefreshInterval(func(k string) string {
			if k == "GITHUB_MEMBERSHIP_REFRESH_INTERVAL" {
				return tc.v
			}
			return ""
		})
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%q: %v, %v; want %v (ok=%v)", tc.v, got, err, tc.want, tc.ok)
		}
	}
}

// TestCheckServePublicURL: the API refuses http PUBLIC_URLs off loopback
// and accepts https anywhere and http on loopback.
func TestCheckServePublicURL(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"https://codelotse.example.com", true},
		{"https://10.0.0.5:8443", true},
		{"http://127.0.0.1:8080", true},
		{"http://localhost:8080", true},
		{"http://[::1]:8080", true},
		{"http://codelotse.example.com", false},
		{"http://10.0.0.5:8080", false},
		{"http://0.0.0.0:8080", false},
	} {
		err := Config{PublicURL: tc.url}.CheckServePublicURL()
		if (err == nil) != tc.ok {
			t.Errorf("%s: err = %v, want ok=%v", tc.url, err, tc.ok)
		}
		if err != nil && (!strings.Contains(err.Error(), "https") || !strings.Contains(err.Error(), tc.url)) {
			t.Errorf("%s: the message does not say what to do: %v", tc.url, err)
		}
	}
}
