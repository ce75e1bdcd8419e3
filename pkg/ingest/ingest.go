// Package ingest is the one path by which text an agent can read reaches
// storage: the code index (file contents and paths), review imports (pull
// requests, reviews, findings), rules and repository names. Every document
// is sanitised first (invisible characters removed, shape.Sanitize), then
// its secrets are learned as the tenant's known secrets (fingerprints, for
// bare values found elsewhere later), then the whole document is redacted
// with full multi-line context, and only the redacted text is stored. A
// secret spanning lines becomes one placeholder per line, so line numbers
// stay true.
//
// Nothing else may write those tables (TestOnlyIngestWritesAgentText
// enforces it). The package keeps no state of its own: the scanner is
// passed in, built once per process by the caller.
package ingest

import (
	"context"
	"fmt"
	"strings"

	"github.com/codelotse/codelotse/pkg/codeindex"
	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/secretscan"
	"github.com/codelotse/codelotse/pkg/shape"
)

// Ingester sanitises and redacts documents before they are stored. It is
// safe for concurrent use.
type Ingester struct {
	scanner *secretscan.Redactor
}

// New returns an Ingester that redacts with scanner (secretscan.New(), built
// once per process and shared with the output shaping).
func New(scanner *secretscan.Redactor) *Ingester { return &Ingester{scanner: scanner} }

// Learned collects the fingerprints of the secrets found while preparing
// documents, to be recorded in the same transaction as the rows.
type Learned struct {
	seen  map[[32]byte]bool
	fps   []postgres.SecretFingerprint
	found []secretscan.Found
}

func (l *Learned) add(found []secretscan.Found) {
	l.found = append(l.found, found...)
	for _, f := range found {
		if l.seen == nil {
			l.seen = map[[32]byte]bool{}
		}
		if l.seen[f.Fingerprint] {
			continue
		}
		l.seen[f.Fingerprint] = true
		h := f.Fingerprint
		l.fps = append(l.fps, postgres.SecretFingerprint{Fingerprint: h[:], Length: f.Length, RuleID: f.RuleID})
	}
}

// known returns a redactor of the tenant's stored known secrets plus those
// learned so far, so that a bare value of a secret (a token alone in a
// path, a private key's body without its BEGIN line) is not stored either;
// nil when there are none.
func (l *Learned) known(ctx context.Context, tx *postgres.Tx) (*secretscan.Known, error) {
	stored, err := tx.SecretFingerprints(ctx)
	if err != nil {
		return nil, err
	}
	all := append([]secretscan.Found(nil), l.found...)
	for _, f := range stored {
		var h [32]byte
		copy(h[:], f.Fingerprint)
		all = append(all, secretscan.Found{RuleID: f.RuleID, Fingerprint: h, Length: f.Length})
	}
	return secretscan.NewKnown(all), nil
}

// Record stores the learned fingerprints in tx.
func (l *Learned) Record(ctx context.Context, tx *postgres.Tx) error {
	return tx.RecordSecretFingerprints(ctx, l.fps)
}

// Document returns the text to store for one whole document (a file, a
// finding body, a title, a path): sanitised, then redacted with the whole
// document as context. The secrets found are added to l (which may be nil).
// The result has as many lines as s.
func (in *Ingester) Document(s string, l *Learned) string {
	if s == "" {
		return s
	}
	// Stored text must be valid UTF-8 (PostgreSQL refuses anything else):
	// a file name in another encoding, which git allows and a push or an
	// archive brings, made a whole repository's indexing fail. Its invalid
	// bytes become U+FFFD, as file contents' do (codeindex), and a path
	// that then collides with another gets a numbered suffix (snapshot).
	s = shape.Sanitize(strings.ToValidUTF8(s, "\uFFFD"))
	out, found := in.scanner.RedactAndFind(s)
	if l != nil {
		l.add(found)
	}
	return out
}

// File returns f as it is stored: its path and its whole content (all lines
// joined, so rules that need the surrounding lines see them) prepared as
// documents, with the same number of lines.
func (in *Ingester) File(f codeindex.File, l *Learned) codeindex.File {
	return in.file(f, func(s string) string { return in.Document(s, l) })
}

func (in *Ingester) file(f codeindex.File, d func(string) string) codeindex.File {
	f.Path = d(f.Path)
	if len(f.Lines) == 0 {
		return f
	}
	doc := d(strings.Join(f.Lines, "\n"))
	lines := strings.Split(doc, "\n")
	if len(lines) != len(f.Lines) {
		// Sanitising and redacting never add or remove a newline; were that
		// broken, store placeholders rather than misnumbered or raw lines.
		lines = make([]string, len(f.Lines))
		for i := range lines {
			lines[i] = "[REDACTED:" + secretscan.Unavailable + "]"
		}
	}
	f.Lines = lines
	return f
}

// Snapshot prepares every file of snap. Two paths that differ only in a
// secret redact to the same text; the later ones get a numbered suffix so
// that both files stay in the index.
func (in *Ingester) Snapshot(snap codeindex.Snapshot, l *Learned) codeindex.Snapshot {
	return in.snapshot(snap, func(s string) string { return in.Document(s, l) })
}

