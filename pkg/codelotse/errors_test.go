package codelotse

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClip(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"eleven char", 10, "eleven cha…"},
		// "€" is three bytes: a cut at 4 would split the second one.
		{"€€€", 4, "€…"},
		{"€€€", 3, "€…"},
		{"€€€", 2, "…"},
		{"abc", 0, "…"},
		{"abc", -1, "…"},
	} {
		got := Clip(tc.s, tc.n)
		if got != tc.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
		if !utf8.ValidString(got) {
			t.Errorf("Clip(%q, %d) = %q is not valid UTF-8", tc.s, tc.n, got)
		}
		if body := strings.TrimSuffix(got, "…"); len(body) > max(tc.n, 0) {
			t.Errorf("Clip(%q, %d) kept %d bytes", tc.s, tc.n, len(body))
		}
	}
}
