package secretscan

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// decodeEscapes returns a copy of s in which the encodings that hide a
// secret's context are undone, and for each byte of the copy the offset in
// s of the character it came from, plus len(s) at the end; false when s has
// none of them. The rules run on s and on the copy, and the copy's spans are
// mapped back (find). Undone are:
//
//   - HTML character references (&quot; &#34; &#x27; &lt; &nbsp; …): code
//     quoted in HTML, JSON in a data- attribute;
//   - \uXXXX escapes (Go's JSON encoder writes < > & so);
//   - a quote after two or more backslashes (JSON inside JSON: \\\"); one
//     backslash is read by the relaxed variants already (unescapeQuotes);
//   - %XX of ASCII (a value percent-encoded whole, or the
//     characters URL encoding hides an assignment with), and + next to an
//     escape of space, quotes, = : & , ; < > @ # ? as a space;
//   - \xXX, \NNN (octal) and \UXXXXXXXX escapes of ASCII characters, as
//     C, Python, shell and Go string literals write bytes;
//   - string literals of token characters joined by concatenation
//     ("AKIA" + "…", '…' . '…', "…"⏎"…"): the quotes and the operator
//     between them are dropped, so a secret split to pass a scanner, or to
//     fit a line, is read whole;
//   - Unicode spaces (no-break, thin, ideographic …) and typographic quotes
//     as their ASCII forms, and zero-width characters and soft hyphens
//     dropped, so that they neither hide an assignment nor split a token;
//     also when written as a reference or an escape.
//
// Only ASCII results: secrets and their context are ASCII, and the copy is
// only searched, never shown. The work is linear in s: each candidate byte
// is found by one library search, and a run of backslashes is read once.
func decodeEscapes(s string) (string, []int32, bool) {
	pct := hasURLEscape(s)
	cands := newCandidates(s, pct)
	var b []byte
	var off []int32
	done := 0 // s[:done] is in b
	for i := cands.next(0); i < len(s); i = cands.next(i + 1) {
		out, n := escapeAt(s, i, pct)
		if n <= 0 {
			i -= n // nothing decoded; a run of backslashes is passed whole
			continue
		}
		if b == nil {
			b = make([]byte, 0, len(s))
			off = make([]int32, 0, len(s)+1)
		}
		b = append(b, s[done:i]...)
		for j := done; j < i; j++ {
			off = append(off, int32(j))
		}
		if out >= 0 {
			b = append(b, byte(out)) // dropped characters (-1) add nothing
			off = append(off, int32(i))
		}
		i += n - 1
		done = i + 1
	}
	if b == nil {
		return "", nil, false
	}
	b = append(b, s[done:]...)
	for j := done; j < len(s); j++ {
		off = append(off, int32(j))
	}
	return string(b), append(off, int32(len(s))), true
}

// candidates finds the next byte where escapeAt may decode something: one
// of the ASCII starts (& \ %, and + in URL-encoded text) or a lead byte of
// the non-ASCII characters of runeASCII. This runs on every string Redact
// sees, so it uses the library's vectorised byte search, once over each
// byte per candidate byte (a byte loop cost 5 % of a redaction; searching
// again from every candidate was quadratic).
type candidates struct {
	s     string
	bytes string
	// at[k] is the offset of bytes[k] at or after the last position
	// asked for (len(s) if none), or -1 before the first search.
	at [len(candidateBytes) + 1]int
	// scanned counts the bytes the searches read (for the test that
	// keeps the work linear).
	scanned int
}

// candidateBytes are the first bytes of what escapeAt decodes, '+' aside.
const candidateBytes = "&\\%\xc2\xe2\xe3\xef\"'`"

func newCandidates(s string, pct bool) *candidates {
	c := &candidates{s: s, bytes: candidateBytes}
	if pct {
		c.bytes += "+"
	}
	for k := range c.at {
		c.at[k] = -1
	}
	return c
}

// next returns the first candidate at or after i, or len(s).
func (c *candidates) next(i int) int {
	best := len(c.s)
	if i >= best {
		return best
	}
	for k := 0; k < len(c.bytes); k++ {
		if c.at[k] < i {
			c.at[k] = len(c.s)
			if j := strings.IndexByte(c.s[i:], c.bytes[k]); j >= 0 {
				c.at[k] = i + j
			}
			c.scanned += c.at[k] - i
		}
		best = min(best, c.at[k])
	}
	return best
}

