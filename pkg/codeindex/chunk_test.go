package codeindex

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestSplitLines(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"a", []string{"a"}},
		{"a\n", []string{"a"}},
		{"a\nb", []string{"a", "b"}},
		{"a\nb\n", []string{"a", "b"}},
		{"a\r\nb\r\n", []string{"a", "b"}},
		{"a\r\nb", []string{"a", "b"}},
		{"a\r\nb\nc", []string{"a", "b", "c"}},
		{"\n", []string{""}},
		{"\n\n", []string{"", ""}},
		{"a\n\nb", []string{"a", "", "b"}},
		{"a\r\n\r\n", []string{"a", ""}},
		{"a\rb", []string{"a\rb"}}, // a lone CR is not a line break
		{"  indented\t\n", []string{"  indented\t"}},
	}
	for _, tt := range tests {
		if got := SplitLines(tt.in); !slices.Equal(got, tt.want) || len(got) != len(tt.want) {
			t.Errorf("SplitLines(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func numbered(n int) []string {
	lines := make([]string, n)
	for i := range lines {
		lines[i] = fmt.Sprintf("line %d", i+1)
	}
	return lines
}

func TestSplitLinesRoundTrip(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 2, 3, 50, 51} {
		lines := numbered(n)
		for _, sep := range []string{"\n", "\r\n"} {
			joined := strings.Join(lines, sep)
			for _, content := range []string{joined, joined + sep} {
				if got := SplitLines(content); !slices.Equal(got, lines) {
					t.Errorf("%d lines joined by %q (final newline %v): got %d lines", n, sep, strings.HasSuffix(content, sep), len(got))
				}
			}
		}
	}
}

// TestChunksOwnership checks, for every file length up to 300 lines, that
// chunks are the 50-line windows every 40 lines, that their content is their
// lines, that every line is owned by exactly one chunk, and that a match on
// an owned line can show MaxContext lines either side from that one chunk.
func TestChunksOwnership(t *testing.T) {
	t.Parallel()
	if MaxContext != 5 {
		t.Fatalf("MaxContext = %d, the search tool promises up to 5 lines of context", MaxContext)
	}
	for n := 0; n <= 300; n++ {
		lines := numbered(n)
		chunks := Chunks(lines)
		if n == 0 {
			if len(chunks) != 0 {
				t.Errorf("empty file: %d chunks", len(chunks))
			}
			continue
		}
		owner := make([]int, n+1) // owner[line] = chunk index + 1
		for i, c := range chunks {
			wantStart := 1 + i*ChunkStep
			wantEnd := min(wantStart+ChunkLines-1, n)
			if c.StartLine != wantStart || c.EndLine != wantEnd {
				t.Fatalf("n=%d chunk %d = [%d,%d], want [%d,%d]", n, i, c.StartLine, c.EndLine, wantStart, wantEnd)
			}
			if want := strings.Join(lines[c.StartLine-1:c.EndLine], "\n"); c.Content != want {
				t.Fatalf("n=%d chunk %d content = %q, want %q", n, i, c.Content, want)
			}
			from, to := Owned(c.StartLine, c.EndLine, n)
			if from < c.StartLine || to > c.EndLine || from > to {
				t.Fatalf("n=%d chunk [%d,%d] owns [%d,%d]", n, c.StartLine, c.EndLine, from, to)
			}
			for l := from; l <= to; l++ {
				if owner[l] != 0 {
					t.Fatalf("n=%d line %d owned by chunks %d and %d", n, l, owner[l]-1, i)
				}
				owner[l] = i + 1
				lo, hi := max(1, l-MaxContext), min(n, l+MaxContext)
				if lo < c.StartLine || hi > c.EndLine {
					t.Fatalf("n=%d line %d owned by chunk [%d,%d] but its context is [%d,%d]", n, l, c.StartLine, c.EndLine, lo, hi)
				}
			}
		}
		if last := chunks[len(chunks)-1]; last.EndLine != n {
			t.Fatalf("n=%d: last chunk ends at %d", n, last.EndLine)
		}
		for l := 1; l <= n; l++ {
			if owner[l] == 0 {
				t.Fatalf("n=%d: line %d is owned by no chunk", n, l)
			}
		}
	}
}

func TestIsBinary(t *testing.T) {
	t.Parallel()
	at := func(i int) []byte {
		b := []byte(strings.Repeat("x", i+10))
		b[i] = 0
		return b
	}
	tests := []struct {
		name string
		in   []byte
		want bool
	}{
		{"nil", nil, false},
		{"empty", []byte{}, false},
		{"text", []byte("package main\n\nfunc main() {}\n"), false},
		{"utf8", []byte("héllo 世界 😀\n"), false},
		{"invalid utf8 without NUL", []byte{0xff, 0xfe, 'a', 0x80}, false},
		{"NUL first", []byte{0, 'a'}, true},
		{"NUL in middle", []byte("ab\x00cd"), true},
		{"utf16", []byte{0xff, 0xfe, 'h', 0, 'i', 0}, true},
		{"NUL at 7999", at(7999), true},
		{"NUL at 8000", at(8000), false},
	}
	for _, tt := range tests {
		if got := IsBinary(tt.in); got != tt.want {
			t.Errorf("%s: IsBinary = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestLanguage(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"main.go":               "go",
		"pkg/shape/shape.go":    "go",
		"UPPER.GO":              "go",
		"a/b/lib.rs":            "rust",
		"script.py":             "python",
		"web/app.tsx":           "typescript",
		"web/app.jsx":           "javascript",
		"index.mjs":             "javascript",
		"include/x.h":           "c",
		"src/x.hpp":             "cpp",
		"run.sh":                "shell",
		"db/0001_init.sql":      "sql",
		"README.md":             "markdown",
		"config.yml":            "yaml",
		"config.yaml":           "yaml",
		"Makefile":              "make",
		"sub/GNUmakefile":       "make",
		"Dockerfile":            "dockerfile",
		"deploy/Dockerfile":     "dockerfile",
		"go.mod":                "go-module",
		"tools/go.sum":          "go-module",
		"go.work":               "go-module",
		"LICENSE":               "",
		"image.png":             "",
		"archive.tar.gz":        "",
		".gitignore":            "",
		"makefile.go":           "go",
		"web/templates/a.tmpl":  "template",
		"api/service.proto":     "protobuf",
		"dir.go/file":           "",
		"no-extension/Makefile": "make",
	}
	for p, want := range tests {
		if got := Language(p); got != want {
			t.Errorf("Language(%q) = %q, want %q", p, got, want)
		}
	}
}
