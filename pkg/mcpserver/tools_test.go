package mcpserver

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/codelotse/codelotse/pkg/codeindex"
	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/postgres"
)

// toolFixture is newEdgeFixture's tenant (acme/r0..r2, pull request #1 on
// acme/r0 with three high findings of rule go.err on main.go) plus a
// tenant rule, a rule of acme/r0 and a code index of acme/r0, served by
// the endpoint to an admin (every repository) and a member granted acme/r0
// only.
type toolFixture struct {
	e             *Endpoint
	admin, member Caller
}

func newToolFixture(t *testing.T) *toolFixture {
	t.Helper()
	fx := newEdgeFixture(t, 3)
	ctx := context.Background()
	err := fx.deps.DB.InTenant(ctx, fx.tenant, func(tx *postgres.Tx) error {
		if _, err := tx.UpsertRule(ctx, nil, codelotse.Rule{Key: "style", Title: "House style", Severity: codelotse.SeverityLow, Instructions: "Keep it tidy."}); err != nil {
			return err
		}
		if _, err := tx.UpsertRule(ctx, &fx.repo0, codelotse.Rule{Key: "go.err", Title: "Check errors", Severity: codelotse.SeverityHigh, Instructions: "Handle every error."}); err != nil {
			return err
		}
		lines := []string{"package main", "", "// NeedleHandler serves the needle.", "func NeedleHandler() {}", ""}
		snap := codeindex.Snapshot{Commit: strings.Repeat("c", 40), Files: []codeindex.File{
			{Path: "main.go", Size: int64(len(strings.Join(lines, "\n"))), BlobSHA: strings.Repeat("b", 40), Language: "go", Lines: lines},
		}}
		_, err := tx.ReplaceIndex(ctx, fx.repo0, snap, postgres.Actor{Label: "test"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	p := codelotse.Principal{TenantID: fx.tenant, UserID: fx.user, TokenID: "tok", Kind: "token"}
	return &toolFixture{
		e:      NewEndpoint(fx.deps, nil),
		admin:  Caller{Principal: p, Grants: codelotse.Grants{Admin: true, Source: "oidc"}},
		member: Caller{Principal: p, Grants: codelotse.Grants{RepoIDs: []int64{fx.repo0}, Source: "local"}},
	}
}

// call runs tools/call through the endpoint for c and returns the tool's
// text and whether it is an in-band error. A protocol error fails the test:
// no argument of an agent's may turn into one.
func (fx *toolFixture) call(t *testing.T, c Caller, tool string, args any) (string, bool) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args}})
	saved := testCaller
	testCaller = c
	rec := post(fx.e, string(body), nil)
	testCaller = saved
	var a struct {
		Result *struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &a) != nil || a.Result == nil || len(a.Result.Content) != 1 {
		t.Fatalf("%s %v: status %d %s", tool, args, rec.Code, rec.Body)
	}
	return a.Result.Content[0].Text, a.Result.IsError
}

type toolCase struct {
	name    string
	member  bool // call as the member (acme/r0 only), not the admin
	args    map[string]any
	isError bool
	want    []string // substrings of the text
	notWant []string
}

func (fx *toolFixture) run(t *testing.T, tool string, cases []toolCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := fx.admin
			if tc.member {
				c = fx.member
			}
			text, isErr := fx.call(t, c, tool, tc.args)
			if isErr != tc.isError {
				t.Fatalf("isError=%v, want %v: %s", isErr, tc.isError, text)
			}
			if strings.Contains(text, "Internal error") {
				t.Errorf("an internal error: %s", text)
			}
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("text lacks %q: %.600s", w, text)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(text, w) {
					t.Errorf("text has %q: %.600s", w, text)
				}
			}
		})
	}
}

// The tool handler tests call each tool as an agent would, below HTTP:
// the endpoint with an authenticated caller, on a real database through
// row-level security; each case is a result or an in-band error a user
// would see.

func TestListRepositories(t *testing.T) {
	newToolFixture(t).run(t, "list_repositories", []toolCase{
		{name: "admin sees every repository", args: map[string]any{}, want: []string{"acme/r0", "acme/r1", "acme/r2", `"all_repositories":true`}},
		{name: "member sees its grants", member: true, args: map[string]any{}, want: []string{"acme/r0", `"source":"local"`}, notWant: []string{"acme/r1", "acme/r2"}},
		{name: "query", args: map[string]any{"query": "R1"}, want: []string{"acme/r1"}, notWant: []string{"acme/r0", "acme/r2"}},
		{name: "limit is clamped, not refused", args: map[string]any{"limit": 500}, want: []string{"acme/r2"}},
		{name: "limit 0 is clamped to 1", args: map[string]any{"limit": 0}, want: []string{"acme/r0", "next_cursor"}, notWant: []string{"acme/r1"}},
		{name: "unknown argument", args: map[string]any{"bogus": 1}, isError: true, want: []string{`Unknown argument "bogus"`}},
		{name: "wrong type", args: map[string]any{"limit": "ten"}, isError: true, want: []string{`Invalid argument "limit": expected a number.`}},
		{name: "bad cursor", args: map[string]any{"cursor": "x"}, isError: true, want: []string{"Invalid cursor"}},
	})
}