func (in *Ingester) snapshot(snap codeindex.Snapshot, d func(string) string) codeindex.Snapshot {
	out := codeindex.Snapshot{Commit: snap.Commit, Files: make([]codeindex.File, len(snap.Files))}
	seen := make(map[string]bool, len(snap.Files))
	var renamed []int
	for i, f := range snap.Files {
		orig := f.Path
		out.Files[i] = in.file(f, d)
		if out.Files[i].Path != orig {
			renamed = append(renamed, i)
			continue
		}
		seen[orig] = true
	}
	// A file whose name was rewritten (a secret redacted, invalid bytes
	// made U+FFFD) never takes the name of a file stored as it is named:
	// those keep their names, and a rewritten name that collides gets a
	// numbered suffix.
	for _, i := range renamed {
		f := &out.Files[i]
		if seen[f.Path] {
			base := f.Path
			for n := 2; seen[f.Path]; n++ {
				f.Path = fmt.Sprintf("%s~%d", base, n)
			}
		}
		seen[f.Path] = true
	}
	return out
}

// ReviewImport prepares every agent-readable string of imp.
func (in *Ingester) ReviewImport(imp codelotse.ReviewImport, l *Learned) codelotse.ReviewImport {
	return reviewImport(imp, func(s string) string { return in.Document(s, l) })
}

func reviewImport(imp codelotse.ReviewImport, d func(string) string) codelotse.ReviewImport {
	imp.Repository = d(imp.Repository)
	imp.Source = d(imp.Source)
	if imp.PullRequest != nil {
		pr := *imp.PullRequest
		pr.Title, pr.Author, pr.BaseRef, pr.HeadRef, pr.URL = d(pr.Title), d(pr.Author), d(pr.BaseRef), d(pr.HeadRef), d(pr.URL)
		imp.PullRequest = &pr
	}
	r := &imp.Review
	// The status is free text in a review import and shown to agents.
	r.ExternalID, r.Status, r.Summary, r.Author = d(r.ExternalID), d(r.Status), d(r.Summary), d(r.Author)
	findings := make([]codelotse.Finding, len(imp.Findings))
	for i, f := range imp.Findings {
		f.RuleKey, f.Path, f.Title, f.Body, f.Suggestion, f.Source = d(f.RuleKey), d(f.Path), d(f.Title), d(f.Body), d(f.Suggestion), d(f.Source)
		findings[i] = f
	}
	imp.Findings = findings
	return imp
}

// Rule prepares a rule's title, instructions and path globs.
func (in *Ingester) Rule(r codelotse.Rule, l *Learned) codelotse.Rule {
	return rule(r, func(s string) string { return in.Document(s, l) })
}

func rule(r codelotse.Rule, d func(string) string) codelotse.Rule {
	r.Title, r.Instructions = d(r.Title), d(r.Instructions)
	globs := make([]string, len(r.PathGlobs))
	for i, g := range r.PathGlobs {
		globs[i] = d(g)
	}
	if r.PathGlobs == nil {
		globs = nil
	}
	r.PathGlobs = globs
	return r
}

// Index replaces a repository's code index with snap, redacted, and learns
// its secrets, in tx.
func (in *Ingester) Index(ctx context.Context, tx *postgres.Tx, repoID int64, snap codeindex.Snapshot, actor postgres.Actor) (postgres.IndexResult, error) {
	var l Learned
	snap = in.Snapshot(snap, &l)
	k, err := l.known(ctx, tx)
	if err != nil {
		return postgres.IndexResult{}, err
	}
	if k != nil {
		snap = in.snapshot(snap, knownPass(k))
	}
	res, err := tx.ReplaceIndex(ctx, repoID, snap, actor)
	if err != nil {
		return res, err
	}
	return res, l.Record(ctx, tx)
}

// Import stores a review import, redacted, and learns its secrets, in tx.
func (in *Ingester) Import(ctx context.Context, tx *postgres.Tx, imp codelotse.ReviewImport, actor postgres.Actor) (postgres.ImportResult, error) {
	var l Learned
	imp = in.ReviewImport(imp, &l)
	k, err := l.known(ctx, tx)
	if err != nil {
		return postgres.ImportResult{}, err
	}
	if k != nil {
		imp = reviewImport(imp, knownPass(k))
	}
	res, err := tx.ImportReview(ctx, imp, actor)
	if err != nil {
		return res, err
	}
	return res, l.Record(ctx, tx)
}

// UpsertRule stores a rule, redacted, and learns its secrets, in tx. A key
// that holds a secret is refused: keys are identifiers that operators type.
func (in *Ingester) UpsertRule(ctx context.Context, tx *postgres.Tx, repoID *int64, r codelotse.Rule) (int64, error) {
	var l Learned
	if key := in.Document(r.Key, &l); key != r.Key {
		return 0, codelotse.Errorf(codelotse.Invalid, "rule key %s looks like a secret; choose another key", key)
	}
	r = in.Rule(r, &l)
	k, err := l.known(ctx, tx)
	if err != nil {
		return 0, err
	}
	if k != nil {
		r = rule(r, knownPass(k))
	}
	id, err := tx.UpsertRule(ctx, repoID, r)
	if err != nil {
		return id, err
	}
	return id, l.Record(ctx, tx)
}

