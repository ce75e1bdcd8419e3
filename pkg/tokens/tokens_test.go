package tokens

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

func TestGenerateFormat(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		tok := Generate()
		if len(tok) != 47 || !strings.HasPrefix(tok, "clt_") {
			t.Fatalf("token %q: want clt_ + 43 characters", tok)
		}
		if strings.ContainsAny(tok, "=+/") {
			t.Fatalf("token %q is not unpadded base64url", tok)
		}
		if !Valid(tok) {
			t.Fatalf("Valid(%q) = false for a generated token", tok)
		}
		if seen[tok] {
			t.Fatalf("duplicate token after %d", i)
		}
		seen[tok] = true
	}
}

func TestValid(t *testing.T) {
	good := Generate()
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{good, true},
		{"", false},
		{"clt_", false},
		{good[:len(good)-1], false},
		{good + "A", false},
		{"clx_" + good[4:], false},
		{"CLT_" + good[4:], false},
		{"clt_" + strings.Repeat("*", 43), false},
		{"clt_" + strings.Repeat("A", 42) + "=", false},
		// 43 base64url characters carry 258 bits; the last character must
		// leave the two spare bits zero, so "B" as the last char is not canonical.
		{"clt_" + strings.Repeat("A", 42) + "B", false},
		{"clt_" + strings.Repeat("A", 43), true},
	} {
		if got := Valid(tc.in); got != tc.want {
			t.Errorf("Valid(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestHashAndLast4(t *testing.T) {
	tok := "clt_" + strings.Repeat("A", 39) + "wxyz"
	sum := sha256.Sum256([]byte(tok))
	if got := hex.EncodeToString(Hash(tok)); got != hex.EncodeToString(sum[:]) {
		t.Fatalf("Hash = %s, want sha256 of the whole token", got)
	}
	if got := Last4(tok); got != "wxyz" {
		t.Fatalf("Last4 = %q", got)
	}
}

func TestCheckName(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
		ok   bool
	}{
		{"laptop", "laptop", true},
		{"  laptop  ", "laptop", true},
		{"", "", false},
		{"   ", "", false},
		{strings.Repeat("ä", 100), strings.Repeat("ä", 100), true},
		{strings.Repeat("a", 101), "", false},
		{"bad\nname", "", false},
		// Invisible and bidirectional controls are dropped: a name of
		// only those is empty.
		{"\u200b", "", false},
		{" \u200b\u2060 ", "", false},
		{"lap\u202etop\u00ad", "laptop", true},
	} {
		got, err := CheckName(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("CheckName(%q) = %q, %v; want %q ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
		if err != nil && codelotse.ErrorCode(err) != codelotse.Invalid {
			t.Errorf("CheckName(%q) error code = %s, want invalid", tc.in, codelotse.ErrorCode(err))
		}
	}
}

func TestExpiresAt(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	for _, tc := range []struct {
		days int
		want time.Duration
		ok   bool
	}{
		{0, 30 * day, true},
		{1, day, true},
		{90, 90 * day, true},
		{-1, 0, false},
		{91, 0, false},
		{365, 0, false},
	} {
		got, err := ExpiresAt(now, tc.days)
		if (err == nil) != tc.ok {
			t.Errorf("ExpiresAt(%d) err = %v, want ok=%v", tc.days, err, tc.ok)
			continue
		}
		if tc.ok && got.Sub(now) != tc.want {
			t.Errorf("ExpiresAt(%d) = +%v, want +%v", tc.days, got.Sub(now), tc.want)
		}
	}
}