func TestGetRules(t *testing.T) {
	newToolFixture(t).run(t, "get_rules", []toolCase{
		{name: "tenant rules", args: map[string]any{}, want: []string{"House style", `"scope":"tenant"`}, notWant: []string{"Check errors"}},
		{name: "a repository's rules too", args: map[string]any{"repository": "acme/r0"}, want: []string{"House style", "Check errors", "repository:acme/r0"}},
		{name: "a granted repository, as the member", member: true, args: map[string]any{"repository": "acme/r0"}, want: []string{"Check errors"}},
		{name: "an ungranted repository", member: true, args: map[string]any{"repository": "acme/r1"}, isError: true, want: []string{"Not found."}},
		{name: "an unknown repository", args: map[string]any{"repository": "acme/nope"}, isError: true, want: []string{"Not found."}},
		{name: "a blank repository", args: map[string]any{"repository": " "}, isError: true, want: []string{`Invalid argument "repository"`}},
		{name: "a repository of the wrong type", args: map[string]any{"repository": true}, isError: true, want: []string{`Invalid argument "repository"`}},
	})
}

func TestGetPullRequestReview(t *testing.T) {
	newToolFixture(t).run(t, "get_pull_request_review", []toolCase{
		{name: "the latest review", args: map[string]any{"repository": "acme/r0", "number": 1}, want: []string{"Finding 0", "Finding 2", `"total_findings":3`, `"high":3`}},
		{name: "missing repository", args: map[string]any{"number": 1}, isError: true, want: []string{`Missing required argument "repository".`}},
		{name: "missing number", args: map[string]any{"repository": "acme/r0"}, isError: true, want: []string{`Missing required argument "number".`}},
		{name: "null number", args: map[string]any{"repository": "acme/r0", "number": nil}, isError: true, want: []string{`Missing required argument "number".`}},
		{name: "number below the minimum", args: map[string]any{"repository": "acme/r0", "number": 0}, isError: true, want: []string{"number must be 1 or more."}},
		{name: "review_id below the minimum", args: map[string]any{"repository": "acme/r0", "number": 1, "review_id": -1}, isError: true, want: []string{"review_id must be 1 or more."}},
		{name: "no such pull request", args: map[string]any{"repository": "acme/r0", "number": 99}, isError: true, want: []string{"Pull request #99 not found"}},
		{name: "no such review", args: map[string]any{"repository": "acme/r0", "number": 1, "review_id": 424242}, isError: true, want: []string{"Review 424242 not found"}},
		{name: "an ungranted repository", member: true, args: map[string]any{"repository": "acme/r1", "number": 1}, isError: true, want: []string{"Not found."}},
	})
}

func TestSearchFindings(t *testing.T) {
	newToolFixture(t).run(t, "search_findings", []toolCase{
		{name: "text", args: map[string]any{"query": "finding 1"}, want: []string{"Finding 1"}, notWant: []string{"Finding 0"}},
		{name: "minimum severity met", args: map[string]any{"severity": "high"}, want: []string{"Finding 0"}},
		{name: "minimum severity above every finding", args: map[string]any{"severity": "critical"}, notWant: []string{"Finding 0"}},
		{name: "status defaults to open", args: map[string]any{"status": ""}, want: []string{"Finding 0"}},
		{name: "resolved only", args: map[string]any{"status": "resolved"}, notWant: []string{"Finding 0"}},
		{name: "a pull request", args: map[string]any{"repository": "acme/r0", "pull_request": 1}, want: []string{"Finding 0"}},
		{name: "the member's repositories only", member: true, args: map[string]any{"repository": "acme/r2"}, isError: true, want: []string{"Not found."}},
		{name: "a bad severity", args: map[string]any{"severity": "urgent"}, isError: true, want: []string{"severity must be one of info, low, medium, high, critical."}},
		{name: "a bad status", args: map[string]any{"status": "closed"}, isError: true, want: []string{"status must be one of open, resolved, dismissed, all."}},
		{name: "pull_request without repository", args: map[string]any{"pull_request": 1}, isError: true, want: []string{"pull_request needs repository"}},
		{name: "pull_request below the minimum", args: map[string]any{"repository": "acme/r0", "pull_request": 0}, isError: true, want: []string{"pull_request must be 1 or more."}},
		{name: "query too long", args: map[string]any{"query": strings.Repeat("é", 501)}, isError: true, want: []string{"query is longer than 500 characters."}},
		{name: "query of 500 characters in two-byte runes", args: map[string]any{"query": strings.Repeat("é", 500)}, notWant: []string{"Finding 0"}},
	})
}