// urlEscaped are the characters URL encoding hides an assignment with; a
// + next to an escape of one of them is a space (spaceEscapeAt).
const urlEscaped = ` "'=:&,;<>/@+#?`

// hasURLEscape reports whether s holds a %XX of ASCII.
func hasURLEscape(s string) bool {
	for at := 0; ; {
		k := strings.IndexByte(s[at:], '%')
		if k < 0 {
			return false
		}
		at += k + 1
		if c, ok := urlByte(s, at-1); ok && urlDecoded(c) {
			return true
		}
	}
}

// urlDecoded reports whether decodeEscapes undoes a %XX of c: ASCII
// (control characters too: a netrc entry's whitespace may be any). A
// secret percent-encoded whole (%67%68%70%5F…) is no less a secret, and
// gitleaks' own decoder reads it.
func urlDecoded(c byte) bool { return c < utf8.RuneSelf }

// urlByte decodes %XX at s[i].
func urlByte(s string, i int) (byte, bool) {
	if i+3 > len(s) {
		return 0, false
	}
	v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
	return byte(v), err == nil
}

// spaceEscapeAt reports whether s has, at i, a %XX that a form-encoded +
// may stand next to as a space: one of urlEscaped but / and +.
func spaceEscapeAt(s string, i int) bool {
	if i >= len(s) || s[i] != '%' {
		return false
	}
	v, ok := urlByte(s, i)
	return ok && v != '/' && v != '+' && strings.IndexByte(urlEscaped, v) >= 0
}

// runeASCII maps the Unicode spaces and quotes decodeEscapes reads as ASCII
// (-1: dropped).
var runeASCII = map[rune]int{
	'\u00a0': ' ', '\u2000': ' ', '\u2001': ' ', '\u2002': ' ', '\u2003': ' ', '\u2004': ' ',
	'\u2005': ' ', '\u2006': ' ', '\u2007': ' ', '\u2008': ' ', '\u2009': ' ', '\u200a': ' ',
	'\u202f': ' ', '\u205f': ' ', '\u3000': ' ',
	'\u2018': '\'', '\u2019': '\'', '\u201a': '\'', '\u2032': '\'',
	'\u201c': '"', '\u201d': '"', '\u201e': '"', '\u2033': '"',
	'\u00ad': -1, '\u200b': -1, '\u200c': -1, '\u200d': -1, '\u2060': -1, '\ufeff': -1,
}

// htmlNamed are the named character references decodeEscapes reads.
var htmlNamed = map[string]int{"quot": '"', "apos": '\'', "amp": '&', "lt": '<', "gt": '>', "nbsp": ' '}

// escapeAt decodes what starts at s[i]: the ASCII character (-1 for none)
// and the length it takes in s; n == 0 when nothing is decoded there, and
// n < 0 when nothing is decoded in the next -n bytes. pct: s holds URL
// escapes, so %XX (and + next to one) are decoded too.
func escapeAt(s string, i int, pct bool) (out, n int) {
	switch c := s[i]; {
	case c == '&':
		end := strings.IndexByte(s[i+1:min(len(s), i+10)], ';')
		if end < 1 {
			return 0, 0
		}
		name := s[i+1 : i+1+end]
		if c, ok := htmlNamed[name]; ok {
			return c, end + 2
		}
		if name[0] != '#' || len(name) < 2 {
			return 0, 0
		}
		base, digits := 10, name[1:]
		if digits[0] == 'x' || digits[0] == 'X' {
			base, digits = 16, digits[1:]
		}
		v, err := strconv.ParseUint(digits, base, 32)
		if out, ok := codePoint(v, err); ok {
			return out, end + 2
		}
	case c == '\\':
		if i+6 <= len(s) && s[i+1] == 'u' {
			v, err := strconv.ParseUint(s[i+2:i+6], 16, 16)
			if out, ok := codePoint(v, err); ok {
				return out, 6
			}
			return 0, 0
		}
		if out, n := byteEscapeAt(s, i); n > 0 {
			return out, n
		}
		k := i
		for k < len(s) && s[k] == '\\' {
			k++
		}
		if k-i >= 2 && k < len(s) && (s[k] == '"' || s[k] == '\'') {
			return int(s[k]), k - i + 1
		}
		if k-i == 1 {
			return 0, 0 // one backslash, not of a \u escape
		}
		if _, n := byteEscapeAt(s, k-1); n > 0 || (k < len(s) && s[k] == 'u') {
			// JSON in JSON with \u0022 quotes (.NET's encoder, PHP's
			// JSON_HEX_QUOT), a \x escape in a string inside JSON: the
			// run's last backslash starts an escape, so it is visited.
			return 0, -(k - i - 2)
		}
		return 0, -(k - i - 1)
	case c == '%' && pct:
		if v, ok := urlByte(s, i); ok && urlDecoded(v) {
			return int(v), 3
		}
	case c == '+' && pct:
		// A space in form encoding only next to an escape of the
		// characters around an assignment (q=db_password+%3D+%22…):
		// elsewhere, and next to %2F or %2B (which url.PathEscape writes
		// inside a base64 value that keeps its +), + is as likely the
		// secret's own character.
		if spaceEscapeAt(s, i+1) || (i >= 3 && spaceEscapeAt(s, i-3)) {
			return ' ', 1
		}
	case c == '"' || c == '\'' || c == '`':
		if n := joinAt(s, i); n > 0 {
			return -1, n
		}
	case c >= utf8.RuneSelf:
		r, size := utf8.DecodeRuneInString(s[i:])
		if a, ok := runeASCII[r]; ok {
			return a, size
		}
	}
	return 0, 0
}

