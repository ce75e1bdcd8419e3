package codeindex

import (
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// MinLiteral is the shortest literal worth a trigram prefilter.
const MinLiteral = 3

// Plan is a parsed search.
type Plan struct {
	// Match confirms a line.
	Match *regexp.Regexp
	// Literals must all occur (case-insensitively) in a chunk that can
	// match; they become ILIKE prefilters (LikePatterns). Empty: no
	// prefilter.
	Literals []string
	// fold: a literal may match in another letter case (a case-insensitive
	// query, or a regular expression, which may fold a part of itself
	// with (?i)), so LikePatterns widens the runes whose folding the
	// database's ASCII-only ILIKE would not see.
	fold bool
	// foldSK: the query itself holds ſ (U+017F) or the Kelvin sign (or a
	// \x escape that may be one), which Go's parser folds into S and K of
	// a (?i) literal; LikePatterns then widens s and k too, so that the
	// character the user typed is found.
	foldSK bool
	// Tight: a chunk that passes the prefilter almost always matches (a
	// literal query, or a regular expression whose Regex is its exact
	// translation), so a round needs few more candidates than matches.
	// Otherwise a regular expression's literals are only part of what it
	// needs.
	Tight bool
	// Regex is a PostgreSQL ARE that matches (with ~) every chunk with a
	// line Match matches, and not many more: a second prefilter, next to
	// the literals, for regular-expression queries (see ARE). Empty: none.
	// It is only set when the literals are not empty or pg_trgm can take
	// a trigram from it, so that it never stands alone without an index.
	Regex string
	// lineLits are literals every line Match matches holds (the query's
	// own, or a regular expression's required ASCII literals), lower-cased
	// where lineFold (matched ASCII-case-insensitively); MatchLine skips
	// a line without them before running Match (see MatchLine).
	lineLits []string
	lineFold bool
}

// MatchLine reports whether Match matches line. Go's regexp runs a
// case-insensitive literal through its backtracker on every line, about
// 0.6 us a line; most lines of a candidate chunk hold none of the
// literals, and a byte loop rules those out first (issue 11: at full size
// the engine spent 0.7 ms of a 6 ms search of context.Context under
// net/http/ in the regexp). A line with a byte outside ASCII always goes
// to Match: (?i) folds k and s with the Kelvin sign and the long s, which
// ASCII folding does not see, so only for an ASCII line is the check
// exact.
func (p Plan) MatchLine(line string) bool {
	for _, l := range p.lineLits {
		if p.lineFold {
			if found, ascii := containsFoldASCII(line, l); !found && ascii {
				return false
			}
		} else if !strings.Contains(line, l) {
			return false
		}
	}
	return p.Match.MatchString(line)
}

// containsFoldASCII reports whether s holds lower (lower-case ASCII) with
// ASCII letters in either case; when it does not, ascii reports whether s
// is all ASCII (when it does, ascii is not computed).
func containsFoldASCII(s, lower string) (found, ascii bool) {
	ascii = true
	n := len(lower)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			ascii = false
		}
		if i+n > len(s) || toLowerASCII(c) != lower[0] {
			continue
		}
		j := 1
		for j < n && toLowerASCII(s[i+j]) == lower[j] {
			j++
		}
		if j == n {
			return true, ascii
		}
	}
	return false, ascii
}

func toLowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// withLineLits sets p's line literals: lits (those with a byte outside
// ASCII left out, whose folding an ASCII check cannot follow),
// lower-cased when fold.
func (p Plan) withLineLits(lits []string, fold bool) Plan {
	p.lineLits, p.lineFold = nil, fold
	for _, l := range lits {
		if l == "" || (fold && strings.IndexFunc(l, func(r rune) bool { return r >= utf8.RuneSelf }) >= 0) {
			continue
		}
		if fold {
			l = strings.ToLower(l) // ASCII here
		}
		p.lineLits = append(p.lineLits, l)
	}
	return p
}

// Scoped reports whether the plan can use the trigram index.
func (p Plan) Scoped() bool { return len(p.Literals) > 0 || p.Regex != "" }

// LikePatterns returns the prefilters as ILIKE patterns for a comparison
// under the "C" collation (search_code_candidates): PostgreSQL then folds
// ASCII letters only, with a byte loop, about four times cheaper per chunk
// than the locale's folding. So that the pattern stays a superset of what
// Go's case-insensitive match accepts, a non-ASCII rune with other members
// in its Unicode simple-folding orbit (é: É) becomes the wildcard _ when
// the plan folds; the plan's Regex (which writes orbits out) then carries
// its trigrams. The two non-ASCII orbit members of ASCII letters, ſ
// (U+017F, s) and K (U+212A, k), are the exception: widening every s and
// k would cost most literals their trigrams, so a literal's prefilter does
// not find them, unless the query itself holds one (foldSK; see
// docs/decisions.md).
func (p Plan) LikePatterns() []string {
	out := make([]string, len(p.Literals))
	for i, l := range p.Literals {
		out[i] = "%" + likeLiteral(l, p.widens) + "%"
	}
	return out
}

