package postgres_test

import (
	"context"
	"fmt"
	"net"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
)

// oneConnPool opens a pool of exactly one connection on url and returns it
// with that connection's backend pid.
func oneConnPool(t *testing.T, url string) (*postgres.DB, int) {
	t.Helper()
	db, err := postgres.OpenURL(context.Background(), url+"&pool_max_conns=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	var pid int
	if err := db.Pool.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return db, pid
}

// TestConnectionLossIsUnavailable: a connection the server ended (what a
// PostgreSQL restart does to every session) and a server that refuses
// connections are Unavailable, so the edges answer 503 and not an internal
// error; the pool reconnects for the next read; a failing statement stays
// an internal error.
func TestConnectionLossIsUnavailable(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	ctx := context.Background()
	tenant := "00000000-0000-0000-0000-000000000001"
	read := func(db *postgres.DB, sql string) error {
		return postgres.ReadTenant(ctx, db, tenant, sql, nil, func(rows pgx.Rows) error {
			for rows.Next() {
			}
			return rows.Err()
		})
	}
	tx := func(db *postgres.DB) error {
		return db.InTenant(ctx, tenant, func(tx *postgres.Tx) error {
			_, err := postgres.Raw(tx).Exec(ctx, "SELECT 1")
			return err
		})
	}

	for name, op := range map[string]func(*postgres.DB) error{
		"ReadTenant": func(db *postgres.DB) error { return read(db, "SELECT 1") },
		"InTenant":   tx,
	} {
		t.Run(name, func(t *testing.T) {
			db, pid := oneConnPool(t, env.AppURL)
			// pg_terminate_backend with a timeout waits until the session
			// is gone, as after pg_ctl restart -m fast.
			if _, err := env.Admin.Pool.Exec(ctx, "SELECT pg_terminate_backend($1, 5000)", pid); err != nil {
				t.Fatal(err)
			}
			err := op(db)
			if code := codelotse.ErrorCode(err); code != codelotse.Unavailable {
				t.Fatalf("after the session was terminated: %v (code %s), want Unavailable", err, code)
			}
			if msg := codelotse.ErrorMessage(err); msg != "The database is unavailable; try again shortly." {
				t.Errorf("message %q", msg)
			}
			if err := op(db); err != nil {
				t.Errorf("the pool did not reconnect: %v", err)
			}
		})
	}

	t.Run("refused", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close() // nothing listens there now
		db := &postgres.DB{Pool: lazyPool(t, fmt.Sprintf("postgres://nobody@127.0.0.1:%d/x?sslmode=disable&connect_timeout=2", port))}
		if code := codelotse.ErrorCode(read(db, "SELECT 1")); code != codelotse.Unavailable {
			t.Errorf("ReadTenant with nothing listening: code %s, want Unavailable", code)
		}
		if code := codelotse.ErrorCode(tx(db)); code != codelotse.Unavailable {
			t.Errorf("InTenant with nothing listening: code %s, want Unavailable", code)
		}
	})

	t.Run("statement error", func(t *testing.T) {
		db, _ := oneConnPool(t, env.AppURL)
		err := read(db, "SELECT no_such_column FROM tenants")
		if err == nil || codelotse.ErrorCode(err) != codelotse.Internal {
			t.Errorf("a failing statement: %v (code %s), want Internal", err, codelotse.ErrorCode(err))
		}
		// A request whose client went away is not an outage either.
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		err = postgres.ReadTenant(cctx, db, tenant, "SELECT 1", nil, func(pgx.Rows) error { return nil })
		if err == nil || codelotse.ErrorCode(err) == codelotse.Unavailable {
			t.Errorf("a canceled request: %v (code %s), want an error that is not Unavailable", err, codelotse.ErrorCode(err))
		}
	})
}

// lazyPool is a pool that does not connect until it is used (postgres.Open
// would refuse to start without a database, which is right for a server
// but not what this test needs).
func lazyPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}
