package secretscan

import (
	"encoding/base64"
	"strings"
)

// Encoded values: a secret, or the line around it, written as base64 or hex
// (a Kubernetes or Docker config blob, `echo … | base64 -d`, a test vector,
// an environment variable holding an encoded file). gitleaks' command line
// decodes such values five levels deep by default and reports what it finds
// in them; the redactor does the same so as not to show an agent less
// redacted text than gitleaks would flag.
//
// decodeEncoded replaces every run that decodes to printable ASCII by its
// decoded text, up to maxDecodeDepth times (base64 of base64, hex of
// base64), and the rules run on that copy (find). A span the rules find in
// the copy that touches decoded text is mapped back to the whole encoded
// run: a part of an encoded value cannot be cut out of it without showing
// the rest's bits, and the run is what a reader could decode.

const (
	// maxDecodeDepth is how often decoded text is decoded again. gitleaks
	// defaults to 5; three levels are base64 of base64 of hex, which is
	// already more than configuration tooling writes.
	maxDecodeDepth = 3
	// minBase64Run is the shortest run tried as base64 (12 decoded
	// bytes), as gitleaks does: shorter ones are words.
	minBase64Run = 16
	// minHexRun is the shortest run tried as hex (16 decoded bytes):
	// shorter ones are hashes' prefixes and numbers.
	minHexRun = 32
)

// encodedByte is the alphabet of base64 (standard and URL-safe) runs; hex
// is a subset.
var encodedByte = func() (t [256]bool) {
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for _, c := range "+/-_" {
		t[c] = true
	}
	return t
}()

// printable is what decoded text may hold: gitleaks' printable ASCII (tab
// through '~', so newlines too). Binary (hashes, images, key material) is
// not text a rule can read.
func printable(b []byte) bool {
	for _, c := range b {
		if c < '\t' || c > '~' {
			return false
		}
	}
	return true
}

// encodedCopy is text with its encoded runs decoded. from and to give, for
// each byte of s, the range of the original text it stands for; decoded is
// true for bytes that came out of an encoded run (at any depth).
type encodedCopy struct {
	s        string
	from, to []int32
	decoded  []bool
	b        []byte // s while it is built
}

// span maps the copy's span [start, end) back to the original text, and
// reports whether it touches decoded text (only those are new: the rest
// the rules saw in the original already).
func (c *encodedCopy) span(start, end int) (int, int, bool) {
	if start >= end {
		return 0, 0, false
	}
	touches := false
	for k := start; k < end && !touches; k++ {
		touches = c.decoded[k]
	}
	return int(c.from[start]), int(c.to[end-1]), touches
}

// decodeEncoded returns s with its encoded runs decoded (see above), or
// false when no run decodes to printable text. base maps s's bytes to an
// original text (nil: s is the original).
func decodeEncoded(s string, base *encodedCopy) (*encodedCopy, bool) {
	var buf []byte
	cur := base
	text := s
	for depth := 0; depth < maxDecodeDepth; depth++ {
		next, ok := decodeRuns(text, cur, depth > 0, &buf)
		if !ok {
			break
		}
		cur, text = next, next.s
	}
	if cur == base {
		return nil, false
	}
	return cur, true
}

// decodeRuns is one level of decodeEncoded over text, whose bytes map to
// the original through prev (nil: text is the original). onlyDecoded: look
// for runs only in text that the previous level decoded (the others were
// tried there already).
func decodeRuns(text string, prev *encodedCopy, onlyDecoded bool, buf *[]byte) (*encodedCopy, bool) {
	var c *encodedCopy
	done := 0  // text[:done] is in c
	tried := 0 // text[:tried] was read as a wrapped block that did not decode
	for i := 0; i < len(text); {
		if !encodedByte[text[i]] {
			i++
			continue
		}
		j := i + 1
		for j < len(text) && encodedByte[text[j]] {
			j++
		}
		run := j
		for k := 0; k < 2 && run < len(text) && text[run] == '='; k++ {
			run++
		}
		start := i
		i = j
		if j-start < minBase64Run || (onlyDecoded && !prev.decoded[start]) {
			continue
		}
		// A run glued to a word on its left (key_ZGF0YQ…) starts mid-word;
		// gitleaks reads the run whole too, so neither finds such a value
		// unless it happens to align.
		var d []byte
		if start >= tried {
			if whole, end, ok := wrappedRun(text, start, j); ok {
				if d = decodeRun(whole, buf); d != nil {
					run = end
				} else {
					// Its lines are read alone below, but none of them
					// starts a block again: that would be quadratic
					// in the block's length.
					tried = end
				}
			}
		}
		if d == nil {
			if d = decodeRun(text[start:run], buf); d == nil {
				continue
			}
		}
		if c == nil {
			c = &encodedCopy{
				b:       make([]byte, 0, len(text)),
				from:    make([]int32, 0, len(text)),
				to:      make([]int32, 0, len(text)),
				decoded: make([]bool, 0, len(text)),
			}
		}
		c.appendPlain(text, done, start, prev)
		c.appendDecoded(d, start, run, prev)
		done = run
		i = run
	}
	if c == nil {
		return nil, false
	}
	c.appendPlain(text, done, len(text), prev)
	c.s, c.b = string(c.b), nil
	return c, true
}

