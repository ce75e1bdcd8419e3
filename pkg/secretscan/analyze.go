package secretscan

import (
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// This file analyses gitleaks rule regexes with regexp/syntax so that a rule
// need not be run over a whole string: every string a regex matches starts,
// at a computable place, with one of a few short literal "anchors", and the
// text a match can span before and after that place is bounded in bytes
// and/or in newlines. A scan then runs the regex only on small windows around
// anchor occurrences, and those windows provably contain every match the
// regex has in the whole string (see the package documentation).

// unbounded marks a width or newline count without an upper bound.
const unbounded = -1

func addBound(a, b int) int {
	if a == unbounded || b == unbounded {
		return unbounded
	}
	return a + b
}

func maxBound(a, b int) int {
	if a == unbounded || b == unbounded {
		return unbounded
	}
	return max(a, b)
}

func mulBound(n, b int) int {
	if b == 0 {
		return 0
	}
	if n == unbounded || b == unbounded {
		return unbounded
	}
	return n * b
}

// isFoldRune reports the non-ASCII runes that case-fold to ASCII letters.
// Windows are only used for strings without them (see foldRunes), so the
// widths below leave them out: (?i)k and [a-z] under (?i) match one byte.
func isFoldRune(r rune) bool { return r == '\u017f' || r == '\u212a' }

// runeWidth is the largest UTF-8 width of a rune the literal r matches,
// including its case-folded forms other than the fold runes.
func runeWidth(r rune, fold bool) int {
	w := utf8.RuneLen(r)
	if w < 0 {
		w = utf8.UTFMax
	}
	if fold {
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if !isFoldRune(f) {
				w = max(w, utf8.RuneLen(f))
			}
		}
	}
	return w
}

// maxBoundOf is the largest value of a per-match measure over every match
// of re: leaf measures single-node regexps (literals, classes, any-char)
// and returns ok=false for the rest, which are combined here — sums over
// concatenations, maxima over alternations, products over repetitions.
func maxBoundOf(re *syntax.Regexp, leaf func(*syntax.Regexp) (int, bool)) int {
	if n, ok := leaf(re); ok {
		return n
	}
	switch re.Op {
	case syntax.OpCapture, syntax.OpQuest:
		return maxBoundOf(re.Sub[0], leaf)
	case syntax.OpStar, syntax.OpPlus:
		return mulBound(unbounded, maxBoundOf(re.Sub[0], leaf))
	case syntax.OpRepeat:
		if re.Max < 0 {
			return mulBound(unbounded, maxBoundOf(re.Sub[0], leaf))
		}
		return mulBound(re.Max, maxBoundOf(re.Sub[0], leaf))
	case syntax.OpConcat:
		n := 0
		for _, sub := range re.Sub {
			n = addBound(n, maxBoundOf(sub, leaf))
		}
		return n
	case syntax.OpAlternate:
		n := 0
		for _, sub := range re.Sub {
			n = maxBound(n, maxBoundOf(sub, leaf))
		}
		return n
	}
	return 0 // empty matches and assertions
}

// width is the largest number of bytes a match of re can span in a string
// without fold runes. Invalid UTF-8 is matched one byte at a time, so rune
// widths are an upper bound for it too.
func width(re *syntax.Regexp) int { return maxBoundOf(re, widthLeaf) }

func widthLeaf(re *syntax.Regexp) (int, bool) {
	switch re.Op {
	case syntax.OpLiteral:
		n := 0
		for _, r := range re.Rune {
			n += runeWidth(r, re.Flags&syntax.FoldCase != 0)
		}
		return n, true
	case syntax.OpCharClass:
		w := 0
		for i := 0; i+1 < len(re.Rune); i += 2 {
			lo, hi := re.Rune[i], min(re.Rune[i+1], unicode.MaxRune)
			for hi >= lo && isFoldRune(hi) {
				hi--
			}
			if hi >= lo {
				w = max(w, utf8.RuneLen(hi))
			}
		}
		return w, true
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return utf8.UTFMax, true
	}
	return 0, false
}

// newlines is the largest number of '\n' a match of re can contain.
func newlines(re *syntax.Regexp) int { return maxBoundOf(re, newlinesLeaf) }

func newlinesLeaf(re *syntax.Regexp) (int, bool) {
	switch re.Op {
	case syntax.OpLiteral:
		return strings.Count(string(re.Rune), "\n"), true
	case syntax.OpCharClass:
		for i := 0; i+1 < len(re.Rune); i += 2 {
			if re.Rune[i] <= '\n' && '\n' <= re.Rune[i+1] {
				return 1, true
			}
		}
		return 0, true
	case syntax.OpAnyChar:
		return 1, true
	}
	return 0, false
}

// minWidth is the smallest number of bytes a match of re spans.
func minWidth(re *syntax.Regexp) int {
	switch re.Op {
	case syntax.OpLiteral:
		return len(string(re.Rune))
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return 1
	case syntax.OpCapture, syntax.OpPlus:
		return minWidth(re.Sub[0])
	case syntax.OpRepeat:
		return re.Min * minWidth(re.Sub[0])
	case syntax.OpConcat:
		n := 0
		for _, sub := range re.Sub {
			n += minWidth(sub)
		}
		return n
	case syntax.OpAlternate:
		n := -1
		for _, sub := range re.Sub {
			if m := minWidth(sub); n < 0 || m < n {
				n = m
			}
		}
		return max(n, 0)
	default:
		return 0
	}
}

