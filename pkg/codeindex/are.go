package codeindex

import (
	"fmt"
	"regexp/syntax"
	"strings"
	"unicode"
)

// MaxARE bounds the length of a regular expression sent to the database as
// a prefilter; a longer translation is not sent (the literals alone are).
const MaxARE = 2000

// maxClassRanges bounds the ranges of a character class written out; a
// larger class (\pL, say) becomes "any character of the line".
const maxClassRanges = 32

// ARE translates an RE2 query (parsed with syntax.Perl, its flags
// included) into a PostgreSQL advanced regular expression for the
// prefilter c.content ~ are. The contract is soundness: whenever the Go
// regexp matches some line of a chunk, the ARE matches the chunk's whole
// content (its lines joined by "\n"). A prefilter that is too strict hides
// matches, so every rule below errs on the permissive side:
//
//   - The ARE starts with (?n), newline-sensitive mode: "." and negated
//     brackets never match "\n", and ^ and $ match at every line boundary
//     as well as at the ends, so a translated match stays on one line
//     exactly as Go's per-line match does, and Go's ^ $ \A \z (which see
//     one line) become ^ and $.
//   - A literal character is written as itself when it is an ASCII letter
//     or digit, as a backslash and itself when it is other printable ASCII
//     (in an ARE a backslash before a non-alphanumeric character is that
//     character), and as a \u or \U hex escape otherwise, so that no user
//     character is ever read as ARE syntax. Inside brackets every
//     non-alphanumeric endpoint is a hex escape.
//   - Case folding is written out: a case-insensitive literal becomes a
//     bracket of its whole Unicode simple-folding orbit (k: [Kk\u212a]),
//     and Go's parser has already folded classes, so the ARE is matched
//     case-sensitively and PostgreSQL's locale-dependent folding, which
//     differs from Go's, never decides anything.
//   - Classes are written as their code-point ranges (ARE ranges are by
//     code point), so \w \d \s and [[:alpha:]] mean Go's ASCII sets, not
//     ARE's locale-dependent ones; "\n", NUL and surrogates are left out
//     (no line contains them). A class of more than maxClassRanges ranges
//     becomes ".", any one character of the line: a superset.
//   - \b and \B become the empty string (always true: a superset), since
//     ARE's word characters are the locale's and Go's are ASCII.
//   - Anything else that cannot be translated exactly (no-match nodes, and
//     any operator this function does not know) becomes ".*", anything on
//     the line: every Go match lies within one line, so this is a superset.
//
// ok is false when no useful prefilter exists: the translation matches the
// empty string (it would pass every chunk) or is longer than MaxARE. exact
// reports that no permissive rule was needed, so the ARE accepts a chunk
// exactly when some line of it matches.
func ARE(re *syntax.Regexp) (are string, exact, ok bool) {
	t := &areWriter{exact: true}
	re = re.Simplify()
	var n areNode
	s := ""
	if re.Op == syntax.OpConcat {
		// Unanchored: a leading or trailing "anything on the line" adds
		// nothing, so those parts are left out (whole parts, never text:
		// the "*" of an escaped dot, "\\.*", is not one).
		parts := t.parts(re)
		n = join(parts)
		for len(parts) > 0 && parts[0].any {
			parts = parts[1:]
		}
		for len(parts) > 0 && parts[len(parts)-1].any {
			parts = parts[:len(parts)-1]
		}
		s = join(parts).s
	} else {
		n = t.node(re)
		s = n.s
	}
	if n.nullable || len(n.s) > MaxARE {
		return "", false, false
	}
	return "(?n)" + s, t.exact, true
}

// parts translates the subexpressions of a concatenation, a run of
// "anything on the line" folded into one.
func (t *areWriter) parts(re *syntax.Regexp) []areNode {
	var out []areNode
	for _, sub := range re.Sub {
		n := t.node(sub)
		if n.any && len(out) > 0 && out[len(out)-1].any {
			continue
		}
		out = append(out, n)
	}
	return out
}

// join is the concatenation of translated parts.
func join(parts []areNode) areNode {
	var b strings.Builder
	nullable, zeroWidth := true, true
	for _, n := range parts {
		b.WriteString(n.s)
		nullable = nullable && n.nullable
		zeroWidth = zeroWidth && n.zeroWidth
	}
	return areNode{s: b.String(), nullable: nullable, zeroWidth: zeroWidth, any: b.String() == anyLine}
}

// anyLine is "anything on the line" in newline-sensitive mode.
const anyLine = ".*"

type areWriter struct{ exact bool }

// areNode is a translated subexpression: its ARE text, whether it can
// match the empty string, whether it never consumes a character (an
// anchor, or empty), and whether it is anyLine.
type areNode struct {
	s         string
	nullable  bool
	zeroWidth bool
	any       bool
}

var anyNode = areNode{s: anyLine, nullable: true, any: true}

func (t *areWriter) loose() areNode {
	t.exact = false
	return anyNode
}

