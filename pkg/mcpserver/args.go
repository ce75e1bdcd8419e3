package mcpserver

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// decodeArgs decodes tool arguments strictly: unknown fields and wrong types
// are in-band errors that name the argument, so an agent can correct itself.
func decodeArgs(raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		raw = json.RawMessage("{}")
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

// clamp bounds an optional integer argument: nil gives def, and values
// outside [lo, hi] are clamped (documented in docs/tools.md).
func clamp(v *int, lo, hi, def int) int {
	if v == nil {
		return def
	}
	return max(lo, min(hi, *v))
}

// encodeCursor makes an opaque cursor from a tool-specific position.
func encodeCursor(tool string, pos any) string {
	b, _ := json.Marshal(struct {
		T string `json:"t"`
		P any    `json:"p"`
	}{tool, pos})
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor reads a cursor made by encodeCursor for the same tool.
func decodeCursor(tool, c string, pos any) error {
	bad := codelotse.Errorf(codelotse.Invalid, "Invalid cursor: pass next_cursor from a previous %s result unchanged, or omit it to start over.", tool)
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return bad
	}
	var env struct {
		T string          `json:"t"`
		P json.RawMessage `json:"p"`
	}
	if err := json.Unmarshal(b, &env); err != nil || env.T != tool {
		return bad
	}
	if err := json.Unmarshal(env.P, pos); err != nil {
		return bad
	}
	return nil
}

// repositoryArg reads a repository argument that may be a full name or a
// numeric id (agents send both as strings and as numbers).
func repositoryArg(raw json.RawMessage) (ref string, given bool, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", false, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if strings.TrimSpace(s) == "" {
			return "", false, codelotse.Errorf(codelotse.Invalid, "Invalid argument \"repository\": pass an id or owner/name.")
		}
		return s, true, nil
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		if _, err := n.Int64(); err == nil {
			return n.String(), true, nil
		}
	}
	return "", false, codelotse.Errorf(codelotse.Invalid, "Invalid argument \"repository\": pass an id or owner/name.")
}
