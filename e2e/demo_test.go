//go:build e2e

package e2e

import (
	"context"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// claudeLineRE matches the line `make run` prints for Claude Code.
var claudeLineRE = regexp.MustCompile(`claude mcp add --transport http codelotse (\S+) --header "Authorization: Bearer (clt_[A-Za-z0-9_-]{43})"`)

// TestDemoLineConnects runs the seeding step of `make run` (cltctl demo)
// twice, takes the printed `claude mcp add` line apart exactly as Claude
// Code would, and connects with the MCP SDK client using that URL and
// header: the line works, and re-running revokes the previous demo token.
func TestDemoLineConnects(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
		{[]string{"token", "create", "--tenant", "acme", "--email", "dev@acme.test", "--name", "t", "--expires-days", "200"}, "--expires-days must be 1 to 90, not 200"},
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
		// Bad input is never reported as the tool's own fault.
		if strings.Contains(errOut, "internal error") {
			t.Errorf("cltctl %v: stderr %q calls bad input an internal error", tc.args, errOut)
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

// TestDemoConsistentAndDurable: the demo (run on this project's checkout,
// as `make run` does) indexes the commit its review was made on, so the
// findings carry no "lines may have moved" note; prints sign-in links for
// the member and the admin; its local memberships do not expire after 24
// hours, so the 7-day token keeps working and says "local". Re-indexing at
// another commit makes every finding tool say that the lines may have
// moved, naming both commits.
func TestDemoConsistentAndDurable(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	out := s.cltctl("demo", "--public-url", s.url, "--source", "..")
	m := claudeLineRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no claude mcp add line in:\n%s", out)
	}
	if n := strings.Count(out, s.url+"/auth/link?v="); n != 2 || !strings.Contains(out, "demo admin") || !strings.Contains(out, "pull request #1") {
		t.Errorf("demo output has %d sign-in links (want member and admin) or no next step:\n%s", n, out)
	}
	const reviewCommit = "00791cd06726f46780e4f5165ee77dfc7f94388c"
	if !strings.Contains(out, "Indexed codelotse/codelotse at "+reviewCommit[:12]) {
		t.Fatalf("the demo did not index the review's commit:\n%s", out)
	}
	// Two days later, by the membership's clock: still served, as local.
	s.exec(`UPDATE tenant_memberships SET refreshed_at = now() - interval '2 days'`)
	cs := connect(t, m[1], m[2], "")
	text, isErr := call(t, cs, "list_repositories", nil)
	if isErr {
		t.Fatalf("demo token after two days: %s", text)
	}
	access := unfence(t, text)["access"].(map[string]any)
	if access["source"] != "local" || access["expires_at"] != nil {
		t.Errorf("demo member's access = %v, want source local without an expiry", access)
	}

	pr := map[string]any{"repository": "codelotse/codelotse", "number": 1}
	all := map[string]any{"repository": "codelotse/codelotse", "status": "all"}
	for _, tool := range []struct {
		name string
		args map[string]any
	}{{"get_pull_request_review", pr}, {"search_findings", all}, {"get_fix_prompt", pr}} {
		text, isErr := call(t, cs, tool.name, tool.args)
		if isErr || strings.Contains(text, "location_note") || !strings.Contains(text, "tokens.go") {
			t.Errorf("%s on the indexed commit: isError=%v %s", tool.name, isErr, text)
		}
	}

	// The index moves on (HEAD of this checkout), the findings do not.
	s.cltctl("index", "--tenant", "demo", "--repo", "codelotse/codelotse", "..")
	head := strings.Fields(unfence(t, mustCall(t, cs, "list_repositories", nil))["repositories"].([]any)[0].(map[string]any)["indexed_commit"].(string))[0]
	if head == reviewCommit {
		t.Skip("this checkout's HEAD is the review's commit")
	}
	for _, tool := range []struct {
		name string
		args map[string]any
	}{{"get_pull_request_review", pr}, {"search_findings", all}, {"get_fix_prompt", pr}} {
		text, isErr := call(t, cs, tool.name, tool.args)
		if isErr {
			t.Fatalf("%s: %s", tool.name, text)
		}
		// get_fix_prompt puts its instructions before the fenced data.
		text = text[strings.Index(text, "The data below comes from"):]
		findings := unfence(t, text)["findings"].([]any)
		if len(findings) == 0 {
			t.Fatalf("%s: no findings", tool.name)
		}
		for _, f := range findings {
			f := f.(map[string]any)
			note, _ := f["location_note"].(string)
			if f["commit"] != reviewCommit || f["indexed_commit"] != head || !strings.Contains(note, reviewCommit) ||
				!strings.Contains(note, head) || !strings.Contains(note, "may have moved") {
				t.Errorf("%s: finding %v does not say its lines may have moved", tool.name, f)
			}
		}
	}
}

func mustCall(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) string {
	t.Helper()
	text, isErr := call(t, cs, name, args)
	if isErr {
		t.Fatalf("%s: %s", name, text)
	}
	return text
}

// TestMakeRunRefusesBusyPort: a second `make run` (scripts/dev.sh) while the
// first is serving on the same address stops before touching anything: the
// running demo's token still works and no token was revoked or created.
func TestMakeRunRefusesBusyPort(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	m := claudeLineRE.FindStringSubmatch(s.cltctl("demo", "--public-url", s.url))
	if m == nil {
		t.Fatal("no demo token")
	}
	before := s.cltctl("token", "list", "--tenant", "demo")
	cmd := exec.Command("bash", "../scripts/dev.sh")
	cmd.Env = append(slices.Clone(s.env), "PUBLIC_URL="+s.url)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("second make run: %v, want exit 1\n%s", err, out)
	}
	if !strings.Contains(string(out), "already in use") || !strings.Contains(string(out), "Nothing was changed") {
		t.Errorf("second make run said:\n%s", out)
	}
	if after := s.cltctl("token", "list", "--tenant", "demo"); after != before {
		t.Errorf("tokens changed:\nbefore\n%s\nafter\n%s", before, after)
	}
	if resp, body := post(t, s, listCall, with(legacy, "Authorization", "Bearer "+m[2])); resp.StatusCode != 200 {
		t.Errorf("the first demo token after a second make run: %d %s", resp.StatusCode, body)
	}
}

// TestOperatorLists: cltctl tenant list, user list and repo list show what
// exists, with MCP state, access source and index status.
func TestOperatorLists(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.cltctl("demo", "--public-url", s.url, "--source", "..")
	s.cltctl("tenant", "create", "--slug", "acme", "--name", "Acme Corp")
	s.cltctl("repo", "add", "--tenant", "acme", "--full-name", "acme/api")

	tenants := s.cltctl("tenant", "list")
	if !regexp.MustCompile(`(?m)^demo\s+CodeLotse demo\s+on\s+2\s+1\s+1\s`).MatchString(tenants) ||
		!regexp.MustCompile(`(?m)^acme\s+Acme Corp\s+off\s+0\s+1\s+0\s`).MatchString(tenants) {
		t.Errorf("tenant list:\n%s", tenants)
	}
	users := s.cltctl("user", "list", "--tenant", "demo")
	if !regexp.MustCompile(`(?m)^admin@demo\.codelotse\.test\s+Demo Admin\s+admin\s+local\s+local\s`).MatchString(users) ||
		!regexp.MustCompile(`(?m)^member@demo\.codelotse\.test\s+Demo Member\s+member\s+local\s+local\s+1\s`).MatchString(users) {
		t.Errorf("user list:\n%s", users)
	}
	repos := s.cltctl("repo", "list", "--tenant", "demo")
	if !regexp.MustCompile(`(?m)^\d+\s+codelotse/codelotse\s+main\s+public\s+00791cd06726\s+\S+\s+[1-9]\d*\s+7\s+1$`).MatchString(repos) {
		t.Errorf("repo list (demo):\n%s", repos)
	}
	if repos := s.cltctl("repo", "list", "--tenant", "acme"); !regexp.MustCompile(`(?m)^\d+\s+acme/api\s+main\s+public\s+not indexed\s+-\s+0\s+0\s+0$`).MatchString(repos) {
		t.Errorf("repo list (acme):\n%s", repos)
	}
	for _, args := range [][]string{{"user", "list"}, {"repo", "list"}} {
		if _, errOut, code := s.cltctlRun(args...); code != 2 || !strings.Contains(errOut, "missing required flag --tenant") {
			t.Errorf("%v: exit %d %q", args, code, errOut)
		}
	}
	// The container health check.
	if out := s.cltctl("health", "--url", s.url+"/readyz"); !strings.Contains(out, "ready") {
		t.Errorf("cltctl health: %q", out)
	}
	if _, _, code := s.cltctlRun("health", "--url", s.url+"/nope"); code != 1 {
		t.Errorf("cltctl health of a 404: exit %d, want 1", code)
	}
	if _, errOut, code := s.cltctlRun("user", "list", "--tenant", "ghost"); code == 0 || !strings.Contains(errOut, "no tenant with slug") {
		t.Errorf("user list of an unknown tenant: exit %d %q", code, errOut)
	}
}

// TestAccessChangesAudited: every operator change of who can see what
// leaves an audit event with its target (written in the change's own
// transaction by the store), and a refused change leaves none.
func TestAccessChangesAudited(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.cltctl("tenant", "create", "--slug", "acme", "--name", "Acme", "--mcp-enabled")
	steps := []struct {
		args           []string
		action, target string
	}{
		{[]string{"user", "add", "--tenant", "acme", "--email", "boss@acme.test", "--role", "admin"}, "user.added", "boss@acme.test"},
		{[]string{"user", "add", "--tenant", "acme", "--email", "dev@acme.test"}, "user.added", "dev@acme.test"},
		{[]string{"repo", "add", "--tenant", "acme", "--full-name", "acme/api", "--private"}, "repository.added", "acme/api"},
		{[]string{"repo", "grant", "--tenant", "acme", "--email", "dev@acme.test", "--full-name", "acme/api"}, "repository.granted", "acme/api"},
		{[]string{"membership", "refresh", "--tenant", "acme", "--email", "dev@acme.test", "--role", "admin"}, "membership.set", "dev@acme.test"},
		{[]string{"membership", "expire", "--tenant", "acme", "--email", "dev@acme.test"}, "membership.expired", ""},
		{[]string{"idp", "add", "--tenant", "acme", "--issuer", "https://idp.acme.test", "--client-id", "c", "--client-secret", "s"}, "idp.saved", "https://idp.acme.test"},
		{[]string{"idp", "map", "--tenant", "acme", "--group", "eng", "--role", "member", "--repo", "acme/api"}, "idp.mapping_added", "eng"},
		{[]string{"idp", "unmap", "--tenant", "acme", "--group", "eng"}, "idp.mapping_removed", "eng"},
		{[]string{"idp", "disable", "--tenant", "acme"}, "", ""},
		{[]string{"user", "delete", "--tenant", "acme", "--email", "dev@acme.test"}, "user.deleted", "dev@acme.test"},
		{[]string{"break-glass", "--tenant", "acme", "--email", "boss@acme.test"}, "break_glass.issued", "boss@acme.test"},
	}
	last := func() (int64, string, string) {
		var id int64
		var action, target string
		_ = s.db.Admin.Pool.QueryRow(context.Background(), `SELECT id, action, target FROM audit_events
			WHERE tenant_id = (SELECT id FROM tenants WHERE slug = 'acme') ORDER BY id DESC LIMIT 1`).Scan(&id, &action, &target)
		return id, action, target
	}
	for _, st := range steps {
		before, _, _ := last()
		s.cltctl(st.args...)
		id, action, target := last()
		if id == before {
			t.Errorf("cltctl %v wrote no audit event", st.args)
			continue
		}
		if st.action != "" && (action != st.action || (st.target != "" && target != st.target)) {
			t.Errorf("cltctl %v: last audit event %s %q, want %s %q", st.args, action, target, st.action, st.target)
		}
	}
	// A refused grant changes nothing and audits nothing.
	before, _, _ := last()
	if _, _, code := s.cltctlRun("repo", "grant", "--tenant", "acme", "--email", "boss@acme.test", "--full-name", "acme/ghost"); code == 0 {
		t.Error("granting an unknown repository succeeded")
	}
	if id, _, _ := last(); id != before {
		t.Error("a refused grant wrote an audit event")
	}
}
