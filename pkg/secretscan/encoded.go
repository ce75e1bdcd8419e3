package secretscan

import (
	"encoding/base64"
	"encoding/hex"
	"slices"
	"strings"
	"unicode/utf8"
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
	// maxDecodeDepth is how often decoded text is decoded again, as
	// gitleaks' default. Only decoded text is read again, so a level
	// costs nothing unless the one before decoded something.
	maxDecodeDepth = 5
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

// textByte reports whether decoded text may hold c: gitleaks' printable
// ASCII (tab through '~', so newlines too) and the bytes of UTF-8 beyond
// ASCII (a comment's umlaut or dash must not make a config "binary").
// Binary (hashes, images, key material) holds control characters within
// a few bytes, and is seldom valid UTF-8.
func textByte(c byte) bool { return c >= '\t' && c != 0x7f && (c >= ' ' || c <= '\r') }

// textStart reports whether b may start decoded text: textBytes, and not
// a byte UTF-8 never starts with (a continuation byte) or never holds.
func textStart(b []byte) bool {
	for i, c := range b {
		if !textByte(c) || c == 0xc0 || c == 0xc1 || c >= 0xf5 || (i == 0 && c >= 0x80 && c < 0xc0) {
			return false
		}
	}
	return true
}

// asText returns decoded bytes as text for the rules, or nil when they are
// not text: every byte a textByte and the whole valid UTF-8. Characters
// beyond ASCII become spaces (every byte maps to the whole run, so
// nothing else changes).
func asText(b []byte) []byte {
	ascii := true
	for _, c := range b {
		if !textByte(c) {
			return nil
		}
		ascii = ascii && c < utf8.RuneSelf
	}
	if ascii {
		return b
	}
	if !utf8.Valid(b) {
		return nil
	}
	out := b[:0]
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r >= utf8.RuneSelf {
			out = append(out, ' ')
		} else {
			out = append(out, byte(r))
		}
		i += n
	}
	return out
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
// false when no run decodes to text. base maps s's bytes to an original
// text (nil: s is the original). Escapes inside decoded text (a
// percent-encoded or \u-escaped token, then base64-encoded) are undone at
// each level, as gitleaks does.
func decodeEncoded(s string, base *encodedCopy) (*encodedCopy, bool) {
	var buf []byte
	cur := base
	text := s
	for depth := 0; depth < maxDecodeDepth; depth++ {
		next, ok := decodeRuns(text, cur, depth > 0, &buf)
		if !ok {
			break
		}
		if d, off, ok := decodeEscapes(next.s); ok {
			next = next.through(d, off)
		}
		cur, text = next, next.s
	}
	if cur == base {
		return nil, false
	}
	return cur, true
}

// through is c seen through decodeEscapes' copy d of c.s: byte k of d
// stands for c.s[off[k]:off[k+1]].
func (c *encodedCopy) through(d string, off []int32) *encodedCopy {
	n := &encodedCopy{s: d, from: make([]int32, len(d)), to: make([]int32, len(d)), decoded: make([]bool, len(d))}
	for k := range len(d) {
		a, b := int(off[k]), max(int(off[k+1]), int(off[k])+1)
		n.from[k], n.to[k] = c.from[a], c.to[b-1]
		n.decoded[k] = slices.Contains(c.decoded[a:b], true)
	}
	return n
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
		start := i
		core, j := readRun(text, i)
		run := j
		for k := 0; k < 2 && run < len(text) && text[run] == '='; k++ {
			run++
		}
		i = j
		if len(core) < minBase64Run || (onlyDecoded && !prev.decoded[start]) {
			continue
		}
		// A run glued to a word on its left (key_ZGF0YQ…) starts mid-word;
		// gitleaks reads the run whole too, so neither finds such a value
		// unless it happens to align.
		d := decodeRun(core+text[j:run], buf)
		if d == nil {
			continue
		}
		if run == j && start >= tried {
			// Lines decode alone as they do joined (each is a whole
			// number of quanta), so only a block whose first line
			// decodes is read as a block.
			if blocks, ends := wrappedRun(text, j, core); len(blocks) > 0 {
				whole := false
				for k, b := range blocks {
					if bd := decodeRun(b, buf); bd != nil {
						d, run, whole = bd, ends[k], true
						break
					}
				}
				if !whole {
					// Its lines are read alone, but none of them
					// starts a block again: that would be quadratic
					// in the block's length.
					tried = ends[0]
					d = decodeRun(core, buf)
				}
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

// readRun reads the run of encodedByte at text[i:]: its characters, with
// \/ read as / (JSON encoders that escape slashes: PHP's json_encode),
// and where it ends.
func readRun(text string, i int) (string, int) {
	j := i
	for j < len(text) && encodedByte[text[j]] {
		j++
	}
	if !slashEscapeAt(text, j) {
		return text[i:j], j // the common case: no escape, no copy
	}
	esc := append(make([]byte, 0, 2*(j-i)+16), text[i:j]...)
	for {
		switch {
		case j < len(text) && encodedByte[text[j]]:
			esc = append(esc, text[j])
			j++
		case slashEscapeAt(text, j):
			esc = append(esc, '/')
			j += 2
		default:
			return string(esc), j
		}
	}
}

// slashEscapeAt reports whether text[j:] is \/ followed by a run byte.
func slashEscapeAt(text string, j int) bool {
	return j+2 < len(text) && text[j] == '\\' && text[j+1] == '/' && encodedByte[text[j+2]]
}

// minWrapWidth is the narrowest line width read as wrapped base64: the
// base64 command wraps at 76 columns, PEM and OpenSSL at 64, GitHub's
// contents API at 60.
const minWrapWidth = 40

// wrappedRun reads a run first, ending at text[end:], that fills a wrapped
// line (a multiple of 4 bytes, at least minWrapWidth, before a line break)
// together with the lines that continue it: the same width, after the
// same indentation, the last one maybe shorter and padded, and ending its
// line. It returns the block's runs joined, with its last line and (when
// that line may be something else: a word, EOF) without it, and where
// each ends; nothing when first starts no block. A line break is a
// newline or, inside a JSON string, an escaped one; trailing spaces are
// skipped. gitleaks reads each line alone, which splits a secret wherever
// the encoder broke the line.
func wrappedRun(text string, end int, first string) (blocks []string, ends []int) {
	width := len(first)
	if width < minWrapWidth || width%4 != 0 {
		return nil, nil
	}
	joined := []byte(first)
	full, fullEnd := 0, end // joined[:full] are whole lines, ending at fullEnd
	indent := ""
	lastEnd := end
	for at, lines := end, 0; ; lines++ {
		k, ok := lineBreak(text, at)
		if !ok {
			break
		}
		m := k
		for m < len(text) && (text[m] == ' ' || text[m] == '\t') {
			m++
		}
		if lines == 0 {
			indent = text[k:m]
		} else if text[k:m] != indent {
			break
		}
		core, e := readRun(text, m)
		if len(core) == 0 || len(core) > width {
			break // an empty line, or a longer one: not this block
		}
		p := e
		for q := 0; q < 2 && p < len(text) && text[p] == '='; q++ {
			p++
		}
		if len(core) == width && p == e {
			joined = append(joined, core...)
			full, fullEnd = len(joined), e
			at = e
			continue
		}
		// The short last line must be padded, or end its line, the
		// text, a quoted string or a word: "tls.key:" is no part of
		// the block. A word that starts the next line ("FileSystem
		// holds …") is tried with the block and without it; the block
		// decodes with it only by chance.
		if p == e && !endsBlock(text, p) && text[p] != ' ' {
			break
		}
		joined = append(joined, core...)
		joined = append(joined, text[e:p]...)
		lastEnd = p
		break
	}
	if full == 0 && lastEnd == end {
		return nil, nil
	}
	if lastEnd > fullEnd {
		blocks, ends = append(blocks, string(joined)), append(ends, lastEnd)
	}
	if full > width {
		blocks, ends = append(blocks, string(joined[:full])), append(ends, fullEnd)
	}
	return blocks, ends
}

// lineBreaks are what lineBreak reads: newlines, and their escapes inside a
// JSON string.
var lineBreaks = []string{"\n", "\r\n", `\n`, `\r\n`}

// lineBreak reads a line break at text[at:] after trailing spaces: \n,
// \r\n, or their escapes inside a JSON string; it returns where the next
// line starts.
func lineBreak(text string, at int) (int, bool) {
	for at < len(text) && (text[at] == ' ' || text[at] == '\t') {
		at++
	}
	for _, br := range lineBreaks {
		if strings.HasPrefix(text[at:], br) {
			return at + len(br), true
		}
	}
	return 0, false
}

// endsBlock reports whether a wrapped block's last line may end at
// text[p:]: at the end of the text or of its line (after spaces), or where
// a quoted string or markup ends.
func endsBlock(text string, p int) bool {
	for p < len(text) && (text[p] == ' ' || text[p] == '\t') {
		p++
	}
	if p == len(text) {
		return true
	}
	if _, ok := lineBreak(text, p); ok {
		return true
	}
	return strings.IndexByte("\"'`<,;)}]", text[p]) >= 0
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
// word). It returns nil unless the result is text (asText). buf is scratch
// space reused between calls; the result aliases it.
func decodeRun(run string, buf *[]byte) []byte {
	core := strings.TrimRight(run, "=")
	if len(core) >= minHexRun && len(core)%2 == 0 && len(core) == len(run) && strings.ContainsAny(core, "0123456789") {
		// Not hex (an error at a non-hex digit), or hex of no text: read
		// as base64 below.
		if d, err := hex.AppendDecode((*buf)[:0], []byte(core)); err == nil {
			*buf = d
			if t := asText(d); t != nil {
				return t
			}
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
	// decode to something that starts no text: try one quantum first,
	// without allocating.
	var src [64]byte
	var q [3]byte
	copy(src[:4], core)
	if n, err := enc.Decode(q[:], src[:4]); err != nil || !textStart(q[:n]) {
		return nil
	}
	need := enc.DecodedLen(len(core))
	if cap(*buf) < need {
		*buf = make([]byte, need)
	}
	out := (*buf)[:need]
	// A chunk at a time, so that a run that is no text (a hash, an
	// image) costs little more than its first chunk.
	n := 0
	for k := 0; k < len(core); k += len(src) {
		m, err := enc.Decode(out[n:], src[:copy(src[:], core[k:])])
		if err != nil {
			return nil
		}
		for _, c := range out[n : n+m] {
			if !textByte(c) {
				return nil
			}
		}
		n += m
	}
	return asText(out[:n])
}

// escapesCopy is decodeEscapes' copy d as a base for decodeEncoded: byte k
// of d stands for s[off[k]:off[k+1]].
func escapesCopy(d string, off []int32) *encodedCopy {
	return &encodedCopy{s: d, from: off[:len(d)], to: off[1:], decoded: make([]bool, len(d))}
}