func TestGetFixPrompt(t *testing.T) {
	newToolFixture(t).run(t, "get_fix_prompt", []toolCase{
		{name: "open findings of the latest review", args: map[string]any{"repository": "acme/r0", "number": 1}, want: []string{"You are asked to address code-review findings", "Finding 0", "Check errors"}, notWant: []string{"House style"}},
		{name: "chosen findings", args: map[string]any{"repository": "acme/r0", "number": 1, "finding_ids": []int{424242}}, isError: true, want: []string{"Finding 424242 not found on pull request #1."}},
		{name: "no finding ids", args: map[string]any{"repository": "acme/r0", "number": 1, "finding_ids": []int{}}, isError: true, want: []string{"finding_ids must list 1 to 100 ids, or be omitted."}},
		{name: "too many finding ids", args: map[string]any{"repository": "acme/r0", "number": 1, "finding_ids": make([]int, 101)}, isError: true, want: []string{"finding_ids must list 1 to 100 ids"}},
		{name: "missing number", args: map[string]any{"repository": "acme/r0"}, isError: true, want: []string{`Missing required argument "number".`}},
		{name: "no such pull request", args: map[string]any{"repository": "acme/r0", "number": 99}, isError: true, want: []string{"Pull request #99 not found"}},
		{name: "an ungranted repository", member: true, args: map[string]any{"repository": "acme/r1", "number": 1}, isError: true, want: []string{"Not found."}},
	})
}

func TestSearchCode(t *testing.T) {
	newToolFixture(t).run(t, "search_code", []toolCase{
		{name: "a literal", args: map[string]any{"query": "NeedleHandler"}, want: []string{"acme/r0", "main.go", "func NeedleHandler"}},
		// The query is not repeated: redacted by the tenant's known
		// secrets, it confirmed guesses at secrets of ungranted
		// repositories.
		{name: "the query is not repeated", args: map[string]any{"query": "needlehandler"}, want: []string{"func NeedleHandler"}, notWant: []string{`"query"`, `needlehandler"`}},
		{name: "a regex in a repository", args: map[string]any{"query": "func [A-Z]\\w+", "regex": true, "repository": "acme/r0"}, want: []string{"func NeedleHandler"}},
		// An alternation has no common literal; its ARE prefilter (with a
		// trigram in every branch, case folding written out) scopes it.
		{name: "an alternation without a common literal", args: map[string]any{"query": "(needlehandler|HaystackNothing)", "regex": true}, want: []string{"acme/r0", "func NeedleHandler"}},
		{name: "a regex with nothing to index needs a scope", args: map[string]any{"query": "\\w+\\(", "regex": true}, isError: true, want: []string{"no literal of 3 or more characters"}},
		{name: "case-sensitive miss", args: map[string]any{"query": "needlehandler", "case_sensitive": true}, notWant: []string{"main.go"}},
		{name: "context 0 is honoured, not defaulted", args: map[string]any{"query": "func NeedleHandler", "context": 0}, want: []string{"func NeedleHandler"}, notWant: []string{"serves the needle"}},
		{name: "context is clamped", args: map[string]any{"query": "func NeedleHandler", "context": 9}, want: []string{"package main"}},
		{name: "the member's repositories only", member: true, args: map[string]any{"query": "NeedleHandler", "repository": "acme/r1"}, isError: true, want: []string{"Not found."}},
		{name: "a repository without an index", args: map[string]any{"query": "NeedleHandler", "repository": "acme/r1"}, isError: true, want: []string{"has no code index yet"}},
		{name: "missing query", args: map[string]any{}, isError: true, want: []string{`Missing required argument "query".`}},
		{name: "query too long", args: map[string]any{"query": strings.Repeat("a", 1001)}, isError: true, want: []string{"query is longer than 1000 characters."}},
		{name: "a bad regex", args: map[string]any{"query": "(", "regex": true, "repository": "acme/r0"}, isError: true, want: []string{"Invalid regular expression"}},
		{name: "pull_request without repository", args: map[string]any{"query": "NeedleHandler", "pull_request": 1}, isError: true, want: []string{"pull_request needs repository"}},
		{name: "pull_request below the minimum", args: map[string]any{"query": "NeedleHandler", "repository": "acme/r0", "pull_request": 0}, isError: true, want: []string{"pull_request must be 1 or more."}},
		{name: "regex of the wrong type", args: map[string]any{"query": "x", "regex": "yes"}, isError: true, want: []string{`Invalid argument "regex": expected true or false.`}},
		// Stored text never holds NUL and the database refuses a pattern
		// with one: a regex requiring one finds nothing (it was an
		// internal error), one that makes it optional finds as usual.
		{name: "a regex requiring NUL", args: map[string]any{"query": `\x00NeedleHandler`, "regex": true}, notWant: []string{"main.go", "Internal error"}},
		{name: "a case-sensitive regex requiring NUL", args: map[string]any{"query": `NeedleHandler[\x00]`, "regex": true, "case_sensitive": true, "repository": "acme/r0"}, notWant: []string{"main.go", "Internal error"}},
		{name: "a regex with an optional NUL", args: map[string]any{"query": `func \x00?NeedleHandler`, "regex": true}, want: []string{"func NeedleHandler"}},
		// maxLength counts characters: 1,000 of three bytes each is allowed.
		{name: "a query of 1000 three-byte characters", args: map[string]any{"query": strings.Repeat("€", 1000)}, notWant: []string{"main.go", "longer than"}},
		{name: "a query of 1001 three-byte characters", args: map[string]any{"query": strings.Repeat("€", 1001)}, isError: true, want: []string{"query is longer than 1000 characters."}},
		// An error that repeats an argument repeats at most MaxToolErrorBytes
		// of it: the answer stays within the 32 KiB cap.
		{name: "an error repeating a long glob", args: map[string]any{"query": "NeedleHandler", "path": "[" + strings.Repeat("a", 300_000)}, isError: true, want: []string{"Invalid path glob", "…"}},
	})
}

