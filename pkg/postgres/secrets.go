package postgres

import (
	"context"

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
// in the caller's transaction.
func (tx *Tx) RecordSecretFingerprints(ctx context.Context, fps []SecretFingerprint) (err error) {
	defer wrap(&err, "postgres.RecordSecretFingerprints")
	tenantID := tx.tenantID
	if len(fps) == 0 {
		return nil
	}
	hashes, lengths, rules := make([][]byte, len(fps)), make([]int32, len(fps)), make([]string, len(fps))
	for i, f := range fps {
		hashes[i], lengths[i], rules[i] = f.Fingerprint, int32(f.Length), f.RuleID
	}
	_, err = tx.q.Exec(ctx, `INSERT INTO secret_fingerprints (tenant_id, fingerprint, length, rule_id)
		SELECT $1, u.fp, u.len, u.rule FROM unnest($2::bytea[], $3::int[], $4::text[]) AS u(fp, len, rule)
		ON CONFLICT (tenant_id, fingerprint) DO NOTHING`, tenantID, hashes, lengths, rules)
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

// SecretFingerprintsTx loads a tenant's known secrets in the caller's
// transaction (ingestion redacts bare values of them before storing).
func (tx *Tx) SecretFingerprints(ctx context.Context) (_ []SecretFingerprint, err error) {
	defer wrap(&err, "postgres.SecretFingerprints")
	tenantID := tx.tenantID
	rows, err := tx.q.Query(ctx, `SELECT fingerprint, length, rule_id FROM secret_fingerprints WHERE tenant_id = $1`, tenantID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (SecretFingerprint, error) {
		var f SecretFingerprint
		return f, r.Scan(&f.Fingerprint, &f.Length, &f.RuleID)
	})
}
