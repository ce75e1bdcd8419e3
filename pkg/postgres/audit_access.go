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
func AddLocalMember(ctx context.Context, tx pgx.Tx, tenantID, email, name string, role codelotse.Role, now time.Time, actor Actor) (codelotse.User, error) {
	u, err := UpsertLocalUser(ctx, tx, tenantID, email, name, role, now)
	if err != nil {
		return u, err
	}
	return u, insertAudit(ctx, tx, tenantID, actor, "user.added", u.Email, map[string]any{"role": role, "source": codelotse.MembershipLocal})
}

// SetLocalMembership writes a local membership of role for a user (cltctl
// membership refresh) and audits it as membership.set.
func SetLocalMembership(ctx context.Context, tx pgx.Tx, tenantID string, u codelotse.User, role codelotse.Role, now time.Time, actor Actor) error {
	if err := RefreshMembership(ctx, tx, tenantID, u.ID, role, codelotse.MembershipLocal, now); err != nil {
		return err
	}
	return insertAudit(ctx, tx, tenantID, actor, "membership.set", u.Email, map[string]any{"role": role, "source": codelotse.MembershipLocal})
}

// GrantRepositoryAudited lets a user view a repository and audits it as
// repository.granted.
func GrantRepositoryAudited(ctx context.Context, tx pgx.Tx, tenantID string, u codelotse.User, r codelotse.Repository, actor Actor) error {
	if err := GrantRepository(ctx, tx, tenantID, u.ID, r.ID); err != nil {
		return err
	}
	return insertAudit(ctx, tx, tenantID, actor, "repository.granted", r.FullName, map[string]any{"user": u.Email})
}

// AuditRepositoryAdded records that an operator registered a repository
// (tenant admins see it from then on).
func AuditRepositoryAdded(ctx context.Context, tx pgx.Tx, tenantID string, r codelotse.Repository, actor Actor) error {
	return insertAudit(ctx, tx, tenantID, actor, "repository.added", r.FullName, map[string]any{"private": r.Private})
}

// AuditLinkSignIn records a sign-in through a single-use link: break-glass
// (an operator's emergency access to everything) or development.
func AuditLinkSignIn(ctx context.Context, tx pgx.Tx, tenantID, userID, kind string) error {
	var email string
	if err := tx.QueryRow(ctx, `SELECT email FROM users WHERE tenant_id = $1 AND id = $2`, tenantID, userID).Scan(&email); err != nil {
		return err
	}
	action := "user.signed_in"
	if kind == "break-glass" {
		action = "break_glass.signed_in"
	}
	return insertAudit(ctx, tx, tenantID, Actor{UserID: userID, Label: email}, action, email, map[string]any{"method": kind + " link"})
}

// AuditFilter narrows ListAuditFiltered; empty fields match everything.
type AuditFilter struct {
	Action, Actor string
}

// ListAuditFiltered returns the newest events first, only those with the
// action and actor given (exact matches).
func ListAuditFiltered(ctx context.Context, tx pgx.Tx, tenantID string, f AuditFilter, limit int) ([]AuditEvent, error) {
	rows, err := tx.Query(ctx, `SELECT id, actor, action, target, details, created_at FROM audit_events
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
func AuditFacets(ctx context.Context, tx pgx.Tx, tenantID string) (actions, actors []string, err error) {
	rows, err := tx.Query(ctx, `SELECT DISTINCT action FROM audit_events WHERE tenant_id = $1 ORDER BY action`, tenantID)
	if err != nil {
		return nil, nil, err
	}
	if actions, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return nil, nil, err
	}
	rows, err = tx.Query(ctx, `SELECT DISTINCT actor FROM audit_events WHERE tenant_id = $1 ORDER BY actor`, tenantID)
	if err != nil {
		return nil, nil, err
	}
	actors, err = pgx.CollectRows(rows, pgx.RowTo[string])
	return actions, actors, err
}