// prefixTrunc returns a regexp at most budget bytes wide that matches a
// prefix of every string re matches: re itself if it is narrow enough, else
// re cut at its first wide repetition, which keeps only its minimum count
// (or nothing).
func prefixTrunc(re *syntax.Regexp, budget int) *syntax.Regexp {
	if w := width(re); w != unbounded && w <= budget {
		return re
	}
	empty := &syntax.Regexp{Op: syntax.OpEmptyMatch}
	switch re.Op {
	case syntax.OpCapture, syntax.OpPlus:
		return prefixTrunc(re.Sub[0], budget)
	case syntax.OpRepeat:
		sw := width(re.Sub[0])
		if re.Min == 0 || sw == unbounded || re.Min*sw > budget {
			if re.Min > 0 {
				return prefixTrunc(re.Sub[0], budget)
			}
			return empty
		}
		c := *re
		c.Max = re.Min
		return &c
	case syntax.OpConcat:
		c := &syntax.Regexp{Op: syntax.OpConcat, Flags: re.Flags}
		for _, sub := range re.Sub {
			if w := width(sub); w == unbounded || w > budget {
				c.Sub = append(c.Sub, prefixTrunc(sub, budget))
				break
			}
			c.Sub = append(c.Sub, sub)
			budget -= width(sub)
		}
		return c
	case syntax.OpAlternate:
		c := &syntax.Regexp{Op: syntax.OpAlternate, Flags: re.Flags}
		for _, sub := range re.Sub {
			c.Sub = append(c.Sub, prefixTrunc(sub, budget))
		}
		return c
	default: // star, quest
		return empty
	}
}

func minWidthOf(seq []*syntax.Regexp) int {
	n := 0
	for _, re := range seq {
		n += minWidth(re)
	}
	return n
}

func widthOf(seq []*syntax.Regexp) int {
	n := 0
	for _, re := range seq {
		n = addBound(n, width(re))
	}
	return n
}

func newlinesOf(seq []*syntax.Regexp) int {
	n := 0
	for _, re := range seq {
		n = addBound(n, newlines(re))
	}
	return n
}

// flatten lists the elements of a concatenation, looking through nested
// concatenations and capture groups.
func flatten(re *syntax.Regexp) []*syntax.Regexp {
	switch re.Op {
	case syntax.OpConcat:
		var out []*syntax.Regexp
		for _, sub := range re.Sub {
			out = append(out, flatten(sub)...)
		}
		return out
	case syntax.OpCapture:
		if re.Sub[0].Op == syntax.OpConcat || re.Sub[0].Op == syntax.OpCapture {
			return flatten(re.Sub[0])
		}
	}
	return []*syntax.Regexp{re}
}

// Limits of the prefix analysis.
const (
	maxPrefixes   = 64
	maxPrefixLen  = 16
	minAnchorLen  = 2
	maxBranches   = 32
	maxClassRunes = 8
)

// prefix is a lowercased ASCII string that a match of a node starts with;
// complete means it is the whole match, so what follows the node can extend
// it.
type prefix struct {
	s        string
	complete bool
}

func lowerASCII(r rune) (byte, bool) {
	if r >= utf8.RuneSelf {
		return 0, false
	}
	b := byte(r)
	if 'A' <= b && b <= 'Z' {
		b += 'a' - 'A'
	}
	return b, true
}

