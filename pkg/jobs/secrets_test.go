package jobs_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/codeindex"
	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/ingest"
	"github.com/codelotse/codelotse/pkg/jobs"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
	"github.com/codelotse/codelotse/pkg/secretscan"
)

// TestWorkerRescansTenantsThatLearnedASecret: a tenant that learned a
// secret after storing its bare value is rescanned by the worker on its
// own (the periodic job runs when the worker starts), the value is no
// longer stored and the request is cleared; a tenant that learned nothing
// gets no rescan.
func TestWorkerRescansTenantsThatLearnedASecret(t *testing.T) {
	env := pgtest.New(t)
	ctx := context.Background()
	in := ingest.New(secretscan.New())
	h := sha256.Sum256([]byte("jobs rescan"))
	value := base64.StdEncoding.EncodeToString(h[:24])
	manifest := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ntype: Opaque\ndata:\n  password: " + value + "\n"
	var tenants []string
	for _, slug := range []string{"learns", "quiet"} {
		tn, err := env.Admin.CreateTenant(ctx, postgres.NewTenant{Slug: slug, Name: slug}, "test")
		if err != nil {
			t.Fatal(err)
		}
		tenants = append(tenants, tn.ID)
		err = env.App.InTenant(ctx, tn.ID, func(tx *postgres.Tx) error {
			r, err := in.AddRepository(ctx, tx, postgres.NewRepository{FullName: "acme/api"})
			if err != nil {
				return err
			}
			_, err = in.Index(ctx, tx, r.ID, codeindex.Snapshot{Commit: "c1", Files: []codeindex.File{
				{Path: "main.go", Lines: []string{"package main", fmt.Sprintf("const k = %q", value)}}}}, postgres.Actor{Label: "test"})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	err := env.App.InTenant(ctx, tenants[0], func(tx *postgres.Tx) error {
		_, err := in.Import(ctx, tx, codelotse.ReviewImport{Repository: "acme/api", Source: "review-json",
			Review: codelotse.Review{ExternalID: "r1", Status: "completed", Summary: manifest}}, postgres.Actor{Label: "test"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	stored := func(tid string) string {
		return strings.Join(env.AdminStrings(t, `SELECT content FROM code_chunks WHERE tenant_id = $1`, tid), "\n")
	}
	if !strings.Contains(stored(tenants[0]), value) {
		t.Fatal("premise: the file indexed before the secret was learned does not hold it")
	}

	w, err := jobs.NewWorker(&jobs.Deps{DB: env.App, Ingest: in}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(context.Background())
	deadline := time.Now().Add(30 * time.Second)
	for strings.Contains(stored(tenants[0]), value) || len(env.AdminStrings(t, `SELECT 1 FROM secret_rescans`)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the worker did not rescan the tenant: jobs %v", env.AdminStrings(t, `SELECT kind || ' ' || state FROM river_job`))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := env.AdminStrings(t, `SELECT args->>'tenant_id' FROM river_job WHERE kind = 'secrets.rescan'`); len(got) != 1 || got[0] != tenants[0] {
		t.Errorf("rescans enqueued for %v, want only %s", got, tenants[0])
	}
	if !strings.Contains(stored(tenants[1]), value) {
		t.Errorf("the quiet tenant's text changed (it never learned the secret)")
	}
}
