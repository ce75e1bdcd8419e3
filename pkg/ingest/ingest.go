// Package ingest holds what every path that stores content (cltctl
// imports and indexing, the GitHub worker) does besides storing it:
// learning the secrets in that content as the tenant's known secrets, so
// that MCP answers redact those values wherever they appear later.
package ingest

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/codelotse/codelotse/pkg/codeindex"
	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/secretscan"
)

var (
	scannerOnce sync.Once
	scanner     *secretscan.Redactor
)

// LearnSecrets records the fingerprints of secrets found in texts, in tx.
func LearnSecrets(ctx context.Context, tx pgx.Tx, tid string, texts ...string) error {
	scannerOnce.Do(func() { scanner = secretscan.New() })
	seen := map[[32]byte]bool{}
	var fps []postgres.SecretFingerprint
	for _, t := range texts {
		for _, f := range scanner.Find(t) {
			if seen[f.Fingerprint] {
				continue
			}
			seen[f.Fingerprint] = true
			h := f.Fingerprint
			fps = append(fps, postgres.SecretFingerprint{Fingerprint: h[:], Length: f.Length, RuleID: f.RuleID})
		}
	}
	return postgres.RecordSecretFingerprints(ctx, tx, tid, fps)
}

// ImportTexts are the strings of an import that reach agents.
func ImportTexts(imp codelotse.ReviewImport) []string {
	out := []string{imp.Review.Summary}
	if imp.PullRequest != nil {
		out = append(out, imp.PullRequest.Title)
	}
	for _, f := range imp.Findings {
		out = append(out, f.Title, f.Body, f.Suggestion, f.Path)
	}
	return out
}

// SnapshotTexts are the paths and chunk contents of an index.
func SnapshotTexts(snap codeindex.Snapshot) []string {
	var out []string
	for _, f := range snap.Files {
		out = append(out, f.Path)
		for _, c := range codeindex.Chunks(f.Lines) {
			out = append(out, c.Content)
		}
	}
	return out
}

// Import stores a review import and learns its secrets, in tx.
func Import(ctx context.Context, tx pgx.Tx, tid string, imp codelotse.ReviewImport, actor postgres.Actor) (postgres.ImportResult, error) {
	res, err := postgres.ImportReview(ctx, tx, tid, imp, actor)
	if err != nil {
		return res, err
	}
	return res, LearnSecrets(ctx, tx, tid, ImportTexts(imp)...)
}

// Index replaces a repository's index with snap and learns its secrets, in tx.
func Index(ctx context.Context, tx pgx.Tx, tid string, repoID int64, snap codeindex.Snapshot, actor postgres.Actor) (postgres.IndexResult, error) {
	res, err := postgres.ReplaceIndex(ctx, tx, tid, repoID, snap, actor)
	if err != nil {
		return res, err
	}
	return res, LearnSecrets(ctx, tx, tid, SnapshotTexts(snap)...)
}

// IndexPull stores a pull request's head as an overlay on the base index
// (the files it changes, the paths it deletes) and learns its secrets, in
// tx.
func IndexPull(ctx context.Context, tx pgx.Tx, tid string, repoID int64, number int, head, base string, files []codeindex.File, deleted []string) (postgres.IndexResult, error) {
	res, err := postgres.ReplacePullIndex(ctx, tx, tid, repoID, number, head, base, files, deleted)
	if err != nil {
		return res, err
	}
	return res, LearnSecrets(ctx, tx, tid, append(SnapshotTexts(codeindex.Snapshot{Commit: head, Files: files}), deleted...)...)
}

// IndexChanges moves a repository's index to commit by replacing only the
// changed files and removing the deleted ones, and learns the secrets of
// what it stores, in tx.
func IndexChanges(ctx context.Context, tx pgx.Tx, tid string, repoID int64, commit string, changed []codeindex.File, deleted []string, actor postgres.Actor) (postgres.IndexResult, error) {
	res, err := postgres.UpdateIndex(ctx, tx, tid, repoID, commit, changed, deleted, actor)
	if err != nil {
		return res, err
	}
	return res, LearnSecrets(ctx, tx, tid, append(SnapshotTexts(codeindex.Snapshot{Commit: commit, Files: changed}), deleted...)...)
}