// prefixes returns a set of lowercased ASCII prefixes such that every string
// re matches starts with one of them (ASCII case-insensitively), or false if
// the set would be too large. Non-ASCII runes end a prefix: the anchors are
// found by an ASCII case-insensitive automaton. Case folding to ASCII from
// outside ASCII (U+017F, U+212A) is left to the caller's slow path.
func prefixes(re *syntax.Regexp) ([]prefix, bool) {
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText,
		syntax.OpEndText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return []prefix{{"", true}}, true
	case syntax.OpLiteral:
		var b []byte
		for _, r := range re.Rune {
			c, ok := lowerASCII(r)
			if !ok || len(b) == maxPrefixLen {
				return []prefix{{string(b), false}}, true
			}
			b = append(b, c)
		}
		return []prefix{{string(b), true}}, true
	case syntax.OpCharClass:
		n := 0
		for i := 0; i+1 < len(re.Rune); i += 2 {
			n += int(re.Rune[i+1]-re.Rune[i]) + 1
			if n > maxClassRunes {
				return []prefix{{"", false}}, true
			}
		}
		seen := map[string]bool{}
		var out []prefix
		for i := 0; i+1 < len(re.Rune); i += 2 {
			for r := re.Rune[i]; r <= re.Rune[i+1]; r++ {
				c, ok := lowerASCII(r)
				if !ok {
					if isFoldRune(r) { // ASCII folds; slow path
						continue
					}
					return []prefix{{"", false}}, true
				}
				if !seen[string(c)] {
					seen[string(c)] = true
					out = append(out, prefix{string(c), true})
				}
			}
		}
		return out, true
	case syntax.OpCapture:
		return prefixes(re.Sub[0])
	case syntax.OpQuest:
		p, ok := prefixes(re.Sub[0])
		if !ok {
			return nil, false
		}
		return union(p, []prefix{{"", true}}), true
	case syntax.OpRepeat, syntax.OpPlus:
		if re.Op == syntax.OpRepeat && re.Min == 0 {
			return []prefix{{"", false}}, true
		}
		p, ok := prefixes(re.Sub[0])
		if !ok {
			return nil, false
		}
		if re.Op == syntax.OpRepeat && re.Min == 1 && re.Max == 1 {
			return p, true
		}
		out := make([]prefix, len(p))
		for i, x := range p {
			out[i] = prefix{x.s, false}
		}
		return out, true
	case syntax.OpConcat:
		return prefixesOf(re.Sub)
	case syntax.OpAlternate:
		var out []prefix
		for _, sub := range re.Sub {
			p, ok := prefixes(sub)
			if !ok {
				return nil, false
			}
			out = union(out, p)
			if len(out) > maxPrefixes {
				return nil, false
			}
		}
		return out, true
	default: // star, any char
		return []prefix{{"", false}}, true
	}
}

// prefixesOf is prefixes for a concatenation.
func prefixesOf(seq []*syntax.Regexp) ([]prefix, bool) {
	cur := []prefix{{"", true}}
	for _, re := range seq {
		open := false
		for _, c := range cur {
			if c.complete {
				open = true
				break
			}
		}
		if !open {
			break
		}
		p, ok := prefixes(re)
		if !ok {
			return nil, false
		}
		var next []prefix
		for _, c := range cur {
			if !c.complete {
				next = union(next, []prefix{c})
				continue
			}
			for _, x := range p {
				s := c.s + x.s
				complete := x.complete
				if len(s) > maxPrefixLen {
					s, complete = s[:maxPrefixLen], false
				}
				next = union(next, []prefix{{s, complete}})
			}
			if len(next) > maxPrefixes {
				return nil, false
			}
		}
		cur = next
	}
	return cur, true
}

// union merges prefix sets. A string that is complete in one and not in the
// other is kept as not complete: some matches go on with unknown text.
func union(a, b []prefix) []prefix {
	for _, x := range b {
		dup := false
		for i, y := range a {
			if y.s == x.s {
				a[i].complete = y.complete && x.complete
				dup = true
				break
			}
		}
		if !dup {
			a = append(a, x)
		}
	}
	return a
}

func minLen(p []prefix) int {
	if len(p) == 0 {
		return 0
	}
	n := len(p[0].s)
	for _, x := range p[1:] {
		n = min(n, len(x.s))
	}
	return n
}

// anchor describes, for one branch of a regex, where every match of that
// branch starts with one of the strings in lits: at that place p, the match
// spans at most before bytes/beforeNL newlines before p and after
// bytes/afterNL newlines from p on. pre, anchored at p, matches whenever the
// branch has a match there.
type anchor struct {
	lits             []string
	before, beforeNL int
	beforeMin        int // the least bytes a match spans before p
	after, afterNL   int
	pre              string // regexp source of the anchored remainder
	// quick is a cheaper necessary condition than pre: its first
	// elements, of at most quickWidth bytes ("" if that is all of pre).
	quick      string
	quickWidth int
	// need is a cheaper check still: one byte of set must occur at
	// offset lo..hi from the anchor (hi < 0: no such check).
	need     byteSet
	needLo   int
	needHi   int
	litBytes int // literal bytes in the branch, a selectivity hint
}

// byteSet is a set of bytes.
type byteSet [4]uint64

func (b *byteSet) add(c byte)      { b[c>>6] |= 1 << (c & 63) }
func (b *byteSet) has(c byte) bool { return b[c>>6]&(1<<(c&63)) != 0 }
func (b *byteSet) union(o byteSet) {
	b[0], b[1], b[2], b[3] = b[0]|o[0], b[1]|o[1], b[2]|o[2], b[3]|o[3]
}
func (b *byteSet) addRange(lo, hi byte) {
	for c := int(lo); c <= int(hi); c++ {
		b.add(byte(c))
	}
}

func (b *byteSet) size() int {
	n := 0
	for c := 0; c < 256; c++ {
		if b.has(byte(c)) {
			n++
		}
	}
	return n
}

