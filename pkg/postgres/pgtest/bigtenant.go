package pgtest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// BigTenant describes the review data of a seeded big tenant. FullSize is the
// tenant of issue 11 (3,000 repositories, 30,000 pull requests, 400,000
// findings, a member with 2,000 repository grants); Scaled divides it.
type BigTenant struct {
	Repositories int
	PullRequests int
	Findings     int
	// MemberGrants is how many repositories the member may view.
	MemberGrants int
}

// FullSize is the big tenant at full size.
var FullSize = BigTenant{Repositories: 3000, PullRequests: 30000, Findings: 400000, MemberGrants: 2000}

// Div is the big-tenant benchmarks' size divisor, BIGTENANT_DIV (1: full
// size; default 10).
func Div(tb testing.TB) int {
	tb.Helper()
	v := os.Getenv("BIGTENANT_DIV")
	if v == "" {
		return 10
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		tb.Fatalf("BIGTENANT_DIV=%q: want a positive integer", v)
	}
	return n
}

// Scaled returns FullSize divided by div (1 is full size).
func Scaled(div int) BigTenant {
	if div < 1 {
		div = 1
	}
	return BigTenant{
		Repositories: max(FullSize.Repositories/div, 1),
		PullRequests: max(FullSize.PullRequests/div, 1),
		Findings:     max(FullSize.Findings/div, 1),
		MemberGrants: max(FullSize.MemberGrants/div, 1),
	}
}

// Seeded is what SeedBigTenant made.
type Seeded struct {
	TenantID string
	// MemberID and AdminID are users of the tenant; the member views
	// MemberGrants repositories, the admin all of them.
	MemberID, AdminID string
	// MemberRepoIDs are the member's repositories, RepoIDs every repository
	// in creation order.
	MemberRepoIDs, RepoIDs []int64
}

// RareWord appears in one finding out of about 20,000 (title or body), and
// CommonWord in most of them: the two ends of search_findings' text query.
const (
	RareWord   = "saml"
	CommonWord = "error"
	RareRule   = "sql-injection"
)

