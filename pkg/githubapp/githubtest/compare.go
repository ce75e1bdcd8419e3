package githubtest

import (
	"encoding/base64"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Served to installation tokens, for indexing pull-request heads:
//
//	GET /repos/{owner}/{repo}/compare/{base}...{head}  the files that differ (files paginated with page/per_page)
//	GET /repos/{owner}/{repo}/contents/{path}?ref=R     a file at a commit: raw with Accept
//	                                                    application/vnd.github.raw+json, else JSON with base64 content
//
// The fake has no commit graph: compare diffs the two commits' files
// (SetRepoFiles) directly, as GitHub does when base is the merge base.

// compare serves GET /repos/{owner}/{repo}/compare/{basehead}.
func (s *Server) compare(w http.ResponseWriter, r *http.Request, rp *repo, basehead string) {
	baseRef, headRef, ok := strings.Cut(basehead, "...")
	if !ok {
		writeJSON(w, http.StatusNotFound, notFound())
		return
	}
	base, ok1 := s.resolve(rp, baseRef)
	head, ok2 := s.resolve(rp, headRef)
	bf, has1 := s.commits[rp.ID][base]
	hf, has2 := s.commits[rp.ID][head]
	if !ok1 || !ok2 || !has1 || !has2 {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found", "documentation_url": "https://docs.github.com/rest/commits/commits#compare-two-commits", "status": "404"})
		return
	}
	var paths []string
	for p := range bf {
		paths = append(paths, p)
	}
	for p := range hf {
		if _, ok := bf[p]; !ok {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	full := s.fullName(rp)
	var files []any
	for _, p := range paths {
		before, inBase := bf[p]
		after, inHead := hf[p]
		status := "modified"
		switch {
		case !inBase:
			status = "added"
		case !inHead:
			status = "removed"
		case before == after:
			continue
		}
		files = append(files, map[string]any{
			"sha":          fakeSHA("blob " + after),
			"filename":     p,
			"status":       status,
			"additions":    strings.Count(after, "\n"),
			"deletions":    strings.Count(before, "\n"),
			"changes":      strings.Count(after, "\n") + strings.Count(before, "\n"),
			"blob_url":     s.WebURL + full + "/blob/" + head + "/" + p,
			"raw_url":      s.WebURL + full + "/raw/" + head + "/" + p,
			"contents_url": s.APIURL + "repos/" + full + "/contents/" + p + "?ref=" + head,
		})
	}
	page, ok := s.paginate(w, r, files)
	if !ok {
		return
	}
	status := "ahead"
	if len(files) == 0 {
		status = "identical"
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"url":               s.APIURL + "repos/" + full + "/compare/" + basehead,
		"html_url":          s.WebURL + full + "/compare/" + basehead,
		"status":            status,
		"ahead_by":          1,
		"behind_by":         0,
		"total_commits":     1,
		"base_commit":       map[string]any{"sha": base},
		"merge_base_commit": map[string]any{"sha": base},
		"commits":           []any{map[string]any{"sha": head}},
		"files":             page,
	})
}

// contents serves GET /repos/{owner}/{repo}/contents/{path}?ref=R.
func (s *Server) contents(w http.ResponseWriter, r *http.Request, rp *repo, path string) {
	ref := r.URL.Query().Get("ref")
	if ref == "" {
		ref = rp.DefaultBranch
	}
	sha, ok := s.resolve(rp, ref)
	content, has := s.commits[rp.ID][sha][path]
	if !ok || !has {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found", "documentation_url": "https://docs.github.com/rest/repos/contents#get-repository-content", "status": "404"})
		return
	}
	if strings.Contains(r.Header.Get("Accept"), "application/vnd.github.raw") {
		w.Header().Set("Content-Type", "application/vnd.github.raw; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(content))
		return
	}
	full := s.fullName(rp)
	name := path[strings.LastIndex(path, "/")+1:]
	writeJSON(w, http.StatusOK, map[string]any{
		"type": "file", "encoding": "base64", "size": len(content), "name": name, "path": path,
		"content": base64.StdEncoding.EncodeToString([]byte(content)), "sha": fakeSHA("blob " + content),
		"url":          s.APIURL + "repos/" + full + "/contents/" + path + "?ref=" + sha,
		"html_url":     s.WebURL + full + "/blob/" + sha + "/" + path,
		"download_url": s.WebURL + full + "/raw/" + sha + "/" + path,
	})
}

// PushPullRequest moves a pull request's head to commit (as a push to its
// branch does, before GitHub sends pull_request synchronize) and bumps its
// updated_at.
func (s *Server) PushPullRequest(repoID int64, number int, commit string) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	pr := s.pull(repoID, number)
	if pr == nil || !isSHA(commit) {
		s.t.Fatalf("githubtest: PushPullRequest(%d, %d, %q)", repoID, number, commit)
	}
	pr.HeadSHA = commit
	pr.UpdatedAt = time.Now().UTC().Truncate(time.Second)
}

// ClosePullRequest closes a pull request (merged when merged is true).
func (s *Server) ClosePullRequest(repoID int64, number int, merged bool) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	pr := s.pull(repoID, number)
	if pr == nil {
		s.t.Fatalf("githubtest: ClosePullRequest: no pull request %d", number)
	}
	pr.State, pr.Merged = "closed", merged
	pr.UpdatedAt = time.Now().UTC().Truncate(time.Second)
}
