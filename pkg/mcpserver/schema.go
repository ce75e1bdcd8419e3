package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/shape"
)

// A tool's arguments are a struct whose field tags declare every
// constraint once: the input schema that tools/list shows is generated
// from them, and the same tags check and complete the decoded arguments
// (docs/decisions.md, "Issue 10"). Nothing else re-checks what a tag says.
//
//	json:"name"    the argument's name (every field has one)
//	desc:"..."     its description
//	schema:"..."   comma-separated: required, minLength=N, maxLength=N,
//	               minimum=N, maximum=N, minItems=N, maxItems=N,
//	               enum=a|b|c, default=V, clamp
//
// clamp makes minimum and maximum bounds that a value is moved into
// rather than refused (docs/tools.md: "limit: 500 → 100"); default is the
// value an absent argument takes. The schema is written in a fixed keyword
// order (type, items, lengths, bounds, item counts, enum, default,
// description) so that the golden tools/list files read like hand-written
// schemas and change only when a tag does.
//
// Types: string, bool, int and int64 (pointers for optional arguments
// without a default, so absence can be told from zero), []int64, and
// repoRef for an id-or-name repository.

// repoRef is a repository argument as sent: a full name or a numeric id,
// as a string or a number; repositoryArg reads it. Its raw bytes are kept
// because cursors are bound to them.
type repoRef json.RawMessage

func (r *repoRef) UnmarshalJSON(b []byte) error {
	*r = append((*r)[:0], b...)
	return nil
}

// argField is one argument: its field index and its declared constraints.
type argField struct {
	index                      int
	name, desc, typ            string // typ: JSON Schema type, or "" for repoRef
	required, clamp            bool
	minLen, maxLen             *int
	minimum, maximum           *int64
	minItems, maxItems         *int
	enum                       []string
	def                        string // default as written in the tag ("" when none)
	hasDef                     bool
	kind                       reflect.Kind // of the field, pointers dereferenced
	pointer, isRepo, isIntList bool
}

// argSpec reads the argument fields of struct type t; a tag it cannot read
// is a programming error, found when the package is initialised.
func argSpec(t reflect.Type) []argField {
	var out []argField
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			panic(fmt.Sprintf("mcpserver: %s.%s has no json name", t, sf.Name))
		}
		f := argField{index: i, name: name, desc: sf.Tag.Get("desc")}
		ft := sf.Type
		if ft.Kind() == reflect.Pointer {
			f.pointer, ft = true, ft.Elem()
		}
		f.kind = ft.Kind()
		switch {
		case ft == reflect.TypeFor[repoRef]():
			f.isRepo = true
		case ft.Kind() == reflect.String:
			f.typ = "string"
		case ft.Kind() == reflect.Bool:
			f.typ = "boolean"
		case ft.Kind() == reflect.Int || ft.Kind() == reflect.Int64:
			f.typ = "integer"
		case ft == reflect.TypeFor[[]int64]():
			f.typ, f.isIntList = "array", true
		default:
			panic(fmt.Sprintf("mcpserver: %s.%s has an argument type the schema generator does not know: %s", t, sf.Name, sf.Type))
		}
		for _, kv := range strings.Split(sf.Tag.Get("schema"), ",") {
			if kv == "" {
				continue
			}
			k, v, _ := strings.Cut(kv, "=")
			num := func() int64 {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					panic(fmt.Sprintf("mcpserver: %s.%s: %s needs a number: %q", t, sf.Name, k, v))
				}
				return n
			}
			small := func() *int { n := int(num()); return &n }
			switch k {
			case "required":
				f.required = true
			case "clamp":
				f.clamp = true
			case "minLength":
				f.minLen = small()
			case "maxLength":
				f.maxLen = small()
			case "minimum":
				f.minimum = ptr(num())
			case "maximum":
				f.maximum = ptr(num())
			case "minItems":
				f.minItems = small()
			case "maxItems":
				f.maxItems = small()
			case "enum":
				f.enum = strings.Split(v, "|")
			case "default":
				f.def, f.hasDef = v, true
			default:
				panic(fmt.Sprintf("mcpserver: %s.%s: unknown schema keyword %q", t, sf.Name, k))
			}
		}
		if f.hasDef && f.pointer {
			panic(fmt.Sprintf("mcpserver: %s.%s: an argument with a default is not a pointer", t, sf.Name))
		}
		if f.required && !f.pointer && !f.isRepo && !f.isIntList && f.kind != reflect.String {
			panic(fmt.Sprintf("mcpserver: %s.%s: a required number or boolean is a pointer, so that absence shows", t, sf.Name))
		}
		if f.clamp && (f.minimum == nil || f.maximum == nil || !f.hasDef) {
			panic(fmt.Sprintf("mcpserver: %s.%s: clamp needs minimum, maximum and default", t, sf.Name))
		}
		out = append(out, f)
	}
	return out
}