// firstBytes is the set of bytes a non-empty match of re can start with.
func firstBytes(re *syntax.Regexp) (byteSet, bool) {
	var set byteSet
	addRune := func(r rune) {
		var buf [utf8.UTFMax]byte
		utf8.EncodeRune(buf[:], r)
		set.add(buf[0])
	}
	switch re.Op {
	case syntax.OpLiteral:
		r := re.Rune[0]
		if r == utf8.RuneError {
			set.addRange(0x80, 0xff) // also matches invalid UTF-8
		}
		addRune(r)
		if re.Flags&syntax.FoldCase != 0 {
			for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
				addRune(f)
			}
		}
		return set, true
	case syntax.OpCharClass:
		for i := 0; i+1 < len(re.Rune); i += 2 {
			lo, hi := re.Rune[i], re.Rune[i+1]
			if lo < utf8.RuneSelf {
				set.addRange(byte(lo), byte(min(hi, utf8.RuneSelf-1)))
			}
			if hi >= utf8.RuneSelf {
				set.addRange(0x80, 0xff) // any lead byte, or invalid UTF-8
			}
		}
		return set, true
	case syntax.OpCapture, syntax.OpPlus, syntax.OpStar, syntax.OpQuest, syntax.OpRepeat:
		return firstBytes(re.Sub[0])
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			if isEmptyWidth(sub) {
				continue
			}
			f, ok := firstBytes(sub)
			if !ok {
				return set, false
			}
			set.union(f)
			if minWidth(sub) > 0 {
				return set, true
			}
		}
		return set, false
	case syntax.OpAlternate:
		for _, sub := range re.Sub {
			f, ok := firstBytes(sub)
			if !ok {
				return set, false
			}
			set.union(f)
		}
		return set, true
	default:
		return set, false
	}
}

// needCheck finds, after the anchor element seq[0], the first element that
// must match, starts at a bounded offset and starts with one of at most
// maxNeedBytes bytes.
func needCheck(seq []*syntax.Regexp) (set byteSet, lo, hi int) {
	lo, hi = minWidth(seq[0]), width(seq[0])
	for _, re := range seq[1:] {
		if hi == unbounded || hi > maxQuickWidth {
			break
		}
		if minWidth(re) > 0 {
			if f, ok := firstBytes(re); ok && f.size() <= maxNeedBytes {
				return f, lo, hi
			}
		}
		lo, hi = lo+minWidth(re), addBound(hi, width(re))
	}
	return set, 0, -1
}

const maxNeedBytes = 24

// maxQuickWidth bounds the width of an anchor's quick check, which keeps it
// small enough for regexp's backtracker (whose cost is proportional to the
// input it is given) instead of its much slower NFA.
const maxQuickWidth = 128

// findAnchor picks the earliest element of seq from which a run of elements
// yields prefixes of at least minAnchorLen bytes.
func findAnchor(seq []*syntax.Regexp) (anchor, bool) {
	for i := range seq {
		p, ok := prefixesOf(seq[i:])
		if !ok || minLen(p) < minAnchorLen {
			continue
		}
		lits := make([]string, len(p))
		for j, x := range p {
			lits[j] = x.s
		}
		a := anchor{
			lits:      lits,
			before:    widthOf(seq[:i]),
			beforeNL:  newlinesOf(seq[:i]),
			beforeMin: minWidthOf(seq[:i]),
			after:     widthOf(seq[i:]),
			afterNL:   newlinesOf(seq[i:]),
			pre:       anchored(seq[i:]),
			litBytes:  literalBytes(seq),
		}
		k, w := i, 0
		for k < len(seq) {
			nw := addBound(w, width(seq[k]))
			if nw == unbounded || nw > maxQuickWidth {
				break
			}
			k, w = k+1, nw
		}
		a.need, a.needLo, a.needHi = needCheck(seq[i:])
		if k > i && k < len(seq) {
			q := append([]*syntax.Regexp{}, seq[i:k]...)
			if t := prefixTrunc(seq[k], maxQuickWidth-w); w+width(t) <= maxQuickWidth {
				q = append(q, t)
				w += width(t)
			}
			a.quick, a.quickWidth = anchored(q), w
		}
		return a, true
	}
	return anchor{}, false
}

// anchored is the source of seq anchored at the start of the text.
func anchored(seq []*syntax.Regexp) string {
	re := &syntax.Regexp{Op: syntax.OpConcat, Flags: syntax.Perl}
	re.Sub = append([]*syntax.Regexp{{Op: syntax.OpBeginText}}, seq...)
	return foldASCII(re).String()
}

func literalBytes(seq []*syntax.Regexp) int {
	n := 0
	var walk func(re *syntax.Regexp)
	walk = func(re *syntax.Regexp) {
		switch re.Op {
		case syntax.OpLiteral:
			n += len(string(re.Rune))
		case syntax.OpCapture, syntax.OpConcat:
			for _, sub := range re.Sub {
				walk(sub)
			}
		}
	}
	for _, re := range seq {
		walk(re)
	}
	return n
}

// branches splits seq at its first alternation (or capture of one) until
// every branch is a plain sequence with an anchor; it fails if there are
// too many branches or a branch has no anchor.
func branches(seq []*syntax.Regexp, depth int) ([][]*syntax.Regexp, bool) {
	if _, ok := findAnchor(seq); ok {
		return [][]*syntax.Regexp{seq}, true
	}
	if depth == 0 {
		return nil, false
	}
	for k, re := range seq {
		alt := re
		for alt.Op == syntax.OpCapture {
			alt = alt.Sub[0]
		}
		if alt.Op != syntax.OpAlternate {
			continue
		}
		var out [][]*syntax.Regexp
		for _, sub := range alt.Sub {
			b := make([]*syntax.Regexp, 0, len(seq)+4)
			b = append(b, seq[:k]...)
			b = append(b, flatten(sub)...)
			b = append(b, seq[k+1:]...)
			bs, ok := branches(b, depth-1)
			if !ok {
				return nil, false
			}
			out = append(out, bs...)
			if len(out) > maxBranches {
				return nil, false
			}
		}
		return out, true
	}
	return nil, false
}

