package secretscan

import (
	"bytes"
	"encoding/base64"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/zricethezav/gitleaks/v8/config"
)

// pad is how far windows and prefilter texts reach past the computed bounds
// of a match: at least one rune (utf8.UTFMax bytes), so that no real match
// touches a window edge and assertions like \b and $ see the same
// neighbours as in the whole string.
const pad = 8

// The anchored prefilters together may read at most preBudgetFactor bytes
// per byte of the string, plus preBudgetBase. A prefilter's cost grows with
// its text while a match is still possible (a long run of letters after
// "ey" for jwt), so on strings made to be slow the budget runs out; the
// remaining anchors then use their static bounds as windows, which merge
// and are scanned once, so the work stays linear in the string.
const (
	preBudgetFactor = 16
	preBudgetBase   = 64 << 10
)

// maxRepeatSecrets bounds how many distinct secrets per string have their
// other occurrences searched (each search is a pass over the string).
const maxRepeatSecrets = 64

// minRepeatLen is the shortest secret whose every other occurrence in the
// string is redacted too.
const minRepeatLen = 8

// foldRunes are the non-ASCII runes that case-fold to ASCII letters (in
// regexp's (?i) or in strings.ToLower, which gitleaks uses for keywords).
// The ASCII automaton can't see them, so strings containing one take the
// slow path: gitleaks' own keyword check and whole-string scans.
var foldRunes = []string{"\u017f", "\u212a", "\u0130"}

const quotes = "\"'`"

// window is a byte range of s that one variant must be run on.
type window struct {
	key        int32 // rule<<8 | variant
	start, end int32
}

// span is a byte range of s to redact.
type span struct {
	start, end int
	rule       int32
	// encoded: the span is an encoded run a secret was found in
	// (encoded.go), not the secret itself.
	encoded bool
}

type lineKey struct {
	a        *config.Allowlist
	from, to int
}

