package postgres

import (
	"context"
	"crypto/rand"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// ServerKey returns the service key called name, creating a random 32-byte
// key the first time. Concurrent first calls from several replicas agree:
// the insert is ON CONFLICT DO NOTHING and everyone reads the row that won.
func (db *DB) ServerKey(ctx context.Context, name string) (_ []byte, err error) {
	defer wrap(&err, "postgres.ServerKey")
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	var key []byte
	// A second attempt covers the race where another replica's insert
	// committed after this statement's snapshot was taken: the insert then
	// does nothing and the snapshot does not see the winner's row yet.
	for range 2 {
		err = db.Pool.QueryRow(ctx, `WITH ins AS (
				INSERT INTO server_keys (name, key) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING RETURNING key)
			SELECT key FROM ins UNION ALL SELECT key FROM server_keys WHERE name = $1 LIMIT 1`, name, k).Scan(&key)
		if !errors.Is(err, pgx.ErrNoRows) {
			break
		}
	}
	if err != nil {
		return nil, codelotse.Wrap(codelotse.Unavailable, err, "reading server key "+name)
	}
	return key, nil
}
