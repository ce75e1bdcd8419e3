package httpserver

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
)

// TestReadyzChecksTheSchema: /readyz is 200 on a migrated database and 503
// when a migration is missing or the schema is gone, not only when the
// database does not answer.
func TestReadyzChecksTheSchema(t *testing.T) {
	env := pgtest.New(t)
	srv, err := New(Config{PublicURL: "http://127.0.0.1:8080", DB: env.App, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	get := func() (int, string) {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := get(); code != http.StatusOK {
		t.Fatalf("migrated database: %d %s", code, body)
	}
	ctx := context.Background()
	if _, err := env.Admin.Pool.Exec(ctx, `DELETE FROM schema_migrations WHERE name = (SELECT max(name) FROM schema_migrations)`); err != nil {
		t.Fatal(err)
	}
	if code, body := get(); code != http.StatusServiceUnavailable || !strings.Contains(body, "not migrated") {
		t.Errorf("a migration missing: %d %s", code, body)
	}
	if _, err := env.Admin.Pool.Exec(ctx, `DROP TABLE schema_migrations`); err != nil {
		t.Fatal(err)
	}
	if code, body := get(); code != http.StatusServiceUnavailable || !strings.Contains(body, "schema missing") {
		t.Errorf("no schema: %d %s", code, body)
	}
}