// SeedBigTenant writes a deterministic big tenant (same sizes, same text,
// same order every time) into the database at adminURL, as the
// administrator and in one transaction, with set-based SQL so that the full
// size takes seconds, not the hours an import path would. It then ANALYZEs
// the tables, as a deployment's autovacuum would have.
//
// Finding text is drawn from a small vocabulary by a hash of the row number;
// rule keys cycle through 50 rules (and one finding in 10,007 has the
// rare rule RareRule), paths through 40 directories; one
// finding in 20,011 mentions RareWord. The generator is for benchmarks and
// plan tests only; it bypasses the ingestion path on purpose (its text holds
// no secrets).
func SeedBigTenant(ctx context.Context, adminURL, slug string, size BigTenant) (Seeded, error) {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return Seeded{}, err
	}
	defer conn.Close(ctx)
	var s Seeded
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `INSERT INTO tenants (slug, name) VALUES ($1, $1) RETURNING id`, slug).Scan(&s.TenantID); err != nil {
			return fmt.Errorf("tenant: %w", err)
		}
		// The administrator is a superuser here, but the tables FORCE row
		// security, so the inserts carry the tenant setting like any writer.
		if _, err := tx.Exec(ctx, `SELECT set_config('app.tenant_id', $1, true)`, s.TenantID); err != nil {
			return err
		}
		base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		steps := []struct {
			name string
			sql  string
			args []any
		}{
			{"repositories", `INSERT INTO repositories (tenant_id, full_name, private, url, created_at)
				SELECT $1, format('bigorg/repo-%s', lpad(i::text, 5, '0')), i % 3 = 0, format('https://github.example/bigorg/repo-%s', i), $3
				FROM generate_series(1, $2) i`, []any{s.TenantID, size.Repositories, base}},
			{"pull requests", `WITH r AS (SELECT id, row_number() OVER (ORDER BY id) - 1 AS n FROM repositories WHERE tenant_id = $1)
				INSERT INTO pull_requests (tenant_id, repository_id, number, title, author, state, base_ref, head_ref, head_sha, url, created_at, updated_at)
				SELECT $1, r.id, (i / $3) + 1, format('Change %s', i), format('dev%s', i % 97),
				       CASE WHEN i % 4 = 0 THEN 'open' ELSE 'merged' END, 'main', format('feature/%s', i), md5(i::text) || substr(md5((i+1)::text), 1, 8),
				       '', $4::timestamptz + i * interval '1 minute', $4::timestamptz + i * interval '1 minute'
				FROM generate_series(0, $2 - 1) i JOIN r ON r.n = i % $3`, []any{s.TenantID, size.PullRequests, size.Repositories, base}},
			{"findings", `WITH p AS (SELECT id, repository_id, row_number() OVER (ORDER BY id) - 1 AS n FROM pull_requests WHERE tenant_id = $1),
				w AS (SELECT ARRAY['the','handler','returns','an','error','when','input','value','nil','pointer','check','missing',
				           'context','timeout','retry','loop','buffer','index','bounds','query','token','cache','lock','race',
				           'close','defer','leak','unused','variable','shadow','format','string','parse','number'] AS v)
				INSERT INTO findings (tenant_id, repository_id, pull_request_id, rule_key, severity, status, path, start_line, end_line,
				                      title, body, fingerprint, commit_sha, source, created_at, updated_at)
				SELECT $1, p.repository_id, p.id, CASE WHEN i % 10007 = 3 THEN 'sql-injection' ELSE format('rule-%s', i % 50) END,
				       (ARRAY['info','low','medium','high','critical'])[1 + i % 5],
				       CASE WHEN i % 3 = 0 THEN 'resolved' ELSE 'open' END,
				       format('pkg/dir%s/file%s.go', i % 40, i % 7), 1 + i % 500, 3 + i % 500,
				       initcap(w.v[1 + abs(hashint4(i)) % 34]) || ' ' || w.v[1 + abs(hashint4(i + 1)) % 34] || ' ' || w.v[1 + abs(hashint4(i + 2)) % 34],
				       concat_ws(' ', w.v[1 + abs(hashint4(i * 3)) % 34], w.v[1 + abs(hashint4(i * 5)) % 34], 'error',
				                 w.v[1 + abs(hashint4(i * 7)) % 34], w.v[1 + abs(hashint4(i * 11)) % 34], w.v[1 + abs(hashint4(i * 13)) % 34],
				                 CASE WHEN i % 20011 = 7 THEN 'saml assertion is not verified' END, '.'),
				       md5('f' || i), md5(i::text) || substr(md5((i+1)::text), 1, 8), 'import',
				       $4::timestamptz + i * interval '10 seconds', $4::timestamptz + i * interval '10 seconds'
				FROM generate_series(0, $2 - 1) i JOIN p ON p.n = i % $3 CROSS JOIN w`, []any{s.TenantID, size.Findings, size.PullRequests, base}},
			{"users", `INSERT INTO users (tenant_id, email, name) VALUES ($1, 'member@big.example', 'Member'), ($1, 'admin@big.example', 'Admin')`, []any{s.TenantID}},
			{"tenant memberships", `INSERT INTO tenant_memberships (tenant_id, user_id, role, source)
				SELECT $1, id, CASE WHEN email LIKE 'admin@%' THEN 'admin' ELSE 'member' END, 'local' FROM users WHERE tenant_id = $1`, []any{s.TenantID}},
			{"repo memberships", `INSERT INTO repo_memberships (tenant_id, user_id, repository_id)
				SELECT $1, u.id, r.id FROM users u
				JOIN (SELECT id FROM repositories WHERE tenant_id = $1 ORDER BY id LIMIT $2) r ON true
				WHERE u.tenant_id = $1 AND u.email = 'member@big.example'`, []any{s.TenantID, size.MemberGrants}},
		}
		for _, st := range steps {
			if _, err := tx.Exec(ctx, st.sql, st.args...); err != nil {
				return fmt.Errorf("seed %s: %w", st.name, err)
			}
		}
		if err := tx.QueryRow(ctx, `SELECT (SELECT id::text FROM users WHERE tenant_id = $1 AND email = 'member@big.example'),
			(SELECT id::text FROM users WHERE tenant_id = $1 AND email = 'admin@big.example')`, s.TenantID).Scan(&s.MemberID, &s.AdminID); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT id FROM repositories WHERE tenant_id = $1 ORDER BY id`, s.TenantID)
		if err != nil {
			return err
		}
		if s.RepoIDs, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
			return err
		}
		s.MemberRepoIDs = s.RepoIDs[:min(size.MemberGrants, len(s.RepoIDs))]
		return nil
	})
	if err != nil {
		return Seeded{}, err
	}
	if err := Settle(ctx, conn, "repositories", "pull_requests", "findings", "repo_memberships", "tenant_memberships", "users"); err != nil {
		return Seeded{}, err
	}
	return s, nil
}
