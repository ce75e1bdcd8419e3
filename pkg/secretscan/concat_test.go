package secretscan

import (
	"regexp"
	"strings"
	"testing"
)

// concatSyntaxes join string literals the ways languages do: + (Go, Java,
// JavaScript, Python, C#), . (PHP, Perl), side by side (Python, C), across
// lines.
var concatSyntaxes = []struct {
	name  string
	build func(pieces []string) string
}{
	{"plus", func(p []string) string { return `token := "` + strings.Join(p, `" + "`) + `"` }},
	{"plus-single", func(p []string) string { return `token = '` + strings.Join(p, `'+'`) + `'` }},
	{"plus-lines", func(p []string) string {
		return "String token = \"" + strings.Join(p, "\" +\n        \"") + "\";"
	}},
	{"dot", func(p []string) string { return `$token = "` + strings.Join(p, `" . "`) + `";` }},
	{"adjacent", func(p []string) string { return "TOKEN = (\n    \"" + strings.Join(p, "\"\n    \"") + "\"\n)" }},
}

var placeholder = regexp.MustCompile(`\[REDACTED:[^\]]*\]`)

// splits cuts a secret into two and three pieces.
func splits(s string) [][]string {
	h, t := len(s)/2, len(s)/3
	return [][]string{{s[:h], s[h:]}, {s[:t], s[t : 2*t], s[2*t:]}}
}

// TestRedactConcatenatedSecrets: a self-identifying secret split into
// string literals joined by concatenation (to get it past a scanner, or
// to fit a line) is found as if written whole, and every piece is hidden.
func TestRedactConcatenatedSecrets(t *testing.T) {
	t.Parallel()
	red := New()
	checked, missed := 0, map[string]int{}
	for _, s := range ruleSamples(t) {
		if !s.bare || strings.ContainsAny(s.Secret, "\"'`\\ \t\n") {
			continue
		}
		for _, pieces := range splits(s.Secret) {
			for _, c := range concatSyntaxes {
				in := c.build(pieces)
				checked++
				out, _ := red.Redact(in)
				out = placeholder.ReplaceAllString(out, "[REDACTED]") // rule ids may hold a piece
				for _, p := range pieces {
					if len(p) >= 4 && strings.Contains(out, p) {
						missed[c.name]++
						if missed[c.name] <= 3 {
							t.Errorf("%s %s: a piece survives in %q", s.Name, c.name, out)
						}
						break
					}
				}
			}
		}
	}
	if checked < 500 {
		t.Fatalf("only %d inputs checked", checked)
	}
	t.Logf("%d concatenations checked, missed %v", checked, missed)
}

// TestConcatenationLeavesCodeAlone: ordinary concatenations are not joined
// into findings, and the text around a joined secret is kept.
func TestConcatenationLeavesCodeAlone(t *testing.T) {
	t.Parallel()
	red := New()
	for _, in := range []string{
		`msg := "hello, " + name + "!"`,
		`path = "config" + "/" + "app.yaml"`,
		`q := "SELECT id " + "FROM users " + "WHERE tenant_id = $1"`,
		`label := "ReadUint16" + "LengthPrefixed"`,
	} {
		if out, counts := red.Redact(in); out != in {
			t.Errorf("%q redacted: %q %v", in, out, counts)
		}
	}
	token := "ghp_" + strings.Repeat("P0o9I8u7Y6", 3) + "t5R4e3"
	in := "client := api.New(\"" + token[:20] + "\" + \"" + token[20:] + "\") // split to pass review"
	out, counts := red.Redact(in)
	if want := "client := api.New(\"[REDACTED:github-pat]\") // split to pass review"; out != want || counts["github-pat"] != 1 {
		t.Errorf("got %q %v, want %q", out, counts, want)
	}
}