// minWrapWidth is the narrowest line width read as wrapped base64: the
// base64 command wraps at 76 columns, PEM and OpenSSL at 64.
const minWrapWidth = 40

// wrappedRun reads a run text[start:end] that fills a wrapped line (a
// multiple of 4 bytes, at least minWrapWidth, at the line's end) together
// with the lines that continue it: the same width, after the same
// indentation, the last one shorter and maybe padded. It returns the runs
// joined and where the last one ends; false when text[start:end] is not
// the first line of such a block. gitleaks reads each line alone, which
// splits a secret wherever the encoder broke the line.
func wrappedRun(text string, start, end int) (string, int, bool) {
	width := end - start
	if width < minWrapWidth || width%4 != 0 {
		return "", 0, false
	}
	var joined []byte
	last := end
	for at := end; ; {
		k := at
		if k < len(text) && text[k] == '\r' {
			k++
		}
		if k >= len(text) || text[k] != '\n' {
			break
		}
		k++
		for k < len(text) && (text[k] == ' ' || text[k] == '\t') {
			k++
		}
		e := k
		for e < len(text) && e-k < width && encodedByte[text[e]] {
			e++
		}
		n := e - k
		if n == 0 || (e < len(text) && encodedByte[text[e]]) {
			break // an empty line, or a longer one: not this block
		}
		for p := 0; p < 2 && e < len(text) && text[e] == '='; p++ {
			e++
		}
		if joined == nil {
			joined = append(make([]byte, 0, 4*width), text[start:end]...)
		}
		joined = append(joined, text[k:e]...)
		last = e
		if n < width || e > k+n {
			break // the short (or padded) last line
		}
		at = e
	}
	if joined == nil {
		return "", 0, false
	}
	return string(joined), last, true
}

// appendPlain copies text[a:b] unchanged.
func (c *encodedCopy) appendPlain(text string, a, b int, prev *encodedCopy) {
	c.b = append(c.b, text[a:b]...)
	for k := a; k < b; k++ {
		if prev == nil {
			c.from = append(c.from, int32(k))
			c.to = append(c.to, int32(k+1))
			c.decoded = append(c.decoded, false)
			continue
		}
		c.from = append(c.from, prev.from[k])
		c.to = append(c.to, prev.to[k])
		c.decoded = append(c.decoded, prev.decoded[k])
	}
}

// appendDecoded appends d, decoded from text[a:b]: each byte stands for the
// whole run.
func (c *encodedCopy) appendDecoded(d []byte, a, b int, prev *encodedCopy) {
	c.b = append(c.b, d...)
	from, to := int32(a), int32(b)
	if prev != nil {
		from, to = prev.from[a], prev.to[b-1]
	}
	for range d {
		c.from = append(c.from, from)
		c.to = append(c.to, to)
		c.decoded = append(c.decoded, true)
	}
}

// decodeRun decodes a run as hex (when it is all hex digits and has a
// digit) or as base64 (standard or URL-safe, padded or not, when it has a
// digit or one of + / - _, as gitleaks asks: a run of letters alone is a
// word). It returns nil unless the result is printable ASCII. buf is
// scratch space reused between calls; the result aliases it.
func decodeRun(run string, buf *[]byte) []byte {
	core := strings.TrimRight(run, "=")
	if len(core) >= minHexRun && len(core)%2 == 0 && len(core) == len(run) && isHex(core) && strings.ContainsAny(core, "0123456789") {
		if d := decodeHex(core, buf); d != nil {
			return d
		}
	}
	if !strings.ContainsAny(core, "0123456789+/-_") {
		return nil
	}
	enc := base64.RawStdEncoding
	if strings.ContainsAny(core, "-_") {
		if strings.ContainsAny(core, "+/") {
			return nil
		}
		enc = base64.RawURLEncoding
	}
	if len(core)%4 == 1 {
		return nil
	}
	// Most runs are identifiers and paths, whose first bytes already
	// decode to something unprintable: try one quantum first.
	var q [3]byte
	if n, err := enc.Decode(q[:], []byte(core[:4])); err != nil || !printable(q[:n]) {
		return nil
	}
	need := enc.DecodedLen(len(core))
	if cap(*buf) < need {
		*buf = make([]byte, need)
	}
	out := (*buf)[:need]
	n, err := enc.Decode(out, []byte(core))
	if err != nil || !printable(out[:n]) {
		return nil
	}
	return out[:n]
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if unhex(s[i]) < 0 {
			return false
		}
	}
	return true
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// decodeHex decodes an even run of hex digits, nil unless printable.
func decodeHex(s string, buf *[]byte) []byte {
	need := len(s) / 2
	if cap(*buf) < need {
		*buf = make([]byte, need)
	}
	out := (*buf)[:need]
	for i := range out {
		b := byte(unhex(s[2*i])<<4 | unhex(s[2*i+1]))
		if b < '\t' || b > '~' {
			return nil
		}
		out[i] = b
	}
	return out
}

// escapesCopy is decodeEscapes' copy d as a base for decodeEncoded: byte k
// of d stands for s[off[k]:off[k+1]].
func escapesCopy(d string, off []int32) *encodedCopy {
	c := &encodedCopy{s: d, from: off[:len(d)], to: off[1:], decoded: make([]bool, len(d))}
	return c
}