// inputSchema writes the JSON Schema of the arguments.
func inputSchema(fields []argField) json.RawMessage {
	var b bytes.Buffer
	b.WriteString(`{"type":"object","properties":{`)
	var required []string
	for i, f := range fields {
		if i > 0 {
			b.WriteByte(',')
		}
		writeJSON(&b, f.name)
		b.WriteString(`:{"type":`)
		switch {
		case f.isRepo:
			b.WriteString(`["string","integer"]`)
		default:
			writeJSON(&b, f.typ)
		}
		if f.isIntList {
			b.WriteString(`,"items":{"type":"integer"}`)
		}
		keyword := func(k string, v any) {
			if reflect.ValueOf(v).IsNil() {
				return
			}
			b.WriteString(`,"` + k + `":`)
			writeJSON(&b, reflect.ValueOf(v).Elem().Interface())
		}
		keyword("minLength", f.minLen)
		keyword("maxLength", f.maxLen)
		keyword("minimum", f.minimum)
		keyword("maximum", f.maximum)
		keyword("minItems", f.minItems)
		keyword("maxItems", f.maxItems)
		if f.enum != nil {
			b.WriteString(`,"enum":`)
			writeJSON(&b, f.enum)
		}
		if f.hasDef {
			b.WriteString(`,"default":`)
			if f.typ == "string" {
				writeJSON(&b, f.def)
			} else {
				b.WriteString(f.def) // a number or a boolean, checked by defaultValue
			}
		}
		if f.desc != "" {
			b.WriteString(`,"description":`)
			writeJSON(&b, f.desc)
		}
		b.WriteByte('}')
		if f.required {
			required = append(required, f.name)
		}
	}
	b.WriteByte('}')
	if len(required) > 0 {
		b.WriteString(`,"required":`)
		writeJSON(&b, required)
	}
	b.WriteString(`,"additionalProperties":false}`)
	return b.Bytes()
}

func writeJSON(b *bytes.Buffer, v any) {
	enc, err := json.Marshal(v)
	if err != nil {
		panic(err) // strings, numbers and string lists always marshal
	}
	b.Write(enc)
}