// anchorsOf returns one anchor per branch of re, or false when re must be
// run over whole strings.
func anchorsOf(re *syntax.Regexp) ([]anchor, bool) {
	bs, ok := branches(flatten(re), 3)
	if !ok {
		return nil, false
	}
	out := make([]anchor, len(bs))
	for i, b := range bs {
		out[i], _ = findAnchor(b)
	}
	return out, true
}

// --- relaxed variants ---------------------------------------------------

// Many gitleaks rules require a word boundary before a token and one of a
// few characters (quote, space, ';', end of text) after it. Planted in a
// path (config/<token>/x.txt), in a URL query, before a '.' or ')' or glued
// to other words, such a token is missed. Relaxed variants drop those
// context requirements for rules whose token itself is distinctive, and
// accept a few more terminators for keyword-context rules like
// generic-api-key.

func isEmptyWidth(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary, syntax.OpEmptyMatch:
		return true
	}
	return false
}

// isContextGuard reports whether re is a one-character context check such as
// (?:[\x60'"\s;]|\\[nr]|$), (?:^|[\s>=:(,)]), (?:[^\w-]|\z) or \b: it
// matches one rune (or an escape like \n) or nothing at the end (or start)
// of the text.
func isContextGuard(re *syntax.Regexp) bool {
	if re.Op == syntax.OpWordBoundary {
		return true
	}
	if re.Op != syntax.OpAlternate || width(re) > utf8.UTFMax {
		return false
	}
	for _, sub := range re.Sub {
		if isEmptyWidth(sub) {
			return true
		}
	}
	return false
}

// stripCaptures copies re without capture groups and without word-boundary
// assertions.
func stripCaptures(re *syntax.Regexp) *syntax.Regexp {
	switch re.Op {
	case syntax.OpCapture:
		return stripCaptures(re.Sub[0])
	case syntax.OpWordBoundary:
		return &syntax.Regexp{Op: syntax.OpEmptyMatch}
	}
	c := *re
	if len(re.Sub) > 0 {
		c.Sub = make([]*syntax.Regexp, len(re.Sub))
		for i, sub := range re.Sub {
			c.Sub[i] = stripCaptures(sub)
		}
		c.Sub0 = [1]*syntax.Regexp{}
	}
	return &c
}

// relaxToken builds the relaxed variant of a token rule: each branch without
// its leading and trailing context guards and word boundaries, captures
// removed (the whole match is the secret). Only branches whose anchor is
// selective take part. It returns "" when no branch changes or qualifies.
// weak is the variant of the branches whose anchor is not selective
// (Vault's "s."): they keep a word boundary before the token and end where
// the token can't continue (tokenEnd); their matches must look generated.
//
// explicitGroup: the rule names its secret group (SecretGroup > 0). A branch
// that matches context outside its groups (Authorization: Basic (…)) is then
// no token: dropping the captures would make the context part of the
// secret. Without it, a group is no statement about the secret
// (microsoft-teams-webhook's ([a-z0-9]{4}-){3} inside the URL, which
// gitleaks would report alone), and the whole token is the secret.
func relaxToken(re *syntax.Regexp, explicitGroup bool) (strong, weak string) {
	alts, weaks := relaxTokenAlts(re, explicitGroup)
	return alternation(alts), alternation(weaks)
}

// matchesOutsideCaptures reports whether re consumes text outside its
// capture groups, context guards and assertions aside.
func matchesOutsideCaptures(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpCapture, syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText,
		syntax.OpEndText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return false
	case syntax.OpConcat, syntax.OpAlternate:
		for _, sub := range re.Sub {
			if !isContextGuard(sub) && matchesOutsideCaptures(sub) {
				return true
			}
		}
		return false
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		return matchesOutsideCaptures(re.Sub[0])
	}
	return true
}

// alternation is the source of alts as one alternation, or "" for none.
func alternation(alts []*syntax.Regexp) string {
	switch len(alts) {
	case 0:
		return ""
	case 1:
		return alts[0].String()
	}
	return (&syntax.Regexp{Op: syntax.OpAlternate, Sub: alts}).String()
}

