package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/benchstat"
	"github.com/codelotse/codelotse/pkg/codeindex"
	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
	"github.com/codelotse/codelotse/pkg/secretscan"
	"github.com/codelotse/codelotse/pkg/shape"
)

// BenchmarkSearchCode measures search_code (candidates from PostgreSQL,
// confirmation in Go, limit 20) over an index of a source tree — the Go
// toolchain's own src/ by default (BENCH_CODE_TREE overrides) — once and
// five times over, against `git grep` and ripgrep on the same tree in the
// same run, each stopped after 20 matching lines as search_code is. The
// setup (git repository, indexing) takes a few minutes. See
// docs/benchmarks.md.
func BenchmarkSearchCode(b *testing.B) {
	fx := searchBenchSetup(b, pgtest.CodeTree(b))
	for _, copies := range []int{1, 5} {
		for _, q := range pgtest.SearchCodeQueries {
			b.Run(fmt.Sprintf("%dx/%s/codelotse", copies, q.Name), func(b *testing.B) {
				in := map[string]any{"query": q.Query, "regex": q.Regex, "limit": 20, "context": 2}
				if q.Repo > 0 {
					in["repository"] = fmt.Sprintf("bench/go%d", min(q.Repo, copies)-1)
				}
				if q.Path != "" {
					in["path"] = q.Path
				}
				args, _ := json.Marshal(in)
				sess := fx.sessions[copies]
				lat := make([]time.Duration, 0, b.N)
				for i := 0; i < b.N; i++ {
					start := time.Now()
					doc, err := searchCode.run(context.Background(), sess, args)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := sess.deps.Shaper.Shape(doc); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(start))
				}
				reportP50(b, lat)
			})
			if q.Repo > 0 || q.Path != "" {
				continue
			}
			b.Run(fmt.Sprintf("%dx/%s/git-grep", copies, q.Name), func(b *testing.B) {
				args := []string{"--git-dir", fx.gitDirs[copies], "--work-tree", fx.trees[copies], "grep", "-n", "-I", "--no-color", "-i"}
				if q.Regex {
					args = append(args, "-E")
				} else {
					args = append(args, "-F")
				}
				reportP50(b, runFirstLines(b, "git", append(args, "-e", q.Query), 20))
			})
			if fx.rg != "" {
				b.Run(fmt.Sprintf("%dx/%s/ripgrep", copies, q.Name), func(b *testing.B) {
					args := []string{"-n", "-i", "--no-heading", "--color", "never"}
					if !q.Regex {
						args = append(args, "-F")
					}
					reportP50(b, runFirstLines(b, fx.rg, append(args, "-e", q.Query, fx.trees[copies]), 20))
				})
			}
		}
	}
}

func reportP50(b *testing.B, lat []time.Duration) { benchstat.ReportMs(b, lat, 0.5) }

// runFirstLines runs a command b.N times, reading its output until n lines
// arrived (then killing it, as a pipe into head would) or it ends.
func runFirstLines(b *testing.B, name string, args []string, n int) []time.Duration {
	lat := make([]time.Duration, 0, b.N)
	for i := 0; i < b.N; i++ {
		start := time.Now()
		cmd := exec.Command(name, args...)
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, 64<<10)
		lines := 0
		for lines < n {
			k, err := out.Read(buf)
			lines += strings.Count(string(buf[:k]), "\n")
			if err != nil {
				break
			}
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		lat = append(lat, time.Since(start))
	}
	return lat
}

type searchBenchFixture struct {
	sessions map[int]*session // by copies
	trees    map[int]string
	gitDirs  map[int]string
	rg       string
}

var (
	searchFxOnce sync.Once
	searchFx     *searchBenchFixture
)

func searchBenchSetup(b *testing.B, tree string) *searchBenchFixture {
	searchFxOnce.Do(func() { searchFx = buildSearchFixture(b, tree) })
	if searchFx == nil {
		b.Fatal("search benchmark setup failed")
	}
	return searchFx
}

func buildSearchFixture(b *testing.B, tree string) *searchBenchFixture {
	ctx := context.Background()
	fx := &searchBenchFixture{sessions: map[int]*session{}, trees: map[int]string{}, gitDirs: map[int]string{}}
	fx.rg, _ = exec.LookPath("rg")
	tmp := b.TempDir()
	git := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@example.test",
			"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.test", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	// 1x: the tree itself, with a git directory beside it (the tree is not
	// modified). 5x: five hard-linked copies under one work tree.
	fx.trees[1] = tree
	five := filepath.Join(tmp, "five")
	for i := 0; i < 5; i++ {
		dst := filepath.Join(five, fmt.Sprintf("copy%d", i))
		if err := os.MkdirAll(five, 0o755); err != nil {
			b.Fatal(err)
		}
		if out, err := exec.Command("cp", "-al", tree, dst).CombinedOutput(); err != nil {
			if out2, err2 := exec.Command("cp", "-a", tree, dst).CombinedOutput(); err2 != nil {
				b.Fatalf("copy tree: %v %s %s", err2, out, out2)
			}
		}
	}
	fx.trees[5] = five
	for _, c := range []int{1, 5} {
		gd := filepath.Join(tmp, fmt.Sprintf("git%d", c))
		git("--git-dir", gd, "--work-tree", fx.trees[c], "init", "-q")
		git("--git-dir", gd, "--work-tree", fx.trees[c], "add", "-A", ".")
		git("--git-dir", gd, "--work-tree", fx.trees[c], "commit", "-q", "-m", "bench")
		fx.gitDirs[c] = gd
	}

	env := pgtest.New(b)
	tn, err := env.Admin.CreateTenant(ctx, postgres.NewTenant{Slug: "bench", Name: "Bench", MCPEnabled: true}, "bench")
	if err != nil {
		b.Fatal(err)
	}
	snap, err := codeindex.ReadGit(ctx, fx.gitDirs[1], "HEAD")
	if err != nil {
		b.Fatal(err)
	}
	var ids []int64
	for i := 0; i < 5; i++ {
		err := env.App.InTenant(ctx, tn.ID, func(tx *postgres.Tx) error {
			r, err := tx.AddRepository(ctx, postgres.NewRepository{FullName: fmt.Sprintf("bench/go%d", i)})
			if err != nil {
				return err
			}
			ids = append(ids, r.ID)
			_, err = tx.ReplaceIndex(ctx, r.ID, snap, postgres.Actor{Label: "bench"})
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := pgtest.Settle(ctx, env.Admin.Pool, "code_chunks", "code_files", "repositories"); err != nil {
		b.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	deps := &Deps{DB: env.App, Shaper: shape.New(secretscan.New()), Logger: quiet}
	fx.sessions[1] = &session{deps: deps, principal: codelotse.Principal{TenantID: tn.ID, Kind: "token"}, grants: codelotse.Grants{RepoIDs: ids[:1]}}
	fx.sessions[5] = &session{deps: deps, principal: codelotse.Principal{TenantID: tn.ID, Kind: "token"}, grants: codelotse.Grants{RepoIDs: ids}}
	return fx
}