// codePoint is the ASCII character decodeEscapes reads for the code point
// of a character reference or \u escape (parsed as v, err): itself, or
// what runeASCII maps it to.
func codePoint(v uint64, err error) (int, bool) {
	if err != nil {
		return 0, false
	}
	if v < utf8.RuneSelf {
		return int(v), true
	}
	a, ok := runeASCII[rune(v)]
	return a, ok
}

// byteEscapeAt decodes \xXX, \NNN (octal, at most \177) and \UXXXXXXXX
// of an ASCII character at s[i] (a backslash): the character and the
// escape's length, or n == 0.
func byteEscapeAt(s string, i int) (out, n int) {
	switch {
	case i+4 <= len(s) && s[i+1] == 'x':
		if v, err := strconv.ParseUint(s[i+2:i+4], 16, 8); err == nil && v < utf8.RuneSelf {
			return int(v), 4
		}
	case i+10 <= len(s) && s[i+1] == 'U':
		v, err := strconv.ParseUint(s[i+2:i+10], 16, 32)
		if out, ok := codePoint(v, err); ok {
			return out, 10
		}
	case i+4 <= len(s) && s[i+1] >= '0' && s[i+1] <= '1' && isOctal(s[i+2]) && isOctal(s[i+3]):
		return int(s[i+1]-'0')<<6 | int(s[i+2]-'0')<<3 | int(s[i+3]-'0'), 4
	}
	return 0, 0
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// maxPiece is the longest string literal joinAt reads on either side: it
// bounds the work per quote.
const maxPiece = 256

// pieceByte are the characters of a string literal joinAt joins: those of
// tokens and keys. A literal with a space or other punctuation is prose,
// a path or a query, not a piece of a secret.
var pieceByte = func() (t [256]bool) {
	for c := 0; c < 256; c++ {
		t[c] = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("+/=_.~-", byte(c)) >= 0
	}
	return t
}()

// joinAt reports, for a quote at s[i] that closes a literal of piece
// bytes, the length of what joins it to the next literal of piece bytes in
// the same quotes: the closing quote, white space, a + or . with white
// space (or none, across a line break), and the opening quote. 0 when there
// is no such join.
func joinAt(s string, i int) int {
	q := s[i]
	k := i - 1
	for k >= 0 && i-k <= maxPiece && pieceByte[s[k]] {
		k--
	}
	if k < 0 || k == i-1 || s[k] != q {
		return 0
	}
	j := skipSpace(s, i+1)
	if j < len(s) && (s[j] == '+' || s[j] == '.') {
		j = skipSpace(s, j+1)
	} else if strings.IndexByte(s[i+1:j], '\n') < 0 {
		// Side by side on one line is how HCL and shell write
		// separate words (resource "aws_db_instance" "main"); Python
		// and C join literals so across lines.
		return 0
	}
	if j >= len(s) || s[j] != q {
		return 0
	}
	e := j + 1
	for e < len(s) && e-j <= maxPiece && pieceByte[s[e]] {
		e++
	}
	if e == j+1 || e >= len(s) || s[e] != q {
		return 0
	}
	return j - i + 1
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}