// relaxTokenAlts returns the relaxed branches of relaxToken.
func relaxTokenAlts(re *syntax.Regexp, explicitGroup bool) (alts, weaks []*syntax.Regexp) {
	top := re
	for top.Op == syntax.OpCapture {
		top = top.Sub[0]
	}
	if explicitGroup && re.MaxCap() > 0 && matchesOutsideCaptures(re) {
		// The secret is a group after context the regex also matches:
		// no token (relaxToken); an alternation is looked at branch by
		// branch.
		if top.Op == syntax.OpAlternate {
			for _, sub := range top.Sub {
				a, w := relaxTokenAlts(sub, explicitGroup)
				alts, weaks = append(alts, a...), append(weaks, w...)
			}
		}
		return alts, weaks
	}
	seq, changedTop := stripGuards(flatten(re))
	bs, ok := splitAll(seq, 3)
	if !ok {
		// Too many branches in all: a keyword-context branch (its
		// assignment operators alone are eight) next to a token branch,
		// as atlassian-api-token's "...jira... = key | ATATT3...". Relax
		// each top-level branch on its own, so the token branch is not
		// lost with the other.
		if top.Op == syntax.OpAlternate {
			for _, sub := range top.Sub {
				a, w := relaxTokenAlts(sub, explicitGroup)
				alts, weaks = append(alts, a...), append(weaks, w...)
			}
			return alts, weaks
		}
		bs = [][]*syntax.Regexp{seq}
	}
	hexGuard, err := syntax.Parse(`(?:\A|[^0-9A-Fa-f])`, syntax.Perl)
	if err != nil {
		return nil, nil
	}
	for _, b := range bs {
		b, changed := stripGuards(b)
		changed = changed || changedTop
		if len(b) == 0 {
			continue
		}
		nb := make([]*syntax.Regexp, len(b))
		for i, x := range b {
			nb[i] = stripCaptures(x)
			if nb[i].String() != x.String() {
				changed = true
			}
		}
		a, ok := findAnchor(nb)
		// A token: what comes before the anchor is a fixed number of
		// token characters (not optional context like generic-api-key's
		// [\w.-]{0,50}?), on one line, with selective literals.
		if !ok || !changed || a.before == unbounded || a.before != a.beforeMin || newlinesOf(nb) != 0 {
			continue
		}
		if !selective(a) {
			// A short prefix like Vault's "s.": without the rule's
			// guards it would match inside any identifier. Keep the word
			// boundary before it, and instead of gitleaks' few
			// terminators (quote, space, ';') accept any character the
			// token's last part can't continue with, so that the token
			// is still found before ')', '<', '/' or '.' (a sentence, an
			// element, a path).
			if end, ok := tokenEnd(nb[len(nb)-1]); ok {
				weaks = append(weaks, &syntax.Regexp{Op: syntax.OpConcat, Sub: []*syntax.Regexp{
					{Op: syntax.OpWordBoundary},
					{Op: syntax.OpCapture, Cap: 1, Sub: []*syntax.Regexp{{Op: syntax.OpConcat, Sub: nb}}},
					end,
				}})
			}
			continue
		}
		// The token is the secret: one capture group per branch.
		var alt *syntax.Regexp = &syntax.Regexp{Op: syntax.OpCapture, Cap: 1,
			Sub: []*syntax.Regexp{{Op: syntax.OpConcat, Sub: nb}}}
		switch {
		case lowInfoAnchor(a):
			// "EAAA" occurs in base64 blobs (runs of zero bytes): keep a
			// word boundary before it.
			alt = &syntax.Regexp{Op: syntax.OpConcat, Sub: []*syntax.Regexp{{Op: syntax.OpWordBoundary}, alt}}
		case hexAnchor(a):
			// "4b1d" occurs in any long hex string: instead of a word
			// boundary, require a character that is not a hex digit
			// (or the start) before it.
			alt = &syntax.Regexp{Op: syntax.OpConcat, Sub: []*syntax.Regexp{hexGuard, alt}}
		}
		alts = append(alts, alt)
	}
	return alts, weaks
}

// secretToken returns a token variant for a keyword-context rule whose
// secret group starts with a distinctive literal of its own (Defined
// Networking's "dnkey-…", New Relic's "NRAK-…", Mailgun's "key-…"): the
// group alone, at a word boundary and ending where its last part can't
// continue. gitleaks finds such a secret only after its keyword and an
// assignment; the same value in a path, a sentence or a list is no less a
// secret. sg is the rule's SecretGroup (0: the first group). It returns ""
// when the group does not qualify.
func secretToken(re *syntax.Regexp, sg int) string {
	g := captureGroup(re, sg)
	if g == nil {
		return ""
	}
	seq := flatten(stripCaptures(g.Sub[0]))
	if len(seq) == 0 {
		return ""
	}
	a, ok := findAnchor(seq)
	if !ok || a.before != 0 || !selective(a) || a.litBytes < minSecretTokenLit ||
		minWidthOf(seq) < minSecretTokenLen || newlinesOf(seq) != 0 {
		return ""
	}
	end, ok := tokenEnd(seq[len(seq)-1])
	if !ok {
		return ""
	}
	return (&syntax.Regexp{Op: syntax.OpConcat, Sub: []*syntax.Regexp{
		{Op: syntax.OpWordBoundary},
		{Op: syntax.OpCapture, Cap: 1, Sub: []*syntax.Regexp{{Op: syntax.OpConcat, Sub: seq}}},
		end,
	}}).String()
}