// scratch is the reusable memory of one call.
type scratch struct {
	hits     []hit
	active   []uint32 // rule -> stamp of the call that activated it
	stamp    uint32
	windows  []window
	spans    []span
	nl       []int32 // newline offsets, once computed (nlDone)
	nlDone   bool
	lineMemo map[lineKey]bool
	repeats  map[string]bool
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// edgeFallbacks counts whole-string reruns after a match touched a window
// edge, for the tests.
var edgeFallbacks atomic.Int64

// call is one find: the string, its copy for relaxed variants (same length
// and newlines) and the scratch memory.
type call struct {
	rs    *ruleset
	s, ns string
	sc    *scratch
}

func (c *call) textFor(v *variant) string {
	if v.relaxed {
		return c.ns
	}
	return c.s
}

// newlines returns the offsets of '\n' in s.
func (c *call) newlines() []int32 {
	if !c.sc.nlDone {
		c.sc.nlDone = true
		nl := c.sc.nl[:0]
		for i := 0; ; {
			j := strings.IndexByte(c.s[i:], '\n')
			if j < 0 {
				break
			}
			nl = append(nl, int32(i+j))
			i += j + 1
		}
		c.sc.nl = nl
	}
	return c.sc.nl
}

// firstNewline is the index in newlines() of the first '\n' at or after p.
func (c *call) firstNewline(p int) int {
	nl := c.newlines()
	return sort.Search(len(nl), func(i int) bool { return int(nl[i]) >= p })
}

// lineStartBefore is the smallest start of a text ending at p that holds at
// most n newlines.
func (c *call) lineStartBefore(p, n int) int {
	k := c.firstNewline(p) // newlines before p: nl[:k]
	if k-n-1 < 0 {
		return 0
	}
	return int(c.newlines()[k-n-1]) + 1
}

// lineEndAfter is the largest end of a text starting at p that holds at most
// n newlines.
func (c *call) lineEndAfter(p, n int) int {
	nl := c.newlines()
	if j := c.firstNewline(p) + n; j < len(nl) {
		return int(nl[j])
	}
	return len(c.s)
}

// find returns the spans of s to redact, sorted by start.
func (rs *ruleset) find(s string, sc *scratch) []span {
	spans := rs.findRules(s, sc)
	n := len(spans)
	text, base := s, (*encodedCopy)(nil)
	if d, off, ok := decodeEscapes(s); ok {
		// Escapes and encodings hide a secret's context or split it
		// (data-config="{&quot;apiKey&quot;: &quot;…&quot;}",
		// \u003cpassword\u003e…, db_password+%3D+%22…): find in the
		// decoded copy too (decode.go) and map its spans back. sc.spans
		// is reused by the second call.
		spans = slices.Clone(spans)
		for _, sp := range rs.findRules(d, sc) {
			sp.start, sp.end = int(off[sp.start]), int(off[sp.end])
			spans = append(spans, sp)
		}
		text, base = d, escapesCopy(d, off)
	}
	if c, ok := decodeEncoded(text, base); ok {
		// Values encoded as base64 or hex (encoded.go): what the rules
		// find in their decoded text replaces the whole encoded run.
		if len(spans) == n {
			spans = slices.Clone(spans)
		}
		for _, sp := range rs.findRules(c.s, sc) {
			start, end, touches := c.span(sp.start, sp.end)
			if touches {
				sp.start, sp.end, sp.encoded = start, end, true
				spans = append(spans, sp)
			}
		}
	}
	if rs.manifest >= 0 {
		// Every value of a Secret manifest, whether or not a rule's
		// window opened in the text (a manifest without any other
		// secret shape).
		spans = secretManifestSpans(s, rs.manifest, spans)
	}
	if len(spans) > n {
		slices.SortFunc(spans, func(a, b span) int {
			if a.start != b.start {
				return a.start - b.start
			}
			return b.end - a.end
		})
	}
	return spans
}

// findRules is find for the gitleaks rules.
func (rs *ruleset) findRules(s string, sc *scratch) []span {
	sc.hits = rs.matcher.scan(s, sc.hits[:0])
	sc.spans = sc.spans[:0]
	sc.windows = sc.windows[:0]
	sc.nlDone = false
	clear(sc.lineMemo)
	if len(sc.hits) == 0 && len(rs.always) == 0 {
		return nil
	}
	if len(sc.active) != len(rs.rules) {
		sc.active = make([]uint32, len(rs.rules))
		sc.stamp = 0
	}
	sc.stamp++
	if sc.stamp == 0 {
		clear(sc.active)
		sc.stamp = 1
	}
	stamp := sc.stamp
	active := func(ri int32) bool { return sc.active[ri] == stamp }
	nactive := 0
	activate := func(ri int32) {
		if sc.active[ri] != stamp {
			sc.active[ri] = stamp
			nactive++
		}
	}
	for _, h := range sc.hits {
		for _, ri := range rs.gate[h.pid] {
			activate(ri)
		}
	}
	for _, ri := range rs.always {
		activate(ri)
	}

	c := &call{rs: rs, s: s, ns: s, sc: sc}
	// Relaxed variants read \" and \' as quotes, so that a secret in
	// escaped JSON or a string literal ("{\"password\": \"...\"}") has
	// its context; the copy has the same length, so offsets carry over.
	if strings.Contains(s, `\"`) || strings.Contains(s, `\'`) {
		c.ns = unescapeQuotes(s)
	}

	slow := false
	for _, fr := range foldRunes {
		if strings.Contains(s, fr) {
			slow = true
			break
		}
	}
	if slow {
		// gitleaks' keyword check on strings.ToLower; then every variant
		// of every active rule on the whole string.
		for _, h := range rs.matcher.scan(strings.ToLower(s), nil) {
			for _, ri := range rs.gate[h.pid] {
				activate(ri)
			}
		}
		for ri, r := range rs.rules {
			if active(int32(ri)) {
				for _, v := range r.variants {
					t := c.textFor(v)
					c.collect(t, 0, int32(ri), v, v.re)
				}
			}
		}
		return c.finish()
	}
	if nactive == 0 {
		return nil
	}

	// Windows around anchor occurrences whose prefilters match.
	budget := preBudgetFactor*len(s) + preBudgetBase
	for _, h := range sc.hits {
		pa := &rs.anchors[h.pid]
		if len(pa.refs) == 0 {
			continue
		}
		p := int(h.pos)
		// Quick check results per text (s, ns): 0 unknown, 1 pass, -1 fail.
		var quick [2][maxQuicksPerPattern]int8
		failRule, failVariant, failAnchor := int32(-1), int32(-1), int32(-1)
		for _, ref := range pa.refs {
			if !active(ref.rule) {
				continue
			}
			v := rs.rules[ref.rule].variants[ref.variant]
			if v.gated && ref.rule == failRule && ref.variant+1 == failVariant && ref.anchor == failAnchor {
				continue
			}
			t, ti := s, 0
			if v.relaxed && c.ns != s {
				t, ti = c.ns, 1
			}
			if ref.quick >= 0 {
				res := &quick[ti][ref.quick]
				if *res == 0 {
					*res = -1
					if pa.quicks[ref.quick].match(t, p) {
						*res = 1
					}
				}
				if *res < 0 {
					continue
				}
			}
			a := &v.anchors[ref.anchor]
			lo, hi := c.matchBounds(p, a)
			if text := t[p:min(len(t), hi+pad)]; len(text) <= budget {
				budget -= len(text)
				// The anchored prefilter, leftmost-longest: its longest
				// match bounds the end of every match with this anchor
				// occurrence.
				loc := a.pre.FindStringIndex(text)
				if loc == nil {
					failRule, failVariant, failAnchor = ref.rule, ref.variant, ref.anchor
					continue
				}
				hi = p + loc[1]
			}
			sc.windows = append(sc.windows, window{
				key:   ref.rule<<8 | ref.variant,
				start: int32(max(0, lo-pad)),
				end:   int32(min(len(s), hi+pad)),
			})
		}
	}
	// Variants without anchors run on the whole string.
	for ri, r := range rs.rules {
		if !active(int32(ri)) {
			continue
		}
		for vi, v := range r.variants {
			if v.whole {
				sc.windows = append(sc.windows, window{key: int32(ri)<<8 | int32(vi), start: 0, end: int32(len(s))})
			}
		}
	}
	if len(sc.windows) == 0 {
		return nil
	}
	slices.SortFunc(sc.windows, func(a, b window) int {
		if a.key != b.key {
			return int(a.key - b.key)
		}
		return int(a.start - b.start)
	})
	// Merge overlapping windows per variant, then scan each merged one.
	ws := sc.windows
	for i := 0; i < len(ws); {
		key, start, end := ws[i].key, ws[i].start, ws[i].end
		j := i + 1
		for j < len(ws) && ws[j].key == key && ws[j].start <= end {
			end = max(end, ws[j].end)
			j++
		}
		ri, vi := key>>8, key&0xff
		v := rs.rules[ri].variants[vi]
		t := c.textFor(v)
		if !c.collect(t[start:end], int(start), ri, v, v.fast) {
			// A match touched the window's edge, where the window and the
			// whole string may disagree: run on the whole string instead.
			// Real matches never do (see the package doc); a match that
			// only exists because the window cuts the text may.
			edgeFallbacks.Add(1)
			for j < len(ws) && ws[j].key == key {
				j++
			}
			c.collect(t, 0, ri, v, v.fast)
		}
		i = j
	}
	return c.finish()
}

// matchBounds returns the range [lo, hi) of s that any match of the anchor's
// branch starting its anchor at p must lie in.
func (c *call) matchBounds(p int, a *compiledAnchor) (lo, hi int) {
	lo, hi = 0, len(c.s)
	if a.before != unbounded {
		lo = max(lo, p-a.before)
	}
	if a.beforeNL != unbounded && lo < p {
		lo = max(lo, c.lineStartBefore(p, a.beforeNL))
	}
	if a.after != unbounded {
		hi = min(hi, p+a.after)
	}
	if a.afterNL != unbounded {
		hi = min(hi, c.lineEndAfter(p, a.afterNL))
	}
	return lo, hi
}

// unescapeQuotes replaces the backslash of every \" and \' with a space.
func unescapeQuotes(s string) string {
	b := []byte(s)
	for i := 0; i+1 < len(b); i++ {
		if b[i] == '\\' && (b[i+1] == '"' || b[i+1] == '\'') {
			b[i] = ' '
			i++
		}
	}
	return string(b)
}

// collect runs variant v (as re) on w, which is textFor(v)[off:off+len(w)],
// and appends the secrets it finds, as gitleaks would report them, to
// sc.spans. It returns false, having appended nothing, if w is a proper part
// of the text and a match touches its edge.
func (c *call) collect(w string, off int, ri int32, v *variant, re *regexp.Regexp) bool {
	s := c.textFor(v)
	ms := re.FindAllStringIndex(w, -1)
	if len(ms) == 0 {
		return true
	}
	if off > 0 || len(w) < len(s) {
		for _, m := range ms {
			if (m[0] == 0 && off > 0) || (m[1] == len(w) && off+len(w) < len(s)) {
				return false
			}
		}
	}
	r := c.rs.rules[ri]
	for _, m := range ms {
		m0 := off + m[0]
		raw := s[m0 : off+m[1]]
		// As gitleaks' detectRule: the match trimmed of newlines, the
		// secret group (or first non-empty group) of the regex re-run on
		// it, then entropy and allowlists.
		trimmed := strings.Trim(raw, "\n")
		if trimmed == "" {
			continue
		}
		tStart := m0 + len(raw) - len(strings.TrimLeft(raw, "\n"))
		secret, sStart := trimmed, tStart
		if re.NumSubexp() > 0 {
			if loc := re.FindStringSubmatchIndex(trimmed); len(loc) >= 4 {
				ngroups := len(loc) / 2
				if v.secretGroup > 0 {
					if ngroups <= v.secretGroup {
						continue
					}
					a, b := loc[2*v.secretGroup], loc[2*v.secretGroup+1]
					if a >= 0 {
						secret, sStart = trimmed[a:b], tStart+a
					} else {
						secret = ""
					}
				} else {
					for g := 1; g < ngroups; g++ {
						if a, b := loc[2*g], loc[2*g+1]; a >= 0 && b > a {
							secret, sStart = trimmed[a:b], tStart+a
							break
						}
					}
				}
			}
		}
		if r.entropy != 0 && shannonEntropy(secret) <= r.entropy-1e-9 {
			continue
		}
		if v.generated && !looksGenerated(secret, v.prefix) {
			continue
		}
		if r.userInfo && !isBasicUserInfo(secret) {
			continue
		}
		if c.allowed(r.allow, s, secret, trimmed, m0, m0+len(trimmed)) {
			continue
		}
		if secret == "" {
			// gitleaks reports an empty secret group; redact the match.
			secret, sStart = trimmed, tStart
		}
		// Some secret groups include the quotes around the secret
		// (hashicorp-tf-password); the quotes are surrounding text.
		if inner := strings.Trim(secret, quotes); inner != "" {
			sStart += strings.Index(secret, inner)
			secret = inner
		}
		c.sc.spans = append(c.sc.spans, span{start: sStart, end: sStart + len(secret), rule: ri})
	}
	return true
}

// finish adds every other occurrence of each found secret, then sorts.
func (c *call) finish() []span {
	sc, s := c.sc, c.s
	if len(sc.spans) == 0 {
		return nil
	}
	if sc.repeats == nil {
		sc.repeats = map[string]bool{}
	}
	clear(sc.repeats)
	n := len(sc.spans)
	for i := 0; i < n && len(sc.repeats) < maxRepeatSecrets; i++ {
		sp := sc.spans[i]
		if sp.end-sp.start < minRepeatLen {
			continue
		}
		secret := s[sp.start:sp.end]
		if sc.repeats[secret] {
			continue
		}
		sc.repeats[secret] = true
		if c.rs.rules[sp.rule].generic && !looksRandom(secret) {
			// A generic rule's secret is often an identifier
			// (NewEncapsulationKey768) that the code uses elsewhere.
			continue
		}
		for at := 0; ; {
			k := strings.Index(s[at:], secret)
			if k < 0 {
				break
			}
			if at+k != sp.start {
				sc.spans = append(sc.spans, span{start: at + k, end: at + k + len(secret), rule: sp.rule})
			}
			at += k + 1
		}
	}
	slices.SortFunc(sc.spans, func(a, b span) int {
		if a.start != b.start {
			return a.start - b.start
		}
		return b.end - a.end
	})
	return sc.spans
}

// isBasicUserInfo reports whether s is base64 (padded or not) of printable
// text holding a colon, as HTTP Basic credentials are.
func isBasicUserInfo(s string) bool {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		if b, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(s, "=")); err != nil {
			return false
		}
	}
	if !utf8.Valid(b) || !bytes.Contains(b, []byte(":")) {
		return false
	}
	for _, r := range string(b) {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// looksGenerated is the test of the generated variants: after the
// token's fixed prefix (prefix: s., key-, pubkey-, access-production-), a
// digit and no word (wordRun; hex like deadbeef is no word). It is not
// known.go's generated, which wants both letter cases: lower-case hex
// tokens (Mailgun's) have one.
func looksGenerated(secret string, prefix *regexp.Regexp) bool {
	tail := secret
	if prefix != nil {
		if loc := prefix.FindStringIndex(secret); loc != nil {
			tail = secret[loc[1]:]
		}
	}
	return strings.ContainsAny(tail, "0123456789") && !wordRun(tail, false)
}

// looksRandom reports whether s has no run of six or more lowercase
// letters, as words and identifiers do and random strings seldom do.
func looksRandom(s string) bool { return !wordRun(s, true) }

// wordRun reports whether s has a run of six or more lowercase letters;
// unless hexIsWord, one of them must be beyond f.
func wordRun(s string, hexIsWord bool) bool {
	run, word := 0, hexIsWord
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 'a' || c > 'z' {
			run, word = 0, hexIsWord
			continue
		}
		run++
		word = word || c > 'f'
		if run >= 6 && word {
			return true
		}
	}
	return false
}

