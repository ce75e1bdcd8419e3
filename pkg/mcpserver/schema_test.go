package mcpserver

import (
	"reflect"
	"testing"

	"github.com/codelotse/codelotse/pkg/codeindex"
)

// TestArgumentBoundsMatchTheEngines: a bound that a tag declares and the
// engine behind the tool also knows is the same number in both.
func TestArgumentBoundsMatchTheEngines(t *testing.T) {
	for _, f := range argSpec(reflect.TypeFor[searchCodeArgs]()) {
		if f.name == "context" && (f.maximum == nil || *f.maximum != codeindex.MaxContext) {
			t.Errorf("search_code context maximum %v, codeindex.MaxContext %d", f.maximum, codeindex.MaxContext)
		}
	}
}

// TestTagsAreReadStrictly: a tag the generator cannot honour fails when the
// package is initialised, never by producing a schema that says less than
// the check does.
func TestTagsAreReadStrictly(t *testing.T) {
	for name, typ := range map[string]reflect.Type{
		"unknown keyword": reflect.TypeFor[struct {
			A string `json:"a" schema:"pattern=x"`
		}](),
		"required int that is not a pointer": reflect.TypeFor[struct {
			A int `json:"a" schema:"required"`
		}](),
		"clamp without default": reflect.TypeFor[struct {
			A int `json:"a" schema:"minimum=1,maximum=2,clamp"`
		}](),
		"default on a pointer": reflect.TypeFor[struct {
			A *int `json:"a" schema:"default=1"`
		}](),
		"unknown type": reflect.TypeFor[struct {
			A float64 `json:"a"`
		}](),
		"no json name": reflect.TypeFor[struct {
			A string
		}](),
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: accepted", name)
				}
			}()
			argSpec(typ)
		}()
	}
}
