package codeindex

import (
	"fmt"
	"regexp/syntax"
	"strings"
	"testing"
)

// TestARE pins the translation of typical queries: literals escaped, Go's
// classes as code-point ranges, case folding written out, per-line
// anchors under (?n), the permissive rules (\b, big classes) and the
// queries with no useful prefilter. TestRegexPrefilterIsSound
// (pkg/postgres) checks on PostgreSQL that translations are supersets.
func TestARE(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		query string
		are   string // "" : none
		exact bool
	}{
		{`func \w+Handler\(`, `(?n)func\u0020[0-9A-Z\u005fa-z]+Handler\(`, true},
		{`(ErrShortWrite|ErrShortBuffer)`, `(?n)ErrShort(?:Write|Buffer)`, true},
		{`(?i)kiss`, `(?n)[Kk\u212a][Ii][Ss\u017f][Ss\u017f]`, true},
		{`^\s*//`, `(?n)^[\u0009\u000c-\u000d\u0020]*\/\/`, true},
		{`a.b$`, `(?n)a.b$`, true},
		{`x[^a]y`, `(?n)x[\u0001-\u0009\u000b-\u0060b-\ud7ff\ue000-\U0010ffff]y`, true},
		{`a\.b\(c\)\[d\]\{e\}\*\+\?\^\$\|\\`, `(?n)a\.b\(c\)\[d\]\{e\}\*\+\?\^\$\|\\`, true},
		{`über`, `(?n)\u00fcber`, true},
		{`(?:ab)+c`, `(?n)(?:ab)+c`, true},
		{`\bfunc\b`, `(?n)func`, false},
		{`\pL+x`, `(?n).+x`, false},
		{`.*foo.*`, `(?n)foo`, true},
		// A trailing escaped dot repeated is not "anything on the line".
		{`foo\.*`, `(?n)foo\.*`, true},
		{`foo\\.*`, `(?n)foo\\`, true},
		{`(abc|xyz)\.*`, `(?n)(?:abc|xyz)\.*`, true},
		{`(?:^)*foo`, `(?n)foo`, true},
		{`a|.*`, "", false},
		{`x*`, "", false},
		{`\b`, "", false},
		{`^$`, "", false},
	} {
		re, err := syntax.Parse(tc.query, syntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		are, exact, ok := ARE(re)
		if are != tc.are || ok != (tc.are != "") || ok && exact != tc.exact {
			t.Errorf("ARE(%q) = %q, exact %v, ok %v; want %q, exact %v", tc.query, are, exact, ok, tc.are, tc.exact)
		}
	}
}

// TestPlanRegexPrefilter: a regex's plan carries its ARE when the index
// can use it (a literal, or trigrams in every branch), which also scopes
// an alternation without a common literal; an exact translation makes the
// plan tight; a literal query carries none.
func TestPlanRegexPrefilter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		query                string
		regex, scoped, tight bool
	}{
		{`func \w+Handler\(`, true, true, true},
		{`(Alpha|Beta)Gamma`, true, true, true},
		{`(ErrShortWriter|EOF)`, true, true, true},
		{`(Alpha|xy)z`, true, true, true}, // every match ends in three letters
		{`(Alpha|x)z`, false, false, false},
		{`(?:ab|cd)_x`, false, false, false},
		{`(?:[a-z]+|Alpha)Beta`, true, true, true},
		{`\d+\.\d+`, false, false, false},
		{`\bfunc\b`, true, true, false},
		// Sixteen alternatives with no common literal may stand alone;
		// seventeen need a repository or a path.
		{"(" + strings.Join(names(16), "|") + ")", true, true, true},
		{"(" + strings.Join(names(17), "|") + ")", false, false, false},
		{"(" + strings.Join(names(17), "|") + ")Suffix", true, true, true},
		// Bounded repeats of classes make a long ARE and a trigram graph
		// pg_trgm gives up on: not alone; beside a literal, still sent.
		{`[0-9a-f]{0,60}(abc|xyz)[0-9a-f]{0,60}`, false, false, false},
		{`[0-9a-f]{0,60}(abc|xyz)[0-9a-f]{0,60}Suffix`, true, true, true},
	} {
		p := mustPlan(t, tc.query, true, true)
		if (p.Regex != "") != tc.regex || p.Scoped() != tc.scoped || p.Tight != tc.tight {
			t.Errorf("%q: regex %q, scoped %v, tight %v; want regex %v, scoped %v, tight %v", tc.query, p.Regex, p.Scoped(), p.Tight, tc.regex, tc.scoped, tc.tight)
		}
	}
	if p := mustPlan(t, "func (", false, true); p.Regex != "" {
		t.Errorf("literal query: regex %q", p.Regex)
	}
}

// names are n distinct identifiers with no three-letter run in common.
func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%c%cq%d", 'a'+i%26, 'z'-i%26, i)
	}
	return out
}
