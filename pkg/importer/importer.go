// Package importer reads review data from files into the domain's
// ReviewImport: CodeLotse's native review JSON (docs/review-format.md) and
// SARIF 2.1.0 from any analyser. It performs no I/O beyond the bytes it is
// given; storing is pkg/postgres's job, in one transaction.
//
// Every error names the part of the file that is wrong, as a JSON pointer
// (RFC 6901) or a line and column, so an operator can fix it.
package importer

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// invalidf is an import error at pointer ptr.
func invalidf(ptr, format string, args ...any) error {
	if ptr == "" {
		ptr = "/"
	}
	return codelotse.Errorf(codelotse.Invalid, "%s: %s", ptr, fmt.Sprintf(format, args...))
}

// decodeStrict decodes data into v, refusing unknown and repeated fields when
// strict, and turns decoder errors into messages with a line, column and
// JSON pointer. A leading UTF-8 byte order mark (written by some Windows
// tools) is ignored.
func decodeStrict(data []byte, v any, strict bool) error {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	dec := json.NewDecoder(bytes.NewReader(data))
	if strict {
		dec.DisallowUnknownFields()
	}
	err := dec.Decode(v)
	var se *json.SyntaxError
	switch {
	case err == nil:
		if off := skipBytes(data, dec.InputOffset(), " \t\r\n"); off < int64(len(data)) {
			return codelotse.Errorf(codelotse.Invalid, "line %s: unexpected data after the JSON document", lineCol(data, off))
		}
	case errors.As(err, &se):
		// Offset counts the offending byte itself.
		return codelotse.Errorf(codelotse.Invalid, "line %s: invalid JSON: %s", lineCol(data, se.Offset-1), se.Error())
	case errors.Is(err, io.EOF):
		return codelotse.Errorf(codelotse.Invalid, "the file is empty")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return codelotse.Errorf(codelotse.Invalid, "line %s: the file ends before the JSON document does", lineCol(data, int64(len(data))))
	}
	// The decoder reports unknown fields and wrong types without a usable
	// place (no array indices; the offset of the document's end or of the
	// value's end), and it accepts field names in any case and NUL
	// characters, which PostgreSQL refuses to store. Find the first such
	// problem with its pointer and position.
	if p := check(data, reflect.TypeOf(v), strict); p != nil {
		ptr := p.ptr
		if ptr == "" {
			ptr = "/"
		}
		return codelotse.Errorf(codelotse.Invalid, "line %s: %s: %s", lineCol(data, p.off), ptr, p.msg)
	}
	if err != nil {
		return codelotse.Errorf(codelotse.Invalid, "invalid JSON: %v", err)
	}
	return nil
}

// skipBytes returns the offset of the first byte at or after off that is not
// one of chars.
func skipBytes(data []byte, off int64, chars string) int64 {
	for off < int64(len(data)) && strings.IndexByte(chars, data[off]) >= 0 {
		off++
	}
	return off
}

// problem is the first part of a document that does not fit the Go type it
// is decoded into: where it starts, its JSON pointer and what is wrong.
type problem struct {
	ptr string
	off int64
	msg string
}

// walker follows a document token by token along a Go type.
type walker struct {
	data   []byte
	dec    *json.Decoder
	strict bool
}

// check returns the first unknown or repeated field (when strict; names
// must match exactly), value of the wrong type or string holding a NUL in
// data read as type t; nil if there is none or the JSON itself is broken.
func check(data []byte, t reflect.Type, strict bool) *problem {
	w := &walker{data: data, dec: json.NewDecoder(bytes.NewReader(data)), strict: strict}
	w.dec.UseNumber()
	p, _ := w.value("", t)
	return p
}

// value reads one value of type t at pointer ptr.
func (w *walker) value(ptr string, t reflect.Type) (*problem, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	off := skipBytes(w.data, w.dec.InputOffset(), " \t\r\n,:")
	tok, err := w.dec.Token()
	if err != nil {
		return nil, err
	}
	if t.Kind() == reflect.Interface {
		return nil, w.skip(tok)
	}
	got := ""
	switch tok := tok.(type) {
	case nil:
		return nil, nil // null leaves any field at its zero value
	case json.Delim:
		switch {
		case tok == '{' && t.Kind() == reflect.Struct:
			return w.object(ptr, t)
		case tok == '{' && t.Kind() == reflect.Map:
			return w.mapping(ptr, t)
		case tok == '[' && t.Kind() == reflect.Slice:
			return w.array(ptr, t)
		case tok == '{':
			got = "an object"
		default:
			got = "an array"
		}
	case string:
		if t.Kind() == reflect.String {
			if strings.IndexByte(tok, 0) >= 0 {
				return &problem{ptr, off, `must not contain NUL characters (\u0000)`}, nil
			}
			return nil, nil
		}
		if utf8.RuneCountInString(tok) > 40 {
			tok = string([]rune(tok)[:40]) + "…"
		}
		got = fmt.Sprintf("the string %q", tok)
	case json.Number:
		var err error
		switch t.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			_, err = strconv.ParseInt(string(tok), 10, t.Bits())
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			_, err = strconv.ParseUint(string(tok), 10, t.Bits())
		case reflect.Float32, reflect.Float64:
			_, err = strconv.ParseFloat(string(tok), t.Bits())
		default:
			err = errors.New("not a number")
		}
		if err == nil {
			return nil, nil
		}
		got = "the number " + string(tok)
	case bool:
		if t.Kind() == reflect.Bool {
			return nil, nil
		}
		got = strconv.FormatBool(tok)
	}
	return &problem{ptr, off, "must be " + describe(t) + ", not " + got}, nil
}

