package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Actor is who performed an audited change: a user of the tenant, or an
// operator command (Label "cltctl").
type Actor struct {
	UserID string
	Label  string
}

// insertAudit appends an audit event inside the caller's transaction, so the
// event exists exactly when the change does.
func (tx *Tx) insertAudit(ctx context.Context, actor Actor, action, target string, details map[string]any) error {
	tenantID := tx.tenantID
	var uid *string
	if actor.UserID != "" {
		uid = &actor.UserID
	}
	label := actor.Label
	if label == "" {
		label = actor.UserID
	}
	if details == nil {
		details = map[string]any{}
	}
	_, err := tx.q.Exec(ctx, `INSERT INTO audit_events (tenant_id, actor_user_id, actor, action, target, details)
		VALUES ($1, $2, $3, $4, $5, $6)`, tenantID, uid, label, action, target, details)
	return err
}

// AuditEvent is one row of the audit log.
type AuditEvent struct {
	ID        int64
	Actor     string
	Action    string
	Target    string
	Details   map[string]any
	CreatedAt time.Time
}

// ListAudit returns the newest events of a tenant first.
func (tx *Tx) ListAudit(ctx context.Context, limit int) (_ []AuditEvent, err error) {
	defer wrap(&err, "postgres.ListAudit")
	tenantID := tx.tenantID
	rows, err := tx.q.Query(ctx, `SELECT id, actor, action, target, details, created_at FROM audit_events
		WHERE tenant_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2`, tenantID, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (AuditEvent, error) {
		var e AuditEvent
		err := r.Scan(&e.ID, &e.Actor, &e.Action, &e.Target, &e.Details, &e.CreatedAt)
		return e, err
	})
}

// AuditBreakGlassIssued records that an operator issued a break-glass link.
func (tx *Tx) AuditBreakGlassIssued(ctx context.Context, email string, actor Actor) (err error) {
	defer wrap(&err, "postgres.AuditBreakGlassIssued")
	return tx.insertAudit(ctx, actor, "break_glass.issued", email, nil)
}
