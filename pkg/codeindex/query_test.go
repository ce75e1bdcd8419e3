package codeindex

import (
	"go/build"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

func mustPlan(t *testing.T, q string, isRegex, caseSensitive bool) Plan {
	t.Helper()
	p, err := NewPlan(q, isRegex, caseSensitive)
	if err != nil {
		t.Fatalf("NewPlan(%q, regex=%v, cs=%v): %v", q, isRegex, caseSensitive, err)
	}
	return p
}

func TestPlanLiteralMatching(t *testing.T) {
	t.Parallel()
	tests := []struct {
		query         string
		caseSensitive bool
		line          string
		want          bool
	}{
		{"Token", false, "func parseTOKEN(s string)", true},
		{"Token", false, "func parseToken(s string)", true},
		{"Token", true, "func parseTOKEN(s string)", false},
		{"Token", true, "func parseToken(s string)", true},
		// Regex metacharacters are literal text in a literal query.
		{"a.b(c", false, "x := a.b(c)", true},
		{"a.b(c", false, "x := axb(c)", false},
		{"[x]*", false, "m[x]*2", true},
		{"[x]*", false, "xxx", false},
		{`\d+`, true, `re := "\d+"`, true},
		{`\d+`, true, "123", false},
		{"$HOME", false, "cd $HOME/bin", true},
		{"ÜBER", false, "über alles", true},
		{"ÜBER", true, "über alles", false},
	}
	for _, tt := range tests {
		p := mustPlan(t, tt.query, false, tt.caseSensitive)
		if got := p.Match.MatchString(tt.line); got != tt.want {
			t.Errorf("literal %q (case sensitive %v) on %q = %v, want %v", tt.query, tt.caseSensitive, tt.line, got, tt.want)
		}
	}

	// A literal query of three or more characters is its own prefilter;
	// shorter ones have none.
	for q, want := range map[string][]string{"abc": {"abc"}, "ab": nil, "世界!": {"世界!"}, "a%_": {"a%_"}} {
		p := mustPlan(t, q, false, true)
		if !slices.Equal(p.Literals, want) || p.Scoped() != (len(want) > 0) {
			t.Errorf("literal %q: Literals %q (scoped %v), want %q", q, p.Literals, p.Scoped(), want)
		}
	}
}

func TestPlanRegexMatching(t *testing.T) {
	t.Parallel()
	tests := []struct {
		query         string
		caseSensitive bool
		line          string
		want          bool
	}{
		{`func \w+Token\(`, true, "func parseToken(s string)", true},
		{`func \w+Token\(`, true, "func parsetoken(s string)", false},
		{`func \w+Token\(`, false, "FUNC PARSETOKEN(s string)", true},
		{`(?i)hello`, true, "HeLLo world", true},
		{`^package \w+$`, true, "package codeindex", true},
		{`^package \w+$`, true, "// package codeindex", false},
		{`foo|bar`, true, "xbarx", true},
		{`a.b`, true, "a-b", true},
	}
	for _, tt := range tests {
		p := mustPlan(t, tt.query, true, tt.caseSensitive)
		if got := p.Match.MatchString(tt.line); got != tt.want {
			t.Errorf("regex %q (case sensitive %v) on %q = %v, want %v", tt.query, tt.caseSensitive, tt.line, got, tt.want)
		}
	}
}

func TestPlanRequiredLiterals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		query string
		want  []string // any letter case
	}{
		{`func \w+Token\(`, []string{"func ", "Token("}},
		{`foo|bar`, nil},
		{`(abc)+def`, []string{"abc", "def"}},
		{`a.b`, nil},
		{`(?i)hello`, []string{"hello"}},
		{`hello`, []string{"hello"}},
		{`\.Close\(\)`, []string{".Close()"}},
		{`abc*`, nil},                  // "ab" then c*: nothing of 3+ characters
		{`(abc)?def`, []string{"def"}}, // optional group is not required
		{`x*yz`, nil},
		{`(foo){2,}bar`, []string{"foo", "foo", "bar"}},
		{`[abc]{3}`, nil},
		{`.*`, nil},
		{`^$`, nil},
		{`\bhttp\b`, []string{"http"}},
		{`日本語\d+`, []string{"日本語"}},
		{`\d+世界`, nil}, // two characters
	}

	for _, tt := range tests {
		p := mustPlan(t, tt.query, true, false)
		got := make([]string, len(p.Literals))
		for i, l := range p.Literals {
			got[i] = strings.ToLower(l)
		}
		want := make([]string, len(tt.want))
		for i, l := range tt.want {
			want[i] = strings.ToLower(l)
		}
		slices.Sort(got)
		slices.Sort(want)
		got = slices.Compact(got)
		want = slices.Compact(want)
		if !slices.Equal(got, want) {
			t.Errorf("NewPlan(%q).Literals = %q, want %q", tt.query, p.Literals, tt.want)
		}
	}

	// At most three literals, the longest first.
	p := mustPlan(t, `alpha\d+bravo_charlie\s+delta_delta_delta\w+echo_e`, true, false)
	want := []string{"delta_delta_delta", "bravo_charlie", "echo_e"}
	if !slices.Equal(p.Literals, want) {
		t.Errorf("Literals = %q, want %q", p.Literals, want)
	}
}

func TestPlanRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		query   string
		isRegex bool
		msg     string // a piece of the message the user reads
	}{
		{"empty literal", "", false, "query"},
		{"empty regex", "", true, "query"},
		{"newline literal", "a\nb", false, "line break"},
		{"newline regex", "abc\ndef", true, "line break"},
		{"carriage return", "abc\rdef", true, "line break"},
		{"too long literal", strings.Repeat("a", MaxQuery+1), false, "1000"},
		{"too long regex", strings.Repeat("a", MaxQuery+1), true, "1000"},
		{"unbalanced paren", "(abc", true, "RE2"},
		{"lookahead", "foo(?=bar)", true, "RE2"},
		{"backreference", `(a)\1`, true, "RE2"},
		{"nested repetition", "a**", true, "RE2"},
		{"bad range", "[z-a]", true, "RE2"},
		{"bad repeat", "a{2,1}", true, "RE2"},
		{"huge repeat", "a{1001}", true, "RE2"},
		{"missing repetition argument", "*abc", true, "RE2"},
		{"bad escape", `\q`, true, "RE2"},
	}
	for _, tt := range tests {
		_, err := NewPlan(tt.query, tt.isRegex, false)
		if err == nil {
			t.Errorf("%s: NewPlan(%.40q) accepted", tt.name, tt.query)
			continue
		}
		if codelotse.ErrorCode(err) != codelotse.Invalid {
			t.Errorf("%s: code %q, want invalid", tt.name, codelotse.ErrorCode(err))
		}
		if msg := codelotse.ErrorMessage(err); !strings.Contains(msg, tt.msg) {
			t.Errorf("%s: message %q does not mention %q", tt.name, msg, tt.msg)
		}
	}
	// Exactly MaxQuery characters is accepted.
	mustPlan(t, strings.Repeat("a", MaxQuery), false, false)
	mustPlan(t, strings.Repeat("a", MaxQuery), true, false)
}

// corpus returns source lines from the Go standard library's strings package
// and from this package, so that the randomized check always has real code.
func corpus(t *testing.T) []string {
	t.Helper()
	var files []string
	std, _ := filepath.Glob(filepath.Join(build.Default.GOROOT, "src", "strings", "*.go"))
	files = append(files, std...)
	own, _ := filepath.Glob("*.go")
	files = append(files, own...)
	var lines []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || IsBinary(b) || !utf8.Valid(b) {
			continue
		}
		lines = append(lines, SplitLines(string(b))...)
	}
	if len(lines) < 1000 {
		t.Fatalf("corpus has only %d lines", len(lines))
	}
	return lines
}

func containsFold(line, lit string) bool {
	return strings.Contains(strings.ToLower(line), strings.ToLower(lit))
}

// randomRegex returns a regular expression built from pieces of real
// source lines (quoted), classes, alternations, repeats, word boundaries
// and case-folded groups; a quarter of them folded as a whole.
func randomRegex(rng *rand.Rand, lines []string) string {
	piece := func() string {
		l := lines[rng.IntN(len(lines))]
		if len(l) < 2 {
			return "x"
		}
		i := rng.IntN(len(l) - 1)
		j := min(len(l), i+3+rng.IntN(12))
		s := l[i:j]
		if !utf8.ValidString(s) {
			return "y"
		}
		return regexp.QuoteMeta(s)
	}
	var atom func(depth int) string
	atom = func(depth int) string {
		if depth > 2 {
			return piece()
		}
		switch rng.IntN(20) {
		case 0:
			return `\w+`
		case 1:
			return `.*`
		case 2:
			return `\s*`
		case 3:
			return `[a-z]+`
		case 4:
			return "(" + atom(depth+1) + "|" + atom(depth+1) + ")"
		case 5:
			return "(" + atom(depth+1) + ")+"
		case 6:
			return "(?:" + atom(depth+1) + "){1,3}"
		case 7:
			return "(" + atom(depth+1) + ")?"
		case 8:
			return "(?:" + atom(depth+1) + ")*"
		case 9:
			return `\b`
		case 10:
			return "(?i:" + atom(depth+1) + ")"
		}
		return piece()
	}
	var b strings.Builder
	if rng.IntN(4) == 0 {
		b.WriteString("(?i)")
	}
	for range 1 + rng.IntN(4) {
		b.WriteString(atom(0))
	}
	return b.String()
}