func TestGetFileContents(t *testing.T) {
	newToolFixture(t).run(t, "get_file_contents", []toolCase{
		{name: "a whole file", args: map[string]any{"repository": "acme/r0", "path": "main.go"}, want: []string{"1: package main", "4: func NeedleHandler", `"total_lines":`}},
		{name: "a window", args: map[string]any{"repository": "acme/r0", "path": "/main.go", "start_line": 3, "end_line": 3}, want: []string{"3: // NeedleHandler"}, notWant: []string{"package main", "4: func"}},
		{name: "missing path", args: map[string]any{"repository": "acme/r0"}, isError: true, want: []string{`Missing required argument "path".`}},
		{name: "an empty path", args: map[string]any{"repository": "acme/r0", "path": ""}, isError: true, want: []string{`Missing required argument "path".`}},
		{name: "missing repository", args: map[string]any{"path": "main.go"}, isError: true, want: []string{`Missing required argument "repository".`}},
		{name: "start_line below the minimum", args: map[string]any{"repository": "acme/r0", "path": "main.go", "start_line": 0}, isError: true, want: []string{"start_line must be 1 or more."}},
		{name: "end_line before start_line", args: map[string]any{"repository": "acme/r0", "path": "main.go", "start_line": 3, "end_line": 2}, isError: true, want: []string{"end_line must not be before start_line."}},
		{name: "past the end", args: map[string]any{"repository": "acme/r0", "path": "main.go", "start_line": 50}, isError: true, want: []string{"past the end of the file"}},
		{name: "no such file", args: map[string]any{"repository": "acme/r0", "path": "nope.go"}, isError: true, want: []string{"File not found"}},
		{name: "a repository without an index", args: map[string]any{"repository": "acme/r1", "path": "main.go"}, isError: true, want: []string{"has no code index yet"}},
		{name: "an ungranted repository", member: true, args: map[string]any{"repository": "acme/r2", "path": "main.go"}, isError: true, want: []string{"Not found."}},
	})
}

// TestFindingsCursorWithPullRequest: a search_findings page of one pull
// request continues with its cursor (the cursor's binding once hashed the
// address of the pull_request argument, so it never verified again).
func TestFindingsCursorWithPullRequest(t *testing.T) {
	fx := newToolFixture(t)
	args := map[string]any{"repository": "acme/r0", "pull_request": 1, "limit": 1}
	text, isErr := fx.call(t, fx.admin, "search_findings", args)
	if isErr {
		t.Fatal(text)
	}
	i := strings.Index(text, `"next_cursor":"`)
	if i < 0 {
		t.Fatalf("no next_cursor: %s", text)
	}
	cur, _, _ := strings.Cut(text[i+len(`"next_cursor":"`):], `"`)
	args["cursor"] = cur
	if text, isErr := fx.call(t, fx.admin, "search_findings", args); isErr {
		t.Errorf("the cursor of a pull request's findings was refused: %s", text)
	}
}