// defaultValue sets field v to f's default.
func (f argField) defaultValue(v reflect.Value) {
	switch f.kind {
	case reflect.String:
		v.SetString(f.def)
	case reflect.Bool:
		b, err := strconv.ParseBool(f.def)
		if err != nil {
			panic(fmt.Sprintf("mcpserver: %s: default %q is not a boolean", f.name, f.def))
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(f.def, 10, 64)
		if err != nil {
			panic(fmt.Sprintf("mcpserver: %s: default %q is not an integer", f.name, f.def))
		}
		v.SetInt(n)
	default:
		panic(fmt.Sprintf("mcpserver: %s: no default for this type", f.name))
	}
}

// present tells whether the field holds an argument: a pointer, list or
// repository that was sent (JSON null counts as absent) or a non-empty
// string. Numbers and booleans that are not pointers always hold one: the
// value sent, or the default set before decoding.
func (f argField) present(v reflect.Value) bool {
	switch {
	case f.pointer, f.isIntList:
		return !v.IsNil()
	case f.isRepo:
		raw := v.Bytes()
		return len(raw) > 0 && string(raw) != "null"
	case f.kind == reflect.String:
		return v.Len() > 0
	}
	return true
}

// check applies the declared constraints to decoded arguments in order
// of declaration: a missing required argument or a value outside the
// schema is an in-band invalid-argument error that names the argument, an
// empty string with a default takes it, and a clamped bound moves the
// value into range.
func check(fields []argField, args reflect.Value) error {
	for _, f := range fields {
		v := args.Field(f.index)
		if !f.present(v) {
			if f.required {
				return codelotse.Errorf(codelotse.Invalid, "Missing required argument %q.", f.name)
			}
			if f.hasDef {
				f.defaultValue(v)
			}
			continue
		}
		if f.pointer {
			v = v.Elem()
		}
		switch {
		case f.kind == reflect.String:
			s := v.String()
			n := utf8.RuneCountInString(s)
			if f.minLen != nil && n < *f.minLen {
				return codelotse.Errorf(codelotse.Invalid, "%s must be at least %d characters long.", f.name, *f.minLen)
			}
			if f.maxLen != nil && n > *f.maxLen {
				return codelotse.Errorf(codelotse.Invalid, "%s is longer than %d characters.", f.name, *f.maxLen)
			}
			if f.enum != nil && !contains(f.enum, s) {
				return codelotse.Errorf(codelotse.Invalid, "%s must be one of %s.", f.name, strings.Join(f.enum, ", "))
			}
		case f.kind == reflect.Int || f.kind == reflect.Int64:
			n := v.Int()
			if f.clamp {
				v.SetInt(max(*f.minimum, min(*f.maximum, n)))
				continue
			}
			if f.minimum != nil && n < *f.minimum {
				return codelotse.Errorf(codelotse.Invalid, "%s must be %d or more.", f.name, *f.minimum)
			}
			if f.maximum != nil && n > *f.maximum {
				return codelotse.Errorf(codelotse.Invalid, "%s must be %d or less.", f.name, *f.maximum)
			}
		case f.isIntList:
			n := v.Len()
			if (f.minItems != nil && n < *f.minItems) || (f.maxItems != nil && n > *f.maxItems) {
				return codelotse.Errorf(codelotse.Invalid, "%s must list %s ids, or be omitted.", f.name, itemRange(f.minItems, f.maxItems))
			}
		}
	}
	return nil
}

func itemRange(lo, hi *int) string {
	switch {
	case lo != nil && hi != nil:
		return fmt.Sprintf("%d to %d", *lo, *hi)
	case lo != nil:
		return fmt.Sprintf("at least %d", *lo)
	default:
		return fmt.Sprintf("at most %d", *hi)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// newTool declares a tool whose arguments are the struct A: its input
// schema is generated from A's tags, and its handler receives arguments
// that are decoded strictly and checked against the same tags.
func newTool[A any](name, title, description string, run func(context.Context, *session, A) (shape.Doc, error)) tool {
	fields := argSpec(reflect.TypeFor[A]())
	return tool{
		name: name, title: title, description: description,
		schema: inputSchema(fields),
		run: func(ctx context.Context, s *session, raw json.RawMessage) (shape.Doc, error) {
			var in A
			args := reflect.ValueOf(&in).Elem()
			// Defaults go in before decoding, so that a value sent
			// replaces them and an absent one (or null) keeps them: this
			// tells "limit absent" (the default) from "context: 0" without
			// a second decode.
			for _, f := range fields {
				if f.hasDef {
					f.defaultValue(args.Field(f.index))
				}
			}
			if err := decodeArgs(raw, &in); err != nil {
				return shape.Doc{}, err
			}
			if err := check(fields, args); err != nil {
				return shape.Doc{}, err
			}
			return run(ctx, s, in)
		},
	}
}
