package githubapp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// ChangedFile is a file that differs between two commits.
type ChangedFile struct {
	Path string
	// Status is GitHub's: added, modified, removed, renamed, copied,
	// changed or unchanged.
	Status string
	// PreviousPath is the old path of a renamed file.
	PreviousPath string
}

// MaxCompareFiles is the most files GitHub's compare API lists; a larger
// difference is cut off there, so it cannot be indexed file by file.
const MaxCompareFiles = 300

// ErrTooManyChanges means a comparison reached MaxCompareFiles.
var ErrTooManyChanges = codelotse.Errorf(codelotse.Invalid, "the pull request changes more files than GitHub's compare API lists (300)")

// ChangedFiles lists the files that differ from base to head
// (GET /repos/{owner}/{repo}/compare/{base}...{head}, its files paged);
// base and head are commit ids. GitHub compares head with the merge base
// of the two, which for a pull request's head against its base branch are
// the files the pull request changes.
//
// ahead reports GitHub's status "ahead" (or "identical"): base is an
// ancestor of head, so the files listed are all that differ between them.
func (c *InstallationClient) ChangedFiles(ctx context.Context, fullName, base, head string) (files []ChangedFile, ahead bool, err error) {
	p, err := c.repoPath(fullName)
	if err != nil {
		return nil, false, err
	}
	if !objectID(base) || !objectID(head) {
		return nil, false, codelotse.Errorf(codelotse.Invalid, "compare needs two commit ids")
	}
	p += "/compare/" + base + "..." + head
	type file struct {
		Filename         string `json:"filename"`
		Status           string `json:"status"`
		PreviousFilename string `json:"previous_filename"`
	}
	status := ""
	raw, err := list(ctx, c, "GET /"+p, c.app.endpoint(p, url.Values{"per_page": {strconv.Itoa(perPage)}}),
		func(body []byte) ([]file, error) {
			var page struct {
				Status string `json:"status"`
				Files  []file `json:"files"`
			}
			err := json.Unmarshal(body, &page)
			status = page.Status
			return page.Files, err
		}, nil)
	if err != nil {
		return nil, false, err
	}
	if len(raw) >= MaxCompareFiles {
		return nil, false, ErrTooManyChanges
	}
	out := make([]ChangedFile, 0, len(raw))
	for _, f := range raw {
		if f.Filename == "" {
			return nil, false, incomplete("GET /"+p, "a file has no name")
		}
		out = append(out, ChangedFile{Path: f.Filename, Status: f.Status, PreviousPath: f.PreviousFilename})
	}
	return out, status == "ahead" || status == "identical", nil
}

// FileAt reads one file at a commit, raw
// (GET /repos/{owner}/{repo}/contents/{path}?ref=SHA with Accept
// application/vnd.github.raw+json). Each path segment is escaped; dot
// segments are refused.
func (c *InstallationClient) FileAt(ctx context.Context, fullName, path, sha string) ([]byte, error) {
	p, err := c.repoPath(fullName)
	if err != nil {
		return nil, err
	}
	if !objectID(sha) {
		return nil, codelotse.Errorf(codelotse.Invalid, "%q is not a commit id", sha)
	}
	segs := strings.Split(path, "/")
	for i, s := range segs {
		if s == "" || s == "." || s == ".." {
			return nil, codelotse.Errorf(codelotse.Invalid, "%q is not a file path", path)
		}
		segs[i] = url.PathEscape(s)
	}
	u := c.app.apiURL.ResolveReference(&url.URL{Path: p + "/contents/"})
	u = u.JoinPath(segs...)
	u.RawQuery = url.Values{"ref": {sha}}.Encode()
	op := fmt.Sprintf("GET /%s/contents/… at %s", p, sha[:7])
	_, body, err := c.app.do(ctx, &request{op: op, url: u.String(), accept: "application/vnd.github.raw+json", cred: c, limit: &c.st.limit, follow: true})
	return body, err
}