// A secret group is a token of its own (secretToken) if it starts with a
// literal of at least minSecretTokenLit bytes and is at least
// minSecretTokenLen long.
const (
	minSecretTokenLit = 4
	minSecretTokenLen = 20
)

// literalPrefix returns a regexp matching, at the start of a secret of
// variant source src, the fixed prefix of its first capture group (the
// leading literals and alternations of literals: "s.", "key-",
// "access-(sandbox|development|production)-"), or nil if it has none.
func literalPrefix(src string) (*regexp.Regexp, error) {
	tree, err := syntax.Parse(src, syntax.Perl)
	if err != nil {
		return nil, err
	}
	g := captureGroup(tree, 0)
	if g == nil {
		return nil, nil
	}
	var pre []*syntax.Regexp
	for _, e := range flatten(g.Sub[0]) {
		if !isLiteralish(e) {
			break
		}
		pre = append(pre, e)
	}
	if len(pre) == 0 {
		return nil, nil
	}
	return regexp.Compile(`^(?:` + (&syntax.Regexp{Op: syntax.OpConcat, Sub: pre}).String() + `)`)
}

// isLiteralish reports whether re matches only literal strings: a literal,
// or an alternation (or capture) of them.
func isLiteralish(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpLiteral:
		return true
	case syntax.OpCapture, syntax.OpAlternate, syntax.OpConcat:
		for _, sub := range re.Sub {
			if !isLiteralish(sub) {
				return false
			}
		}
		return true
	}
	return false
}

// captureGroup returns capture group n of re (the first if n is 0), or nil.
func captureGroup(re *syntax.Regexp, n int) *syntax.Regexp {
	if re.Op == syntax.OpCapture && (re.Cap == n || n == 0) {
		return re
	}
	for _, sub := range re.Sub {
		if g := captureGroup(sub, n); g != nil {
			return g
		}
	}
	return nil
}

// tokenEnd returns the end of a token whose last part is a run of the
// character class C (or one of them): a character that is not in C, not
// '(' (a call: Go's s.ReadUint16LengthPrefixed( is Vault-shaped) and not
// a '.' before more text (a selector), or the end of the text; false if
// last is no such part.
func tokenEnd(last *syntax.Regexp) (*syntax.Regexp, bool) {
	switch last.Op {
	case syntax.OpRepeat, syntax.OpPlus, syntax.OpStar:
		last = last.Sub[0]
	}
	if last.Op != syntax.OpCharClass || len(last.Rune) == 0 {
		return nil, false
	}
	// The complement of C, then without '(' and '.'.
	var neg []rune
	next := rune(0)
	for i := 0; i < len(last.Rune); i += 2 {
		if lo := last.Rune[i]; lo > next {
			neg = append(neg, next, lo-1)
		}
		next = last.Rune[i+1] + 1
	}
	if next <= unicode.MaxRune {
		neg = append(neg, next, unicode.MaxRune)
	}
	var cls []rune
	for i := 0; i < len(neg); i += 2 {
		lo, hi := neg[i], neg[i+1]
		for _, x := range []rune{'(', '.'} {
			if lo <= x && x <= hi {
				if lo < x {
					cls = append(cls, lo, x-1)
				}
				lo = x + 1
			}
		}
		if lo <= hi {
			cls = append(cls, lo, hi)
		}
	}
	alts := []*syntax.Regexp{{Op: syntax.OpEndText}}
	if len(cls) > 0 {
		alts = append(alts, &syntax.Regexp{Op: syntax.OpCharClass, Rune: cls})
	}
	if !classHas(last.Rune, '.') {
		dot, err := syntax.Parse(`\.(?:\s|\z)`, syntax.Perl)
		if err != nil {
			return nil, false
		}
		alts = append(alts, dot)
	}
	return &syntax.Regexp{Op: syntax.OpAlternate, Sub: alts}, true
}

// classHas reports whether the character class ranges hold r.
func classHas(ranges []rune, r rune) bool {
	for i := 0; i < len(ranges); i += 2 {
		if ranges[i] <= r && r <= ranges[i+1] {
			return true
		}
	}
	return false
}

// lowInfoAnchor reports whether one of the anchor's literals has a run of
// three equal characters, like "EAAA", which base64 of zero bytes is full of.
func lowInfoAnchor(a anchor) bool {
	for _, l := range a.lits {
		for i := 0; i+2 < len(l); i++ {
			if l[i] == l[i+1] && l[i] == l[i+2] {
				return true
			}
		}
	}
	return false
}

// hexAnchor reports whether one of the anchor's literals is all hex digits.
func hexAnchor(a anchor) bool {
	for _, l := range a.lits {
		if strings.Trim(l, "0123456789abcdef") == "" {
			return true
		}
	}
	return false
}

// stripGuards removes leading and trailing context guards and assertions.
func stripGuards(b []*syntax.Regexp) ([]*syntax.Regexp, bool) {
	changed := false
	for len(b) > 0 && (isContextGuard(b[0]) || isEmptyWidth(b[0])) {
		b = b[1:]
		changed = true
	}
	for len(b) > 0 && (isContextGuard(b[len(b)-1]) || isEmptyWidth(b[len(b)-1])) {
		b = b[:len(b)-1]
		changed = true
	}
	return b, changed
}

