package postgres_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codelotse/codelotse/pkg/codeindex"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
)

// goTree reads $(go env GOROOT)/src (or BENCH_CODE_TREE) as a snapshot,
// with the index's rules (binary files and files over 1 MiB listed only).
func goTree(b *testing.B) codeindex.Snapshot {
	b.Helper()
	root := os.Getenv("BENCH_CODE_TREE")
	if root == "" {
		out, err := exec.Command("go", "env", "GOROOT").Output()
		if err != nil {
			b.Fatalf("go env GOROOT: %v", err)
		}
		root = filepath.Join(strings.TrimSpace(string(out)), "src")
	}
	snap := codeindex.Snapshot{Commit: strings.Repeat("a", 40)}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !d.Type().IsRegular() {
			return err
		}
		body, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		f := codeindex.File{Path: filepath.ToSlash(rel), Size: int64(len(body)), Language: codeindex.Language(rel)}
		switch {
		case len(body) > codeindex.MaxFileBytes:
			f.SkipReason = "too large"
		case codeindex.IsBinary(body):
			f.SkipReason = "binary"
		default:
			// As the archive reader does: text is stored as valid UTF-8.
			f.Lines = codeindex.SplitLines(string(bytes.ToValidUTF8(body, []byte("\uFFFD"))))
		}
		snap.Files = append(snap.Files, f)
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return snap
}

// BenchmarkPullHeads: the cost of indexing 100 open pull requests' heads
// on a Go-sized repository (the Go source tree), as overlays of the files
// each changes (5 files per pull request, one line changed in each) against
// one base index, next to one full copy of the index, which is what every
// pull request would cost without overlays.
func BenchmarkPullHeads(b *testing.B) {
	snap := goTree(b)
	env := pgtest.New(b)
	ctx := context.Background()
	tn, err := env.Admin.CreateTenant(ctx, postgres.NewTenant{Slug: "bench", Name: "bench"}, "bench")
	if err != nil {
		b.Fatal(err)
	}
	var repoID int64
	if err := env.App.InTenant(ctx, tn.ID, func(tx *postgres.Tx) error {
		r, err := tx.AddRepository(ctx, postgres.NewRepository{FullName: "golang/go"})
		repoID = r.ID
		return err
	}); err != nil {
		b.Fatal(err)
	}
	size := func(tables ...string) float64 {
		var n int64
		for _, t := range tables {
			var s int64
			if err := env.Admin.Pool.QueryRow(ctx, `SELECT pg_total_relation_size($1::regclass)`, t).Scan(&s); err != nil {
				b.Fatal(err)
			}
			n += s
		}
		return float64(n) / (1 << 20)
	}
	var indexed []codeindex.File
	for _, f := range snap.Files {
		if f.SkipReason == "" && len(f.Lines) > 10 {
			indexed = append(indexed, f)
		}
	}
	b.Run("full-copy", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := env.App.InTenant(ctx, tn.ID, func(tx *postgres.Tx) error {
				_, err := tx.ReplaceIndex(ctx, repoID, snap, postgres.Actor{Label: "bench"})
				return err
			}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(size("code_files", "code_chunks"), "MiB")
		b.ReportMetric(float64(len(snap.Files)), "files")
	})
	b.Run("100-pull-request-heads", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			for pr := 1; pr <= 100; pr++ {
				var files []codeindex.File
				for k := 0; k < 5; k++ {
					f := indexed[(pr*37+k*1009)%len(indexed)]
					lines := append([]string(nil), f.Lines...)
					lines[len(lines)/2] = fmt.Sprintf("// changed by pull request %d", pr)
					f.Lines = lines
					files = append(files, f)
				}
				if err := env.App.InTenant(ctx, tn.ID, func(tx *postgres.Tx) error {
					_, err := tx.ReplacePullIndex(ctx, repoID, pr, fmt.Sprintf("%040x", pr), snap.Commit, files, nil)
					return err
				}); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(size("pull_code_heads", "pull_code_files", "pull_code_chunks"), "MiB")
	})
}
