// Package db embeds the forward-only migrations (migrations/NNNN_verb_noun.sql).
// A migration is never edited after it lands; a change is a new file.
package db

import "embed"

//go:embed migrations/*.sql
var Migrations embed.FS
