package jobs

import (
	"bytes"
	"context"
	"errors"
	"log/slog"

	"github.com/jackc/pgx/v5"

	"github.com/codelotse/codelotse/pkg/codeindex"
	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/githubapp"
	"github.com/codelotse/codelotse/pkg/ingest"
	"github.com/codelotse/codelotse/pkg/postgres"
)

// indexPullHeads keeps the code index at the heads of the repository's
// open pull requests: for each whose head (or the base index beneath it)
// moved since it was indexed, the files it changes are read at its head
// (compare API, then one contents request per file) and stored as an
// overlay on the base index through pkg/ingest; the overlays of pull
// requests that are no longer open are dropped. A repository without a
// base index has nothing to overlay yet: the index job syncs it again
// once it has one.
func (d *Deps) indexPullHeads(ctx context.Context, tid string, inst *githubapp.InstallationClient, repo codelotse.Repository, prs []githubapp.PullRequest) error {
	var heads map[int]postgres.PullCodeHead
	if err := d.DB.InTenant(ctx, tid, func(tx pgx.Tx) error {
		var err error
		heads, err = postgres.PullCodeHeads(ctx, tx, tid, repo.ID)
		return err
	}); err != nil {
		return err
	}
	var open []int
	for _, pr := range prs {
		if pr.State != "open" || pr.HeadSHA == "" || repo.IndexedCommit == "" {
			continue
		}
		if h, ok := heads[pr.Number]; ok && h.HeadSHA == pr.HeadSHA && h.BaseSHA == repo.IndexedCommit {
			open = append(open, pr.Number)
			continue
		}
		changed, err := inst.ChangedFiles(ctx, repo.FullName, repo.IndexedCommit, pr.HeadSHA)
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
		var files []codeindex.File
		var deleted []string
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
			body, err := inst.FileAt(ctx, repo.FullName, c.Path, pr.HeadSHA)
			if err != nil {
				return err
			}
			files = append(files, headFile(c.Path, body))
		}
		if err := d.DB.InTenant(ctx, tid, func(tx pgx.Tx) error {
			_, err := ingest.IndexPull(ctx, tx, tid, repo.ID, pr.Number, pr.HeadSHA, repo.IndexedCommit, files, deleted)
			return err
		}); err != nil {
			return err
		}
		open = append(open, pr.Number)
	}
	return d.DB.InTenant(ctx, tid, func(tx pgx.Tx) error {
		_, err := postgres.DropPullIndexes(ctx, tx, tid, repo.ID, open)
		return err
	})
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
