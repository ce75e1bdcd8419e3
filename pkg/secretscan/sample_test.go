package secretscan

import (
	"math/rand/v2"
	"regexp/syntax"
	"sort"
	"strings"
	"unicode"
)

// sampleString returns a random string matched by re (a regexp/syntax
// tree), preferring printable ASCII: material for tests that need a secret
// of every gitleaks rule.
func sampleString(r *rand.Rand, re *syntax.Regexp) string {
	var b strings.Builder
	var walk func(re *syntax.Regexp)
	walk = func(re *syntax.Regexp) {
		switch re.Op {
		case syntax.OpLiteral:
			for _, c := range re.Rune {
				if re.Flags&syntax.FoldCase != 0 && r.IntN(2) == 0 {
					c = unicode.SimpleFold(c)
					if c > unicode.MaxASCII {
						c = unicode.SimpleFold(c)
					}
				}
				b.WriteRune(c)
			}
		case syntax.OpCharClass:
			b.WriteRune(sampleRune(r, re.Rune))
		case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
			b.WriteByte("abcdefghijklmnopqrstuvwxyz0123456789"[r.IntN(36)])
		case syntax.OpCapture:
			walk(re.Sub[0])
		case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
			lo, hi := 0, 3
			switch re.Op {
			case syntax.OpPlus:
				lo, hi = 1, 4
			case syntax.OpQuest:
				lo, hi = 0, 1
			case syntax.OpRepeat:
				lo, hi = re.Min, re.Max
				if hi < 0 || hi > lo+4 {
					hi = lo + 4
				}
			}
			for n := lo + r.IntN(hi-lo+1); n > 0; n-- {
				walk(re.Sub[0])
			}
		case syntax.OpConcat:
			for _, sub := range re.Sub {
				walk(sub)
			}
		case syntax.OpAlternate:
			walk(re.Sub[r.IntN(len(re.Sub))])
		}
	}
	walk(re)
	return b.String()
}

// sampleRune picks a rune of a class, printable ASCII where it can.
func sampleRune(r *rand.Rand, ranges []rune) rune {
	var ascii []rune
	for i := 0; i+1 < len(ranges); i += 2 {
		for c := max(ranges[i], 0x21); c <= min(ranges[i+1], 0x7e); c++ {
			ascii = append(ascii, c)
		}
	}
	if len(ascii) > 0 {
		sort.Slice(ascii, func(i, j int) bool { return ascii[i] < ascii[j] })
		return ascii[r.IntN(len(ascii))]
	}
	i := 2 * r.IntN(len(ranges)/2)
	return ranges[i] + rune(r.IntN(int(min(ranges[i+1]-ranges[i], 1000))+1))
}
