//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// secret is one planted secret of the shared corpus.
type secret struct {
	Name   string `json:"name"`
	Secret string `json:"secret"`
	Line   string `json:"line"`
}

// loadSecrets reads the shared planted-secret corpus (../shared/testdata
// beside the checkout), falling back to the copy in testdata/.
func loadSecrets(t *testing.T) []secret {
	t.Helper()
	var data []byte
	var err error
	for _, p := range []string{"../../shared/testdata/secrets.json", "../testdata/secrets.json"} {
		if data, err = os.ReadFile(p); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("no planted-secret corpus found: %v", err)
	}
	var out []secret
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("empty secret corpus")
	}
	return out
}

// gitRepo creates a git repository in a temporary directory with files
// (path → content) committed, and returns its directory and commit.
func gitRepo(t *testing.T, files map[string]string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	run := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=e2e", "GIT_AUTHOR_EMAIL=e2e@example.test",
			"GIT_COMMITTER_NAME=e2e", "GIT_COMMITTER_EMAIL=e2e@example.test", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run("init", "-q", "-b", "main")
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run("add", "-A")
	run("commit", "-q", "-m", "fixture")
	return dir, run("rev-parse", "HEAD")
}

// goFile returns a plausible Go source file of n lines, with marker on line
// markerLine (0: none).
func goFile(pkg string, n, markerLine int, marker string) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		switch {
		case i == 1:
			fmt.Fprintf(&b, "package %s\n", pkg)
		case i == markerLine:
			b.WriteString(marker + "\n")
		case i%10 == 0:
			fmt.Fprintf(&b, "func helper%d(x int) int { return x * %d }\n", i, i)
		default:
			fmt.Fprintf(&b, "// line %d of %s: ordinary code comment\n", i, pkg)
		}
	}
	return b.String()
}

// writeJSON writes v to a temporary file and returns its path.
func writeJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "doc.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
