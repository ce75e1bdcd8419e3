package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/jackc/pgx/v5"

	"github.com/codelotse/codelotse/pkg/codeindex"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
)

// regexWords are the pieces both the generated contents and the generated
// regular expressions are made of, so that the regexes match often: words
// of Go code, every ARE and RE2 metacharacter, white space, and letters
// whose case folding differs between Go and PostgreSQL (K and the Kelvin
// sign, s and the long s, ß, é).
var regexWords = []string{
	"func", "Handler", "ReadRune", "ErrShortWrite", "ErrShortBuffer", "err", "nil", "return", "TODO", "x", "a", "B", "_",
	"0x1F", "3.14", "42", "über", "Straße", "ÉTÉ", "K", "\u212a", "k", "s", "\u017f", "S",
	".", "(", ")", "[", "]", "{", "}", "*", "+", "?", "^", "$", "|", `\`, "/", "-", ":", "=", "!", "#", "'", `"`, ",", ";", "<", ">", "&", "%", "@", "~", "`",
	" ", " ", " ", "\t", "\r",
}

// regexCases are realistic queries an agent sends; each must translate to
// a prefilter that rejects some generated content.
var regexCases = []string{
	`func \w+Handler\(`,
	`func \(\w+ \*Reader\) ReadRune\(`,
	`(ErrShortWrite|ErrShortBuffer)`,
	`^\s*//\s*TODO`,
	`err\s*!=\s*nil`,
	`\bfunc\b`,
	`[A-Z][a-z]+Error\b`,
	`0x[0-9a-fA-F]+`,
	`\d+\.\d+`,
	`^func\s`,
	`return\s+nil,\s*err$`,
	`(?i)straße|über`,
	`\$\{?[A-Z_]+\}?`,
	`a\.b\(c\)\[d\]\{e\}\*\+\?\^\$\|\\`,
	`(?:Read|Write)(?:Rune|Byte)s?\(`,
	`Err[A-Z]\w{2,8}`,
	`x{2,3}|K\x{212a}`,
	`[^\s]+Handler`,
	`.+return`,
	`\Afunc.*\z`,
}

// TestRegexPrefilterIsSound checks codeindex.ARE's promise on PostgreSQL:
// for every pair of a regular expression (the realistic cases and
// generated ones) and a multi-line content where Go's regexp (the plan's
// Match, as search_code confirms) matches some line, the ARE matches the
// whole content with ~. Every ARE must compile; the realistic cases'
// translations must reject some content (a prefilter that passes
// everything would pass this test vacuously); and the run must see enough
// matching pairs, and enough pairs the prefilter rejects, to be worth
// something.
func TestRegexPrefilterIsSound(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(11, 2))

	word := func() string { return regexWords[rng.IntN(len(regexWords))] }
	var lines []string
	for range 400 {
		var b strings.Builder
		for range rng.IntN(9) {
			b.WriteString(word())
		}
		lines = append(lines, b.String())
	}
	// Realistic lines too, so that the realistic cases match some.
	lines = append(lines, "func fooHandler(w http.ResponseWriter) {", "func (b *Reader) ReadRune() (r rune, size int, err error) {",
		"\treturn ErrShortWrite", "  // TODO: later", "if err != nil {", "x := 0xdeadBEEF + 3.14", "type ParseError struct",
		"func main() {", "\treturn nil, err", "Strasse über", "${HOME_DIR}", `a.b(c)[d]{e}*+?^$|\`, "ReadBytes(", "ErrTooLarge",
		"xxx", "K\u212a", "xHandler", "  return", "func x() {}")
	var contents []string
	for range 300 {
		var ls []string
		for range 1 + rng.IntN(6) {
			ls = append(ls, lines[rng.IntN(len(lines))])
		}
		contents = append(contents, strings.Join(ls, "\n"))
	}

	// Generated regexes: pieces of lines (quoted or not), classes, escapes,
	// quantifiers, groups, alternations, anchors and case folding.
	piece := func() string {
		l := lines[rng.IntN(len(lines))]
		rs := []rune(l)
		if len(rs) == 0 {
			return "x"
		}
		i := rng.IntN(len(rs))
		j := min(len(rs), i+1+rng.IntN(6))
		return regexp.QuoteMeta(string(rs[i:j]))
	}
	var atom func(depth int) string
	atom = func(depth int) string {
		if depth > 2 {
			return piece()
		}
		switch rng.IntN(24) {
		case 0:
			return `\w`
		case 1:
			return `\d`
		case 2:
			return `\s`
		case 3:
			return `\b`
		case 4:
			return `.`
		case 5:
			return `[a-zA-Z_]`
		case 6:
			return `[^a-z\s]`
		case 7:
			return `[.*+?()\[\]{}^$|\\-]`
		case 8:
			return "(" + atom(depth+1) + "|" + atom(depth+1) + ")"
		case 9:
			return "(?:" + atom(depth+1) + ")*"
		case 10:
			return "(?:" + atom(depth+1) + ")+"
		case 11:
			return "(?:" + atom(depth+1) + ")?"
		case 12:
			return fmt.Sprintf("(?:%s){%d,%d}", atom(depth+1), rng.IntN(2), 1+rng.IntN(3))
		case 13:
			return "^"
		case 14:
			return "$"
		case 15:
			return "(?i:" + atom(depth+1) + ")"
		case 16:
			return `\B`
		case 17:
			return `[[:upper:]]`
		case 18:
			return `\pL`
		}
		return piece()
	}
	queries := append([]string{}, regexCases...)
	for range 1500 {
		var b strings.Builder
		for range 1 + rng.IntN(4) {
			b.WriteString(atom(0))
		}
		if q := b.String(); !strings.Contains(q, "\r") {
			queries = append(queries, q) // NewPlan refuses a line break
		}
	}

	var pairs, matched, rejected, translated, planned int
	for qi, q := range queries {
		realistic := qi < len(regexCases)
		for _, caseSensitive := range []bool{true, false} {
			plan, err := codeindex.NewPlan(q, true, caseSensitive)
			if err != nil {
				t.Fatalf("NewPlan(%q): %v", q, err)
			}
			flags := ""
			if !caseSensitive {
				flags = "(?i)"
			}
			parsed, err := syntax.Parse(flags+q, syntax.Perl)
			if err != nil {
				t.Fatal(err)
			}
			are, _, ok := codeindex.ARE(parsed)
			if realistic && !ok {
				t.Errorf("%q (case sensitive %v): no ARE", q, caseSensitive)
			}
			if plan.Regex != "" && plan.Regex != are {
				t.Errorf("%q (case sensitive %v): the plan's regex %q is not the translation %q", q, caseSensitive, plan.Regex, are)
			}
			if plan.Regex != "" {
				planned++
			}
			if !ok {
				continue
			}
			translated++
			var accepts []bool
			if err := env.Admin.Pool.QueryRow(ctx, `SELECT array_agg(u.c ~ $2 COLLATE "C" ORDER BY u.n) FROM unnest($1::text[]) WITH ORDINALITY AS u(c, n)`,
				contents, are).Scan(&accepts); err != nil {
				t.Fatalf("%q: ARE %q: %v", q, are, err)
			}
			rejects := 0
			for i, c := range contents {
				goMatch := false
				for _, l := range strings.Split(c, "\n") {
					if plan.Match.MatchString(l) {
						goMatch = true
						break
					}
				}
				pairs++
				if goMatch {
					matched++
				}
				if !accepts[i] {
					rejects++
				}
				if goMatch && !accepts[i] {
					t.Errorf("%q (case sensitive %v) matches a line of %q, but its ARE %q does not match the content", q, caseSensitive, c, are)
				}
			}
			rejected += rejects
			if realistic && rejects == 0 {
				t.Errorf("%q (case sensitive %v): ARE %q rejects no content: it filters nothing", q, caseSensitive, are)
			}
		}
	}
	t.Logf("%d queries, %d translated, %d the plan's prefilter, %d pairs, %d with a Go match, %d rejected by the ARE", 2*len(queries), translated, planned, pairs, matched, rejected)
	if translated < len(queries) || matched < 20000 || rejected < 100000 {
		t.Fatalf("weak run: %d translations, %d matching pairs, %d rejected pairs", translated, matched, rejected)
	}
}

// TestRegexPrefilterEscapes: every character a query can hold, as a
// literal (alone and case-insensitively) and in a class, translates to an
// ARE that matches it, and a literal query's ARE matches only text that
// holds it: no character is ever read as ARE syntax.
func TestRegexPrefilterEscapes(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	ctx := context.Background()
	var chars []string
	for r := rune(1); r < 0x80; r++ {
		if r != '\n' {
			chars = append(chars, string(r))
		}
	}
	chars = append(chars, "é", "ß", "\u212a", "\u017f", "€", "😀", "\ufffd")
	batch := &pgx.Batch{}
	type check struct {
		query, text, are string
		want             bool
	}
	var checks []check
	for _, c := range chars {
		for _, q := range []string{"(?:" + regexp.QuoteMeta(c) + "){3}", "[" + regexp.QuoteMeta(c) + "]{3}", "(?i)" + regexp.QuoteMeta(c) + "{3}"} {
			parsed, err := syntax.Parse(q, syntax.Perl)
			if err != nil {
				t.Fatalf("%q: %v", q, err)
			}
			are, _, ok := codeindex.ARE(parsed)
			if !ok {
				t.Fatalf("%q: no ARE", q)
			}
			three := strings.Repeat(c, 3)
			if strings.HasPrefix(q, "(?i)") {
				three = c + strings.ToUpper(c) + strings.ToLower(c)
			}
			for _, tc := range []check{{q, "x\n" + three + "\ny", are, true}, {q, c + c + "\n" + c, are, false}} {
				checks = append(checks, tc)
				batch.Queue(`SELECT $1::text ~ $2 COLLATE "C"`, tc.text, tc.are)
			}
		}
	}
	res := env.Admin.Pool.SendBatch(ctx, batch)
	defer res.Close()
	for _, c := range checks {
		var got bool
		if err := res.QueryRow().Scan(&got); err != nil {
			t.Fatalf("%q: ARE %q: %v", c.query, c.are, err)
		}
		if got != c.want {
			t.Errorf("%q: ARE %q on %q = %v, want %v", c.query, c.are, c.text, got, c.want)
		}
	}
}

// TestSearchCandidatesDropsABadRegex: a prefilter regex PostgreSQL cannot
// compile is dropped (the patterns alone decide) instead of failing the
// search; a good one filters.
func TestSearchCandidatesDropsABadRegex(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	ctx := context.Background()
	tenant, repos := seedCode(t, env, "badre", 2, 50)
	ids := func(regex string) []int64 {
		t.Helper()
		cands, err := env.App.Tenant(tenant).SearchCandidates(ctx, repos, []string{"%common%"}, regex, "", 0, 1000)
		if err != nil {
			t.Fatalf("regex %q: %v", regex, err)
		}
		var out []int64
		for _, c := range cands {
			out = append(out, c.ChunkID)
		}
		return out
	}
	all := ids("")
	if len(all) == 0 {
		t.Fatal("no candidates without a regex")
	}
	if got := ids(`(?n)(unclosed`); !slices.Equal(got, all) {
		t.Errorf("an invalid regex: %d candidates, want the %d of the patterns alone", len(got), len(all))
	}
	if got := ids(`(?n)nomatchatall`); len(got) != 0 {
		t.Errorf("a regex that matches nothing: %d candidates", len(got))
	}
}

// prefilterWords are the pieces of TestSearchPrefilterIsSound's contents
// and queries: code words, ASCII punctuation and LIKE's own wildcards, and
// words in cased scripts whose letters fold beyond ASCII (é: É, σ: Σ: ς,
// ǅ: Ǆ: ǆ), which an ILIKE under the "C" collation does not fold. The long
// s and the Kelvin sign are left out: they are the documented exception
// (codeindex.Plan.LikePatterns).
var prefilterWords = []string{
	"func", "Handler", "ReadRune", "err", "nil", "return", "x", "a", "B", "_", "%", `\`, ".", "(", ")", "*", " ", "\t",
	"été", "ÉTÉ", "Été", "über", "ÜBER", "Straße", "STRAẞE", "Σίσυφος", "ΣΊΣΥΦΟΣ", "σοφός", "привет", "ПРИВЕТ", "Привет",
	"ǅemal", "Ǆemal", "ǆemal", "日本語", "→",
}

// threeInARow reports whether s holds three letters or digits in a row (a
// trigram for pg_trgm).
func threeInARow(s string) bool {
	run := 0
	for _, r := range s {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			run = 0
		} else if run++; run == 3 {
			return true
		}
	}
	return false
}

// TestSearchPrefilterIsSound checks the whole prefilter search_code sends
// (every ILIKE pattern under the "C" collation and the plan's ARE, as
// search_code_candidates applies them) against Go's match on PostgreSQL:
// for literal and regular-expression queries, case-sensitive or not, a
// content with a line Go matches always passes. Queries with letters that
// fold beyond ASCII also must still be scoped (the plan's ARE carries
// their trigrams when the patterns widen them).
func TestSearchPrefilterIsSound(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 8))
	word := func() string { return prefilterWords[rng.IntN(len(prefilterWords))] }
	var lines []string
	for range 300 {
		var b strings.Builder
		for range 1 + rng.IntN(6) {
			b.WriteString(word())
		}
		lines = append(lines, b.String())
	}
	var contents []string
	for range 200 {
		var ls []string
		for range 1 + rng.IntN(4) {
			ls = append(ls, lines[rng.IntN(len(lines))])
		}
		contents = append(contents, strings.Join(ls, "\n"))
	}
	piece := func() string {
		rs := []rune(lines[rng.IntN(len(lines))])
		i := rng.IntN(len(rs))
		return string(rs[i:min(len(rs), i+1+rng.IntN(10))])
	}
	type query struct {
		q     string
		regex bool
	}
	queries := []query{{"été", false}, {"ΣΊΣΥΦΟΣ", false}, {"привет", false}, {"ǆemal", false}, {`Stra(ß|ẞ)e`, true}}
	for range 400 {
		queries = append(queries, query{piece(), false})
		q := regexp.QuoteMeta(piece())
		switch rng.IntN(3) {
		case 0:
			q += `\w*` + regexp.QuoteMeta(piece())
		case 1:
			q = "(" + q + "|" + regexp.QuoteMeta(piece()) + ")"
		}
		queries = append(queries, query{q, true})
	}
	// A query that itself holds the long s or the Kelvin sign finds it:
	// as a literal (widened as a non-ASCII letter) and in an inline (?i)
	// regex, where Go's parser folds it into S or K (review finding).
	for _, tc := range []struct {
		q       string
		regex   bool
		content string
	}{
		{"ſtrasse", false, "x ſtrasse y"}, {"maſk", false, "maſk"}, {"\u212aelvin", false, "\u212aelvin"},
		{`(?i)ſtrasse`, true, "ſtrasse"}, {`(?i)\x{212A}elvin`, true, "\u212aelvin"}, {`(?i)maſk`, true, "maſk"},
	} {
		plan, err := codeindex.NewPlan(tc.q, tc.regex, !tc.regex)
		if err != nil {
			t.Fatal(err)
		}
		if !plan.Match.MatchString(tc.content) {
			t.Fatalf("%q does not match %q in Go", tc.q, tc.content)
		}
		var regex any
		if plan.Regex != "" {
			regex = plan.Regex
		}
		var ok bool
		if err := env.Admin.Pool.QueryRow(ctx, `SELECT coalesce((SELECT bool_and($1 ILIKE p COLLATE "C") FROM unnest($2::text[]) AS p), true)
			AND ($3::text IS NULL OR $1 ~ $3 COLLATE "C")`, tc.content, plan.LikePatterns(), regex).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		if !ok {
			t.Errorf("%q (regex %v): its prefilter (patterns %q, ARE %v) rejects %q", tc.q, tc.regex, plan.LikePatterns(), regex, tc.content)
		}
	}

	var pairs, matched, rejected, widened int
	for _, qu := range queries {
		for _, caseSensitive := range []bool{true, false} {
			plan, err := codeindex.NewPlan(qu.q, qu.regex, caseSensitive)
			if err != nil {
				t.Fatalf("NewPlan(%q): %v", qu.q, err)
			}
			pats := plan.LikePatterns()
			if pats == nil {
				pats = []string{}
			}
			for _, p := range pats {
				if strings.Contains(p, "_") && !strings.Contains(qu.q, "_") {
					widened++
				}
			}
			if !qu.regex && threeInARow(qu.q) && !plan.Scoped() {
				t.Errorf("%q (case sensitive %v): a literal with a trigram, yet the plan is not scoped", qu.q, caseSensitive)
			}
			var regex any
			if plan.Regex != "" {
				regex = plan.Regex
			}
			var accepts []bool
			if err := env.Admin.Pool.QueryRow(ctx, `SELECT array_agg(
					coalesce((SELECT bool_and(u.c ILIKE p COLLATE "C") FROM unnest($2::text[]) AS p), true)
					AND ($3::text IS NULL OR u.c ~ $3 COLLATE "C") ORDER BY u.n)
				FROM unnest($1::text[]) WITH ORDINALITY AS u(c, n)`, contents, pats, regex).Scan(&accepts); err != nil {
				t.Fatalf("%q: patterns %q, ARE %v: %v", qu.q, pats, regex, err)
			}
			for i, c := range contents {
				goMatch := slices.ContainsFunc(strings.Split(c, "\n"), plan.Match.MatchString)
				pairs++
				if goMatch {
					matched++
				}
				if !accepts[i] {
					rejected++
				}
				if goMatch && !accepts[i] {
					t.Errorf("%q (regex %v, case sensitive %v) matches a line of %q, but its prefilter (patterns %q, ARE %v) rejects it",
						qu.q, qu.regex, caseSensitive, c, pats, regex)
				}
			}
		}
	}
	t.Logf("%d queries, %d pairs, %d with a Go match, %d rejected, %d patterns widened", 2*len(queries), pairs, matched, rejected, widened)
	if matched < 5000 || rejected < 50000 || widened < 50 {
		t.Fatalf("weak run: %d matching pairs, %d rejected, %d widened patterns", matched, rejected, widened)
	}
}
