// Package codeindex turns repository content into the searchable code index
// and plans searches over it: files are split into overlapping windows of
// lines (chunks), queries are parsed in Go (literal or RE2), their required
// literals become the database prefilter, and candidates are confirmed line
// by line with Go's regexp. Searcher runs a search over a Source of
// candidates (pkg/mcpserver's is PostgreSQL): rounds, paging positions and
// the budgets; this package never reads the database itself.
//
// Search is lexical only: no embeddings and no outbound calls.
package codeindex

import (
	"bytes"
	"path"
	"strings"
)

const (
	// ChunkLines is the size of a chunk window.
	ChunkLines = 50
	// ChunkStep is the distance between chunk starts; consecutive chunks
	// overlap by ChunkLines-ChunkStep lines.
	ChunkStep = 40
	// margin is how many lines of a chunk at each edge belong to its
	// neighbour. Every line is owned by exactly one chunk, and every owned
	// line has at least margin lines of context inside its own chunk, so a
	// search match and up to MaxContext lines around it come from one row.
	margin = (ChunkLines - ChunkStep) / 2
	// MaxContext is the most context lines a search returns on each side.
	MaxContext = margin

	// MaxFileBytes: larger files are listed but not indexed.
	MaxFileBytes = 1 << 20
)

// Chunk is a window of lines of one file.
type Chunk struct {
	StartLine int // 1-based, inclusive
	EndLine   int // inclusive
	Content   string
}

// SplitLines splits content into lines without their terminators ("\n" or
// "\r\n"). A final line without a newline is a line; a trailing newline does
// not start another one.
func SplitLines(content string) []string {
	if content == "" {
		return nil
	}
	content = strings.TrimSuffix(content, "\n")
	lines := strings.Split(content, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	return lines
}

// Chunks splits a file's lines into overlapping windows.
func Chunks(lines []string) []Chunk {
	var out []Chunk
	for start := 0; start < len(lines); start += ChunkStep {
		end := min(start+ChunkLines, len(lines))
		out = append(out, Chunk{StartLine: start + 1, EndLine: end, Content: strings.Join(lines[start:end], "\n")})
		if end == len(lines) {
			break
		}
	}
	return out
}

// Owned returns the lines [from, to] of a chunk that belong to it (and not
// to a neighbour) in a file of lineCount lines.
func Owned(startLine, endLine, lineCount int) (from, to int) {
	from, to = startLine+margin, startLine+ChunkStep-1+margin
	if startLine == 1 {
		from = 1
	}
	if endLine >= lineCount {
		to = endLine
	}
	return from, min(to, endLine)
}

// IsBinary reports whether content looks binary: a NUL byte in its first
// 8000 bytes (git's heuristic).
func IsBinary(content []byte) bool {
	return bytes.IndexByte(content[:min(len(content), 8000)], 0) >= 0
}

// Language guesses a file's language from its name.
func Language(p string) string {
	base := path.Base(p)
	switch base {
	case "Makefile", "GNUmakefile":
		return "make"
	case "Dockerfile":
		return "dockerfile"
	case "go.mod", "go.sum", "go.work":
		return "go-module"
	}
	ext := strings.ToLower(path.Ext(base))
	if l, ok := languages[ext]; ok {
		return l
	}
	return ""
}

var languages = map[string]string{
	".go": "go", ".s": "assembly", ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".hpp": "cpp",
	".rs": "rust", ".py": "python", ".rb": "ruby", ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript",
	".ts": "typescript", ".tsx": "typescript", ".jsx": "javascript", ".java": "java", ".kt": "kotlin", ".swift": "swift",
	".cs": "csharp", ".php": "php", ".sh": "shell", ".bash": "shell", ".zsh": "shell", ".sql": "sql",
	".html": "html", ".css": "css", ".scss": "scss", ".md": "markdown", ".json": "json", ".yaml": "yaml", ".yml": "yaml",
	".toml": "toml", ".xml": "xml", ".proto": "protobuf", ".tmpl": "template", ".txt": "text",
}
