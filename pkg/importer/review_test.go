package importer

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// fullReview uses every field of the native format. Finding 1 relies on
// every finding default, finding 2 has no place at all.
const fullReview = `{
  "schema": "codelotse.review/v1",
  "repository": "acme/shop",
  "pull_request": {
    "number": 42,
    "title": "Export orders as CSV",
    "author": "mstone",
    "base": "main",
    "head": "feature/csv-export",
    "head_sha": "4f1c2e9a7b3d5c8e0f6a1b2c3d4e5f6a7b8c9d0e",
    "url": "https://github.com/acme/shop/pull/42"
  },
  "review": {
    "id": "bot-review-42-1",
    "summary": "Two issues in the export handler.",
    "author": "codelotse-review-bot",
    "created_at": "2026-11-30T12:00:00+01:00"
  },
  "findings": [
    {
      "rule": "sql/injection",
      "severity": "high",
      "status": "resolved",
      "path": "internal/store/orders.go",
      "start_line": 55,
      "end_line": 57,
      "title": "Query built with fmt.Sprintf",
      "body": "The ` + "`sort`" + ` parameter reaches the query **unescaped**.",
      "suggestion": "rows, err := db.Query(ctx, q, customer)",
      "fingerprint": "orders-sql-1"
    },
    {
      "severity": "low",
      "path": "./internal/api//export.go",
      "start_line": 12,
      "title": "Typo in the Content-Disposition header"
    },
    {
      "rule": "docs/changelog",
      "severity": "info",
      "status": "dismissed",
      "title": "CHANGELOG entry missing"
    }
  ]
}`

func intp(n int) *int { return &n }

func TestParseReviewFull(t *testing.T) {
	got, err := ParseReview([]byte(fullReview))
	if err != nil {
		t.Fatalf("ParseReview: %v", err)
	}
	const head = "4f1c2e9a7b3d5c8e0f6a1b2c3d4e5f6a7b8c9d0e"
	want := codelotse.ReviewImport{
		Repository: "acme/shop",
		Source:     "review-json",
		PullRequest: &codelotse.PullRequest{Number: 42, Title: "Export orders as CSV", Author: "mstone", State: "open",
			BaseRef: "main", HeadRef: "feature/csv-export", HeadSHA: head, URL: "https://github.com/acme/shop/pull/42"},
		Review: codelotse.Review{ExternalID: "bot-review-42-1", CommitSHA: head, Status: "completed",
			Summary: "Two issues in the export handler.", Author: "codelotse-review-bot",
			CreatedAt: time.Date(2026, 11, 30, 11, 0, 0, 0, time.UTC)},
		Findings: []codelotse.Finding{
			{RuleKey: "sql/injection", Severity: codelotse.SeverityHigh, Status: codelotse.StatusResolved,
				Path: "internal/store/orders.go", StartLine: intp(55), EndLine: intp(57),
				Title: "Query built with fmt.Sprintf", Body: "The `sort` parameter reaches the query **unescaped**.",
				Suggestion: "rows, err := db.Query(ctx, q, customer)", Fingerprint: "orders-sql-1",
				CommitSHA: head, Source: "review-json"},
			{Severity: codelotse.SeverityLow, Status: codelotse.StatusOpen,
				Path: "internal/api/export.go", StartLine: intp(12), EndLine: intp(12),
				Title:       "Typo in the Content-Disposition header",
				Fingerprint: Fingerprint("", "internal/api/export.go", intp(12), intp(12), "Typo in the Content-Disposition header"),
				CommitSHA:   head, Source: "review-json"},
			{RuleKey: "docs/changelog", Severity: codelotse.SeverityInfo, Status: codelotse.StatusDismissed,
				Title:       "CHANGELOG entry missing",
				Fingerprint: Fingerprint("docs/changelog", "", nil, nil, "CHANGELOG entry missing"),
				CommitSHA:   head, Source: "review-json"},
		},
	}
	// The review time is an instant: compare it apart from its zone.
	if !got.Review.CreatedAt.Equal(want.Review.CreatedAt) {
		t.Errorf("CreatedAt = %v, want %v", got.Review.CreatedAt, want.Review.CreatedAt)
	}
	got.Review.CreatedAt = want.Review.CreatedAt
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseReview mismatch\n got: %s\nwant: %s", dump(got), dump(want))
	}

	// The computed fingerprints are pinned: changing the formula would make
	// every stored finding look new on the next re-import.
	if fp := got.Findings[1].Fingerprint; fp != "5ffc473f259c33ef739f831fa66efcee" {
		t.Errorf("computed fingerprint = %s; the formula changed, which breaks idempotent re-imports", fp)
	}
	hex32 := regexp.MustCompile(`^[0-9a-f]{32}$`)
	seen := map[string]int{}
	for i, f := range got.Findings {
		if i > 0 && !hex32.MatchString(f.Fingerprint) {
			t.Errorf("finding %d: computed fingerprint %q is not 32 hex digits", i, f.Fingerprint)
		}
		if j, dup := seen[f.Fingerprint]; dup {
			t.Errorf("findings %d and %d share fingerprint %s", j, i, f.Fingerprint)
		}
		seen[f.Fingerprint] = i
	}
	again, err := ParseReview([]byte(fullReview))
	if err != nil {
		t.Fatal(err)
	}
	for i := range got.Findings {
		if again.Findings[i].Fingerprint != got.Findings[i].Fingerprint {
			t.Errorf("finding %d: fingerprint not stable across parses: %s then %s", i, got.Findings[i].Fingerprint, again.Findings[i].Fingerprint)
		}
	}
}

