package secretscan

import (
	"cmp"
	"crypto/sha256"
	"slices"
	"strings"
)

// Found is a secret found in text, as a fingerprint: the SHA-256 of the
// secret and its length, never the secret itself.
type Found struct {
	RuleID      string
	Fingerprint [32]byte
	Length      int
}

// minKnownLen is the shortest value remembered as a known secret: shorter
// ones would redact ordinary words.
const minKnownLen = 8

// Find returns the fingerprints of the secrets in s that Redact would
// replace. The import and indexing paths store them per tenant (see Known).
func (r *Redactor) Find(s string) []Found {
	if s == "" || r == nil || r.rs == nil {
		return nil
	}
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	spans, _ := r.findSafe(s, sc) // nothing learned from a failed scan
	return r.found(s, spans)
}

// found turns the spans find returned for s into fingerprints.
func (r *Redactor) found(s string, spans []span) []Found {
	var out []Found
	index := map[[32]byte]int{}
	label := map[[32]byte]int{}
	remember := func(value string, rl *rule) {
		if len(value) < minKnownLen {
			return
		}
		h := sha256.Sum256([]byte(value))
		if i, ok := index[h]; ok {
			// The same value under several rules: name it as Redact does.
			if rl.label > label[h] {
				out[i].RuleID, label[h] = rl.id, rl.label
			}
			return
		}
		index[h], label[h] = len(out), rl.label
		out = append(out, Found{RuleID: rl.id, Fingerprint: h, Length: len(value)})
	}
	for _, sp := range spans {
		if sp.encoded {
			// The encoded run, line by line when it is wrapped: only
			// lines that look generated, with and without padding (a
			// bare occurrence glued to a word ends before its '=').
			// Text the run took in by chance ("EOF", a word after the
			// block) is redacted there but is no value to learn.
			run := jsonBreaks.Replace(s[sp.start:sp.end])
			for _, line := range strings.FieldsFunc(run, func(r rune) bool {
				return r == '\n' || r == '\r' || r == ' ' || r == '\t' || strings.ContainsRune("\"'`", r)
			}) {
				if learnable(line) {
					remember(line, r.rs.rules[sp.rule])
					rememberPadless(line, r.rs.rules[sp.rule], remember)
				}
			}
			continue
		}
		raw := s[sp.start:sp.end]
		secret := strings.Trim(raw, "\"'` \t\r\n")
		rule := r.rs.rules[sp.rule]
		if rule.valuesOnly {
			if learnable(secret) {
				remember(secret, rule)
				rememberPadless(secret, rule, remember)
			}
			continue
		}
		// Whether the span's last value ends where the text's word does:
		// a rule whose pattern has no right boundary can stop inside a
		// longer word ("postgresql" of "postgresql.default.svc"), and that
		// piece is no value of its own.
		whole := len(secret) < len(raw) || sp.end == len(s) || endsValue(s[sp.end])
		if strings.Contains(secret, "\n") {
			// A multi-line block (a private key): remember every inner
			// line, so that any excerpt of it — a file window starting in
			// the middle, a search snippet — is redacted line by line.
			lines := strings.Split(secret, "\n")
			for i, line := range lines {
				line = strings.TrimSpace(line)
				if strings.HasPrefix(line, "-----") {
					continue
				}
				remember(line, rule)
				if i < len(lines)-1 || whole {
					rememberValue(line, rule, remember)
				}
			}
			continue
		}
		remember(secret, rule)
		if whole {
			rememberValue(secret, rule, remember)
		}
	}
	return out
}

// jsonBreaks undoes the escapes a wrapped run may hold inside a JSON
// string (readRun, lineBreak).
var jsonBreaks = strings.NewReplacer(`\r\n`, "\n", `\n`, "\n", `\/`, "/")

// rememberValue remembers the value part of secret, and, when it ends in
// base64 padding, the value with its padding too: a bare occurrence is one
// run or the other depending on the characters around it ('+' and '/' join
// the padding's run, letters and digits alone do not).
func rememberValue(secret string, rl *rule, remember func(string, *rule)) {
	v := valuePart(secret)
	if v == "" {
		return
	}
	remember(v, rl)
	trimmed := strings.TrimRight(secret, "\"'` \t\r")
	if pad := len(trimmed) - len(strings.TrimRight(trimmed, "=")); pad > 0 && strings.HasSuffix(trimmed, v+strings.Repeat("=", pad)) {
		remember(v+strings.Repeat("=", pad), rl)
	}
}

// learnable reports whether a value that a rule with valuesOnly found may
// be learned: one line of the base64 or URL-safe alphabet that looks
// generated. Words ("postgres", "production"), region names and prose
// around such a rule's match are redacted where they were found, but must
// not be redacted from every later text of the tenant.
func learnable(v string) bool {
	if strings.Contains(v, "\n") {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; !isAlnum(c) && c != '+' && c != '/' && c != '=' && c != '_' {
			return false
		}
	}
	return generated(strings.TrimRight(v, "="))
}

// rememberPadless remembers a value with base64 padding also without it.
func rememberPadless(v string, rl *rule, remember func(string, *rule)) {
	if p := strings.TrimRight(v, "="); p != v {
		remember(p, rl)
	}
}

