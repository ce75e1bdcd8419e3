package secretscan

import (
	"crypto/sha256"
	"strings"
)

// referenceClasses are the character classes of referenceRedact.
var referenceClasses = []func(c byte) bool{
	func(c byte) bool { return isAlnum(c) },
	func(c byte) bool { return isAlnum(c) || c == '_' || c == '-' },
	func(c byte) bool { return isAlnum(c) || c == '_' || c == '-' || c == '.' },
	func(c byte) bool {
		return isAlnum(c) || c == '_' || c == '-' || c == '.' || c == '+' || c == '/' || c == '=' || c == '~'
	},
	func(c byte) bool {
		return c > ' ' && c != '"' && c != '\'' && c != '`' && c != ',' && c != ';' && c != '<' && c != '>' && c != '(' && c != ')'
	},
}

// referenceRedact is Known.Redact as it was before it was made
// table-driven (2026-12-07): a byte-by-byte scan per character class with a
// function call per byte and a map lookup per run. It is kept as the oracle
// of TestKnownRedactMatchesReference.
func referenceRedact(k *Known, s string) (string, map[string]int) {
	if k == nil || len(s) < minKnownLen {
		return s, nil
	}
	type hit struct {
		start, end int
		rule       string
	}
	var hits []hit
	for _, in := range referenceClasses {
		for i := 0; i < len(s); {
			if !in(s[i]) {
				i++
				continue
			}
			j := i
			for j < len(s) && in(s[j]) {
				j++
			}
			if m := k.byLen[j-i]; m != nil {
				if rule, ok := m[sha256.Sum256([]byte(s[i:j]))]; ok {
					hits = append(hits, hit{i, j, rule})
				}
			}
			// A value with '/' in it (base64) glued to a path by the
			// classes that allow '/': also try the pieces between
			// slashes ("leak/<value>/config.txt").
			// A base64 value may itself start or end with the slash, so
			// each piece is tried with and without the slashes around it.
			if cuts := referenceSlashCuts(s, i, j); len(cuts) > 2 {
				for a := 0; a < len(cuts); a++ {
					for b := a + 1; b < len(cuts); b++ {
						for _, d := range [4][2]int{{1, 0}, {0, 0}, {1, 1}, {0, 1}} {
							from, to := cuts[a]+d[0], cuts[b]+d[1]
							if a == 0 {
								from = cuts[a]
							}
							if b == len(cuts)-1 {
								to = cuts[b]
							}
							if to <= from || to > j || (from == i && to == j) {
								continue
							}
							if m := k.byLen[to-from]; m != nil {
								if rule, ok := m[sha256.Sum256([]byte(s[from:to]))]; ok {
									hits = append(hits, hit{from, to, rule})
								}
							}
						}
					}
				}
			}
			i = j
		}
	}
	if len(hits) == 0 {
		return s, nil
	}
	// Merge overlapping hits (the same value found under several classes).
	for i := 1; i < len(hits); i++ {
		for j := i; j > 0 && hits[j].start < hits[j-1].start; j-- {
			hits[j], hits[j-1] = hits[j-1], hits[j]
		}
	}
	counts := map[string]int{}
	var b strings.Builder
	last := 0
	for _, h := range hits {
		if h.start < last {
			continue
		}
		b.WriteString(s[last:h.start])
		b.WriteString("[REDACTED:" + h.rule + "]")
		counts[h.rule]++
		last = h.end
	}
	b.WriteString(s[last:])
	return b.String(), counts
}

// referenceSlashCuts is slashCuts as referenceRedact called it.
func referenceSlashCuts(s string, i, j int) []int {
	if strings.IndexByte(s[i:j], '/') < 0 {
		return nil
	}
	cuts := []int{i}
	for p := i; p < j && len(cuts) <= maxSlashCuts; p++ {
		if s[p] == '/' {
			cuts = append(cuts, p)
		}
	}
	return append(cuts, j)
}