// widens reports whether LikePatterns writes r as the wildcard _.
func (p Plan) widens(r rune) bool {
	return p.fold && foldsBeyondASCII(r) || p.foldSK && strings.ContainsRune("sSkK", r)
}

// likeLiteral escapes l for LIKE and widens to _ each rune widen names.
func likeLiteral(l string, widen func(rune) bool) string {
	var b strings.Builder
	for _, r := range l {
		switch {
		case r == '\\' || r == '%' || r == '_':
			b.WriteByte('\\')
			b.WriteRune(r)
		case widen(r):
			b.WriteByte('_')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// foldsBeyondASCII reports whether r is a non-ASCII rune whose
// simple-folding orbit has other members (what an ASCII-only ILIKE would
// not fold).
func foldsBeyondASCII(r rune) bool { return r >= utf8.RuneSelf && unicode.SimpleFold(r) != r }

// likeable reports whether literal l, as its ILIKE pattern, still holds
// MinLiteral runes in a row that are not wildcards (otherwise it would
// give the trigram index nothing and is no prefilter worth sending).
func likeable(l string, widen func(rune) bool) bool {
	run := 0
	for _, r := range l {
		if widen(r) {
			run = 0
			continue
		}
		if run++; run >= MinLiteral {
			return true
		}
	}
	return false
}

// EscapeLike escapes LIKE wildcards with backslash (PostgreSQL's default
// escape character).
func EscapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// MaxQuery bounds the length of a query, in characters (code points), as
// the tools' schemas say (maxLength).
const MaxQuery = 1000

// NewPlan parses a query: a literal (regex false) or an RE2 regular
// expression. Matching is per line.
func NewPlan(query string, isRegex, caseSensitive bool) (Plan, error) {
	if query == "" {
		return Plan{}, codelotse.Errorf(codelotse.Invalid, `Missing required argument "query".`)
	}
	if utf8.RuneCountInString(query) > MaxQuery {
		return Plan{}, codelotse.Errorf(codelotse.Invalid, "The query is longer than %d characters.", MaxQuery)
	}
	if strings.ContainsAny(query, "\n\r") {
		return Plan{}, codelotse.Errorf(codelotse.Invalid, "Search matches one line at a time; the query must not contain a line break.")
	}
	flags := ""
	if !caseSensitive {
		flags = "(?i)"
	}
	if !isRegex {
		re := regexp.MustCompile(flags + regexp.QuoteMeta(query))
		plan := Plan{Match: re, fold: !caseSensitive}
		if utf8.RuneCountInString(query) >= MinLiteral && likeable(query, plan.widens) {
			plan.Literals = []string{query}
		}
		if plan.fold && strings.IndexFunc(query, foldsBeyondASCII) >= 0 {
			// Its ILIKE pattern has wildcards where the query has letters
			// the database's ILIKE would not fold (likeLiteral); the
			// quoted query's ARE writes their orbits out, so that it is
			// exact and gives the trigram index those letters too.
			if parsed, err := syntax.Parse(flags+regexp.QuoteMeta(query), syntax.Perl); err == nil {
				if are, exact, ok := ARE(parsed); ok && exact && (len(plan.Literals) > 0 || indexable(parsed.Simplify())) {
					plan.Regex = are
				}
			}
		}
		plan.Tight = plan.Scoped()
		return plan.withLineLits([]string{query}, plan.fold), nil
	}
	re, err := regexp.Compile(flags + query)
	if err != nil {
		msg := err.Error()
		msg = strings.TrimPrefix(msg, "error parsing regexp: ")
		return Plan{}, codelotse.Errorf(codelotse.Invalid, "Invalid regular expression (RE2 syntax): %s.", msg)
	}
	parsed, err := syntax.Parse(query, syntax.Perl)
	if err != nil {
		return Plan{}, codelotse.Errorf(codelotse.Invalid, "Invalid regular expression (RE2 syntax): %v.", err)
	}
	lits := requiredLiterals(parsed.Simplify())
	var keep []string
	widening := Plan{fold: true, foldSK: strings.ContainsAny(query, "\u017f\u212a") || strings.Contains(query, `\x`)}
	for _, lit := range lits {
		// Stored text never holds NUL (PostgreSQL's text cannot), and a
		// pattern holding one is refused by the database: a literal with
		// NULs (\x00 in the expression) requires its pieces between them,
		// a superset that the line match then narrows (to nothing).
		for _, l := range strings.Split(lit, "\x00") {
			if utf8.RuneCountInString(l) >= MinLiteral && likeable(l, widening.widens) {
				keep = append(keep, l)
			}
		}
	}
	// The longest literals filter best; three are plenty.
	sortByLenDesc(keep)
	if len(keep) > 3 {
		keep = keep[:3]
	}
	plan := Plan{Match: re, Literals: keep, fold: true, foldSK: widening.foldSK}
	// The ARE is translated from the query with its case flag, so that a
	// case-insensitive query's literals carry their folding.
	withFlags, err := syntax.Parse(flags+query, syntax.Perl)
	if err != nil {
		return Plan{}, codelotse.Errorf(codelotse.Invalid, "Invalid regular expression (RE2 syntax): %v.", err)
	}
	// A regex with no required literal scopes a search through pg_trgm
	// alone; past a few alternatives pg_trgm may give up on its trigram
	// graph and take every chunk as a candidate, so a larger alternation
	// needs a repository or a path, as before.
	simple := withFlags.Simplify()
	standsAlone := indexable(simple) && branches(simple) <= MaxIndexedBranches
	are, exact, ok := ARE(withFlags)
	// Nor a long one: bounded repeats of classes ([0-9a-f]{0,60}) grow
	// the trigram graph past pg_trgm's limits too, which then takes
	// every chunk as a candidate.
	standsAlone = standsAlone && len(are) <= MaxStandaloneARE
	if ok && (len(keep) > 0 || standsAlone) {
		plan.Regex = are
		plan.Tight = exact
	}
	// Every literal the regular expression requires lies within any of
	// its matches, and so within the line (a literal with a line break
	// is in no line, nor is any match of it). Its letters may be folded
	// by the query's flags or by a (?i) of its own, so they are checked
	// folded.
	return plan.withLineLits(lits, true), nil
}

// MaxIndexedBranches bounds the alternatives of a regular expression with
// no required literal that may search a tenant through the trigram index.
const MaxIndexedBranches = 16

// MaxStandaloneARE bounds the translation of a regular expression with no
// required literal that may search through the trigram index alone.
const MaxStandaloneARE = 256

// branches counts the alternatives in re, at every depth.
func branches(re *syntax.Regexp) int {
	n := 0
	if re.Op == syntax.OpAlternate {
		n = len(re.Sub)
	}
	for _, sub := range re.Sub {
		n += branches(sub)
	}
	return n
}

// requiredLiterals returns literal strings that every match must contain.
func requiredLiterals(re *syntax.Regexp) []string {
	switch re.Op {
	case syntax.OpLiteral:
		return []string{string(re.Rune)}
	case syntax.OpCapture:
		return requiredLiterals(re.Sub[0])
	case syntax.OpPlus:
		return requiredLiterals(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return requiredLiterals(re.Sub[0])
		}
		return nil
	case syntax.OpConcat:
		// Adjacent literals join into one longer literal; other required
		// pieces contribute their own literals.
		var out []string
		var run strings.Builder
		flush := func() {
			if run.Len() > 0 {
				out = append(out, run.String())
				run.Reset()
			}
		}
		for _, sub := range re.Sub {
			if sub.Op == syntax.OpLiteral {
				run.WriteString(string(sub.Rune))
				continue
			}
			flush()
			out = append(out, requiredLiterals(sub)...)
		}
		flush()
		return out
	}
	// Alternations, classes, stars and anchors require no literal.
	return nil
}

func sortByLenDesc(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && len(s[j]) > len(s[j-1]); j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// PathFilter matches paths by prefix or by glob (when the pattern contains
// *, ? or [). "**" matches any number of directories.
type PathFilter struct {
	Prefix string // literal prefix for the database
	re     *regexp.Regexp
}

// NewPathFilter parses a path argument.
func NewPathFilter(p string) (PathFilter, error) {
	p = strings.TrimPrefix(p, "./")
	p = strings.TrimPrefix(p, "/")
	i := strings.IndexAny(p, "*?[")
	if i < 0 {
		return PathFilter{Prefix: p}, nil
	}
	var b strings.Builder
	b.WriteString("^")
	for j := 0; j < len(p); j++ {
		c := p[j]
		switch {
		case c == '*' && j+1 < len(p) && p[j+1] == '*':
			j++
			if j+1 < len(p) && p[j+1] == '/' {
				j++
				b.WriteString("(?:.*/)?")
			} else {
				b.WriteString(".*")
			}
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		case c == '[':
			k := strings.IndexByte(p[j:], ']')
			if k < 0 {
				return PathFilter{}, codelotse.Errorf(codelotse.Invalid, "Invalid path glob %q: unclosed [.", p)
			}
			class := p[j : j+k+1]
			if strings.HasPrefix(class, "[!") {
				class = "[^" + class[2:] // shell negation
			}
			if strings.HasPrefix(class, "[^") {
				// A negated class must not cross directories.
				class = class[:len(class)-1] + "/]"
			}
			b.WriteString(class)
			j += k
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return PathFilter{}, codelotse.Errorf(codelotse.Invalid, "Invalid path glob %q.", p)
	}
	return PathFilter{Prefix: p[:i], re: re}, nil
}

// Match reports whether a path passes the filter.
func (f PathFilter) Match(p string) bool {
	if f.re != nil {
		return f.re.MatchString(p)
	}
	return strings.HasPrefix(p, f.Prefix)
}

// IsGlob reports whether the filter is a glob.
func (f PathFilter) IsGlob() bool { return f.re != nil }