// TestPlanLiteralsAreRequired builds random regular expressions from pieces
// of real source lines and checks the prefilter never hides a match: every
// line the regex matches contains every literal, in any letter case (the
// database compares with ILIKE).
func TestPlanLiteralsAreRequired(t *testing.T) {
	t.Parallel()
	lines := corpus(t)
	rng := rand.New(rand.NewPCG(42, 1))
	matched, withLiterals := 0, 0 // lines matched by plans with a prefilter
	for range 300 {
		q := randomRegex(rng, lines)
		if len(q) > MaxQuery {
			continue
		}
		p, err := NewPlan(q, true, rng.IntN(2) == 0)
		if err != nil {
			t.Fatalf("NewPlan(%q): %v", q, err)
		}
		if len(p.Literals) > 3 {
			t.Errorf("%q: %d literals", q, len(p.Literals))
		}
		for i, l := range p.Literals {
			if utf8.RuneCountInString(l) < MinLiteral {
				t.Errorf("%q: literal %q shorter than %d", q, l, MinLiteral)
			}
			if i > 0 && len(l) > len(p.Literals[i-1]) {
				t.Errorf("%q: literals %q not longest first", q, p.Literals)
			}
		}
		if len(p.Literals) == 0 {
			continue
		}
		withLiterals++
		for _, line := range lines {
			if !p.Match.MatchString(line) {
				continue
			}
			matched++
			for _, l := range p.Literals {
				if !containsFold(line, l) {
					t.Fatalf("%q matches %q, which lacks the required literal %q", q, line, l)
				}
			}
		}
	}
	t.Logf("%d matching lines, %d plans with literals", matched, withLiterals)
	// The check is only worth something if it saw matches and literals.
	if matched < 500 || withLiterals < 150 {
		t.Fatalf("weak run: %d matching lines, %d plans with literals", matched, withLiterals)
	}
}

// likeMatch evaluates a PostgreSQL LIKE pattern with backslash as the
// escape character, as the database would.
func likeMatch(pattern, s string) bool {
	var b strings.Builder
	b.WriteString("(?s)^")
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; c {
		case '\\':
			i++
			if i < len(pattern) {
				b.WriteString(regexp.QuoteMeta(pattern[i : i+1]))
			}
		case '%':
			b.WriteString(".*")
		case '_':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(pattern[i : i+1]))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String()).MatchString(s)
}

