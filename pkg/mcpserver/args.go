package mcpserver

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// decodeArgs decodes tool arguments strictly: unknown fields and wrong types
// are in-band errors that name the argument, so an agent can correct itself.
func decodeArgs(raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		raw = json.RawMessage("{}")
	}
	if err := checkArgValues(raw); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te):
			return codelotse.Errorf(codelotse.Invalid, "Invalid argument %q: expected %s.", te.Field, jsonKind(te.Type.Kind().String()))
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return codelotse.Errorf(codelotse.Invalid, "Unknown argument %s.", strings.TrimPrefix(err.Error(), "json: unknown field "))
		default:
			return codelotse.Errorf(codelotse.Invalid, "Arguments must be a JSON object.")
		}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return codelotse.Errorf(codelotse.Invalid, "Arguments must be a single JSON object.")
	}
	return nil
}

// idArgs are the arguments that hold 64-bit database ids; every other
// integer argument is stored or compared as a PostgreSQL integer (int4).
var idArgs = map[string]bool{"repository": true, "review_id": true, "finding_ids": true}

// checkArgValues refuses argument values that PostgreSQL would refuse
// later as an internal error: a NUL character in any string (text cannot
// hold one) and integers beyond int4 outside the id arguments. Both are
// the caller's mistake and get an in-band message that names the argument.
func checkArgValues(raw json.RawMessage) error {
	if !mayHoldBadValue(raw) {
		return nil // the common case: no second decode on the request path
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var args map[string]any
	if dec.Decode(&args) != nil {
		return nil // not an object: the typed decode says so
	}
	var walk func(name string, v any) error
	walk = func(name string, v any) error {
		switch x := v.(type) {
		case string:
			if strings.ContainsRune(x, 0) {
				return codelotse.Errorf(codelotse.Invalid, "Invalid argument %q: text cannot contain NUL (\\u0000) characters.", name)
			}
		case json.Number:
			n, err := x.Int64()
			if err != nil {
				if _, ferr := x.Float64(); ferr == nil && !strings.ContainsAny(x.String(), ".eE") {
					return codelotse.Errorf(codelotse.Invalid, "Invalid argument %q: %s is out of range.", name, x)
				}
				return nil // a fraction: the typed decode says so
			}
			if !idArgs[name] && (n > math.MaxInt32 || n < math.MinInt32) {
				return codelotse.Errorf(codelotse.Invalid, "Invalid argument %q: %d is out of range (at most %d).", name, n, math.MaxInt32)
			}
		case []any:
			for _, e := range x {
				if err := walk(name, e); err != nil {
					return err
				}
			}
		case map[string]any:
			for k, e := range x {
				if strings.ContainsRune(k, 0) {
					return codelotse.Errorf(codelotse.Invalid, "Argument names cannot contain NUL characters.")
				}
				if err := walk(name, e); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for k, v := range args {
		if strings.ContainsRune(k, 0) {
			return codelotse.Errorf(codelotse.Invalid, "Argument names cannot contain NUL characters.")
		}
		if err := walk(k, v); err != nil {
			return err
		}
	}
	return nil
}

// mayHoldBadValue is checkArgValues' prefilter on the raw bytes. A NUL can
// reach a JSON string only as the escape \u0000 (raw control characters are
// invalid JSON), and an integer beyond int4 needs at least ten digits in a
// row; arguments with neither are accepted without decoding them twice.
func mayHoldBadValue(raw []byte) bool {
	if bytes.Contains(raw, []byte(`\u0000`)) {
		return true
	}
	run := 0
	for _, c := range raw {
		if c >= '0' && c <= '9' {
			if run++; run >= 10 {
				return true
			}
		} else {
			run = 0
		}
	}
	return false
}

func jsonKind(k string) string {
	switch k {
	case "int", "int32", "int64", "float64":
		return "a number"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "slice":
		return "an array"
	}
	return k
}

// maxCursorBytes bounds a cursor before it is decoded: a real one is a few
// ids and a MAC, well under 200 bytes.
const maxCursorBytes = 512

// encodeCursor makes an opaque cursor: the tool's position (ids only, never
// names or content, so a cursor cannot carry text out of a redacted answer)
// and an HMAC under the server's cursor key over the position, the tool,
// the principal (tenant, user, token) and bind, a digest of the arguments
// the cursor continues. Another token, other arguments or an edited
// position fail the MAC.
func (s *session) encodeCursor(tool, bind string, pos any) string {
	b, _ := json.Marshal(pos)
	p := base64.RawURLEncoding.EncodeToString(b)
	return p + "." + base64.RawURLEncoding.EncodeToString(s.cursorMAC(tool, bind, p))
}

// decodeCursor checks a cursor made by encodeCursor for the same tool,
// principal and arguments and reads its position. Every failure is the
// same in-band invalid-argument error.
func (s *session) decodeCursor(tool, bind, c string, pos any) error {
	bad := codelotse.Errorf(codelotse.Invalid, "Invalid cursor: pass next_cursor from a previous %s result unchanged, with the same arguments, or omit it to start over.", tool)
	if len(c) > maxCursorBytes {
		return bad
	}
	p, mac, ok := strings.Cut(c, ".")
	if !ok {
		return bad
	}
	got, err := base64.RawURLEncoding.DecodeString(mac)
	if err != nil || !hmac.Equal(got, s.cursorMAC(tool, bind, p)) {
		return bad
	}
	b, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil {
		return bad
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(pos); err != nil {
		return bad
	}
	return nil
}

// cursorMAC is the truncated HMAC-SHA256 of a cursor. Every field is
// length-prefixed so that no two inputs share an encoding.
func (s *session) cursorMAC(tool, bind, payload string) []byte {
	m := hmac.New(sha256.New, s.deps.cursorKey())
	for _, f := range []string{"codelotse-cursor-v1", tool, s.principal.TenantID, s.principal.UserID, s.principal.TokenID, bind, payload} {
		fmt.Fprintf(m, "%d:%s", len(f), f)
	}
	return m.Sum(nil)[:16]
}

var (
	processKeyOnce sync.Once
	processKey     []byte
)

// cursorKey is Deps.CursorKey, or a random key of this process when none is
// configured (tests and tools that build Deps by hand). The programs in
// apps/ always configure one shared by every replica (docs/decisions.md,
// "Issue 9"), because a per-process key would break paging behind a load
// balancer.
func (d *Deps) cursorKey() []byte {
	if len(d.CursorKey) > 0 {
		return d.CursorKey
	}
	processKeyOnce.Do(func() {
		processKey = make([]byte, 32)
		if _, err := rand.Read(processKey); err != nil {
			panic(err) // crypto/rand never fails on supported platforms
		}
	})
	return processKey
}

// repositoryArg reads a repository argument that may be a full name or a
// numeric id (agents send both as strings and as numbers).
func repositoryArg(raw repoRef) (ref string, given bool, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", false, nil
	}
	var s string
	if json.Unmarshal([]byte(raw), &s) == nil {
		if strings.TrimSpace(s) == "" {
			return "", false, codelotse.Errorf(codelotse.Invalid, "Invalid argument \"repository\": pass an id or owner/name.")
		}
		return s, true, nil
	}
	var n json.Number
	if json.Unmarshal([]byte(raw), &n) == nil {
		if _, err := n.Int64(); err == nil {
			return n.String(), true, nil
		}
	}
	return "", false, codelotse.Errorf(codelotse.Invalid, "Invalid argument \"repository\": pass an id or owner/name.")
}
