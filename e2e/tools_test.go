//go:build e2e

package e2e

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolsFixture is two tenants with reviews, rules and code indexes.
type toolsFixture struct {
	s                    *stack
	dev, boss, bravo     *mcp.ClientSession
	commit               string
	hiddenID, bravoWebID string
	pagedLines           int // lines containing PAGINATE_ME in acme/api
}

var idRE = regexp.MustCompile(`has id (\d+)`)

func reviewDoc(repo string, pr int, reviewID, created string, findings []map[string]any) map[string]any {
	return map[string]any{
		"schema":     "codelotse.review/v1",
		"repository": repo,
		"pull_request": map[string]any{"number": pr, "title": "Add the store", "author": "octocat", "state": "open",
			"base": "main", "head": "feature/store", "head_sha": "0123456789abcdef0123456789abcdef01234567"},
		"review":   map[string]any{"id": reviewID, "summary": "Review of the store.", "author": "codelotse-bot", "created_at": created},
		"findings": findings,
	}
}

func newToolsFixture(t *testing.T) *toolsFixture {
	t.Helper()
	s := newStack(t)
	f := &toolsFixture{s: s}
	s.cltctl("tenant", "create", "--slug", "acme", "--name", "Acme", "--mcp-enabled")
	s.cltctl("tenant", "create", "--slug", "bravo", "--name", "Bravo", "--mcp-enabled")
	s.cltctl("user", "add", "--tenant", "acme", "--email", "dev@acme.test")
	s.cltctl("user", "add", "--tenant", "acme", "--email", "boss@acme.test", "--role", "admin")
	s.cltctl("user", "add", "--tenant", "bravo", "--email", "dev@bravo.test")
	s.cltctl("repo", "add", "--tenant", "acme", "--full-name", "acme/api")
	f.hiddenID = idRE.FindStringSubmatch(s.cltctl("repo", "add", "--tenant", "acme", "--full-name", "acme/hidden"))[1]
	s.cltctl("repo", "add", "--tenant", "acme", "--full-name", "acme/empty")
	f.bravoWebID = idRE.FindStringSubmatch(s.cltctl("repo", "add", "--tenant", "bravo", "--full-name", "bravo/web"))[1]
	for _, r := range []string{"acme/api", "acme/empty"} {
		s.cltctl("repo", "grant", "--tenant", "acme", "--email", "dev@acme.test", "--full-name", r)
	}
	s.cltctl("repo", "grant", "--tenant", "bravo", "--email", "dev@bravo.test", "--full-name", "bravo/web")
	s.cltctl("rule", "add", "--tenant", "acme", "--key", "sql-injection", "--title", "No string-built SQL", "--severity", "high",
		"--instructions", "Use bind parameters.", "--paths", "pkg/**")
	s.cltctl("rule", "add", "--tenant", "acme", "--repo", "acme/api", "--key", "errors", "--title", "Wrap errors", "--severity", "medium",
		"--instructions", "Wrap errors with context.", "--paths", "cmd/**")

	// Code: acme/api with ordinary files, a binary, a file over 1 MiB and
	// lines for paging; bravo/web and acme/hidden with their own needle.
	files := map[string]string{
		"cmd/main.go":        goFile("main", 120, 57, "func NeedleHandler() {}"),
		"pkg/store/store.go": goFile("store", 200, 0, ""),
		"README.md":          "# acme/api\n\nThe API.\n",
		"assets/logo.png":    "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
		"big/data.txt":       strings.Repeat("0123456789abcdef\n", 70000),
		"paging/a.go":        "",
		"paging/b.go":        "",
	}
	var a, b strings.Builder
	for i := 1; i <= 130; i++ {
		line := fmt.Sprintf("var x%d = %d\n", i, i)
		if i%9 == 0 {
			line = fmt.Sprintf("const PAGINATE_ME_%d = true\n", i)
			f.pagedLines++
		}
		a.WriteString(line)
	}
	for i := 1; i <= 60; i++ {
		if i%4 == 0 {
			b.WriteString("// PAGINATE_ME again\n")
			f.pagedLines++
		} else {
			b.WriteString("// filler\n")
		}
	}
	files["paging/a.go"], files["paging/b.go"] = a.String(), b.String()
	dir, commit := gitRepo(t, files)
	f.commit = commit
	s.cltctl("index", "--tenant", "acme", "--repo", "acme/api", dir)
	hdir, _ := gitRepo(t, map[string]string{"x.go": "package x\n// NeedleHandler hidden copy\n"})
	s.cltctl("index", "--tenant", "acme", "--repo", "acme/hidden", hdir)
	bdir, _ := gitRepo(t, map[string]string{"web.go": "package web\n// NeedleHandler bravo copy\n"})
	s.cltctl("index", "--tenant", "bravo", "--repo", "bravo/web", bdir)

	// Reviews: an older and a newer review of acme/api#7, one of acme/hidden#1.
	var latest []map[string]any
	sevs := []string{"critical", "high", "medium", "low", "info"}
	for i := 0; i < 12; i++ {
		status := "open"
		if i%5 == 4 {
			status = "resolved"
		}
		latest = append(latest, map[string]any{"rule": []string{"sql-injection", "errors"}[i%2], "severity": sevs[i%5], "status": status,
			"path": fmt.Sprintf("pkg/store/file%d.go", i), "start_line": i + 1, "title": fmt.Sprintf("Finding number %d", i),
			"body": fmt.Sprintf("Body of finding %d.", i), "suggestion": "Do the right thing."})
	}
	s.cltctl("import", "review", "--tenant", "acme", writeJSON(t, reviewDoc("acme/api", 7, "rev-new", "2026-11-30T12:00:00Z", latest)))
	s.cltctl("import", "review", "--tenant", "acme", writeJSON(t, reviewDoc("acme/api", 7, "rev-old", "2026-11-29T12:00:00Z", latest[:2])))
	s.cltctl("import", "review", "--tenant", "acme", writeJSON(t, reviewDoc("acme/hidden", 1, "rev-hidden", "2026-11-30T12:00:00Z", latest[:1])))

	f.dev = connect(t, s.url+"/mcp", s.token("acme", "dev@acme.test", "dev"), "")
	f.boss = connect(t, s.url+"/mcp", s.token("acme", "boss@acme.test", "boss"), "")
	f.bravo = connect(t, s.url+"/mcp", s.token("bravo", "dev@bravo.test", "bravo"), "")
	return f
}

