package postgres

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestErrorsCarryOperation keeps every error this package returns labelled
// with the operation that failed: each exported function or method whose
// last result is an error names that result err and starts with
// `defer wrap(&err, "postgres.<its name>")`. With that one line, no
// `return …, err` in its body can hand a bare database error to a caller,
// and a new function without it fails here rather than in a log that says
// only "no rows in result set".
func TestErrorsCarryOperation(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || !fn.Name.IsExported() || fn.Body == nil || !returnsError(fn) {
				continue
			}
			checked++
			if _, ok := wrapsInline[fn.Name.Name]; ok {
				continue
			}
			if msg := wrapProblem(fn); msg != "" {
				t.Errorf("%s: %s %s", fset.Position(fn.Pos()), fn.Name.Name, msg)
			}
		}
	}
	// The package has well over a hundred such functions; a count near zero
	// means the walk above stopped seeing them, not that all is well.
	if checked < 100 {
		t.Fatalf("checked only %d exported functions returning an error", checked)
	}
}

// wrapsInline are the functions that wrap their own failures in place
// instead of with the deferred wrap, and why.
var wrapsInline = map[string]string{
	"InTenant": "returns fn's error as fn returned it; begin, tenant setting and commit failures are wrapped as postgres.InTenant",
}

func returnsError(fn *ast.FuncDecl) bool {
	res := fn.Type.Results
	if res == nil || len(res.List) == 0 {
		return false
	}
	id, ok := res.List[len(res.List)-1].Type.(*ast.Ident)
	return ok && id.Name == "error"
}

// wrapProblem says what is wrong with fn's error wrapping, "" when nothing.
func wrapProblem(fn *ast.FuncDecl) string {
	last := fn.Type.Results.List[len(fn.Type.Results.List)-1]
	if len(last.Names) == 0 || last.Names[len(last.Names)-1].Name != "err" {
		return "must name its error result err (for the deferred wrap)"
	}
	want := `defer wrap(&err, "postgres.` + fn.Name.Name + `")`
	if len(fn.Body.List) == 0 {
		return "must start with " + want
	}
	def, ok := fn.Body.List[0].(*ast.DeferStmt)
	if !ok {
		return "must start with " + want
	}
	call := def.Call
	if id, ok := call.Fun.(*ast.Ident); !ok || id.Name != "wrap" || len(call.Args) != 2 {
		return "must start with " + want
	}
	if u, ok := call.Args[0].(*ast.UnaryExpr); !ok || u.Op != token.AND || !isIdent(u.X, "err") {
		return "must start with " + want
	}
	lit, ok := call.Args[1].(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "must start with " + want
	}
	if op, _ := strconv.Unquote(lit.Value); op != "postgres."+fn.Name.Name {
		return "wraps its errors as " + lit.Value + "; want " + want
	}
	return ""
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}