// minimalReview is the smallest valid document with four findings; the
// error cases below break one part of it.
const minimalReview = `{"schema":"codelotse.review/v1","repository":"acme/shop","pull_request":{"number":7},"review":{"id":"r1"},` +
	`"findings":[{"severity":"low","title":"a"},{"severity":"low","title":"b"},{"severity":"low","title":"c"},{"severity":"low","title":"d"}]}`

func TestParseReviewDefaultsAndOverrides(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(d map[string]any)
		check func(t *testing.T, got codelotse.ReviewImport)
	}{
		{"defaults", nil, func(t *testing.T, got codelotse.ReviewImport) {
			if got.PullRequest.State != "open" || got.Review.Status != "completed" || got.Review.CommitSHA != "" || !got.Review.CreatedAt.IsZero() {
				t.Errorf("PR state %q, review status %q, commit %q, created %v; want open, completed, empty, zero",
					got.PullRequest.State, got.Review.Status, got.Review.CommitSHA, got.Review.CreatedAt)
			}
			for i, f := range got.Findings {
				if f.Status != codelotse.StatusOpen || f.StartLine != nil || f.EndLine != nil || f.Path != "" {
					t.Errorf("finding %d = %+v, want open with no place", i, f)
				}
			}
		}},
		{"merged pull request", func(d map[string]any) { pr(d)["state"] = "merged" }, func(t *testing.T, got codelotse.ReviewImport) {
			if got.PullRequest.State != "merged" {
				t.Errorf("state = %q", got.PullRequest.State)
			}
		}},
		{"closed pull request", func(d map[string]any) { pr(d)["state"] = "closed" }, func(t *testing.T, got codelotse.ReviewImport) {
			if got.PullRequest.State != "closed" {
				t.Errorf("state = %q", got.PullRequest.State)
			}
		}},
		{"review commit beats head_sha", func(d map[string]any) {
			pr(d)["head_sha"] = "4f1c2e9a7b3d5c8e0f6a1b2c3d4e5f6a7b8c9d0e"
			rv(d)["commit"] = "b7e0d1c"
		}, func(t *testing.T, got codelotse.ReviewImport) {
			if got.Review.CommitSHA != "b7e0d1c" || got.PullRequest.HeadSHA != "4f1c2e9a7b3d5c8e0f6a1b2c3d4e5f6a7b8c9d0e" || got.Findings[0].CommitSHA != "b7e0d1c" {
				t.Errorf("review commit %q, head %q, finding commit %q", got.Review.CommitSHA, got.PullRequest.HeadSHA, got.Findings[0].CommitSHA)
			}
		}},
		{"review status kept", func(d map[string]any) { rv(d)["status"] = "in_progress" }, func(t *testing.T, got codelotse.ReviewImport) {
			if got.Review.Status != "in_progress" {
				t.Errorf("status = %q", got.Review.Status)
			}
		}},
		{"no findings", func(d map[string]any) { delete(d, "findings") }, func(t *testing.T, got codelotse.ReviewImport) {
			if len(got.Findings) != 0 {
				t.Errorf("findings = %v", got.Findings)
			}
		}},
		{"null findings and optional members", func(d map[string]any) {
			d["findings"] = nil
			pr(d)["title"] = nil
		}, func(t *testing.T, got codelotse.ReviewImport) {
			if len(got.Findings) != 0 || got.PullRequest.Title != "" {
				t.Errorf("got %+v", got)
			}
		}},
		{"paths normalised", func(d map[string]any) {
			fnd(d, 0)["path"] = `.\pkg\importer\review.go`
			fnd(d, 1)["path"] = "/pkg/./importer/"
			fnd(d, 2)["path"] = "pkg//shape/shape.go"
		}, func(t *testing.T, got codelotse.ReviewImport) {
			for i, want := range []string{"pkg/importer/review.go", "pkg/importer", "pkg/shape/shape.go"} {
				if got.Findings[i].Path != want {
					t.Errorf("finding %d path = %q, want %q", i, got.Findings[i].Path, want)
				}
			}
		}},
		{"same title at other lines is another finding", func(d map[string]any) {
			for i := range 4 {
				fnd(d, i)["title"] = "same"
				fnd(d, i)["start_line"] = i + 1
			}
		}, func(t *testing.T, got codelotse.ReviewImport) {
			if len(got.Findings) != 4 {
				t.Errorf("%d findings", len(got.Findings))
			}
		}},
		{"every severity", func(d map[string]any) {
			for i, s := range []string{"info", "medium", "high", "critical"} {
				fnd(d, i)["severity"] = s
			}
		}, func(t *testing.T, got codelotse.ReviewImport) {
			for i, s := range []codelotse.Severity{"info", "medium", "high", "critical"} {
				if got.Findings[i].Severity != s {
					t.Errorf("finding %d severity %q, want %q", i, got.Findings[i].Severity, s)
				}
			}
		}},
		{"explicit fingerprints are kept", func(d map[string]any) {
			fnd(d, 0)["fingerprint"] = "github-comment-1234"
		}, func(t *testing.T, got codelotse.ReviewImport) {
			if got.Findings[0].Fingerprint != "github-comment-1234" {
				t.Errorf("fingerprint = %q", got.Findings[0].Fingerprint)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseReview(editReview(t, tc.edit))
			if err != nil {
				t.Fatalf("ParseReview: %v", err)
			}
			tc.check(t, got)
		})
	}
}