func (t *areWriter) node(re *syntax.Regexp) areNode {
	switch re.Op {
	case syntax.OpEmptyMatch:
		return areNode{nullable: true, zeroWidth: true}
	case syntax.OpLiteral:
		var b strings.Builder
		for _, r := range re.Rune {
			lit, exact := literalARE(r, re.Flags&syntax.FoldCase != 0)
			b.WriteString(lit)
			t.exact = t.exact && exact
		}
		return areNode{s: b.String(), nullable: len(re.Rune) == 0}
	case syntax.OpCharClass:
		return t.class(re.Rune)
	case syntax.OpAnyCharNotNL, syntax.OpAnyChar:
		// A line holds no "\n", so Go's (?s). is "." on a line too.
		return areNode{s: "."}
	case syntax.OpBeginLine, syntax.OpBeginText:
		return areNode{s: "^", nullable: true, zeroWidth: true}
	case syntax.OpEndLine, syntax.OpEndText:
		return areNode{s: "$", nullable: true, zeroWidth: true}
	case syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		t.exact = false
		return areNode{nullable: true, zeroWidth: true}
	case syntax.OpCapture:
		return t.node(re.Sub[0])
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
		sub := t.node(re.Sub[0])
		if sub.any {
			return anyNode
		}
		if sub.zeroWidth {
			// An operand that consumes nothing (an anchor, say): the empty
			// string, always true and consuming nothing, is a superset, and
			// no quantifier ever applies to an anchor in the ARE. (An
			// operand that is merely nullable, x*|y, is quantified as it
			// is: the empty string would be stricter than (?:x*|y)+.)
			t.exact = t.exact && (sub.s == "" || re.Op != syntax.OpPlus) // (?:^)* and (?:^)? are empty; (?:^)+ is ^
			return areNode{nullable: true, zeroWidth: true}
		}
		op := map[syntax.Op]string{syntax.OpStar: "*", syntax.OpPlus: "+", syntax.OpQuest: "?"}[re.Op]
		q := group(sub.s) + op
		return areNode{s: q, nullable: re.Op != syntax.OpPlus || sub.nullable, any: q == anyLine}
	case syntax.OpRepeat:
		// Simplify expands repeats; should one remain, ARE's bounds stop
		// at 255.
		sub := t.node(re.Sub[0])
		if sub.any || sub.zeroWidth || re.Max > 255 || re.Min > 255 {
			return t.loose()
		}
		bound := fmt.Sprintf("{%d,%d}", re.Min, re.Max)
		if re.Max < 0 {
			bound = fmt.Sprintf("{%d,}", re.Min)
		}
		return areNode{s: group(sub.s) + bound, nullable: re.Min == 0 || sub.nullable}
	case syntax.OpConcat:
		return join(t.parts(re))
	case syntax.OpAlternate:
		parts := make([]string, len(re.Sub))
		nullable, zeroWidth := false, true
		for i, sub := range re.Sub {
			n := t.node(sub)
			if n.any {
				return anyNode // anything on the line covers every branch
			}
			parts[i] = n.s
			nullable = nullable || n.nullable
			zeroWidth = zeroWidth && n.zeroWidth
		}
		return areNode{s: "(?:" + strings.Join(parts, "|") + ")", nullable: nullable, zeroWidth: zeroWidth}
	}
	// OpNoMatch and anything unknown.
	return t.loose()
}

// group wraps s for a quantifier unless it is one atom already: a
// character, an escaped one, a bracket or a group.
func group(s string) string {
	atom := len([]rune(s)) == 1 || len(s) == 2 && s[0] == '\\' ||
		strings.HasPrefix(s, "[") && strings.IndexByte(s, ']') == len(s)-1 ||
		strings.HasPrefix(s, `\u`) && len(s) == 6 || strings.HasPrefix(s, `\U`) && len(s) == 10
	if atom || (strings.HasPrefix(s, "(?:") && strings.HasSuffix(s, ")") && balanced(s[3:len(s)-1])) {
		return s
	}
	return "(?:" + s + ")"
}

// balanced reports whether s's unescaped parentheses and brackets close
// within it, so that the group around it is one group.
func balanced(s string) bool {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '(', '[':
			depth++
		case ')', ']':
			depth--
			if depth < 0 {
				return false
			}
		}
	}
	return depth == 0
}

