package ingest_test

import (
	"context"
	"testing"

	"github.com/codelotse/codelotse/pkg/ingest"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
	"github.com/codelotse/codelotse/pkg/secretscan"
)

// BenchmarkIndexGoSrc measures indexing the Go tree end to end through the
// ingestion path: sanitise, learn, redact, and store files and chunks in
// PostgreSQL in one transaction. See docs/benchmarks.md.
func BenchmarkIndexGoSrc(b *testing.B) {
	ctx := context.Background()
	snap, total := ingest.GoSrcSnapshot(b)
	env := pgtest.New(b)
	tn, err := env.Admin.CreateTenant(ctx, postgres.NewTenant{Slug: "bench", Name: "Bench"}, "bench")
	if err != nil {
		b.Fatal(err)
	}
	in := ingest.New(secretscan.New())
	var repoID int64
	if err := env.App.InTenant(ctx, tn.ID, func(tx *postgres.Tx) error {
		r, err := in.AddRepository(ctx, tx, postgres.NewRepository{FullName: "bench/go"})
		repoID = r.ID
		return err
	}); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(total)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := env.App.InTenant(ctx, tn.ID, func(tx *postgres.Tx) error {
			_, err := in.Index(ctx, tx, repoID, snap, postgres.Actor{Label: "bench"})
			return err
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(total)/1e6, "MB")
}
