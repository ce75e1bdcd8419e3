package pgtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// SearchCodeQuery is one search_code case of the benchmarks: repo scopes it
// to one repository (a 1-based index of the fixture's copies; 0: all) and
// path to a prefix.
type SearchCodeQuery struct {
	Name, Query string
	Regex       bool
	Repo        int
	Path        string
}

// SearchCodeQueries are realistic agent searches over a Go source tree —
// rare and common literals, case-insensitive text, regular expressions with
// and without good literals — and the cliffs of issue 11 (very common
// literals, one repository of several, path prefixes narrow and broad, a
// regex whose literal is common). pkg/mcpserver's and pkg/postgres's
// benchmarks both run them, so their tables compare.
var SearchCodeQueries = []SearchCodeQuery{
	{"rare-literal", "TestSeekNoStrictOrdering", false, 0, ""},
	{"symbol", "func NewRequestWithContext", false, 0, ""},
	{"common-literal", "context.Context", false, 0, ""},
	{"ci-text", "deadline exceeded", false, 0, ""},
	{"regex-method", `func \(\w+ \*Reader\) ReadRune\(`, true, 0, ""},
	{"regex-alternation", `(ErrShortWrite|ErrShortBuffer)`, true, 0, ""},
	{"very-common-err", "err", false, 0, ""},
	{"very-common-return", "return", false, 0, ""},
	{"common-literal-one-repo", "context.Context", false, 3, ""},
	{"common-literal-path", "context.Context", false, 0, "net/http/"},
	{"regex-handler", `func \w+Handler\(`, true, 0, ""},
	// Path prefixes of many files (each a few percent of the tree), where
	// the literal is very common, absent, or rare though its trigrams are
	// common: they walked the whole tenant (or every file's chunks) until
	// the files' spans of migration 0066.
	{"very-common-err-path", "err", false, 0, "net/"},
	{"ci-text-path", "deadline exceeded", false, 0, "math/"},
	{"common-literal-rare-path", "context.Context", false, 0, "go/"},
}

// CodeTree is the source tree the search benchmarks index: BENCH_CODE_TREE,
// or the Go toolchain's own src/.
func CodeTree(tb testing.TB) string {
	tb.Helper()
	if tree := os.Getenv("BENCH_CODE_TREE"); tree != "" {
		return tree
	}
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		tb.Fatalf("go env GOROOT: %v", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "src")
}
