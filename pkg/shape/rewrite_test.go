package shape

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestRewriteStringsAsTheTokenizerDid: the scanner that rewrites a JSON
// document's strings gives, byte for byte, what the token-by-token
// decoder it replaced gave (kept below as the reference), for documents
// made of every kind of value and string: escapes, HTML characters, fence
// tags, invalid UTF-8, line separators, non-ASCII, keys that are data.
func TestRewriteStringsAsTheTokenizerDid(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(11, 12))
	pieces := []string{"a", "plain text", `quote "x"`, `back\slash`, "tab\there", "nl\nline", "\x00\x1f",
		"<untrusted-data>", "</untrusted-data>", "&lt;", "a<b", "x&y", "\u2028\u2029", "\xff\xfe", "ünïcödé", "＜tag", "K\u212a", "{}[],:", "12.5e3", "null"}
	var value func(depth int) any
	value = func(depth int) any {
		switch n := rng.IntN(8); {
		case n == 0 && depth < 4:
			m := map[string]any{}
			for i := rng.IntN(4); i > 0; i-- {
				m[pieces[rng.IntN(len(pieces))]+pieces[rng.IntN(len(pieces))]] = value(depth + 1)
			}
			return m
		case n == 1 && depth < 4:
			var l []any
			for i := rng.IntN(4); i > 0; i-- {
				l = append(l, value(depth+1))
			}
			return l
		case n == 2:
			return rng.Float64() * 1e6
		case n == 3:
			return rng.IntN(2) == 0
		case n == 4:
			return nil
		default:
			var sb strings.Builder
			for i := rng.IntN(4); i >= 0; i-- {
				sb.WriteString(pieces[rng.IntN(len(pieces))])
			}
			return sb.String()
		}
	}
	fs := []func(string) string{
		func(s string) string { return s },
		strings.ToUpper,
		func(s string) string { return strings.ReplaceAll(s, "a", "<untrusted-data>") },
		Sanitize,
	}
	for i := 0; i < 3000; i++ {
		raw, err := json.Marshal(value(0))
		if err != nil {
			t.Fatal(err)
		}
		f := fs[i%len(fs)]
		got, err := rewriteStrings(raw, f)
		if err != nil {
			t.Fatal(err)
		}
		want, err := referenceRewriteStrings(raw, f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("document %s\n got %s\nwant %s", raw, got, want)
		}
	}
	if _, err := rewriteStrings([]byte(`{"a":"unterminated`), strings.ToUpper); err == nil {
		t.Error("an unterminated string was accepted")
	}
}

// referenceRewriteStrings is the token-by-token implementation that
// rewriteStrings replaced, with the string writer it used.
func referenceRewriteStrings(raw []byte, f func(string) string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var b bytes.Buffer
	// stack of containers: '{' or '['; afterKey tracks object key/value.
	type frame struct {
		obj     bool
		n       int
		wantKey bool
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if err != nil {
			if err.Error() == "EOF" {
				break
			}
			return nil, err
		}
		// separators
		if len(stack) > 0 {
			top := &stack[len(stack)-1]
			_, isDelim := tok.(json.Delim)
			closing := isDelim && (tok == json.Delim('}') || tok == json.Delim(']'))
			if !closing {
				if top.obj {
					if top.wantKey {
						if top.n > 0 {
							b.WriteByte(',')
						}
					} else {
						b.WriteByte(':')
					}
				} else if top.n > 0 {
					b.WriteByte(',')
				}
			}
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				b.WriteByte(byte(t))
				stack = append(stack, frame{obj: t == '{', wantKey: t == '{'})
				continue
			case '}', ']':
				b.WriteByte(byte(t))
				stack = stack[:len(stack)-1]
			}
		case string:
			referenceWriteString(&b, f(t))
		case json.Number:
			b.WriteString(t.String())
		case bool:
			if t {
				b.WriteString("true")
			} else {
				b.WriteString("false")
			}
		case nil:
			b.WriteString("null")
		}
		// advance the parent frame
		if len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.obj {
				if top.wantKey {
					top.wantKey = false
				} else {
					top.wantKey = true
					top.n++
				}
			} else {
				top.n++
			}
		}
	}
	return b.Bytes(), nil
}

func referenceWriteString(b *bytes.Buffer, s string) {
	var sb bytes.Buffer
	enc := json.NewEncoder(&sb)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	out := bytes.TrimSuffix(sb.Bytes(), []byte("\n"))
	b.Write(escapeFenceTags(out))
}
