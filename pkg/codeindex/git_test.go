package codeindex

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

func gitRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("a.go", filepath.Join(dir, "link.go")); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "core.autocrlf=false", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Env = append(os.Environ(),
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.test",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.test",
			"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("init", "-q")
	run("add", "-A")
	run("commit", "-q", "-m", "initial")
	return dir
}

func TestReadGit(t *testing.T) {
	t.Parallel()
	dir := gitRepo(t, map[string]string{
		"a.go":           "package a\r\n\r\nfunc A() {}\r\n",
		"sub/b.py":       "print('b')",
		"bin.dat":        "GIF89a\x00\x01\x02",
		"big.txt":        strings.Repeat("x", MaxFileBytes+1),
		"latin1.txt":     "caf\xe9\n",
		"name with sp.c": "int x;\n",
		"empty.txt":      "",
	})
	snap, err := ReadGit(context.Background(), dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Commit) != 40 {
		t.Errorf("Commit = %q", snap.Commit)
	}
	byPath := map[string]File{}
	var paths []string
	for _, f := range snap.Files {
		byPath[f.Path] = f
		paths = append(paths, f.Path)
	}
	// Sorted by path; the symbolic link is not content.
	want := []string{"a.go", "big.txt", "bin.dat", "empty.txt", "latin1.txt", "name with sp.c", "sub/b.py"}
	if !slices.Equal(paths, want) {
		t.Fatalf("paths = %q, want %q", paths, want)
	}
	if f := byPath["a.go"]; !slices.Equal(f.Lines, []string{"package a", "", "func A() {}"}) || f.Language != "go" || f.SkipReason != "" || f.Size != 26 || len(f.BlobSHA) != 40 {
		t.Errorf("a.go = %+v", f)
	}
	if f := byPath["sub/b.py"]; !slices.Equal(f.Lines, []string{"print('b')"}) || f.Language != "python" {
		t.Errorf("sub/b.py = %+v", f)
	}
	if f := byPath["bin.dat"]; f.SkipReason != "binary" || f.Lines != nil {
		t.Errorf("bin.dat = %+v", f)
	}
	if f := byPath["big.txt"]; f.SkipReason != "too large" || f.Lines != nil || f.Size != MaxFileBytes+1 {
		t.Errorf("big.txt: SkipReason %q, %d lines, size %d", f.SkipReason, len(f.Lines), f.Size)
	}
	if f := byPath["latin1.txt"]; !slices.Equal(f.Lines, []string{"caf\ufffd"}) {
		t.Errorf("latin1.txt lines = %q, want invalid UTF-8 replaced", f.Lines)
	}
	if f := byPath["name with sp.c"]; !slices.Equal(f.Lines, []string{"int x;"}) {
		t.Errorf("name with sp.c = %+v", f)
	}
	if f := byPath["empty.txt"]; f.SkipReason != "" || len(f.Lines) != 0 {
		t.Errorf("empty.txt = %+v", f)
	}

	// The same commit by explicit ref.
	again, err := ReadGit(context.Background(), dir, snap.Commit)
	if err != nil || again.Commit != snap.Commit || len(again.Files) != len(snap.Files) {
		t.Errorf("ReadGit by commit: %v, %d files", err, len(again.Files))
	}
}

func TestReadGitRefusals(t *testing.T) {
	t.Parallel()
	dir := gitRepo(t, map[string]string{"a.go": "package a\n"})
	for _, ref := range []string{"--output=/tmp/x", "-h", "no-such-branch"} {
		_, err := ReadGit(context.Background(), dir, ref)
		if err == nil || codelotse.ErrorCode(err) != codelotse.Invalid {
			t.Errorf("ref %q: err %v (code %s), want invalid", ref, err, codelotse.ErrorCode(err))
		}
	}
	if _, err := ReadGit(context.Background(), t.TempDir(), ""); err == nil || codelotse.ErrorCode(err) != codelotse.Invalid {
		t.Errorf("not a repository: err %v", err)
	}
}
