package jobs

import (
	"testing"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/githubapp"
)

func TestCommentTitle(t *testing.T) {
	for body, want := range map[string]string{
		"Possible nil dereference here.\nCheck the store before use.": "Possible nil dereference here.",
		"<!-- metadata -->\n**Avoid shadowing `err`**\n\nDetails…":    "Avoid shadowing err",
		"<!--\nmulti\n-->\n\n## Heading title\nbody":                  "Heading title",
		"```suggestion\nx := 1\n```\nUse a constant.":                 "Use a constant.",
		"": "Review comment",
		"![badge](https://x)\n- Use a mutex here": "Use a mutex here",
		"This sentence is far too long to be a title because it goes on and on about the many problems it sees in the code": "This sentence is far too long to be a title because it goes on and on about the many problems it…",
	} {
		if got := commentTitle(body); got != want {
			t.Errorf("commentTitle(%q) = %q, want %q", body, got, want)
		}
	}
}

func TestSuggestion(t *testing.T) {
	for body, want := range map[string]string{
		"Use a constant.\n```suggestion\nconst n = 1\n```\n":            "const n = 1",
		"Two lines:\r\n```suggestion\r\na()\r\nb()\r\n```":              "a()\nb()",
		"Nested:\n````suggestion\n```go\nx()\n```\n````":                "```go\nx()\n```",
		"Delete it:\n```suggestion\n```":                                "",
		"Not a suggestion:\n```go\nx()\n```":                            "",
		"Unclosed:\n```suggestion\nx()":                                 "",
		"First wins:\n```suggestion\none\n```\n```suggestion\ntwo\n```": "one",
	} {
		if got := suggestion(body); got != want {
			t.Errorf("suggestion(%q) = %q, want %q", body, got, want)
		}
	}
}

func TestCommentFindingFollowsThreads(t *testing.T) {
	ptr := func(n int) *int { return &n }
	open := githubapp.ReviewComment{ID: 1, Path: "a.go", Line: ptr(7), StartLine: ptr(5), OriginalLine: ptr(7), CommitID: "head", OriginalCommitID: "orig", Body: "x"}
	old := githubapp.ReviewComment{ID: 2, Path: "b.go", OriginalLine: ptr(9), Outdated: true, CommitID: "head", OriginalCommitID: "orig", Body: "y"}
	for _, tc := range []struct {
		name       string
		c          githubapp.ReviewComment
		th         *githubapp.ReviewThread
		status     string
		commit     string
		start, end int
	}{
		{"open, no GraphQL", open, nil, codelotse.StatusOpen, "head", 5, 7},
		{"resolved thread", open, &githubapp.ReviewThread{Resolved: true}, codelotse.StatusResolved, "head", 5, 7},
		{"outdated, no GraphQL", old, nil, codelotse.StatusResolved, "orig", 9, 9},
		{"outdated, unresolved", old, &githubapp.ReviewThread{Outdated: true}, codelotse.StatusOpen, "orig", 9, 9},
		{"outdated multi-line", old, &githubapp.ReviewThread{Outdated: true, Resolved: true, OriginalStartLine: ptr(8)}, codelotse.StatusResolved, "orig", 8, 9},
	} {
		f := commentFinding(tc.c, tc.th)
		if f.Status != tc.status || f.CommitSHA != tc.commit || f.StartLine == nil || *f.StartLine != tc.start || *f.EndLine != tc.end {
			t.Errorf("%s: status %s commit %s lines %v-%v", tc.name, f.Status, f.CommitSHA, deref(f.StartLine), deref(f.EndLine))
		}
	}
}

func deref(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}
