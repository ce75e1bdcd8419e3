package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/codeindex"
	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/postgres"
)

// TestCodeSourceOnPostgres: search_code's candidate source is the
// tenant's search function on a real database, and the engine's deadline
// reaches the query through its context: a deadline that has passed stops
// the first round, which answers with the in-band timeout error rather
// than a database error.
func TestCodeSourceOnPostgres(t *testing.T) {
	fx := newEdgeFixture(t, 0)
	ctx := context.Background()
	var lines []string
	for i := 1; i <= 300; i++ {
		l := fmt.Sprintf("line %d", i)
		if i%25 == 0 {
			l += " deadline_needle"
		}
		lines = append(lines, l)
	}
	err := fx.deps.DB.InTenant(ctx, fx.tenant, func(tx *postgres.Tx) error {
		_, err := tx.ReplaceIndex(ctx, fx.repo0, codeindex.Snapshot{Commit: strings.Repeat("a", 40),
			Files: []codeindex.File{{Path: "big.go", Size: 3000, BlobSHA: strings.Repeat("b", 40), Language: "go", Lines: lines}}}, postgres.Actor{Label: "test"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := codeindex.NewPlan("deadline_needle", false, false)
	if err != nil {
		t.Fatal(err)
	}
	src := codeSource{s: fx.session("tok-a"), repoIDs: []int64{fx.repo0}, patterns: plan.LikePatterns()}
	q := codeindex.Query{Plan: plan, Limit: 100}

	res, err := codeindex.Searcher{Batch: 2}.Search(ctx, src, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Matches) != 12 || res.More || res.Truncated {
		t.Fatalf("%d matches (More %v, Truncated %v), want the 12 lines", len(res.Matches), res.More, res.Truncated)
	}
	for i, m := range res.Matches {
		if m.Line != 25*(i+1) || m.Path != "big.go" || m.Repository != "acme/r0" {
			t.Errorf("match %d: %+v", i, m)
		}
	}

	_, err = codeindex.Searcher{Deadline: time.Nanosecond}.Search(ctx, src, q)
	if !errors.Is(err, codeindex.ErrSearchTimeout) || codelotse.ErrorCode(err) != codelotse.Invalid {
		t.Errorf("past the deadline: %v, want the in-band timeout", err)
	}
}
