package config

import (
	"testing"
	"time"
)

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