// repository prepares what AddRepository and UpsertGitHubRepository store:
// the default branch and URL as documents, then the bare values of the
// tenant's known secrets, as every other stored text. A name that holds a
// secret, by pattern or known, is refused (full names are identifiers that
// other paths look repositories up by, and the schema allows only
// OWNER/NAME characters, so a placeholder cannot be stored).
func (in *Ingester) repository(ctx context.Context, tx *postgres.Tx, name string, texts ...*string) (*Learned, error) {
	var l Learned
	clean := in.Document(name, &l)
	for _, s := range texts {
		*s = in.Document(*s, &l)
	}
	k, err := l.known(ctx, tx)
	if err != nil {
		return nil, err
	}
	if k != nil {
		pass := knownPass(k)
		clean = pass(clean)
		for _, s := range texts {
			*s = pass(*s)
		}
	}
	if clean != name {
		return nil, codelotse.Errorf(codelotse.Invalid, "repository name %s looks like a secret and is not stored", clean)
	}
	return &l, nil
}

// AddRepository registers a repository (its URL redacted), in tx.
func (in *Ingester) AddRepository(ctx context.Context, tx *postgres.Tx, nr postgres.NewRepository) (codelotse.Repository, error) {
	l, err := in.repository(ctx, tx, nr.FullName, &nr.DefaultBranch, &nr.URL)
	if err != nil {
		return codelotse.Repository{}, err
	}
	r, err := tx.AddRepository(ctx, nr)
	if err != nil {
		return r, err
	}
	return r, l.Record(ctx, tx)
}

// UpsertGitHubRepository stores a repository reported by GitHub (its URL
// and default branch redacted), in tx.
func (in *Ingester) UpsertGitHubRepository(ctx context.Context, tx *postgres.Tx, githubID int64, fullName, defaultBranch, url string, private, settle bool) (int64, error) {
	l, err := in.repository(ctx, tx, fullName, &defaultBranch, &url)
	if err != nil {
		return 0, err
	}
	id, err := tx.UpsertGitHubRepository(ctx, githubID, fullName, defaultBranch, url, private, settle)
	if err != nil {
		return id, err
	}
	return id, l.Record(ctx, tx)
}

// knownPass redacts bare values of known secrets in an already prepared
// document (line by line: known values never span lines).
func knownPass(k *secretscan.Known) func(string) string {
	return func(s string) string {
		out, _ := k.Redact(s)
		return out
	}
}

// files prepares changed files and deleted paths of a partial index (a
// pull request's head, or a push's changes) exactly as Index prepares a
// whole snapshot: the files sanitised and redacted as documents, then the
// known secrets' bare values; deleted paths the same way, so that they name
// the paths as they were stored.
func (in *Ingester) files(ctx context.Context, tx *postgres.Tx, commit string, files []codeindex.File, deleted []string, l *Learned) ([]codeindex.File, []string, error) {
	snap := in.Snapshot(codeindex.Snapshot{Commit: commit, Files: files}, l)
	dels := make([]string, len(deleted))
	for i, p := range deleted {
		dels[i] = in.Document(p, l)
	}
	k, err := l.known(ctx, tx)
	if err != nil {
		return nil, nil, err
	}
	if k != nil {
		pass := knownPass(k)
		snap = in.snapshot(snap, pass)
		for i := range dels {
			dels[i] = pass(dels[i])
		}
	}
	return snap.Files, dels, nil
}

// IndexPull stores a pull request's head as an overlay on the base index
// (the files it changes, the paths it deletes), redacted, and learns its
// secrets, in tx.
func (in *Ingester) IndexPull(ctx context.Context, tx *postgres.Tx, repoID int64, number int, head, base string, files []codeindex.File, deleted []string) (postgres.IndexResult, error) {
	var l Learned
	files, deleted, err := in.files(ctx, tx, head, files, deleted, &l)
	if err != nil {
		return postgres.IndexResult{}, err
	}
	res, err := tx.ReplacePullIndex(ctx, repoID, number, head, base, files, deleted)
	if err != nil {
		return res, err
	}
	return res, l.Record(ctx, tx)
}

// IndexChanges moves a repository's index to commit by replacing only the
// changed files and removing the deleted ones, redacted, and learns the
// secrets of what it stores, in tx.
func (in *Ingester) IndexChanges(ctx context.Context, tx *postgres.Tx, repoID int64, commit string, changed []codeindex.File, deleted []string, actor postgres.Actor) (postgres.IndexResult, error) {
	var l Learned
	changed, deleted, err := in.files(ctx, tx, commit, changed, deleted, &l)
	if err != nil {
		return postgres.IndexResult{}, err
	}
	res, err := tx.UpdateIndex(ctx, repoID, commit, changed, deleted, actor)
	if err != nil {
		return res, err
	}
	return res, l.Record(ctx, tx)
}
