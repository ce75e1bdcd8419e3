package main

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/authn"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
)

// TestLoginStatesArePurgedOnASchedule: the API's purge loop deletes expired
// sign-in states at start and again at every tick (rows aged by creating
// them already expired), and keeps live ones.
func TestLoginStatesArePurgedOnASchedule(t *testing.T) {
	env := pgtest.New(t)
	ctx := context.Background()
	tn, err := env.Admin.CreateTenant(ctx, postgres.NewTenant{Slug: "acme", Name: "Acme"}, "test")
	if err != nil {
		t.Fatal(err)
	}
	add := func(ttl time.Duration) {
		t.Helper()
		err := env.App.InTenant(ctx, tn.ID, func(tx *postgres.Tx) error {
			return tx.CreateLoginState(ctx, authn.HashValue(authn.NewSecret()), postgres.LoginState{Kind: "oidc"}, ttl)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	count := func() (expired, live int) {
		t.Helper()
		if err := env.Admin.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE expires_at < now()), count(*) FILTER (WHERE expires_at >= now()) FROM login_states`).Scan(&expired, &live); err != nil {
			t.Fatal(err)
		}
		return
	}
	waitPurged := func(what string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			expired, live := count()
			if expired == 0 {
				if live != 1 {
					t.Fatalf("%s: %d live states, want 1", what, live)
				}
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d expired states were never purged", what, expired)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	add(-time.Hour)
	add(time.Hour)
	loopCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		purgeLoginStates(loopCtx, env.App, 50*time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))
		close(done)
	}()
	waitPurged("at start")
	add(-time.Minute)
	waitPurged("at a later tick")
	cancel()
	<-done
}
