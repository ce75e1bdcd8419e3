package postgres_test

import (
	"context"
	"testing"

	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
)

// BenchmarkRepositoriesBigTenant measures the repository reads every tool
// makes with a principal's grants (list_repositories' page, resolving a
// repository argument, the indexed repositories search_code starts from) on
// the seeded big tenant, for the member with MemberGrants grants and for an
// admin. p50/p90 per call, as the runtime role:
//
//	BIGTENANT_DIV=10|1 go test ./pkg/postgres -run '^$' -bench RepositoriesBigTenant -benchtime 200x -timeout 30m
func BenchmarkRepositoriesBigTenant(b *testing.B) {
	env, s := seedBig(b, pgtest.Div(b))
	ctx := context.Background()
	tdb := env.App.Tenant(s.TenantID)
	for _, who := range []struct {
		name string
		f    postgres.RepoFilter
	}{{"member", postgres.RepoFilter{IDs: s.MemberRepoIDs}}, {"admin", postgres.RepoFilter{All: true}}} {
		for _, tc := range []struct {
			name string
			run  func() error
		}{
			{"list", func() error { _, err := tdb.ListRepositories(ctx, who.f, "", 0, 51); return err }},
			{"list=query", func() error { _, err := tdb.ListRepositories(ctx, who.f, "repo-0001", 0, 51); return err }},
			{"resolve", func() error { _, err := tdb.ResolveRepository(ctx, who.f, "bigorg/repo-00001"); return err }},
			{"indexed", func() error { _, err := tdb.IndexedRepositoryIDs(ctx, who.f); return err }},
		} {
			b.Run(tc.name+"/"+who.name, func(b *testing.B) {
				reportP50P90(b, func() {
					if err := tc.run(); err != nil {
						b.Fatal(err)
					}
				})
			})
		}
	}
}