// allowed reports whether gitleaks' allowlists (global and the rule's) let
// the finding pass, as detect.checkFindingAllowed for a fragment without
// path or commit. s is the text the match [start, end) was found in.
func (c *call) allowed(als []*config.Allowlist, s, secret, match string, start, end int) bool {
	for _, a := range als {
		var regexAllowed bool
		switch a.RegexTarget {
		case "match":
			regexAllowed = a.RegexAllowed(match)
		case "line":
			// Many matches can share a line, and the line can be the
			// whole string: look each (allowlist, line) up once.
			from, to := c.gitleaksLine(start, end)
			k := lineKey{a, from, to}
			var ok bool
			if regexAllowed, ok = c.sc.lineMemo[k]; !ok {
				regexAllowed = a.RegexAllowed(s[from:to])
				if c.sc.lineMemo == nil {
					c.sc.lineMemo = map[lineKey]bool{}
				}
				c.sc.lineMemo[k] = regexAllowed
			}
		default:
			regexAllowed = a.RegexAllowed(secret)
		}
		stop, _ := a.ContainsStopWord(secret)
		var ok bool
		if a.MatchCondition == config.AllowlistMatchAnd {
			ok = true
			if len(a.Commits) > 0 || len(a.Paths) > 0 {
				ok = false // no commit, no path
			}
			if len(a.Regexes) > 0 && !regexAllowed {
				ok = false
			}
			if len(a.StopWords) > 0 && !stop {
				ok = false
			}
		} else {
			ok = regexAllowed || stop
		}
		if ok {
			return true
		}
	}
	return false
}

