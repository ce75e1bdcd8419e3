package postgres_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
)

// TestSecurityDefinerSearchPath: every SECURITY DEFINER function of the
// schema pins search_path to pg_catalog, public, pg_temp, with pg_temp
// last, so that a caller's temporary objects can never shadow a table or
// function the definer's code names.
func TestSecurityDefinerSearchPath(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	rows, err := env.Admin.Pool.Query(context.Background(), `
		SELECT p.proname, coalesce(array_to_string(p.proconfig, ';'), '')
		FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE n.nspname = 'public' AND p.prosecdef
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var name, config string
		if err := rows.Scan(&name, &config); err != nil {
			t.Fatal(err)
		}
		n++
		var path string
		for _, kv := range strings.Split(config, ";") {
			if v, ok := strings.CutPrefix(kv, "search_path="); ok {
				path = v
			}
		}
		if strings.ReplaceAll(path, " ", "") != "pg_catalog,public,pg_temp" {
			t.Errorf("SECURITY DEFINER function %s has search_path %q, want pg_catalog, public, pg_temp", name, path)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 5 {
		t.Fatalf("found only %d SECURITY DEFINER functions; the catalog query is wrong", n)
	}
}

// TestServerKeyIsCreatedOnceAndShared: the runtime role creates the key on
// first use and every later call (any replica) reads the same key.
func TestServerKeyIsCreatedOnceAndShared(t *testing.T) {
	t.Parallel()
	env := pgtest.New(t)
	ctx := context.Background()
	k1, err := env.App.ServerKey(ctx, "mcp_cursor")
	if err != nil {
		t.Fatal(err)
	}
	k2, err := env.Admin.ServerKey(ctx, "mcp_cursor")
	if err != nil {
		t.Fatal(err)
	}
	if len(k1) != 32 || !bytes.Equal(k1, k2) {
		t.Fatalf("keys differ or are short: %x %x", k1, k2)
	}
	other, err := env.App.ServerKey(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(other, k1) {
		t.Error("two key names share a key")
	}
}