// object reads the members of an object (its "{" already read) as struct
// type t.
func (w *walker) object(ptr string, t reflect.Type) (*problem, error) {
	seen := map[string]bool{}
	for w.dec.More() {
		off := skipBytes(w.data, w.dec.InputOffset(), " \t\r\n,")
		tok, err := w.dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		if w.strict && seen[key] {
			// encoding/json would silently keep the last value.
			return &problem{ptr, off, fmt.Sprintf("duplicate field %q", key)}, nil
		}
		seen[key] = true
		ft, hint := field(t, key, w.strict)
		if ft == nil {
			if w.strict {
				msg := fmt.Sprintf("unknown field %q", key)
				if hint != "" {
					msg += fmt.Sprintf(" (field names are case-sensitive: %q)", hint)
				}
				return &problem{ptr, off, msg}, nil
			}
			tok, err := w.dec.Token()
			if err != nil {
				return nil, err
			}
			if err := w.skip(tok); err != nil {
				return nil, err
			}
			continue
		}
		if p, err := w.value(ptr+"/"+escapePointer(key), ft); p != nil || err != nil {
			return p, err
		}
	}
	_, err := w.dec.Token()
	return nil, err
}

// mapping reads the members of an object (its "{" already read) as map
// type t.
func (w *walker) mapping(ptr string, t reflect.Type) (*problem, error) {
	for w.dec.More() {
		tok, err := w.dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		if p, err := w.value(ptr+"/"+escapePointer(key), t.Elem()); p != nil || err != nil {
			return p, err
		}
	}
	_, err := w.dec.Token()
	return nil, err
}

// array reads the elements of an array (its "[" already read) as slice
// type t.
func (w *walker) array(ptr string, t reflect.Type) (*problem, error) {
	for i := 0; w.dec.More(); i++ {
		if p, err := w.value(ptr+"/"+strconv.Itoa(i), t.Elem()); p != nil || err != nil {
			return p, err
		}
	}
	_, err := w.dec.Token()
	return nil, err
}

// skip reads the rest of the value that starts with tok.
func (w *walker) skip(tok json.Token) error {
	if d, ok := tok.(json.Delim); !ok || d == '}' || d == ']' {
		return nil
	}
	for depth := 1; depth > 0; {
		tok, err := w.dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}

// field returns the type of the field of struct type t that key names, as
// encoding/json matches it: the exact name, else (unless exact) in any
// case. When exact and only another case matches, hint is that field's name.
func field(t reflect.Type, key string, exact bool) (ft reflect.Type, hint string) {
	var folded reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name := f.Name
		if tag, ok := f.Tag.Lookup("json"); ok {
			if tag == "-" {
				continue
			}
			if n, _, _ := strings.Cut(tag, ","); n != "" {
				name = n
			}
		}
		if name == key {
			return f.Type, ""
		}
		if folded == nil && strings.EqualFold(name, key) {
			folded, hint = f.Type, name
		}
	}
	if exact {
		return nil, hint
	}
	return folded, ""
}

// describe names what a JSON value must be to fit Go type t.
func describe(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}

// escapePointer escapes a member name for a JSON pointer (RFC 6901).
func escapePointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

// lineCol turns a byte offset into "line:column" (both 1-based; the column
// counts characters, not bytes).
func lineCol(data []byte, off int64) string {
	off = max(0, min(off, int64(len(data))))
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	col := 1 + utf8.RuneCount(data[bytes.LastIndexByte(data[:off], '\n')+1:off])
	return strconv.Itoa(line) + ":" + strconv.Itoa(col)
}

// Fingerprint identifies a finding within a review when the source gives
// none: the same rule at the same place with the same title is the same
// finding on re-import.
func Fingerprint(rule, path string, start, end *int, title string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%d\x00%d\x00%s", rule, path, deref(start), deref(end), title)
	return hex.EncodeToString(h.Sum(nil))[:32]
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// maxNumber bounds line and pull request numbers: they are stored as
// PostgreSQL integers.
const maxNumber = math.MaxInt32

// checkLines validates a line range at ptr.
func checkLines(ptr string, start, end *int) error {
	if start != nil && (*start < 1 || *start > maxNumber) {
		return invalidf(ptr+"/start_line", "must be 1 to %d", maxNumber)
	}
	if end != nil && (*end < 1 || *end > maxNumber) {
		return invalidf(ptr+"/end_line", "must be 1 to %d", maxNumber)
	}
	if start != nil && end != nil && *end < *start {
		return invalidf(ptr+"/end_line", "must not be before start_line")
	}
	if start == nil && end != nil {
		return invalidf(ptr+"/start_line", "is required when end_line is given")
	}
	return nil
}

// cleanPath normalises a repository-relative path: forward slashes, no
// leading "./" or "/", no empty or "." segments, no "..".
func cleanPath(ptr, p string) (string, error) {
	p = strings.ReplaceAll(p, "\\", "/")
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return "", invalidf(ptr, "path must stay inside the repository, not %q", p)
		}
	}
	if len(p) > 4096 {
		return "", invalidf(ptr, "path is longer than 4096 characters")
	}
	if p == "" {
		return "", nil
	}
	return strings.TrimPrefix(path.Clean("/"+p), "/"), nil
}
