package ingest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// storeFuncs are the pkg/postgres functions that write agent-readable
// text. Only this package may call them (and tests, which plant raw rows
// on purpose).
var storeFuncs = map[string]bool{
	"ReplaceIndex": true, "ImportReview": true, "UpsertRule": true, "AddRepository": true,
	"UpsertGitHubRepository": true, "UpdateStoredRow": true, "ReplaceStoredFile": true,
	"ReplacePullIndex": true, "UpdateIndex": true, "RewriteStoredText": true,
}

// TestOnlyIngestWritesAgentText enforces the single ingestion path: no
// shipped code outside pkg/ingest (and pkg/postgres, which defines them)
// calls a function that stores agent-readable text.
func TestOnlyIngestWritesAgentText(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "e2e", "node_modules", ".git", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		dir := filepath.ToSlash(filepath.Dir(rel))
		if dir == "pkg/ingest" || dir == "pkg/postgres" {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "postgres" && storeFuncs[sel.Sel.Name] {
				t.Errorf("%s: calls postgres.%s directly; store agent-readable text through pkg/ingest", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("only %d files checked; is the walk rooted at the module?", checked)
	}
}
