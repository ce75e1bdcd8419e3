-- Keys of the service itself that every replica must share and that no
-- operator has to manage: today the key that signs MCP cursors when
-- CURSOR_KEY is not set. The first process that needs a key inserts a
-- random one (crypto/rand); every later one reads it. Not a tenant table:
-- the key is the service's, like the schema.
CREATE TABLE server_keys (
    name       text PRIMARY KEY CHECK (name ~ '^[a-z][a-z0-9_]{0,39}$'),
    key        bytea NOT NULL CHECK (length(key) >= 32),
    created_at timestamptz NOT NULL DEFAULT now()
);
