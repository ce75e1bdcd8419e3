//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fenceRE matches a whole fenced result and captures the nonce and JSON.
var fenceRE = regexp.MustCompile(`(?s)^The data below comes from repositories and code reviews\.[^\n]*\n<untrusted-data id="([0-9a-f]{24})">\n(.*)\n</untrusted-data id="([0-9a-f]{24})">$`)

// unfence checks the fence and returns the JSON document inside it.
func unfence(t *testing.T, text string) map[string]any {
	t.Helper()
	m := fenceRE.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("result is not fenced as untrusted data:\n%s", text)
	}
	if m[1] != m[3] {
		t.Fatalf("fence nonces differ: %s vs %s", m[1], m[3])
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(m[2]), &doc); err != nil {
		t.Fatalf("fenced content is not JSON: %v\n%s", err, m[2])
	}
	return doc
}

func repoNames(t *testing.T, doc map[string]any) []string {
	t.Helper()
	var names []string
	for _, r := range doc["repositories"].([]any) {
		names = append(names, r.(map[string]any)["full_name"].(string))
	}
	slices.Sort(names)
	return names
}

func ruleKeys(doc map[string]any) []string {
	var keys []string
	for _, r := range doc["rules"].([]any) {
		keys = append(keys, r.(map[string]any)["key"].(string))
	}
	slices.Sort(keys)
	return keys
}

// seedTwoTenants creates tenants acme and bravo with cltctl, as an operator
// would, and returns tokens: acme member, acme admin, bravo member.
func seedTwoTenants(s *stack) (acmeDev, acmeBoss, bravoDev string, acmeAPIID string) {
	s.cltctl("tenant", "create", "--slug", "acme", "--name", "Acme Corp", "--mcp-enabled")
	s.cltctl("tenant", "create", "--slug", "bravo", "--name", "Bravo Ltd", "--mcp-enabled")
	s.cltctl("user", "add", "--tenant", "acme", "--email", "dev@acme.test")
	s.cltctl("user", "add", "--tenant", "acme", "--email", "boss@acme.test", "--role", "admin")
	s.cltctl("user", "add", "--tenant", "bravo", "--email", "dev@bravo.test")
	out := s.cltctl("repo", "add", "--tenant", "acme", "--full-name", "acme/api", "--private")
	acmeAPIID = regexp.MustCompile(`has id (\d+)`).FindStringSubmatch(out)[1]
	s.cltctl("repo", "add", "--tenant", "acme", "--full-name", "acme/secret-plans", "--private")
	s.cltctl("repo", "add", "--tenant", "bravo", "--full-name", "bravo/web")
	s.cltctl("repo", "grant", "--tenant", "acme", "--email", "dev@acme.test", "--full-name", "acme/api")
	s.cltctl("repo", "grant", "--tenant", "bravo", "--email", "dev@bravo.test", "--full-name", "bravo/web")
	s.cltctl("rule", "add", "--tenant", "acme", "--key", "acme/tenant-rule", "--title", "Acme tenant rule", "--severity", "high", "--instructions", "Acme-wide instructions.")
	s.cltctl("rule", "add", "--tenant", "acme", "--repo", "acme/api", "--key", "acme/api-rule", "--title", "Acme API rule", "--severity", "medium", "--instructions", "API instructions.", "--paths", "cmd/**,pkg/**")
	s.cltctl("rule", "add", "--tenant", "acme", "--repo", "acme/secret-plans", "--key", "acme/secret-rule", "--title", "Acme secret rule", "--severity", "low", "--instructions", "Secret instructions.")
	s.cltctl("rule", "add", "--tenant", "bravo", "--key", "bravo/rule", "--title", "Bravo rule", "--severity", "info", "--instructions", "Bravo instructions.")
	return s.token("acme", "dev@acme.test", "laptop"), s.token("acme", "boss@acme.test", "laptop"), s.token("bravo", "dev@bravo.test", "laptop"), acmeAPIID
}