// valuePart is the value of a secret that a rule reports together with its
// key ("password: c2VjcmV0…", the whole match of kubernetes-secret-yaml):
// the text after the last separator (whitespace, ':' or '='), unquoted. The
// same value elsewhere — bare in a path, a sentence or a glob — holds no
// key, so only the value's own fingerprint finds it there. Only a value that
// looks generated is returned ("" otherwise, and when there is no
// separator): such rules also match ordinary settings next to a Secret
// ("environment: production"), and a word learned as a secret would be
// redacted from every later text of the tenant.
//
// A base64 value's padding ("…YXBw==") is part of the value, not a
// separator: the separator is looked for before it, and the value is
// remembered without the padding, as the runs Known.Redact hashes end
// before an '=' that the stricter classes do not admit.
func valuePart(secret string) string {
	body := strings.TrimRight(strings.TrimRight(secret, "\"'` \t\r"), "=")
	k := strings.LastIndexAny(body, " \t:=")
	if k < 0 {
		return ""
	}
	v := strings.Trim(body[k+1:], "\"'` \t\r")
	if !generated(v) {
		return ""
	}
	return v
}

// generated reports whether v looks like a generated value rather than a
// word or a name: upper- and lower-case letters, and either a digit or '+'
// or '/' with at least 3.5 bits of entropy per character, or (letters only)
// at least 20 characters with 4 bits.
func generated(v string) bool {
	var upper, lower, other bool
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case 'A' <= c && c <= 'Z':
			upper = true
		case 'a' <= c && c <= 'z':
			lower = true
		case '0' <= c && c <= '9', c == '+', c == '/':
			other = true
		}
	}
	e := shannonEntropy(v)
	// Letters only: long and varied, as a random value is and a name is not.
	return upper && lower && (other && e >= 3.5 || len(v) >= 20 && e >= 4.0)
}

// endsValue reports whether c, the byte after a match, ends the value
// before it (the end of a line, a quote, a delimiter, base64 padding).
func endsValue(c byte) bool {
	return strings.IndexByte(" \t\r\n\"'`,;=)]}#", c) >= 0
}

// Known redacts values a tenant is known to have as secrets, by
// fingerprint: every maximal run of secret-like characters of a known
// length is hashed and compared, under several character classes so that
// the value is found whatever separates it from its neighbours (a path
// slash, quotes, spaces, an equals sign).
type Known struct {
	byLen map[int]map[[32]byte]string
	// lens[n] says a known secret is n bytes long, for n up to maxLen;
	// minLen is the shortest. A run of another length is never hashed.
	lens           []bool
	minLen, maxLen int
}

// NewKnown builds the set; it is nil (a no-op) when there is nothing known.
func NewKnown(found []Found) *Known {
	if len(found) == 0 {
		return nil
	}
	k := &Known{byLen: map[int]map[[32]byte]string{}, minLen: found[0].Length}
	for _, f := range found {
		k.minLen, k.maxLen = min(k.minLen, f.Length), max(k.maxLen, f.Length)
	}
	k.lens = make([]bool, k.maxLen+1)
	for _, f := range found {
		k.lens[max(f.Length, 0)] = true
		m := k.byLen[f.Length]
		if m == nil {
			m = map[[32]byte]string{}
			k.byLen[f.Length] = m
		}
		m[f.Fingerprint] = f.RuleID
	}
	return k
}