func TestEscapeLike(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"plain":     "plain",
		"100%":      `100\%`,
		"a_b":       `a\_b`,
		`C:\dir`:    `C:\\dir`,
		`\%_`:       `\\\%\_`,
		"%%__\\\\":  `\%\%\_\_\\\\`,
		"":          "",
		"héllo_世界%": `héllo\_世界\%`,
	}
	for in, want := range tests {
		if got := EscapeLike(in); got != want {
			t.Errorf("EscapeLike(%q) = %q, want %q", in, got, want)
		}
	}

	p := Plan{Literals: []string{"50%_off", `a\b`}}
	if got, want := p.LikePatterns(), []string{`%50\%\_off%`, `%a\\b%`}; !slices.Equal(got, want) {
		t.Errorf("LikePatterns = %q, want %q", got, want)
	}

	// The pattern matches exactly the strings that contain the literal.
	rng := rand.New(rand.NewPCG(7, 7))
	alphabet := []byte(`ab%_\`)
	rnd := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	for range 3000 {
		lit, s := rnd(1+rng.IntN(3)), rnd(rng.IntN(8))
		pat := (Plan{Literals: []string{lit}}).LikePatterns()[0]
		if got, want := likeMatch(pat, s), strings.Contains(s, lit); got != want {
			t.Fatalf("LIKE %q on %q = %v, want %v", pat, s, got, want)
		}
	}
}

func TestPathFilter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pattern string
		prefix  string
		glob    bool
		yes     []string
		no      []string
	}{
		{"pkg/", "pkg/", false, []string{"pkg/a.go", "pkg/x/y.go"}, []string{"apps/pkg/a.go", "pk"}},
		{"./pkg/shape", "pkg/shape", false, []string{"pkg/shape/shape.go", "pkg/shape"}, []string{"pkg/grants/grants.go"}},
		{"/README.md", "README.md", false, []string{"README.md"}, []string{"docs/README.md"}},
		{"", "", false, []string{"anything", "a/b/c"}, nil},
		{"*.go", "", true, []string{"main.go", ".go"}, []string{"pkg/main.go", "main.gox", "main.go/x"}},
		{"**/*_test.go", "", true, []string{"a_test.go", "pkg/a_test.go", "pkg/x/y/z_test.go"}, []string{"a_test.go.txt", "pkg/a.go", "pkg/test.go"}},
		{"pkg/**", "pkg/", true, []string{"pkg/a.go", "pkg/x/y/z.go"}, []string{"apps/pkg/a.go", "pkgx/a.go"}},
		{"pkg/**/x.go", "pkg/", true, []string{"pkg/x.go", "pkg/a/x.go", "pkg/a/b/x.go"}, []string{"pkg/ax.go", "pkg/a/y.go", "x.go", "apps/pkg/x.go"}},
		{"pkg/*/x.go", "pkg/", true, []string{"pkg/a/x.go"}, []string{"pkg/x.go", "pkg/a/b/x.go"}},
		{"file?.go", "file", true, []string{"file1.go", "fileA.go"}, []string{"file.go", "file12.go", "file/.go"}},
		{"[ab].go", "", true, []string{"a.go", "b.go"}, []string{"c.go", "ab.go"}},
		{"src/[a-c]*.ts", "src/", true, []string{"src/app.ts", "src/c.ts"}, []string{"src/d.ts", "src/a/b.ts"}},
		{"a.b*", "a.b", true, []string{"a.b", "a.bc"}, []string{"axb", "a.b/c"}},
		{"./docs/*.md", "docs/", true, []string{"docs/x.md"}, []string{"docs/a/x.md", "x.md"}},
		{"(x)+*.go", "(x)+", true, []string{"(x)+y.go"}, []string{"xy.go", "xxy.go"}},
	}
	for _, tt := range tests {
		f, err := NewPathFilter(tt.pattern)
		if err != nil {
			t.Errorf("NewPathFilter(%q): %v", tt.pattern, err)
			continue
		}
		if f.Prefix != tt.prefix || f.IsGlob() != tt.glob {
			t.Errorf("NewPathFilter(%q): Prefix %q glob %v, want %q %v", tt.pattern, f.Prefix, f.IsGlob(), tt.prefix, tt.glob)
		}
		for _, p := range tt.yes {
			if !f.Match(p) {
				t.Errorf("%q should match %q", tt.pattern, p)
			}
			if !strings.HasPrefix(p, f.Prefix) {
				t.Errorf("%q matches %q, which the database prefix %q would exclude", tt.pattern, p, f.Prefix)
			}
		}
		for _, p := range tt.no {
			if f.Match(p) {
				t.Errorf("%q should not match %q", tt.pattern, p)
			}
		}
	}

	for _, bad := range []string{"pkg/[ab", "[", "a/**/[x"} {
		_, err := NewPathFilter(bad)
		if err == nil {
			t.Errorf("NewPathFilter(%q) accepted an unclosed [", bad)
			continue
		}
		if codelotse.ErrorCode(err) != codelotse.Invalid || !strings.Contains(codelotse.ErrorMessage(err), "[") {
			t.Errorf("NewPathFilter(%q): %v (code %s)", bad, err, codelotse.ErrorCode(err))
		}
	}
}

// TestLikePatternsWidenFolding: a folding plan's ILIKE patterns (compared
// under the "C" collation, which folds ASCII only) write each non-ASCII
// rune with other case forms as _, and its ARE then carries those letters;
// ASCII letters (s and k included, the stated exception) stay.
func TestLikePatternsWidenFolding(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		query     string
		regex, cs bool
		want      []string
		wantRegex bool
	}{
		{"Straße", false, false, []string{"%Stra_e%"}, true},
		{"Straße", false, true, []string{"%Straße%"}, false},
		{"привет", false, false, []string{}, true},
		{"привет", false, true, []string{"%привет%"}, false},
		{"mask_key", false, false, []string{`%mask\_key%`}, false},
		{"日本語", false, false, []string{"%日本語%"}, false},
		{`über\w+Straße`, true, true, []string{"%Stra_e%", "%_ber%"}, true},
		// Go's parser folds a (?i) ſ or K into S or K; a query that holds
		// either widens s and k (review finding).
		{`(?i)ſtrasse`, true, true, []string{"%_TRA__E%"}, true},
		{`(?i)\x{212A}elvin`, true, true, []string{"%_ELVIN%"}, true},
		{`(?i)strasse`, true, true, []string{"%STRASSE%"}, true},
	} {
		plan, err := NewPlan(tc.query, tc.regex, tc.cs)
		if err != nil {
			t.Fatal(err)
		}
		got := plan.LikePatterns()
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q (regex %v, case sensitive %v): patterns %q, want %q", tc.query, tc.regex, tc.cs, got, tc.want)
		}
		if (plan.Regex != "") != tc.wantRegex {
			t.Errorf("%q (regex %v, case sensitive %v): regex %q, want one: %v", tc.query, tc.regex, tc.cs, plan.Regex, tc.wantRegex)
		}
		if !plan.Scoped() || (!tc.regex && !plan.Tight) {
			t.Errorf("%q: scoped %v, tight %v", tc.query, plan.Scoped(), plan.Tight)
		}
	}
}

// TestMatchLineAgreesWithMatch: MatchLine, which rules lines out by the
// plan's literals before running Match, accepts exactly the lines Match
// does, for literal queries (either case, pieces of real lines with their
// letters' case changed at random) and random regular expressions over
// real source lines, and over lines whose letters fold beyond ASCII: the
// Kelvin sign and the long s, which (?i) folds with k and s, the
// dotless-i's capital, and text in other scripts.
func TestMatchLineAgreesWithMatch(t *testing.T) {
	t.Parallel()
	lines := corpus(t)
	// Under -short (make test runs it with the race detector, which makes
	// the regexp some twenty times slower) a third of the queries, over
	// every other line of the corpus and all of the crafted ones.
	n, step := 200, 1
	if testing.Short() {
		n, step = 70, 2
	}
	checkedLines := []string{
		"ctx \u212aontext.Context", "return \u017ftring(b)", "var \u212a = ReadRune", "\u0130stanbul handler(",
		"func okHandler\u212a(w)", "Grüße, context.context", "日本語 func fooHandler(", "\u017f\u017f\u017f",
		"CONTEXT.CONTEXT", "Context.ContexT", "", "\t", "k", "K", "\u212a"}
	for i := 0; i < len(lines); i += step {
		checkedLines = append(checkedLines, lines[i])
	}
	rng := rand.New(rand.NewPCG(7, 11))
	recase := func(s string) string {
		b := []byte(s)
		for i, c := range b {
			if rng.IntN(2) == 0 && 'a' <= c && c <= 'z' {
				b[i] = c - 'a' + 'A'
			} else if rng.IntN(2) == 0 && 'A' <= c && c <= 'Z' {
				b[i] = c - 'A' + 'a'
			}
		}
		return string(b)
	}
	type query struct {
		q                      string
		isRegex, caseSensitive bool
	}
	queries := []query{{"context.Context", false, false}, {"kontext", false, false}, {"string(", false, false},
		{"K", false, false}, {"s", false, false}, {"ſtring", false, false}, {"context.Context", false, true},
		{`func \w+Handler\(`, true, false}, {`(?i)kontext`, true, true}, {`Kontext|string`, true, false},
		{`\x{212a}ontext`, true, false}, {`(?-i:Context)\.`, true, false}}
	for range n {
		l := lines[rng.IntN(len(lines))]
		if len(l) < 4 {
			continue
		}
		i := rng.IntN(len(l) - 3)
		piece := l[i:min(len(l), i+3+rng.IntN(10))]
		if utf8.ValidString(piece) {
			queries = append(queries, query{recase(piece), false, rng.IntN(3) == 0})
		}
	}
	for range n {
		queries = append(queries, query{randomRegex(rng, lines), true, rng.IntN(2) == 0})
	}
	checked, skipped, matched := 0, 0, 0
	for _, q := range queries {
		p, err := NewPlan(q.q, q.isRegex, q.caseSensitive)
		if err != nil {
			continue // a query NewPlan refuses never reaches a line
		}
		for _, line := range checkedLines {
			want := p.Match.MatchString(line)
			if got := p.MatchLine(line); got != want {
				t.Fatalf("%q (regex %v, case-sensitive %v) on %q: MatchLine %v, Match %v", q.q, q.isRegex, q.caseSensitive, line, got, want)
			}
			checked++
			if want {
				matched++
			}
			if len(p.lineLits) > 0 && !want {
				skipped++
			}
		}
	}
	t.Logf("%d lines checked, %d matched, %d not matched by plans with line literals", checked, matched, skipped)
	// Worth something only if the literals were exercised both ways.
	if matched < 1000 || skipped < checked/2 {
		t.Fatalf("weak run: %d matched, %d ruled out of %d", matched, skipped, checked)
	}
}
