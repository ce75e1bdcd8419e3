package ingest

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codelotse/codelotse/pkg/codeindex"
	"github.com/codelotse/codelotse/pkg/secretscan"
)

// GoSrcSnapshot is goSrcSnapshot, for the external test package.
func GoSrcSnapshot(b *testing.B) (codeindex.Snapshot, int64) { return goSrcSnapshot(b) }

// goSrcSnapshot reads $(go env GOROOT)/src (BENCH_CODE_TREE overrides) as
// an index snapshot, as the indexers would (files up to 1 MiB, no binaries).
func goSrcSnapshot(b *testing.B) (codeindex.Snapshot, int64) {
	tree := os.Getenv("BENCH_CODE_TREE")
	if tree == "" {
		out, err := exec.Command("go", "env", "GOROOT").Output()
		if err != nil {
			b.Fatal(err)
		}
		tree = filepath.Join(strings.TrimSpace(string(out)), "src")
	}
	snap := codeindex.Snapshot{Commit: strings.Repeat("0", 40)}
	var total int64
	err := filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil || len(data) > codeindex.MaxFileBytes || codeindex.IsBinary(data) {
			return err
		}
		rel, _ := filepath.Rel(tree, p)
		total += int64(len(data))
		snap.Files = append(snap.Files, codeindex.File{Path: filepath.ToSlash(rel), Size: int64(len(data)), Lines: codeindex.SplitLines(string(bytes.ToValidUTF8(data, []byte("\uFFFD"))))})
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return snap, total
}

// BenchmarkIngestGoSrc measures the CPU cost of preparing the Go tree for
// storage: "before" is what ingestion did before redaction at ingestion
// (learning secrets over every path and chunk), "after" is Snapshot
// (sanitise, learn and redact each whole file and path). The database
// writes, the same in both, are left out. See docs/benchmarks.md.
func BenchmarkIngestGoSrc(b *testing.B) {
	snap, total := goSrcSnapshot(b)
	scanner := secretscan.New()
	b.Run("before-learn-only", func(b *testing.B) {
		b.SetBytes(total)
		for i := 0; i < b.N; i++ {
			for _, f := range snap.Files {
				scanner.Find(f.Path)
				for _, c := range codeindex.Chunks(f.Lines) {
					scanner.Find(c.Content)
				}
			}
		}
	})
	b.Run("after-sanitise-learn-redact", func(b *testing.B) {
		b.SetBytes(total)
		in := New(scanner)
		for i := 0; i < b.N; i++ {
			var l Learned
			in.Snapshot(snap, &l)
		}
	})
}
