package postgres

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// SecretFingerprint is a known secret of a tenant: the SHA-256 of the value
// and its length, never the value.
type SecretFingerprint struct {
	Fingerprint []byte
	Length      int
	RuleID      string
}

// RecordSecretFingerprints remembers secrets found in content being stored,
// in the caller's transaction. When any of them is new to the tenant, the
// same statement requests a rescan of the tenant's stored text
// (secret_rescans, migration 0072): text stored before the secret was
// known may hold its bare value, and the worker rewrites it (pkg/ingest
// RedactKnown). Fingerprints are inserted in byte order, so that two
// transactions learning the same secrets wait for one another instead of
// deadlocking.
func (tx *Tx) RecordSecretFingerprints(ctx context.Context, fps []SecretFingerprint) (err error) {
	defer wrap(&err, "postgres.RecordSecretFingerprints")
	tenantID := tx.tenantID
	if len(fps) == 0 {
		return nil
	}
	fps = slices.Clone(fps)
	slices.SortFunc(fps, func(a, b SecretFingerprint) int { return bytes.Compare(a.Fingerprint, b.Fingerprint) })
	hashes, lengths, rules := make([][]byte, len(fps)), make([]int32, len(fps)), make([]string, len(fps))
	for i, f := range fps {
		hashes[i], lengths[i], rules[i] = f.Fingerprint, int32(f.Length), f.RuleID
	}
	_, err = tx.q.Exec(ctx, `WITH learned AS (
			INSERT INTO secret_fingerprints (tenant_id, fingerprint, length, rule_id)
			SELECT $1, u.fp, u.len, u.rule FROM unnest($2::bytea[], $3::int[], $4::text[]) WITH ORDINALITY AS u(fp, len, rule, n)
			ORDER BY u.n
			ON CONFLICT (tenant_id, fingerprint) DO NOTHING
			RETURNING 1)
		INSERT INTO secret_rescans (tenant_id) SELECT $1 WHERE EXISTS (SELECT 1 FROM learned)
		ON CONFLICT (tenant_id) DO UPDATE SET requested = secret_rescans.requested + 1`, tenantID, hashes, lengths, rules)
	return err
}

// SecretFingerprints loads a tenant's known secrets.
func (t TenantDB) SecretFingerprints(ctx context.Context) (_ []SecretFingerprint, err error) {
	defer wrap(&err, "postgres.SecretFingerprints")
	db, tenantID := t.db, t.tenantID
	var out []SecretFingerprint
	err = db.readTenant(ctx, tenantID, 0, `SELECT fingerprint, length, rule_id FROM secret_fingerprints WHERE tenant_id = $1`,
		[]any{tenantID}, func(rows pgx.Rows) error {
			var err error
			out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (SecretFingerprint, error) {
				var f SecretFingerprint
				return f, r.Scan(&f.Fingerprint, &f.Length, &f.RuleID)
			})
			return err
		})
	return out, err
}

// secretsLock is the advisory lock key of a tenant's known secrets ($1:
// the tenant). Ingestion holds it shared from reading the known secrets to
// its commit (SecretFingerprints); a rescan takes it exclusively for a
// moment before it starts (StartSecretRescan, which only tries it).
const secretsLock = `hashtextextended('secret_fingerprints ' || $1, 0)`

// SecretFingerprints loads a tenant's known secrets in the caller's
// transaction (ingestion redacts bare values of them before storing).
//
// It first takes the tenant's secrets lock shared, until the transaction
// ends, in a statement of its own (a statement's snapshot is taken before
// it runs, so a lock taken inside the read could be granted after a rescan
// started and the read still miss the secret that rescan is for). So a
// rescan that starts after taking the lock exclusively sees every row
// stored by a transaction that read the known secrets before a newer one
// was learned: such a transaction has committed by then.
func (tx *Tx) SecretFingerprints(ctx context.Context) (_ []SecretFingerprint, err error) {
	defer wrap(&err, "postgres.SecretFingerprints")
	tenantID := tx.tenantID
	if _, err := tx.q.Exec(ctx, `SELECT pg_advisory_xact_lock_shared(`+secretsLock+`)`, tenantID); err != nil {
		return nil, err
	}
	rows, err := tx.q.Query(ctx, `SELECT fingerprint, length, rule_id FROM secret_fingerprints WHERE tenant_id = $1`, tenantID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (SecretFingerprint, error) {
		var f SecretFingerprint
		return f, r.Scan(&f.Fingerprint, &f.Length, &f.RuleID)
	})
}

