package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// Audited changes of who can see what (issue 14). Each writes its audit
// event in the caller's transaction, with the change.

// AddLocalMember adds (or restores) a user with a local membership of role,
// as `cltctl user add` does, and audits it as user.added.
func (tx *Tx) AddLocalMember(ctx context.Context, email, name string, role codelotse.Role, now time.Time, actor Actor) (_ codelotse.User, err error) {
	defer wrap(&err, "postgres.AddLocalMember")
	u, err := tx.UpsertLocalUser(ctx, email, name, role, now)
	if err != nil {
		return u, err
	}
	return u, tx.insertAudit(ctx, actor, "user.added", u.Email, map[string]any{"role": role, "source": codelotse.MembershipLocal})
}

// SetLocalMembership writes a local membership of role for a user (cltctl
// membership refresh) and audits it as membership.set.
func (tx *Tx) SetLocalMembership(ctx context.Context, u codelotse.User, role codelotse.Role, now time.Time, actor Actor) (err error) {
	defer wrap(&err, "postgres.SetLocalMembership")
	if err := tx.RefreshMembership(ctx, u.ID, role, codelotse.MembershipLocal, now); err != nil {
		return err
	}
	return tx.insertAudit(ctx, actor, "membership.set", u.Email, map[string]any{"role": role, "source": codelotse.MembershipLocal})
}

// GrantRepositoryAudited lets a user view a repository and audits it as
// repository.granted.
func (tx *Tx) GrantRepositoryAudited(ctx context.Context, u codelotse.User, r codelotse.Repository, actor Actor) (err error) {
	defer wrap(&err, "postgres.GrantRepositoryAudited")
	if err := tx.GrantRepository(ctx, u.ID, r.ID); err != nil {
		return err
	}
	return tx.insertAudit(ctx, actor, "repository.granted", r.FullName, map[string]any{"user": u.Email})
}

// AuditRepositoryAdded records that an operator registered a repository
// (tenant admins see it from then on).
func (tx *Tx) AuditRepositoryAdded(ctx context.Context, r codelotse.Repository, actor Actor) (err error) {
	defer wrap(&err, "postgres.AuditRepositoryAdded")
	return tx.insertAudit(ctx, actor, "repository.added", r.FullName, map[string]any{"private": r.Private})
}

// AuditLinkSignIn records a sign-in through a single-use link: break-glass
// (an operator's emergency access to everything) or development.
func (tx *Tx) AuditLinkSignIn(ctx context.Context, userID, kind string) (err error) {
	defer wrap(&err, "postgres.AuditLinkSignIn")
	tenantID := tx.tenantID
	var email string
	if err := tx.q.QueryRow(ctx, `SELECT email FROM users WHERE tenant_id = $1 AND id = $2`, tenantID, userID).Scan(&email); err != nil {
		return err
	}
	action := "user.signed_in"
	if kind == "break-glass" {
		action = "break_glass.signed_in"
	}
	return tx.insertAudit(ctx, Actor{UserID: userID, Label: email}, action, email, map[string]any{"method": kind + " link"})
}

// AuditFilter narrows ListAuditFiltered; empty fields match everything.
type AuditFilter struct {
	Action, Actor string
}

// ListAuditFiltered returns the newest events first, only those with the
// action and actor given (exact matches).
func (tx *Tx) ListAuditFiltered(ctx context.Context, f AuditFilter, limit int) (_ []AuditEvent, err error) {
	defer wrap(&err, "postgres.ListAuditFiltered")
	tenantID := tx.tenantID
	rows, err := tx.q.Query(ctx, `SELECT id, actor, action, target, details, created_at FROM audit_events
		WHERE tenant_id = $1 AND ($2 = '' OR action = $2) AND ($3 = '' OR actor = $3)
		ORDER BY created_at DESC, id DESC LIMIT $4`, tenantID, f.Action, f.Actor, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (AuditEvent, error) {
		var e AuditEvent
		err := r.Scan(&e.ID, &e.Actor, &e.Action, &e.Target, &e.Details, &e.CreatedAt)
		return e, err
	})
}

// AuditFacets are the distinct actions and actors of a tenant's audit log,
// for the admin page's filter.
func (tx *Tx) AuditFacets(ctx context.Context) (actions, actors []string, err error) {
	defer wrap(&err, "postgres.AuditFacets")
	tenantID := tx.tenantID
	rows, err := tx.q.Query(ctx, `SELECT DISTINCT action FROM audit_events WHERE tenant_id = $1 ORDER BY action`, tenantID)
	if err != nil {
		return nil, nil, err
	}
	if actions, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return nil, nil, err
	}
	rows, err = tx.q.Query(ctx, `SELECT DISTINCT actor FROM audit_events WHERE tenant_id = $1 ORDER BY actor`, tenantID)
	if err != nil {
		return nil, nil, err
	}
	actors, err = pgx.CollectRows(rows, pgx.RowTo[string])
	return actions, actors, err
}
