package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// HandoffTTL is how long a created token waits for the page that shows it:
// the redirect follows at once, so a minute is plenty.
const HandoffTTL = 5 * time.Minute

// CreateTokenHandoff stores a sealed token for the session's next page view
// and returns the handoff's id (migration 0040). Expired handoffs of the
// tenant are removed on the way.
func (tx *Tx) CreateTokenHandoff(ctx context.Context, sessionID, tokenID string, sealed []byte) (_ string, err error) {
	defer wrap(&err, "postgres.CreateTokenHandoff")
	tenantID := tx.tenantID
	if _, err := tx.q.Exec(ctx, `DELETE FROM token_handoffs WHERE tenant_id = $1 AND expires_at < now()`, tenantID); err != nil {
		return "", err
	}
	var id string
	err = tx.q.QueryRow(ctx, `INSERT INTO token_handoffs (tenant_id, session_id, token_id, sealed, expires_at)
		VALUES ($1, $2, $3, $4, now() + $5::interval) RETURNING id::text`,
		tenantID, sessionID, tokenID, sealed, HandoffTTL.String()).Scan(&id)
	return id, err
}

// TakeTokenHandoff removes the session's handoff id and returns its sealed
// token and the token's name; found is false when there is none (already
// shown, expired, another session's, or not an id at all).
func (tx *Tx) TakeTokenHandoff(ctx context.Context, sessionID, id string) (sealed []byte, name string, found bool, err error) {
	defer wrap(&err, "postgres.TakeTokenHandoff")
	tenantID := tx.tenantID
	if !uuidLike(id) {
		return nil, "", false, nil
	}
	err = tx.q.QueryRow(ctx, `WITH taken AS (
			DELETE FROM token_handoffs WHERE tenant_id = $1 AND session_id = $2 AND id = $3::uuid AND expires_at > now()
			RETURNING token_id, sealed)
		SELECT taken.sealed, t.name FROM taken JOIN mcp_tokens t ON t.tenant_id = $1 AND t.id = taken.token_id`,
		tenantID, sessionID, id).Scan(&sealed, &name)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, "", false, nil
	}
	return sealed, name, err == nil, err
}

// uuidLike reports whether s has the canonical form of a UUID, so that a
// mangled URL parameter is "not found" rather than a cast error.
func uuidLike(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return false
			}
		case (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'):
		default:
			return false
		}
	}
	return true
}
