package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
)

// TestContextCancelsTheQuery: when a caller's context ends during a query,
// the call returns and PostgreSQL stops the statement (pgx closes the
// connection and sends a cancel request), rather than running it on to
// the end. search_code's deadline relies on this to bound the database
// work of a round in progress, not only the caller's wait. The statement
// would sleep for an hour: if it were not cancelled, the wait below would
// run into the test binary's timeout and fail.
func TestContextCancelsTheQuery(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	const marker = "SELECT pg_sleep(3600) -- context-cancel-test"
	done := make(chan error, 1)
	go func() {
		_, err := env.App.Pool.Exec(ctx, marker)
		done <- err
	}()
	running := func() int {
		var n int
		if err := env.Admin.Pool.QueryRow(context.Background(),
			`SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query = $1`, marker).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for running() == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the query finished although its context ended")
	}
	for running() != 0 {
		time.Sleep(10 * time.Millisecond)
	}
	var one int
	if err := env.App.Pool.QueryRow(context.Background(), "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Errorf("the pool after a cancelled query: %v", err)
	}
}