func findingIDs(t *testing.T, doc map[string]any) []int64 {
	t.Helper()
	var ids []int64
	for _, x := range doc["findings"].([]any) {
		ids = append(ids, int64(x.(map[string]any)["id"].(float64)))
	}
	return ids
}

func TestToolsHappyPaths(t *testing.T) {
	t.Parallel()
	f := newToolsFixture(t)

	// list_repositories shows the indexed commit.
	text, _ := call(t, f.dev, "list_repositories", map[string]any{"query": "api"})
	repos := unfence(t, text)["repositories"].([]any)
	if len(repos) != 1 || repos[0].(map[string]any)["indexed_commit"] != f.commit {
		t.Errorf("list_repositories: %v", repos)
	}

	// get_pull_request_review: latest review by default.
	text, isErr := call(t, f.dev, "get_pull_request_review", map[string]any{"repository": "acme/api", "number": 7})
	if isErr {
		t.Fatal(text)
	}
	doc := unfence(t, text)
	pr := doc["pull_request"].(map[string]any)
	rev := doc["review"].(map[string]any)
	if pr["number"].(float64) != 7 || pr["title"] != "Add the store" || pr["head_sha"] != "0123456789abcdef0123456789abcdef01234567" || pr["url"] != "https://github.com/acme/api/pull/7" {
		t.Errorf("pull_request = %v", pr)
	}
	if rev["summary"] != "Review of the store." || rev["created_at"] != "2026-11-30T12:00:00Z" || rev["total_findings"].(float64) != 12 {
		t.Errorf("review = %v", rev)
	}
	counts := rev["counts_by_severity"].(map[string]any)
	if counts["critical"].(float64) != 3 || counts["info"].(float64) != 2 {
		t.Errorf("counts = %v", counts)
	}
	first := doc["findings"].([]any)[0].(map[string]any)
	if first["severity"] != "critical" || first["body"] == "" || first["suggestion"] != "Do the right thing." {
		t.Errorf("first finding = %v", first)
	}
	others := rev["other_review_ids"].([]any)
	if len(others) != 1 {
		t.Fatalf("other_review_ids = %v", others)
	}
	text, _ = call(t, f.dev, "get_pull_request_review", map[string]any{"repository": "acme/api", "number": 7, "review_id": others[0]})
	if got := unfence(t, text)["review"].(map[string]any)["total_findings"].(float64); got != 2 {
		t.Errorf("older review has %v findings, want 2", got)
	}

	// search_findings with filters.
	for _, tc := range []struct {
		args map[string]any
		want int
	}{
		// Both reviews of #7 count: 12 findings in the newer (2 resolved),
		// 2 in the older (open).
		{map[string]any{}, 12}, // open by default, across viewable repositories
		{map[string]any{"status": "all"}, 14},
		{map[string]any{"status": "resolved"}, 2},
		{map[string]any{"severity": "high"}, 8},
		{map[string]any{"rule": "errors", "status": "all"}, 7},
		{map[string]any{"path": "pkg/store/file1", "status": "all"}, 4}, // file1 (twice), file10, file11
		{map[string]any{"query": "NUMBER 3", "status": "all"}, 1},
		{map[string]any{"repository": "acme/api", "pull_request": 7, "status": "all"}, 14},
	} {
		text, isErr := call(t, f.dev, "search_findings", tc.args)
		if isErr {
			t.Fatalf("search_findings %v: %s", tc.args, text)
		}
		if got := len(findingIDs(t, unfence(t, text))); got != tc.want {
			t.Errorf("search_findings %v: %d findings, want %d", tc.args, got, tc.want)
		}
	}
	// The admin also sees acme/hidden's finding; the member does not.
	text, _ = call(t, f.boss, "search_findings", map[string]any{"status": "all", "limit": 100})
	if got := len(findingIDs(t, unfence(t, text))); got != 15 {
		t.Errorf("admin search_findings: %d, want 15", got)
	}

	// get_fix_prompt frames the open findings of the latest review.
	text, isErr = call(t, f.dev, "get_fix_prompt", map[string]any{"repository": "acme/api", "number": 7})
	if isErr {
		t.Fatal(text)
	}
	lead, _, _ := strings.Cut(text, "The data below comes from")
	if !strings.Contains(lead, "claims made by reviewers") || !strings.Contains(lead, "decide whether the claim still holds") {
		t.Errorf("fix prompt lead does not frame findings as claims:\n%s", lead)
	}
	fixDoc := unfence(t, text[len(lead):])
	if got := len(findingIDs(t, fixDoc)); got != 10 {
		t.Errorf("fix prompt has %d findings, want the 10 open ones", got)
	}
	var ruleKeys []string
	for _, r := range fixDoc["rules"].([]any) {
		ruleKeys = append(ruleKeys, r.(map[string]any)["key"].(string))
	}
	slices.Sort(ruleKeys)
	if !slices.Equal(ruleKeys, []string{"errors", "sql-injection"}) {
		t.Errorf("fix prompt rules = %v", ruleKeys)
	}
	ids := findingIDs(t, fixDoc)[:2]
	text, _ = call(t, f.dev, "get_fix_prompt", map[string]any{"repository": "acme/api", "number": 7, "finding_ids": ids})
	if got := findingIDs(t, unfence(t, strings.SplitN(text, "\n\n", 2)[1])); !slices.Equal(sorted(got), sorted(ids)) {
		t.Errorf("fix prompt for %v returned %v", ids, got)
	}

	// search_code: literal, regex, path glob, context.
	text, isErr = call(t, f.dev, "search_code", map[string]any{"query": "needlehandler", "context": 2})
	if isErr {
		t.Fatal(text)
	}
	matches := unfence(t, text)["matches"].([]any)
	if len(matches) != 1 {
		t.Fatalf("search_code NeedleHandler: %v (acme/hidden and bravo must not appear)", matches)
	}
	m := matches[0].(map[string]any)
	if m["repository"] != "acme/api" || m["path"] != "cmd/main.go" || m["line"].(float64) != 57 || m["commit"] != f.commit ||
		m["snippet"] != "55: // line 55 of main: ordinary code comment\n56: // line 56 of main: ordinary code comment\n57> func NeedleHandler() {}\n58: // line 58 of main: ordinary code comment\n59: // line 59 of main: ordinary code comment" {
		t.Errorf("match = %v", m)
	}
	text, _ = call(t, f.dev, "search_code", map[string]any{"query": "NeedleHandler", "case_sensitive": true, "repository": "acme/api"})
	if n := len(unfence(t, text)["matches"].([]any)); n != 1 {
		t.Errorf("case-sensitive: %d matches", n)
	}
	text, _ = call(t, f.dev, "search_code", map[string]any{"query": "needlehandler", "case_sensitive": true})
	if n := len(unfence(t, text)["matches"].([]any)); n != 0 {
		t.Errorf("case-sensitive lower-case query: %d matches, want 0", n)
	}
	text, isErr = call(t, f.dev, "search_code", map[string]any{"query": `func helper\d+0\(`, "regex": true, "path": "cmd/**", "limit": 100})
	if isErr {
		t.Fatal(text)
	}
	if n := len(unfence(t, text)["matches"].([]any)); n != 12 {
		t.Errorf("regex in cmd/**: %d matches, want 12 (lines 10..120 step 10)", n)
	}
	text, _ = call(t, f.dev, "search_code", map[string]any{"query": "helper", "path": "pkg/**/*.go", "limit": 100, "context": 0})
	if n := len(unfence(t, text)["matches"].([]any)); n != 20 {
		t.Errorf("glob pkg/**/*.go: %d matches, want 20", n)
	}
	// A literal-less regex is refused unless scoped.
	if text, isErr = call(t, f.dev, "search_code", map[string]any{"query": `\w+`, "regex": true}); !isErr || !strings.Contains(text, "scope") {
		t.Errorf("unscoped literal-less regex: %v %s", isErr, text)
	}
	if text, isErr = call(t, f.dev, "search_code", map[string]any{"query": `^x\d$`, "regex": true, "repository": "acme/api", "path": "README"}); isErr {
		t.Errorf("scoped literal-less regex refused: %s", text)
	}

	// get_file_contents: a window, numbered, with the total.
	text, isErr = call(t, f.dev, "get_file_contents", map[string]any{"repository": "acme/api", "path": "cmd/main.go", "start_line": 56, "end_line": 58})
	if isErr {
		t.Fatal(text)
	}
	fdoc := unfence(t, text)
	lines := fdoc["lines"].([]any)
	if fdoc["total_lines"].(float64) != 120 || fdoc["commit"] != f.commit || len(lines) != 3 || lines[1] != "57: func NeedleHandler() {}" {
		t.Errorf("get_file_contents = %v", fdoc)
	}
	text, _ = call(t, f.dev, "get_file_contents", map[string]any{"repository": "acme/api", "path": "pkg/store/store.go"})
	if n := len(unfence(t, text)["lines"].([]any)); n != 200 {
		t.Errorf("whole file: %d lines, want 200", n)
	}
	for path, want := range map[string]string{"assets/logo.png": "binary", "big/data.txt": "too large"} {
		text, isErr = call(t, f.dev, "get_file_contents", map[string]any{"repository": "acme/api", "path": path})
		if !isErr || !strings.Contains(text, "not indexed ("+want) {
			t.Errorf("%s: %v %s", path, isErr, text)
		}
	}
}