// ErrSecretsBusy is StartSecretRescan's answer when transactions that read
// the tenant's known secrets held their lock for as long as it tried.
var ErrSecretsBusy = errors.New("the tenant's text is being stored (ingestion held its known secrets as long as the rescan tried); try again")

// StartSecretRescan begins a rescan of the tenant's stored text for the
// bare values of its known secrets. It takes the tenant's secrets lock
// (SecretFingerprints) exclusively for a moment, so that every transaction
// that stored text with an older set of known secrets has committed, and
// returns the tenant's rescan request count (0: none pending), to be passed
// to FinishSecretRescan once every stored text was read with the secrets
// known from now on.
//
// It only tries the lock, again every 25 ms for up to wait, and never
// queues for it: a queued exclusive request would make every new ingestion
// of the tenant queue behind it, and one that already holds other locks
// could close a cycle with a long indexing the rescan waits for.
// ErrSecretsBusy when the lock was never free.
func (db *DB) StartSecretRescan(ctx context.Context, tenantID string, wait time.Duration) (requested int64, err error) {
	defer wrap(&err, "postgres.StartSecretRescan")
	err = db.InTenant(ctx, tenantID, func(tx *Tx) error {
		deadline := time.Now().Add(wait)
		for {
			var locked bool
			if err := tx.q.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(`+secretsLock+`)`, tenantID).Scan(&locked); err != nil {
				return err
			}
			if locked {
				break
			}
			if !time.Now().Before(deadline) {
				return ErrSecretsBusy
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(25 * time.Millisecond):
			}
		}
		err := tx.q.QueryRow(ctx, `SELECT requested FROM secret_rescans WHERE tenant_id = $1`, tenantID).Scan(&requested)
		if errors.Is(err, pgx.ErrNoRows) {
			requested, err = 0, nil
		}
		return err
	})
	return requested, err
}

// FinishSecretRescan ends a rescan that StartSecretRescan began at count
// requested (0: none was requested, the rescan was forced): the tenant's
// request is cleared unless a secret was learned since (the count moved
// on), in which case it stays for the next rescan. In the same transaction
// it records the audit event secrets.rescanned with the rows rewritten per
// table, when a rescan was requested or rewrote anything. It reports
// whether the request was cleared.
func (db *DB) FinishSecretRescan(ctx context.Context, tenantID string, requested int64, actor Actor, rewritten map[string]int) (cleared bool, err error) {
	defer wrap(&err, "postgres.FinishSecretRescan")
	total := 0
	for _, n := range rewritten {
		total += n
	}
	if requested == 0 && total == 0 {
		return false, nil
	}
	err = db.InTenant(ctx, tenantID, func(tx *Tx) error {
		if requested > 0 {
			tag, err := tx.q.Exec(ctx, `DELETE FROM secret_rescans WHERE tenant_id = $1 AND requested = $2`, tenantID, requested)
			if err != nil {
				return err
			}
			cleared = tag.RowsAffected() == 1
		}
		details := map[string]any{"rewritten": rewritten, "requested": requested > 0, "pending": requested > 0 && !cleared}
		return tx.insertAudit(ctx, actor, "secrets.rescanned", "", details)
	})
	return cleared, err
}

// TenantsWithSecretRescans lists the tenants whose stored text waits for a
// rescan (tenants_with_secret_rescans, policies/auth.sql), oldest request
// first.
func (db *DB) TenantsWithSecretRescans(ctx context.Context) (_ []string, err error) {
	defer wrap(&err, "postgres.TenantsWithSecretRescans")
	rows, err := db.Pool.Query(ctx, "SELECT id::text FROM tenants_with_secret_rescans() AS id")
	if err != nil {
		return nil, classifyConn(err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