// classes are the character classes a secret's run is delimited by, from
// strict to loose.
var classes = [...]func(c byte) bool{
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

// classLevels is, for each byte, the strictest class that admits it
// (len(classes): none), and classSlash says whether a class admits '/'
// (only then can a run hold pieces between slashes). Redact relies on the
// classes being nested; TestKnownClassesNested checks it.
var classLevels, classSlash = func() (lv [256]uint8, slash [len(classes)]bool) {
	for c := 0; c < 256; c++ {
		lv[c] = uint8(len(classes))
		for i := len(classes) - 1; i >= 0; i-- {
			if classes[i](byte(c)) {
				lv[c] = uint8(i)
			}
		}
	}
	for i, in := range classes {
		slash[i] = in('/')
	}
	return lv, slash
}()

// has reports whether a known secret is n bytes long.
func (k *Known) has(n int) bool { return n >= k.minLen && n <= k.maxLen && k.lens[n] }

// escapeLen is the length of the escape letters at the start of the run
// s[i:j] that an escape character before it introduces: 1 for \n \t \r \b
// \f \v, 5 for \uXXXX, 9 for \UXXXXXXXX, 3 for \xXX and \NNN (octal), 2
// for %XX; 0 for none.
func escapeLen(s string, i, j int) int {
	hex := func(from, n int) bool {
		if from+n > j {
			return false
		}
		for p := from; p < from+n; p++ {
			if c := s[p] | 0x20; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
		return true
	}
	switch s[i-1] {
	case '\\':
		switch s[i] {
		case 'n', 't', 'r', 'b', 'f', 'v':
			return 1
		case 'u':
			if hex(i+1, 4) {
				return 5
			}
		case 'x':
			if hex(i+1, 2) {
				return 3
			}
		case 'U':
			if hex(i+1, 8) {
				return 9
			}
		case '0', '1', '2', '3':
			// Up to \377: a byte of UTF-8 written in octal before a
			// value hides it as well as an ASCII one (decodeEscapes
			// reads only \000–\177, its copy being ASCII).
			if i+3 <= j && isOctal(s[i+1]) && isOctal(s[i+2]) {
				return 3
			}
		}
	case '%':
		if hex(i, 2) {
			return 2
		}
	}
	return 0
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// Redact replaces every known secret in s with [REDACTED:<rule-id>].
func (k *Known) Redact(s string) (string, map[string]int) {
	if k == nil || len(s) < minKnownLen {
		return s, nil
	}
	type hit struct {
		start, end int
		class      int
		rule       string
	}
	var hits []hit
	// buf holds the bytes being hashed and cuts a run's slashes, reused
	// (converting each run to a new []byte was most of the allocations).
	var buf []byte
	var cuts []int
	sum := func(from, to int) [32]byte {
		buf = append(buf[:0], s[from:to]...)
		return sha256.Sum256(buf)
	}
	// run looks up the run s[i:j] of class ci. Its length is checked
	// first: most runs (identifiers, words) are shorter than any known
	// secret and are never hashed, and the pieces between slashes of a run
	// are shorter than the run, so a run no longer than the shortest secret
	// has none to try.
	run := func(ci, i, j int) {
		if j-i < k.minLen {
			return
		}
		if k.has(j - i) {
			if rule, ok := k.byLen[j-i][sum(i, j)]; ok {
				hits = append(hits, hit{i, j, ci, rule})
			}
		}
		// A value right after an escape sequence shares its run with the
		// escape's letters: "first\nVALUE" in JSON or a string literal,
		// "%3DVALUE" in a URL. The strictest class (letters and digits)
		// sees every such run; the value is also tried without them.
		if ci == 0 && i > 0 {
			if off := escapeLen(s, i, j); off > 0 && k.has(j-i-off) {
				if rule, ok := k.byLen[j-i-off][sum(i+off, j)]; ok {
					hits = append(hits, hit{i + off, j, ci, rule})
				}
			}
		}
		// A value with '/' in it (base64) glued to a path by the classes
		// that allow '/': also try the pieces between slashes
		// ("leak/<value>/config.txt"). A base64 value may itself start or
		// end with the slash, so each piece is tried with and without the
		// slashes around it.
		if !classSlash[ci] || j-i <= k.minLen {
			return
		}
		if cuts = slashCuts(cuts[:0], s, i, j); len(cuts) <= 2 {
			return
		}
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
					if to <= from || to > j || (from == i && to == j) || !k.has(to-from) {
						continue
					}
					if rule, ok := k.byLen[to-from][sum(from, to)]; ok {
						hits = append(hits, hit{from, to, ci, rule})
					}
				}
			}
		}
	}
	// One pass finds the runs of every class. The classes are nested (each
	// admits every byte the stricter ones do), so while a class's run is
	// open every looser class's run is too: open is the strictest class
	// with an open run, and a byte whose level (the strictest class that
	// admits it) differs from open ends the runs of the classes stricter
	// than its level and starts those from its level up to open.
	var starts [len(classes)]int
	open := len(classes)
	for p := 0; p <= len(s); p++ {
		level := len(classes)
		if p < len(s) {
			level = int(classLevels[s[p]])
		}
		if level == open {
			continue
		}
		for c := open; c < level; c++ {
			run(c, starts[c], p)
		}
		for c := level; c < open; c++ {
			starts[c] = p
		}
		open = level
	}
	if len(hits) == 0 {
		return s, nil
	}
	// Merge overlapping hits (the same value found under several classes):
	// by start, the stricter class first, and a run before the pieces of
	// it found after it.
	slices.SortStableFunc(hits, func(a, b hit) int { return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(a.class, b.class)) })
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

// Chain applies redactors in order and sums their counts.
type Chain []interface {
	Redact(string) (string, map[string]int)
}

// Redact implements shape.Redactor.
func (c Chain) Redact(s string) (string, map[string]int) {
	var total map[string]int
	for _, r := range c {
		if r == nil {
			continue
		}
		var counts map[string]int
		s, counts = r.Redact(s)
		for k, n := range counts {
			if total == nil {
				total = map[string]int{}
			}
			total[k] += n
		}
	}
	return s, total
}

// maxSlashCuts bounds the slashes per run that slashCuts considers (the
// pieces tried grow with their square).
const maxSlashCuts = 16

// slashCuts appends to cuts i, the offsets of the slashes in s[i:j] (at
// most maxSlashCuts), and j; it returns cuts empty when s[i:j] holds no
// slash.
func slashCuts(cuts []int, s string, i, j int) []int {
	if strings.IndexByte(s[i:j], '/') < 0 {
		return cuts
	}
	cuts = append(cuts, i)
	for p := i; p < j && len(cuts) <= maxSlashCuts; p++ {
		if s[p] == '/' {
			cuts = append(cuts, p)
		}
	}
	return append(cuts, j)
}