func sorted(x []int64) []int64 { y := slices.Clone(x); slices.Sort(y); return y }

// TestToolErrors: every tool's failures are in-band and actionable, and
// unknown, forbidden and other-tenant repositories are all "Not found.".
func TestToolErrors(t *testing.T) {
	t.Parallel()
	f := newToolsFixture(t)
	repoTools := []struct {
		tool string
		args map[string]any // without repository
	}{
		{"get_rules", map[string]any{}},
		{"get_pull_request_review", map[string]any{"number": 1}},
		{"search_findings", map[string]any{}},
		{"get_fix_prompt", map[string]any{"number": 1}},
		{"search_code", map[string]any{"query": "NeedleHandler"}},
		{"get_file_contents", map[string]any{"path": "x.go"}},
	}
	for _, rt := range repoTools {
		for _, ref := range []any{"acme/nope", "acme/hidden", f.hiddenID, "bravo/web", f.bravoWebID, 999999} {
			args := map[string]any{"repository": ref}
			for k, v := range rt.args {
				args[k] = v
			}
			text, isErr := call(t, f.dev, rt.tool, args)
			if !isErr || text != "Not found." {
				t.Errorf("%s(repository=%v): isError=%v %q, want Not found.", rt.tool, ref, isErr, text)
			}
		}
	}
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"get_pull_request_review", map[string]any{"number": 7}, `Missing required argument "repository"`},
		{"get_pull_request_review", map[string]any{"repository": "acme/api"}, `Missing required argument "number"`},
		{"get_pull_request_review", map[string]any{"repository": "acme/api", "number": 99}, "Pull request #99 not found"},
		{"get_pull_request_review", map[string]any{"repository": "acme/api", "number": 7, "review_id": 424242}, "Review 424242 not found"},
		{"get_pull_request_review", map[string]any{"repository": "acme/api", "number": "seven"}, `"number"`},
		{"get_fix_prompt", map[string]any{"number": 7}, `Missing required argument "repository"`},
		{"get_fix_prompt", map[string]any{"repository": "acme/api", "number": 99}, "Pull request #99 not found"},
		{"get_fix_prompt", map[string]any{"repository": "acme/api", "number": 7, "finding_ids": []int{424242}}, "Finding 424242 not found"},
		{"search_findings", map[string]any{"severity": "urgent"}, "severity must be one of"},
		{"search_findings", map[string]any{"status": "closed"}, "status must be"},
		{"search_findings", map[string]any{"pull_request": 7}, "pull_request needs repository"},
		{"search_code", map[string]any{}, `Missing required argument "query"`},
		{"search_code", map[string]any{"query": "(", "regex": true, "repository": "acme/api"}, "Invalid regular expression"},
		{"search_code", map[string]any{"query": "NeedleHandler", "repository": "acme/empty"}, "has no code index yet"},
		{"get_file_contents", map[string]any{"repository": "acme/empty", "path": "x.go"}, "has no code index yet"},
		{"get_file_contents", map[string]any{"repository": "acme/api"}, `Missing required argument "path"`},
		{"get_file_contents", map[string]any{"repository": "acme/api", "path": "nope.go"}, "File not found"},
		{"get_file_contents", map[string]any{"repository": "acme/api", "path": "cmd/main.go", "start_line": 500}, "past the end"},
		{"get_file_contents", map[string]any{"repository": "acme/api", "path": "cmd/main.go", "start_line": 9, "end_line": 3}, "end_line must not be before"},
		{"list_repositories", map[string]any{"bogus": 1}, "Unknown argument"},
	} {
		text, isErr := call(t, f.dev, tc.tool, tc.args)
		if !isErr || !strings.Contains(text, tc.want) {
			t.Errorf("%s(%v): isError=%v %q, want %q", tc.tool, tc.args, isErr, text, tc.want)
		}
	}
	// A tenant with nothing indexed.
	text, isErr := call(t, f.bravo, "search_code", map[string]any{"query": "NeedleHandler"})
	if isErr || strings.Contains(text, "acme") {
		t.Errorf("bravo search_code: %v %s", isErr, text)
	}
}

