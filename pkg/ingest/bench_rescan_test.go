package ingest_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/codelotse/codelotse/pkg/ingest"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
	"github.com/codelotse/codelotse/pkg/secretscan"
)

// rescanRounds numbers the benchmark's rounds across its runs (the
// testing package calls it again with a larger b.N), so that each learns a
// secret of its own.
var rescanRounds int

// BenchmarkRedactKnownBigTenant times the worker's rescan of a tenant's
// stored text by its known secrets (RedactKnown) on the big tenant of
// issue 11, held by pkg/postgres's TestHoldCodeBenchFixture (401,395
// chunks at full size), migrated to this checkout first. Each round learns
// a new secret as ingestion would (a fingerprint and the request), plants
// its bare value in every 4,000th chunk, and rescans:
//
//	BIGTENANT_DIV=1 BENCH_HOLD=/tmp/full.json go test ./pkg/postgres -run TestHoldCodeBenchFixture -count=1 -timeout 4h &
//	# (wait for the file)
//	BENCH_FIXTURE=/tmp/full.json go test ./pkg/ingest -run '^$' -bench RedactKnownBigTenant -benchtime 3x -timeout 30m
//	rm /tmp/full.json
func BenchmarkRedactKnownBigTenant(b *testing.B) {
	env, h := pgtest.AttachHeld(b)
	if env == nil {
		b.Skip("BENCH_FIXTURE names no held fixture (see pkg/postgres TestHoldCodeBenchFixture)")
	}
	ctx := context.Background()
	// A fixture held by an older checkout gains the rescan's table
	// (migrations are forward-only and idempotent).
	if _, err := postgres.MigrateURL(ctx, h.AdminURL, postgres.MigrateOptions{Roles: h.Roles}); err != nil {
		b.Fatal(err)
	}
	admin, app := env.Admin, env.App
	exec := func(sql string, args ...any) {
		b.Helper()
		if _, err := admin.Pool.Exec(ctx, sql, args...); err != nil {
			b.Fatalf("%s: %v", sql, err)
		}
	}
	in := ingest.New(secretscan.New())
	var chunks int64
	if err := admin.Pool.QueryRow(ctx, `SELECT count(*) FROM code_chunks WHERE tenant_id = $1`, h.Tenant).Scan(&chunks); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		rescanRounds++
		value := derivedFrom(fmt.Sprintf("rescan-bench/%d", rescanRounds), alnum, 32)
		fp := sha256.Sum256([]byte(value))
		exec(`INSERT INTO secret_fingerprints (tenant_id, fingerprint, length, rule_id) VALUES ($1, $2, $3, 'bench') ON CONFLICT DO NOTHING`, h.Tenant, fp[:], len(value))
		exec(`INSERT INTO secret_rescans (tenant_id) VALUES ($1) ON CONFLICT (tenant_id) DO UPDATE SET requested = secret_rescans.requested + 1`, h.Tenant)
		exec(`UPDATE code_chunks SET content = content || ' ' || $2 WHERE tenant_id = $1 AND id % 4000 = 0`, h.Tenant, value)
		b.StartTimer()
		st, err := in.RedactKnown(ctx, app, h.Tenant, false, postgres.Actor{Label: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if st.Pending || st.Scanned["code_chunks"] != int(chunks) || st.Changed["code_chunks"] == 0 {
			b.Fatalf("rescan %+v of %d chunks", st, chunks)
		}
		b.ReportMetric(float64(st.Changed["code_chunks"]), "rewritten/op")
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(chunks)*float64(b.N)/b.Elapsed().Seconds(), "chunks/s")
}