// A UTF-8 byte order mark, as some Windows editors write, is not an error.
func TestParseReviewByteOrderMark(t *testing.T) {
	got, err := ParseReview(append([]byte("\xef\xbb\xbf"), minimalReview...))
	if err != nil || len(got.Findings) != 4 {
		t.Fatalf("ParseReview = %d findings, %v", len(got.Findings), err)
	}
}

func TestParseReviewErrors(t *testing.T) {
	sha := "4f1c2e9a7b3d5c8e0f6a1b2c3d4e5f6a7b8c9d0e"
	tests := []struct {
		name string
		edit func(d map[string]any)
		raw  string // used instead of edit when set
		want string // the whole message
	}{
		// Document level.
		{name: "wrong schema", edit: func(d map[string]any) { d["schema"] = "codelotse.review/v2" },
			want: `/schema: must be "codelotse.review/v1"`},
		{name: "missing schema", edit: func(d map[string]any) { delete(d, "schema") },
			want: `/schema: must be "codelotse.review/v1"`},
		{name: "repository without owner", edit: func(d map[string]any) { d["repository"] = "shop" },
			want: `/repository: must be OWNER/NAME, not "shop"`},
		{name: "repository as URL", edit: func(d map[string]any) { d["repository"] = "https://github.com/acme/shop" },
			want: `/repository: must be OWNER/NAME, not "https://github.com/acme/shop"`},
		{name: "missing repository", edit: func(d map[string]any) { delete(d, "repository") },
			want: `/repository: must be OWNER/NAME, not ""`},

		// Pull request.
		{name: "missing pull_request", edit: func(d map[string]any) { delete(d, "pull_request") },
			want: `/pull_request: is required`},
		{name: "null pull_request", edit: func(d map[string]any) { d["pull_request"] = nil },
			want: `/pull_request: is required`},
		{name: "number 0", edit: func(d map[string]any) { pr(d)["number"] = 0 },
			want: `/pull_request/number: must be a positive number`},
		{name: "number missing", edit: func(d map[string]any) { delete(pr(d), "number") },
			want: `/pull_request/number: must be a positive number`},
		{name: "number negative", edit: func(d map[string]any) { pr(d)["number"] = -3 },
			want: `/pull_request/number: must be a positive number`},
		{name: "number beyond an integer column", edit: func(d map[string]any) { pr(d)["number"] = 1 << 31 },
			want: `/pull_request/number: must be at most 2147483647`},
		{name: "bad state", edit: func(d map[string]any) { pr(d)["state"] = "draft" },
			want: `/pull_request/state: must be open, closed or merged, not "draft"`},
		{name: "state in capitals", edit: func(d map[string]any) { pr(d)["state"] = "OPEN" },
			want: `/pull_request/state: must be open, closed or merged, not "OPEN"`},
		{name: "head_sha not hex", edit: func(d map[string]any) { pr(d)["head_sha"] = "main" },
			want: `/pull_request/head_sha: must be a lowercase hex commit id`},
		{name: "head_sha upper case", edit: func(d map[string]any) { pr(d)["head_sha"] = strings.ToUpper(sha) },
			want: `/pull_request/head_sha: must be a lowercase hex commit id`},
		{name: "head_sha too short", edit: func(d map[string]any) { pr(d)["head_sha"] = "4f1c2e" },
			want: `/pull_request/head_sha: must be a lowercase hex commit id`},
		{name: "title too long", edit: func(d map[string]any) { pr(d)["title"] = strings.Repeat("t", 1001) },
			want: `/pull_request/title: is longer than 1000 bytes`},
		// A finding's title is one line (docs/review-format.md); a title
		// of two lines, or of 100,000 characters, was stored as sent.
		{name: "finding title of two lines", edit: func(d map[string]any) { fnd(d, 0)["title"] = "a\nb" },
			want: `/findings/0/title: must be one line (put the details in body)`},
		{name: "finding title with a line separator", edit: func(d map[string]any) { fnd(d, 0)["title"] = "a\u2028b" },
			want: `/findings/0/title: must be one line (put the details in body)`},
		{name: "finding title too long", edit: func(d map[string]any) { fnd(d, 0)["title"] = strings.Repeat("t", 1001) },
			want: `/findings/0/title: is longer than 1000 bytes`},

		// Review.
		{name: "missing review", edit: func(d map[string]any) { delete(d, "review") },
			want: `/review: is required`},
		{name: "missing review id", edit: func(d map[string]any) { delete(rv(d), "id") },
			want: `/review/id: is required (1-200 characters): it makes re-imports idempotent`},
		{name: "blank review id", edit: func(d map[string]any) { rv(d)["id"] = "  " },
			want: `/review/id: is required (1-200 characters): it makes re-imports idempotent`},
		{name: "review id too long", edit: func(d map[string]any) { rv(d)["id"] = strings.Repeat("r", 201) },
			want: `/review/id: is required (1-200 characters): it makes re-imports idempotent`},
		{name: "bad review commit", edit: func(d map[string]any) { rv(d)["commit"] = "HEAD~1" },
			want: `/review/commit: must be a lowercase hex commit id`},
		{name: "bad created_at", edit: func(d map[string]any) { rv(d)["created_at"] = "2026-11-30 12:00" },
			want: `/review/created_at: must be an RFC 3339 time such as 2026-11-30T12:00:00Z`},
		{name: "created_at without zone", edit: func(d map[string]any) { rv(d)["created_at"] = "2026-11-30T12:00:00" },
			want: `/review/created_at: must be an RFC 3339 time such as 2026-11-30T12:00:00Z`},

		// Findings.
		{name: "bad severity", edit: func(d map[string]any) { fnd(d, 3)["severity"] = "blocker" },
			want: `/findings/3/severity: must be one of info, low, medium, high, critical, not "blocker"`},
		{name: "severity in capitals", edit: func(d map[string]any) { fnd(d, 3)["severity"] = "High" },
			want: `/findings/3/severity: must be one of info, low, medium, high, critical, not "High"`},
		{name: "missing severity", edit: func(d map[string]any) { delete(fnd(d, 3), "severity") },
			want: `/findings/3/severity: must be one of info, low, medium, high, critical, not ""`},
		{name: "bad status", edit: func(d map[string]any) { fnd(d, 3)["status"] = "wontfix" },
			want: `/findings/3/status: must be open, resolved or dismissed, not "wontfix"`},
		{name: "missing title", edit: func(d map[string]any) { delete(fnd(d, 3), "title") },
			want: `/findings/3/title: is required`},
		{name: "blank title", edit: func(d map[string]any) { fnd(d, 3)["title"] = " \n\t" },
			want: `/findings/3/title: is required`},
		{name: "rule too long", edit: func(d map[string]any) { fnd(d, 3)["rule"] = strings.Repeat("r", 201) },
			want: `/findings/3/rule: is longer than 200 characters`},
		{name: "start_line 0", edit: func(d map[string]any) { fnd(d, 3)["start_line"] = 0 },
			want: `/findings/3/start_line: must be 1 to 2147483647`},
		{name: "end_line 0", edit: func(d map[string]any) { fnd(d, 3)["start_line"] = 1; fnd(d, 3)["end_line"] = 0 },
			want: `/findings/3/end_line: must be 1 to 2147483647`},
		{name: "start_line beyond an integer column", edit: func(d map[string]any) { fnd(d, 3)["start_line"] = 3000000000 },
			want: `/findings/3/start_line: must be 1 to 2147483647`},
		{name: "end_line beyond an integer column", edit: func(d map[string]any) { fnd(d, 3)["start_line"] = 1; fnd(d, 3)["end_line"] = 1 << 31 },
			want: `/findings/3/end_line: must be 1 to 2147483647`},
		{name: "end_line before start_line", edit: func(d map[string]any) { fnd(d, 3)["start_line"] = 20; fnd(d, 3)["end_line"] = 19 },
			want: `/findings/3/end_line: must not be before start_line`},
		{name: "end_line without start_line", edit: func(d map[string]any) { fnd(d, 3)["end_line"] = 4 },
			want: `/findings/3/start_line: is required when end_line is given`},
		{name: "path escaping the repository", edit: func(d map[string]any) { fnd(d, 3)["path"] = "../etc/passwd" },
			want: `/findings/3/path: path must stay inside the repository, not "../etc/passwd"`},
		{name: "path with .. inside", edit: func(d map[string]any) { fnd(d, 3)["path"] = "pkg/../../secrets.env" },
			want: `/findings/3/path: path must stay inside the repository, not "pkg/../../secrets.env"`},
		{name: "path with backslash ..", edit: func(d map[string]any) { fnd(d, 3)["path"] = `pkg\..\..\x.go` },
			want: `/findings/3/path: path must stay inside the repository, not "pkg/../../x.go"`},
		{name: "path too long", edit: func(d map[string]any) { fnd(d, 3)["path"] = strings.Repeat("a/", 2049) },
			want: `/findings/3/path: path is longer than 4096 characters`},
		{name: "fingerprint too long", edit: func(d map[string]any) { fnd(d, 3)["fingerprint"] = strings.Repeat("f", 201) },
			want: `/findings/3/fingerprint: is longer than 200 characters`},
		{name: "duplicate explicit fingerprints", edit: func(d map[string]any) {
			fnd(d, 1)["fingerprint"] = "same"
			fnd(d, 3)["fingerprint"] = "same"
		}, want: `/findings/3/fingerprint: duplicates /findings/1; give each finding a distinct fingerprint (or rule, path, lines and title)`},
		{name: "duplicate computed fingerprints", edit: func(d map[string]any) { fnd(d, 2)["title"] = "a" },
			want: `/findings/2/fingerprint: duplicates /findings/0; give each finding a distinct fingerprint (or rule, path, lines and title)`},
		{name: "duplicate after path normalisation", edit: func(d map[string]any) {
			fnd(d, 0)["path"] = "pkg/a.go"
			fnd(d, 1)["path"] = "./pkg/a.go"
			fnd(d, 1)["title"] = "a"
		}, want: `/findings/1/fingerprint: duplicates /findings/0; give each finding a distinct fingerprint (or rule, path, lines and title)`},

		// Decoding: these carry a line and column.
		{name: "unknown top-level field", raw: "{\n  \"schema\": \"codelotse.review/v1\",\n  \"repo\": \"acme/shop\"\n}",
			want: `line 3:3: /: unknown field "repo"`},
		{name: "unknown field in a finding", raw: "{\"schema\":\"codelotse.review/v1\",\"repository\":\"acme/shop\",\n" +
			"\"findings\":[\n  {\"severity\":\"low\",\"title\":\"a\"},\n  {\"severity\":\"low\",\"title\":\"b\", \"line\": 3}\n]}",
			want: `line 4:34: /findings/1: unknown field "line"`},
		{name: "field in the wrong case", raw: `{"Schema":"codelotse.review/v1"}`,
			want: `line 1:2: /: unknown field "Schema" (field names are case-sensitive: "schema")`},
		{name: "repeated field", raw: "{\"findings\":[{\"severity\":\"low\",\n  \"severity\":\"high\"}]}",
			want: `line 2:3: /findings/0: duplicate field "severity"`},
		{name: "number as string", raw: "{\"schema\":\"codelotse.review/v1\",\n\"pull_request\": {\"number\": \"42\"}}",
			want: `line 2:28: /pull_request/number: must be a whole number, not the string "42"`},
		{name: "line as string in a finding", raw: "{\"findings\":[{},\n {\"start_line\": \"12\"}]}",
			want: `line 2:17: /findings/1/start_line: must be a whole number, not the string "12"`},
		{name: "fractional number", raw: `{"pull_request":{"number":4.5}}`,
			want: `line 1:27: /pull_request/number: must be a whole number, not the number 4.5`},
		{name: "number too large", raw: `{"pull_request":{"number":1e400}}`,
			want: `line 1:27: /pull_request/number: must be a whole number, not the number 1e400`},
		{name: "object where a string belongs", raw: `{"repository":{"owner":"acme","name":"shop"}}`,
			want: `line 1:15: /repository: must be a string, not an object`},
		{name: "findings as object", raw: `{"findings":{"severity":"low"}}`,
			want: `line 1:13: /findings: must be an array, not an object`},
		{name: "pull_request as number", raw: `{"pull_request":42}`,
			want: `line 1:17: /pull_request: must be an object, not the number 42`},
		{name: "title as boolean", raw: `{"findings":[{"title":true}]}`,
			want: `line 1:23: /findings/0/title: must be a string, not true`},
		{name: "document is an array", raw: "[\n]",
			want: `line 1:1: /: must be an object, not an array`},
		{name: "NUL in a string", raw: `{"findings":[{"severity":"low","title":"a\u0000b"}]}`,
			want: `line 1:40: /findings/0/title: must not contain NUL characters (\u0000)`},
		{name: "syntax error", raw: "{\n  \"schema\": \"codelotse.review/v1\"\n  \"repository\": \"acme/shop\"\n}",
			want: `line 3:3: invalid JSON: invalid character '"' after object key:value pair`},
		{name: "trailing comma", raw: "{\"schema\": \"codelotse.review/v1\",\n}",
			want: `line 2:1: invalid JSON: invalid character '}' looking for beginning of object key string`},
		{name: "single quotes", raw: `{'schema': 1}`,
			want: `line 1:2: invalid JSON: invalid character '\'' looking for beginning of object key string`},
		{name: "column counts characters", raw: `{"title": "größe" x}`,
			want: `line 1:19: invalid JSON: invalid character 'x' after object key:value pair`},
		{name: "trailing document", raw: minimalReview + "\n{}",
			want: `line 2:1: unexpected data after the JSON document`},
		{name: "trailing garbage", raw: minimalReview + " }",
			want: fmt.Sprintf(`line 1:%d: unexpected data after the JSON document`, len(minimalReview)+2)},
		{name: "trailing word", raw: minimalReview + "\nEOF\n",
			want: `line 2:1: unexpected data after the JSON document`},
		{name: "truncated", raw: "{\"schema\": \"codelotse.review/v1\",\n \"findings\": [",
			want: `line 2:15: the file ends before the JSON document does`},
		{name: "empty", raw: "", want: `the file is empty`},
		{name: "only whitespace", raw: " \n\t\n", want: `the file is empty`},
		{name: "null document", raw: "null", want: `/schema: must be "codelotse.review/v1"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(tc.raw)
			if tc.raw == "" && tc.edit != nil {
				data = editReview(t, tc.edit)
			}
			got, err := ParseReview(data)
			if err == nil {
				t.Fatalf("ParseReview succeeded (%d findings), want error %q", len(got.Findings), tc.want)
			}
			if code := codelotse.ErrorCode(err); code != codelotse.Invalid {
				t.Errorf("error code = %q, want %q", code, codelotse.Invalid)
			}
			if msg := codelotse.ErrorMessage(err); msg != tc.want {
				t.Errorf("error message\n got: %s\nwant: %s", msg, tc.want)
			}
		})
	}
}

func TestParseReviewTooManyFindings(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"schema":"codelotse.review/v1","repository":"acme/shop","pull_request":{"number":1},"review":{"id":"r"},"findings":[`)
	for i := range MaxFindings + 1 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"severity":"info","title":"t%d"}`, i)
	}
	b.WriteString("]}")
	_, err := ParseReview([]byte(b.String()))
	want := fmt.Sprintf("/findings: has %d findings; at most %d per import", MaxFindings+1, MaxFindings)
	if codelotse.ErrorCode(err) != codelotse.Invalid || codelotse.ErrorMessage(err) != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
}

// TestReviewExample keeps the example at the repository root (referenced
// by docs/review-format.md) importable.
func TestReviewExample(t *testing.T) {
	data, err := os.ReadFile("../../testdata/review-example.json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseReview(data)
	if err != nil {
		t.Fatalf("ParseReview: %v", err)
	}
	if got.Repository != "codelotse/codelotse" || got.PullRequest.Number != 1 || got.PullRequest.Title != "Walking skeleton" {
		t.Errorf("repository %q, pull request #%d %q", got.Repository, got.PullRequest.Number, got.PullRequest.Title)
	}
	if !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(got.PullRequest.HeadSHA) {
		t.Errorf("head_sha %q is not a full commit id", got.PullRequest.HeadSHA)
	}
	if n := len(got.Findings); n < 5 || n > 8 {
		t.Errorf("%d findings, want 5 to 8", n)
	}
	severities, statuses := map[codelotse.Severity]bool{}, map[string]bool{}
	for i, f := range got.Findings {
		severities[f.Severity], statuses[f.Status] = true, true
		if f.Path == "" || f.StartLine == nil || f.Body == "" {
			t.Errorf("finding %d (%s) lacks a path, a line or a body", i, f.Title)
			continue
		}
		// The paths and lines are real: the example must stay plausible.
		src, err := os.ReadFile("../../" + f.Path)
		if err != nil {
			t.Errorf("finding %d: %v", i, err)
			continue
		}
		if lines := strings.Count(string(src), "\n"); *f.EndLine > lines {
			t.Errorf("finding %d: %s has %d lines, the finding ends at %d", i, f.Path, lines, *f.EndLine)
		}
	}
	if len(severities) < 3 || len(statuses) < 3 {
		t.Errorf("severities %v and statuses %v are not varied", severities, statuses)
	}
}

// editReview returns minimalReview after edit.
func editReview(t *testing.T, edit func(d map[string]any)) []byte {
	t.Helper()
	var d map[string]any
	if err := json.Unmarshal([]byte(minimalReview), &d); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(d)
	}
	data, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func pr(d map[string]any) map[string]any { return d["pull_request"].(map[string]any) }
func rv(d map[string]any) map[string]any { return d["review"].(map[string]any) }
func fnd(d map[string]any, i int) map[string]any {
	return d["findings"].([]any)[i].(map[string]any)
}

// dump renders v for a failure message, dereferencing pointers.
func dump(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}
