package config

import (
	"strings"
	"testing"
)

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