// gitleaksLine returns the bounds of the Line gitleaks reports for a match
// [start, end) of s, quirks included (detect.location): from the newline
// before the match (or the start of s) to the newline after it, and from
// the start of s for a match after the last newline.
func (c *call) gitleaksLine(start, end int) (from, to int) {
	s, nl := c.s, c.newlines()
	if len(nl) == 0 {
		return 0, len(s)
	}
	lastNL := int(nl[len(nl)-1])
	if start < lastNL {
		k := c.firstNewline(start + 1) // newlines at or before start: nl[:k]
		if k > 0 {
			from = int(nl[k-1])
		}
		to = int(nl[k]) // the first newline after start
		if end <= lastNL {
			to = int(nl[c.firstNewline(end)])
		}
		return from, max(to, end)
	}
	i := strings.IndexAny(s[end:], "\r\n")
	if i < 0 {
		return 0, len(s)
	}
	return 0, end + i
}

// shannonEntropy is gitleaks' entropy of a secret: over runes, divided by
// the length in bytes.
func shannonEntropy(data string) float64 {
	if data == "" {
		return 0
	}
	var ascii [128]int
	var other map[rune]int
	for _, c := range data {
		if c < 128 {
			ascii[c]++
		} else {
			if other == nil {
				other = map[rune]int{}
			}
			other[c]++
		}
	}
	inv := 1.0 / float64(len(data))
	e := 0.0
	add := func(n int) {
		if n > 0 {
			f := float64(n) * inv
			e -= f * math.Log2(f)
		}
	}
	for _, n := range ascii {
		add(n)
	}
	for _, n := range other {
		add(n)
	}
	return e
}
