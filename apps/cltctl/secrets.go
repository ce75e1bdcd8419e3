package main

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

// learnSecrets records the fingerprints of secrets found in texts as the
// tenant's known secrets, so that MCP answers redact those values wherever
// they appear later, even without a pattern's context.
func learnSecrets(ctx context.Context, tx pgx.Tx, tid string, texts ...string) error {
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

// importTexts are the strings of an import that reach agents.
func importTexts(imp codelotse.ReviewImport) []string {
	out := []string{imp.Review.Summary}
	if imp.PullRequest != nil {
		out = append(out, imp.PullRequest.Title)
	}
	for _, f := range imp.Findings {
		out = append(out, f.Title, f.Body, f.Suggestion, f.Path)
	}
	return out
}

// snapshotTexts are the paths and chunk contents of an index.
func snapshotTexts(snap codeindex.Snapshot) []string {
	var out []string
	for _, f := range snap.Files {
		out = append(out, f.Path)
		for _, c := range codeindex.Chunks(f.Lines) {
			out = append(out, c.Content)
		}
	}
	return out
}