// literalARE writes one literal rune, with its case-folding orbit when
// fold is set; exact is false when it had to write a superset.
func literalARE(r rune, fold bool) (are string, exact bool) {
	if !validLineRune(r) {
		// No line holds it, so Go never matches it: any character is a
		// superset.
		return ".", false
	}
	if fold {
		orbit := []rune{r}
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			orbit = append(orbit, f)
		}
		if len(orbit) > 1 {
			var b strings.Builder
			b.WriteByte('[')
			for _, o := range orbit {
				b.WriteString(bracketRune(o))
			}
			b.WriteByte(']')
			return b.String(), true
		}
	}
	switch {
	case r < 0x80 && isAlnum(byte(r)):
		return string(r), true
	case r > 0x20 && r < 0x7f:
		return `\` + string(r), true
	}
	return hexRune(r), true
}

// class writes a character class from Go's sorted [lo, hi] pairs.
func (t *areWriter) class(pairs []rune) areNode {
	var b strings.Builder
	n := 0
	for i := 0; i+1 < len(pairs); i += 2 {
		for _, rg := range lineRanges(pairs[i], pairs[i+1]) {
			n++
			b.WriteString(bracketRune(rg[0]))
			if rg[1] != rg[0] {
				b.WriteByte('-')
				b.WriteString(bracketRune(rg[1]))
			}
		}
	}
	switch {
	case n == 0:
		// Nothing a line holds: Go never matches; any character is a
		// superset.
		t.exact = false
		return areNode{s: "."}
	case n > maxClassRanges:
		t.exact = false
		return areNode{s: "."}
	}
	return areNode{s: "[" + b.String() + "]"}
}

// lineRanges cuts [lo, hi] around the code points no line holds: NUL,
// "\n" and the surrogates.
func lineRanges(lo, hi rune) [][2]rune {
	out := [][2]rune{{lo, hi}}
	for _, gap := range [][2]rune{{0, 0}, {'\n', '\n'}, {0xD800, 0xDFFF}} {
		var next [][2]rune
		for _, rg := range out {
			if rg[1] < gap[0] || rg[0] > gap[1] {
				next = append(next, rg)
				continue
			}
			if rg[0] < gap[0] {
				next = append(next, [2]rune{rg[0], gap[0] - 1})
			}
			if rg[1] > gap[1] {
				next = append(next, [2]rune{gap[1] + 1, rg[1]})
			}
		}
		out = next
	}
	return out
}

func validLineRune(r rune) bool {
	return r > 0 && r != '\n' && (r < 0xD800 || r > 0xDFFF) && r <= unicode.MaxRune
}

// bracketRune writes a rune inside a bracket expression: letters and
// digits as themselves, anything else as a hex escape (never ] ^ - \ or [).
func bracketRune(r rune) string {
	if r < 0x80 && isAlnum(byte(r)) {
		return string(r)
	}
	return hexRune(r)
}

func hexRune(r rune) string {
	if r <= 0xFFFF {
		return fmt.Sprintf(`\u%04x`, r)
	}
	return fmt.Sprintf(`\U%08x`, r)
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// indexable reports whether every match of re contains three letters or
// digits in a row of fixed text, so that pg_trgm can extract a trigram
// from the translated ARE and the trigram index narrows its candidates
// without an ILIKE pattern (an alternation of words, say). It may say no
// when the answer is yes (then the plan keeps its literals alone), never
// the reverse.
func indexable(re *syntax.Regexp) bool { return trigramInfo(re).tri }

// trigrams describes the fixed letters and digits of a subexpression:
// tri, every match holds three in a row; pre and suf, every match starts
// and ends with at least that many; full, every match is the same run of
// n of them.
type trigrams struct {
	tri      bool
	pre, suf int
	full     bool
	n        int
}

func trigramInfo(re *syntax.Regexp) trigrams {
	switch re.Op {
	case syntax.OpLiteral:
		var out trigrams
		for i, r := range re.Rune {
			out = concatTrigrams(out, runeTrigrams(r), i == 0)
		}
		return out
	case syntax.OpCapture:
		return trigramInfo(re.Sub[0])
	case syntax.OpPlus, syntax.OpRepeat:
		if re.Op == syntax.OpRepeat && re.Min < 1 {
			return trigrams{}
		}
		sub := trigramInfo(re.Sub[0])
		return trigrams{tri: sub.tri, pre: sub.pre, suf: sub.suf}
	case syntax.OpConcat:
		var out trigrams
		for i, sub := range re.Sub {
			out = concatTrigrams(out, trigramInfo(sub), i == 0)
		}
		return out
	case syntax.OpAlternate:
		if len(re.Sub) == 0 {
			return trigrams{}
		}
		out := trigramInfo(re.Sub[0])
		for _, sub := range re.Sub[1:] {
			b := trigramInfo(sub)
			out = trigrams{tri: out.tri && b.tri, pre: min(out.pre, b.pre), suf: min(out.suf, b.suf),
				full: out.full && b.full && out.n == b.n, n: out.n}
		}
		return out
	}
	return trigrams{}
}

func runeTrigrams(r rune) trigrams {
	if unicode.IsLetter(r) || unicode.IsDigit(r) {
		return trigrams{pre: 1, suf: 1, full: true, n: 1}
	}
	return trigrams{}
}

// concatTrigrams is x followed by y (first: x is the empty start).
func concatTrigrams(x, y trigrams, first bool) trigrams {
	if first {
		return y
	}
	out := trigrams{tri: x.tri || y.tri || x.suf+y.pre >= 3, pre: x.pre, suf: y.suf, full: x.full && y.full, n: x.n + y.n}
	if x.full {
		out.pre = x.n + y.pre
	}
	if y.full {
		out.suf = x.suf + y.n
	}
	out.tri = out.tri || out.pre >= 3 || out.suf >= 3
	return out
}
