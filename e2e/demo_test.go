//go:build e2e

package e2e

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// claudeLineRE matches the line `make run` prints for Claude Code.
var claudeLineRE = regexp.MustCompile(`claude mcp add --transport http codelotse (\S+) --header "Authorization: Bearer (clt_[A-Za-z0-9_-]{43})"`)

// TestDemoLineConnects runs the seeding step of `make run` (cltctl demo)
// twice, takes the printed `claude mcp add` line apart exactly as Claude
// Code would, and connects with the MCP SDK client using that URL and
// header: the line works, and re-running revokes the previous demo token.
func TestDemoLineConnects(t *testing.T) {
	s := newStack(t)
	first := claudeLineRE.FindStringSubmatch(s.cltctl("demo", "--public-url", s.url))
	out := s.cltctl("demo", "--public-url", s.url)
	m := claudeLineRE.FindStringSubmatch(out)
	if m == nil || first == nil {
		t.Fatalf("no claude mcp add line in:\n%s", out)
	}
	if m[1] != s.url+"/mcp" {
		t.Errorf("endpoint %s, want %s/mcp", m[1], s.url)
	}
	cs := connect(t, m[1], m[2], "")
	text, isErr := call(t, cs, "list_repositories", nil)
	if isErr {
		t.Fatal(text)
	}
	if got := repoNames(t, unfence(t, text)); !slices.Equal(got, []string{"codelotse/codelotse"}) {
		t.Errorf("demo repositories = %v", got)
	}
	text, _ = call(t, cs, "get_rules", map[string]any{"repository": "codelotse/codelotse"})
	if keys := ruleKeys(unfence(t, text)); len(keys) < 3 {
		t.Errorf("demo rules = %v", keys)
	}
	// The first run's token was revoked by the second run.
	resp, _ := post(t, s, listCall, with(legacy, "Authorization", "Bearer "+first[2]))
	if resp.StatusCode != 401 {
		t.Errorf("previous demo token: status %d, want 401", resp.StatusCode)
	}
	if n := strings.Count(s.cltctl("token", "list", "--tenant", "demo"), "active"); n != 1 {
		t.Errorf("%d active demo tokens after two runs, want 1", n)
	}
}

// TestCLIRefusesBadInput: every command prints a clear error and exits
// non-zero on bad input, and changes nothing.
func TestCLIRefusesBadInput(t *testing.T) {
	s := newStack(t)
	s.cltctl("tenant", "create", "--slug", "acme", "--name", "Acme")
	s.cltctl("user", "add", "--tenant", "acme", "--email", "dev@acme.test")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"nope"}, "unknown command"},
		{[]string{"tenant", "create", "--slug", "acme", "--name", "Again"}, "already exists"},
		{[]string{"tenant", "create", "--slug", "Bad Slug", "--name", "x"}, "slug must be"},
		{[]string{"tenant", "create", "--name", "x"}, "missing required flag --slug"},
		{[]string{"tenant", "set-mcp", "--slug", "acme", "--enabled=maybe"}, "--enabled must be true or false"},
		{[]string{"tenant", "set-mcp", "--slug", "ghost", "--enabled=true"}, "no tenant with slug"},
		{[]string{"user", "add", "--tenant", "acme", "--email", "not-an-email"}, "not an email address"},
		{[]string{"user", "add", "--tenant", "acme", "--email", "x@acme.test", "--role", "owner"}, "--role must be admin or member"},
		{[]string{"token", "create", "--tenant", "acme", "--email", "dev@acme.test", "--name", "t", "--expires-days", "91"}, "--expires-days must be 1 to 90"},
		{[]string{"token", "create", "--tenant", "acme", "--email", "dev@acme.test", "--name", "t", "--expires-days", "0"}, "--expires-days must be 1 to 90"},
		{[]string{"token", "create", "--tenant", "acme", "--email", "dev@acme.test", "--name", strings.Repeat("n", 101)}, "token name must be 1 to 100"},
		{[]string{"token", "create", "--tenant", "acme", "--email", "ghost@acme.test", "--name", "t"}, "no user with email"},
		{[]string{"token", "revoke", "--tenant", "acme", "--id", "00000000-0000-0000-0000-000000000000"}, "no token with id"},
		{[]string{"repo", "add", "--tenant", "acme", "--full-name", "no-slash"}, "OWNER/NAME"},
		{[]string{"repo", "grant", "--tenant", "acme", "--email", "dev@acme.test", "--full-name", "acme/ghost"}, "no repository"},
		{[]string{"rule", "add", "--tenant", "acme", "--key", "k", "--title", "t", "--severity", "urgent", "--instructions", "i"}, "--severity must be one of"},
		{[]string{"rule", "add", "--tenant", "acme", "--repo", "acme/ghost", "--key", "k", "--title", "t", "--severity", "low", "--instructions", "i"}, "no repository"},
	} {
		out, errOut, code := s.cltctlRun(tc.args...)
		if code == 0 {
			t.Errorf("cltctl %v succeeded; want an error", tc.args)
			continue
		}
		if !strings.Contains(errOut, tc.want) {
			t.Errorf("cltctl %v: stderr %q does not say %q", tc.args, errOut, tc.want)
		}
		if strings.Contains(out, "clt_") {
			t.Errorf("cltctl %v printed a token on failure", tc.args)
		}
	}

	// The token limit: ten active tokens, the eleventh is refused and not stored.
	for i := 0; i < 10; i++ {
		s.token("acme", "dev@acme.test", "t")
	}
	_, errOut, code := s.cltctlRun("token", "create", "--tenant", "acme", "--email", "dev@acme.test", "--name", "eleventh")
	if code == 0 || !strings.Contains(errOut, "10 active tokens") {
		t.Errorf("eleventh token: exit %d, stderr %q", code, errOut)
	}
	list := s.cltctl("token", "list", "--tenant", "acme")
	if strings.Contains(list, "eleventh") || strings.Count(list, "active") != 10 {
		t.Errorf("after the refused eleventh token:\n%s", list)
	}
	// Revoking one makes room again.
	id := strings.Fields(strings.Split(list, "\n")[1])[0]
	s.cltctl("token", "revoke", "--tenant", "acme", "--id", id)
	s.token("acme", "dev@acme.test", "eleventh")
}