// splitAll splits seq at every alternation (captures looked through), up to
// depth levels and maxBranches branches.
func splitAll(seq []*syntax.Regexp, depth int) ([][]*syntax.Regexp, bool) {
	for k, re := range seq {
		alt := re
		for alt.Op == syntax.OpCapture {
			alt = alt.Sub[0]
		}
		if alt.Op != syntax.OpAlternate {
			continue
		}
		if depth == 0 {
			return nil, false
		}
		var out [][]*syntax.Regexp
		for _, sub := range alt.Sub {
			b := make([]*syntax.Regexp, 0, len(seq)+4)
			b = append(b, seq[:k]...)
			b = append(b, flatten(sub)...)
			b = append(b, seq[k+1:]...)
			bs, ok := splitAll(b, depth-1)
			if !ok {
				return nil, false
			}
			out = append(out, bs...)
			if len(out) > maxBranches {
				return nil, false
			}
		}
		return out, true
	}
	return [][]*syntax.Regexp{seq}, true
}

// selective reports whether a branch's literals make a match unlikely in
// ordinary text even without context: three literal bytes, or two with a
// character rare in prose and code (as in Azure's "Q~").
func selective(a anchor) bool {
	n := max(a.litBytes, minLen(prefixSetOf(a.lits)))
	if n >= 3 {
		return true
	}
	for _, l := range a.lits {
		if !strings.ContainsAny(l, "~|%@#^") {
			return false
		}
	}
	return n >= 2
}

func prefixSetOf(lits []string) []prefix {
	p := make([]prefix, len(lits))
	for i, s := range lits {
		p[i] = prefix{s, true}
	}
	return p
}

// extraGuard is what relaxed keyword-context rules accept after a secret
// besides the rule's own guard (gitleaks' (?:[\x60'"\s;]|\\[nr]|$)): '&' (a URL
// query string: ?password=...&user=...), '<' (XML or HTML element text:
// <password>...</password>) and an escaped tab. ',' and ')' would find
// secrets in argument lists too, but mostly find identifiers in code.
const extraGuard = `[&<]|\\t`

// relaxGuard returns re with its trailing context guard G replaced by
// (?:G|extraGuard), captures kept (so SecretGroup still applies), or "" when
// re has no trailing guard at top level. The result matches whatever re
// matches (the strict variant's prefilter relies on that).
func relaxGuard(re *syntax.Regexp) string {
	if re.Op != syntax.OpConcat || len(re.Sub) == 0 || !isContextGuard(re.Sub[len(re.Sub)-1]) ||
		re.Sub[len(re.Sub)-1].Op == syntax.OpWordBoundary {
		return ""
	}
	extra, err := syntax.Parse(extraGuard, syntax.Perl)
	if err != nil {
		return ""
	}
	guard := re.Sub[len(re.Sub)-1]
	g := &syntax.Regexp{Op: syntax.OpAlternate, Flags: guard.Flags, Sub: []*syntax.Regexp{guard, extra}}
	c := *re
	c.Sub = append(append([]*syntax.Regexp{}, re.Sub[:len(re.Sub)-1]...), g)
	c.Sub0 = [1]*syntax.Regexp{}
	return c.String()
}

// foldASCII rewrites case-folding literals as character classes of their
// fold orbits without the fold runes: (?i)key becomes [Kk][Ee][Yy]. On
// strings without fold runes (the fast path) the result matches exactly
// what re matches, and regexp runs it faster than folded literals.
func foldASCII(re *syntax.Regexp) *syntax.Regexp {
	c := *re
	if len(re.Sub) > 0 {
		c.Sub = make([]*syntax.Regexp, len(re.Sub))
		for i, sub := range re.Sub {
			c.Sub[i] = foldASCII(sub)
		}
		c.Sub0 = [1]*syntax.Regexp{}
	}
	if re.Op != syntax.OpLiteral || re.Flags&syntax.FoldCase == 0 {
		return &c
	}
	flags := re.Flags &^ syntax.FoldCase
	out := &syntax.Regexp{Op: syntax.OpConcat, Flags: flags}
	var lit []rune
	flush := func() {
		if len(lit) > 0 {
			out.Sub = append(out.Sub, &syntax.Regexp{Op: syntax.OpLiteral, Flags: flags, Rune: lit})
			lit = nil
		}
	}
	for _, r := range re.Rune {
		orbit := []rune{r}
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if !isFoldRune(f) {
				orbit = append(orbit, f)
			}
		}
		if len(orbit) == 1 {
			lit = append(lit, r)
			continue
		}
		flush()
		slices.Sort(orbit)
		cls := &syntax.Regexp{Op: syntax.OpCharClass, Flags: flags}
		for _, o := range orbit {
			cls.Rune = append(cls.Rune, o, o)
		}
		out.Sub = append(out.Sub, cls)
	}
	flush()
	if len(out.Sub) == 1 {
		return out.Sub[0]
	}
	return out
}
