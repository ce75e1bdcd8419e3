package jobs

import (
	"bytes"
	"context"
	"errors"
	"log/slog"

	"github.com/codelotse/codelotse/pkg/codeindex"
	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/githubapp"
	"github.com/codelotse/codelotse/pkg/postgres"
)

// indexPullHeads keeps the code index at the heads of the repository's
// open pull requests: for each whose head (or the base index beneath it)
// moved since it was indexed, the files it changes are read at its head
// (compare API, then one contents request per file) and stored as an
// overlay on the base index through pkg/ingest; the overlays of pull
// requests that are no longer open are dropped. A repository without a
// base index has nothing to overlay yet: the index job syncs it again
// once it has one. heads are the stored overlays' heads.
func (d *Deps) indexPullHeads(ctx context.Context, tid string, inst *githubapp.InstallationClient, repo codelotse.Repository, prs []githubapp.PullRequest, heads map[int]postgres.PullCodeHead) error {
	var open []int
	for _, pr := range prs {
		if pr.State != "open" || pr.HeadSHA == "" || repo.IndexedCommit == "" {
			continue
		}
		if h, ok := heads[pr.Number]; ok && h.HeadSHA == pr.HeadSHA && h.BaseSHA == repo.IndexedCommit {
			open = append(open, pr.Number)
			continue
		}
		changed, _, err := inst.ChangedFiles(ctx, repo.FullName, repo.IndexedCommit, pr.HeadSHA)
		if errors.Is(err, githubapp.ErrTooManyChanges) || codelotse.ErrorCode(err) == codelotse.NotFound {
			// Too big to overlay file by file, or the head is gone (a
			// force-push the listing has not caught up with): no overlay,
			// so the tools say the head is not indexed.
			d.log().Warn("pull request head not indexed", "repository", repo.FullName, "number", pr.Number, "err", err)
			continue
		}
		if err != nil {
			return err
		}
		files, deleted, err := readChanged(ctx, inst, repo.FullName, pr.HeadSHA, changed)
		if err != nil {
			return err
		}
		if err := d.DB.InTenant(ctx, tid, func(tx *postgres.Tx) error {
			_, err := d.Ingest.IndexPull(ctx, tx, repo.ID, pr.Number, pr.HeadSHA, repo.IndexedCommit, files, deleted)
			return err
		}); err != nil {
			return err
		}
		open = append(open, pr.Number)
	}
	return d.DB.InTenant(ctx, tid, func(tx *postgres.Tx) error {
		_, err := tx.DropPullIndexes(ctx, repo.ID, open)
		return err
	})
}

// readChanged reads the changed files at commit (one contents request
// each) and lists the paths that are gone (removed, or renamed away).
func readChanged(ctx context.Context, inst *githubapp.InstallationClient, fullName, commit string, changed []githubapp.ChangedFile) (files []codeindex.File, deleted []string, err error) {
	for _, c := range changed {
		switch c.Status {
		case "removed":
			deleted = append(deleted, c.Path)
			continue
		case "renamed":
			if c.PreviousPath != "" {
				deleted = append(deleted, c.PreviousPath)
			}
		}
		body, err := inst.FileAt(ctx, fullName, c.Path, commit)
		if err != nil {
			return nil, nil, err
		}
		files = append(files, headFile(c.Path, body))
	}
	return files, deleted, nil
}

// headFile is one file read at a pull request's head, with the base
// index's rules: binary files and files over 1 MiB are listed, not indexed.
func headFile(path string, body []byte) codeindex.File {
	f := codeindex.File{Path: path, Size: int64(len(body)), Language: codeindex.Language(path)}
	switch {
	case len(body) > codeindex.MaxFileBytes:
		f.SkipReason = "too large"
	case codeindex.IsBinary(body):
		f.SkipReason = "binary"
	default:
		// As the archive reader does: text is stored as valid UTF-8.
		f.Lines = codeindex.SplitLines(string(bytes.ToValidUTF8(body, []byte("\uFFFD"))))
	}
	return f
}

// log is the worker's logger, or a silent one in tests that set none.
func (d *Deps) log() *slog.Logger {
	if d.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return d.Logger
}

// maxIncrementalFiles: a push that changes more files than this is
// re-indexed from the archive, one request instead of one per file.
const maxIncrementalFiles = 100

// indexIncrementally moves the default branch's index from its indexed
// commit to head by reading only the files that changed (compare, then
// contents at head), when head is a fast-forward of the indexed commit
// and few files changed. It reports whether it did; otherwise the caller
// re-indexes from the archive (first index, force-push, large change, or
// too many files out of path order: postgres.ErrIndexScattered).
func (d *Deps) indexIncrementally(ctx context.Context, tid string, inst *githubapp.InstallationClient, repo codelotse.Repository, head string) (bool, error) {
	if repo.IndexedCommit == "" {
		return false, nil
	}
	changed, ahead, err := inst.ChangedFiles(ctx, repo.FullName, repo.IndexedCommit, head)
	if errors.Is(err, githubapp.ErrTooManyChanges) || codelotse.ErrorCode(err) == codelotse.NotFound {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !ahead || len(changed) > maxIncrementalFiles {
		return false, nil
	}
	files, deleted, err := readChanged(ctx, inst, repo.FullName, head, changed)
	if err != nil {
		return false, err
	}
	err = d.DB.InTenant(ctx, tid, func(tx *postgres.Tx) error {
		_, err := d.Ingest.IndexChanges(ctx, tx, repo.ID, head, files, deleted, worker)
		return err
	})
	if errors.Is(err, postgres.ErrIndexScattered) {
		// Too many of its files lie out of path order: the whole
		// repository is written again from the archive (migration 0071).
		d.log().Info("index scattered: indexing whole", "tenant", tid, "repository", repo.FullName)
		return false, nil
	}
	return err == nil, err
}