// TestPagingExactlyOnce walks search_findings and search_code page by page
// and gets every match exactly once.
func TestPagingExactlyOnce(t *testing.T) {
	t.Parallel()
	f := newToolsFixture(t)
	walk := func(tool string, args map[string]any, key func(map[string]any) string) []string {
		var seen []string
		cursor := ""
		for page := 0; page < 100; page++ {
			a := map[string]any{}
			for k, v := range args {
				a[k] = v
			}
			if cursor != "" {
				a["cursor"] = cursor
			}
			text, isErr := call(t, f.boss, tool, a)
			if isErr {
				t.Fatalf("%s page %d: %s", tool, page, text)
			}
			doc := unfence(t, text)
			list := doc["findings"]
			if list == nil {
				list = doc["matches"]
			}
			for _, x := range list.([]any) {
				seen = append(seen, key(x.(map[string]any)))
			}
			c, _ := doc["next_cursor"].(string)
			if c == "" {
				return seen
			}
			cursor = c
		}
		t.Fatalf("%s: more than 100 pages", tool)
		return nil
	}
	fid := func(m map[string]any) string { return fmt.Sprint(m["id"]) }
	all := walk("search_findings", map[string]any{"status": "all", "limit": 100}, fid)
	paged := walk("search_findings", map[string]any{"status": "all", "limit": 3}, fid)
	if len(all) != 15 || !slices.Equal(all, paged) {
		t.Errorf("search_findings: one page %v, paged %v", all, paged)
	}
	loc := func(m map[string]any) string { return fmt.Sprintf("%s:%v", m["path"], m["line"]) }
	all = walk("search_code", map[string]any{"query": "PAGINATE_ME", "limit": 100, "context": 0}, loc)
	paged = walk("search_code", map[string]any{"query": "PAGINATE_ME", "limit": 2, "context": 0}, loc)
	if len(all) != f.pagedLines || !slices.Equal(all, paged) {
		t.Errorf("search_code: %d lines planted; one page %d %v; paged %d %v", f.pagedLines, len(all), all, len(paged), paged)
	}
	seen := map[string]bool{}
	for _, k := range paged {
		if seen[k] {
			t.Errorf("search_code returned %s twice", k)
		}
		seen[k] = true
	}
	// A cursor from one search does not continue another.
	text, _ := call(t, f.boss, "search_code", map[string]any{"query": "PAGINATE_ME", "limit": 1})
	c := unfence(t, text)["next_cursor"].(string)
	if text, isErr := call(t, f.boss, "search_code", map[string]any{"query": "other", "cursor": c}); !isErr || !strings.Contains(text, "Invalid cursor") {
		t.Errorf("foreign cursor: %v %s", isErr, text)
	}
}