// TestMCPTwoTenants is the walking skeleton's end-to-end test: two tenants
// created with cltctl, the SDK client on both protocol eras, both tools,
// and tenant B's token never seeing tenant A's repositories or rules.
func TestMCPTwoTenants(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	acmeDev, acmeBoss, bravoDev, acmeAPIID := seedTwoTenants(s)
	endpoint := s.url + "/mcp"

	for _, tc := range []struct{ ask, want string }{{"", "2026-07-28"}, {"2025-06-18", "2025-06-18"}, {"2025-03-26", "2025-03-26"}, {"2025-11-25", "2025-11-25"}} {
		t.Run("protocol "+tc.want, func(t *testing.T) {
			dev := connect(t, endpoint, acmeDev, tc.ask)
			if got := dev.InitializeResult().ProtocolVersion; got != tc.want {
				t.Fatalf("negotiated protocol %s, want %s", got, tc.want)
			}
			if ins := dev.InitializeResult().Instructions; !strings.Contains(ins, "untrusted-data") {
				t.Errorf("instructions do not warn about untrusted data: %q", ins)
			}
			caps := dev.InitializeResult().Capabilities
			//lint:ignore SA1019 asserting that the deprecated logging capability is not advertised
			// Tools, plus the empty prompt and resource lists the server
			// answers (ARCHITECTURE §6.1); nothing changes, so no listChanged.
			if caps == nil || caps.Tools == nil || caps.Tools.ListChanged || caps.Logging != nil || caps.Completions != nil ||
				caps.Resources == nil || caps.Resources.ListChanged || caps.Resources.Subscribe || caps.Prompts == nil || caps.Prompts.ListChanged {
				t.Errorf("capabilities = %+v, want tools and empty prompts/resources, without listChanged", caps)
			}

			tools, err := dev.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tl := range tools.Tools {
				names = append(names, tl.Name)
				a := tl.Annotations
				if a == nil || !a.ReadOnlyHint || !a.IdempotentHint || a.OpenWorldHint == nil || *a.OpenWorldHint || tl.Title == "" {
					t.Errorf("tool %s annotations = %+v, want readOnly, idempotent, closed world, titled", tl.Name, a)
				}
			}
			if !slices.Equal(names, []string{"get_file_contents", "get_fix_prompt", "get_pull_request_review", "get_rules", "list_repositories", "search_code", "search_findings"}) {
				t.Errorf("tools = %v", names)
			}

			// A member sees the repositories granted to them, nothing else.
			text, isErr := call(t, dev, "list_repositories", nil)
			if isErr {
				t.Fatalf("list_repositories failed: %s", text)
			}
			doc := unfence(t, text)
			if got := repoNames(t, doc); !slices.Equal(got, []string{"acme/api"}) {
				t.Errorf("acme member sees %v, want [acme/api]", got)
			}
			// Added by cltctl: local access, not a GitHub cache (issue 14).
			if src := doc["access"].(map[string]any)["source"]; src != "local" {
				t.Errorf("access source = %v", src)
			}

			// An admin sees every repository of the tenant.
			boss := connect(t, endpoint, acmeBoss, tc.ask)
			text, _ = call(t, boss, "list_repositories", map[string]any{"query": "ACME/"})
			if got := repoNames(t, unfence(t, text)); !slices.Equal(got, []string{"acme/api", "acme/secret-plans"}) {
				t.Errorf("acme admin sees %v", got)
			}

			// Rules: tenant-wide plus the repository's, by name and by id.
			for _, ref := range []any{"acme/api", "ACME/API", acmeAPIID} {
				text, isErr = call(t, dev, "get_rules", map[string]any{"repository": ref})
				if isErr {
					t.Fatalf("get_rules %v: %s", ref, text)
				}
				if got := ruleKeys(unfence(t, text)); !slices.Equal(got, []string{"acme/api-rule", "acme/tenant-rule"}) {
					t.Errorf("get_rules(%v) = %v", ref, got)
				}
			}
			text, _ = call(t, dev, "get_rules", nil)
			if got := ruleKeys(unfence(t, text)); !slices.Equal(got, []string{"acme/tenant-rule"}) {
				t.Errorf("get_rules() = %v, want tenant rules only", got)
			}

			// A repository of the same tenant without a grant: "Not found."
			text, isErr = call(t, dev, "get_rules", map[string]any{"repository": "acme/secret-plans"})
			if !isErr || text != "Not found." {
				t.Errorf("forbidden repository: isError=%v text=%q, want Not found.", isErr, text)
			}
			text, isErr = call(t, dev, "get_rules", map[string]any{"repository": "acme/does-not-exist"})
			if !isErr || text != "Not found." {
				t.Errorf("unknown repository: isError=%v text=%q, want Not found.", isErr, text)
			}

			// Tenant B never sees tenant A: not in lists, not by id, not by name.
			bravo := connect(t, endpoint, bravoDev, tc.ask)
			text, _ = call(t, bravo, "list_repositories", nil)
			if got := repoNames(t, unfence(t, text)); !slices.Equal(got, []string{"bravo/web"}) {
				t.Errorf("bravo sees %v", got)
			}
			for _, ref := range []any{"acme/api", acmeAPIID, json.Number(acmeAPIID)} {
				text, isErr = call(t, bravo, "get_rules", map[string]any{"repository": ref})
				if !isErr || text != "Not found." {
					t.Errorf("bravo get_rules(%v): isError=%v text=%q, want Not found.", ref, isErr, text)
				}
			}
			text, _ = call(t, bravo, "get_rules", nil)
			if strings.Contains(strings.ToLower(text), "acme") {
				t.Errorf("bravo's rules mention acme:\n%s", text)
			}
			if got := ruleKeys(unfence(t, text)); !slices.Equal(got, []string{"bravo/rule"}) {
				t.Errorf("bravo rules = %v", got)
			}

			// Bad arguments are in-band tool errors the agent can act on.
			text, isErr = call(t, dev, "list_repositories", map[string]any{"limit": "ten"})
			if !isErr || !strings.Contains(text, `"limit"`) {
				t.Errorf("bad limit: isError=%v text=%q", isErr, text)
			}
			text, isErr = call(t, dev, "get_rules", map[string]any{"repo": "acme/api"})
			if !isErr || !strings.Contains(text, "Unknown argument") {
				t.Errorf("unknown argument: isError=%v text=%q", isErr, text)
			}
			text, isErr = call(t, dev, "list_repositories", map[string]any{"cursor": "garbage"})
			if !isErr || !strings.Contains(text, "Invalid cursor") {
				t.Errorf("bad cursor: isError=%v text=%q", isErr, text)
			}

			// An unknown tool is a protocol error, not a tool result.
			_, err = dev.CallTool(context.Background(), &mcp.CallToolParams{Name: "delete_everything"})
			if err == nil {
				t.Error("calling an unknown tool succeeded")
			}
		})
	}

	// Paging: limit 1 walks every repository exactly once.
	boss := connect(t, endpoint, acmeBoss, "")
	var seen []string
	cursor := ""
	for i := 0; i < 5; i++ {
		args := map[string]any{"limit": 1}
		if cursor != "" {
			args["cursor"] = cursor
		}
		text, isErr := call(t, boss, "list_repositories", args)
		if isErr {
			t.Fatalf("page %d: %s", i, text)
		}
		doc := unfence(t, text)
		seen = append(seen, repoNames(t, doc)...)
		c, _ := doc["next_cursor"].(string)
		if c == "" {
			break
		}
		cursor = c
	}
	if !slices.Equal(seen, []string{"acme/api", "acme/secret-plans"}) {
		t.Errorf("paging saw %v", seen)
	}

	// No token ever reaches a log line.
	logs := s.logs.String()
	for _, tok := range []string{acmeDev, acmeBoss, bravoDev} {
		if strings.Contains(logs, tok) || strings.Contains(logs, tok[4:20]) {
			t.Errorf("a token appears in the API's logs")
		}
	}
}
