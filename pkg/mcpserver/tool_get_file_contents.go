package mcpserver

import (
	"context"
	"fmt"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/shape"
)

var getFileContents = newTool("get_file_contents", "Get file contents",
	"Returns one file of the code index (or a window of its lines) at the repository's indexed commit or a pull request's head, numbered, with the total line count. "+
		"Long files come back in windows: when the result says truncated, call again with start_line set to next_start_line. "+
		"Use search_code to find where to look.",
	runGetFileContents)

type getFileContentsArgs struct {
	Repository  repoRef `json:"repository" schema:"required" desc:"Repository id or full name (owner/name)."`
	Path        string  `json:"path" schema:"required,minLength=1" desc:"File path relative to the repository root, as search_code returns it."`
	StartLine   *int    `json:"start_line" schema:"minimum=1" desc:"First line to return (default 1)."`
	EndLine     *int    `json:"end_line" schema:"minimum=1" desc:"Last line to return (default: the end of the file)."`
	PullRequest *int    `json:"pull_request" schema:"minimum=1" desc:"Read the file at this pull request's head instead."`
}

// maxFileWindow bounds the lines read per call; the 32 KiB cap usually
// shortens the window further.
const maxFileWindow = 2000

func runGetFileContents(ctx context.Context, s *session, in getFileContentsArgs) (shape.Doc, error) {
	ref, _, err := repositoryArg(in.Repository)
	if err != nil {
		return shape.Doc{}, err
	}
	from, to := 1, 0
	if in.StartLine != nil {
		from = *in.StartLine
	}
	if in.EndLine != nil {
		if *in.EndLine < from {
			return shape.Doc{}, codelotse.Errorf(codelotse.Invalid, "end_line must not be before start_line.")
		}
		to = *in.EndLine
	}
	if to == 0 || to-from+1 > maxFileWindow {
		to = from + maxFileWindow - 1
	}
	r, err := s.deps.DB.Tenant(s.principal.TenantID).ResolveRepository(ctx, s.filter(), ref)
	if err != nil {
		return shape.Doc{}, err
	}
	if r.IndexedCommit == "" {
		return shape.Doc{}, codelotse.Errorf(codelotse.NotFound, "Repository %s has no code index yet.", r.FullName)
	}
	var f postgres.IndexedFile
	if in.PullRequest != nil {
		h, ok, err := s.deps.DB.Tenant(s.principal.TenantID).PullHead(ctx, r.ID, *in.PullRequest)
		if err != nil {
			return shape.Doc{}, err
		}
		if !ok {
			return shape.Doc{}, codelotse.Errorf(codelotse.NotFound, "Pull request #%d of %s has no index of its head: it is not open, or not indexed yet. Omit pull_request to read %s's indexed commit.", *in.PullRequest, r.FullName, r.FullName)
		}
		f, err = s.deps.DB.Tenant(s.principal.TenantID).ReadPullFile(ctx, r.ID, h, trimPath(in.Path), from, to)
		if err != nil {
			return shape.Doc{}, err
		}
	} else {
		f, err = s.deps.DB.Tenant(s.principal.TenantID).ReadIndexedFile(ctx, r.ID, trimPath(in.Path), from, to)
		if err != nil {
			return shape.Doc{}, err
		}
	}
	if f.SkipReason != "" {
		return shape.Doc{}, codelotse.Errorf(codelotse.NotFound, "%s is in the repository but not indexed (%s, %d bytes).", f.Path, f.SkipReason, f.Size)
	}
	if from > f.LineCount && f.LineCount > 0 {
		return shape.Doc{}, codelotse.Errorf(codelotse.Invalid, "start_line %d is past the end of the file (%d lines).", from, f.LineCount)
	}
	last := f.FirstLine + len(f.Lines) - 1
	redactions := map[string]int{}
	lines := s.redactLines(ctx, f.Lines, redactions)
	items := make([]any, len(lines))
	for i, l := range lines {
		items[i] = fmt.Sprintf("%d: %s", f.FirstLine+i, l)
	}
	doc := shape.Doc{
		Head: []shape.Field{
			{Key: "repository", Value: r.FullName},
			{Key: "commit", Value: f.Commit},
			{Key: "path", Value: f.Path},
			{Key: "language", Value: f.Language},
			{Key: "total_lines", Value: f.LineCount},
			{Key: "start_line", Value: f.FirstLine},
		},
		ListKey:    "lines",
		Items:      items,
		Redactions: redactions,
		CursorKey:  "next_start_line",
		Cursor:     func(i int) any { return f.FirstLine + i + 1 },
	}
	if last < f.LineCount && (in.EndLine == nil || last < *in.EndLine) {
		doc.NextCursor = last + 1
	}
	return doc, nil
}
