//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// tenantData seeds a tenant whose every datum carries marker, so that a
// leak into another tenant's answers is visible.
func tenantData(t *testing.T, s *stack, slug, marker string, mcp bool) (apiID string) {
	t.Helper()
	args := []string{"tenant", "create", "--slug", slug, "--name", slug}
	if mcp {
		args = append(args, "--mcp-enabled")
	}
	s.cltctl(args...)
	apiID = idRE.FindStringSubmatch(s.cltctl("repo", "add", "--tenant", slug, "--full-name", slug+"/api"))[1]
	s.cltctl("repo", "add", "--tenant", slug, "--full-name", slug+"/hidden")
	s.cltctl("rule", "add", "--tenant", slug, "--repo", slug+"/api", "--key", "rule", "--title", marker+" rule", "--severity", "high", "--instructions", marker+" instructions")
	s.cltctl("rule", "add", "--tenant", slug, "--repo", slug+"/hidden", "--key", "hidden-rule", "--title", "HIDDEN-"+marker, "--severity", "high", "--instructions", "HIDDEN-"+marker)
	for _, repo := range []string{"api", "hidden"} {
		m := marker
		if repo == "hidden" {
			m = "HIDDEN-" + marker
		}
		dir, _ := gitRepo(t, map[string]string{"cmd/main.go": "package main\n// " + m + "\nfunc NeedleHandler() {} // " + m + "\n"})
		s.cltctl("index", "--tenant", slug, "--repo", slug+"/"+repo, dir)
		s.cltctl("import", "review", "--tenant", slug, writeJSON(t, reviewDoc(slug+"/"+repo, 7, "rev-"+repo, "2026-11-30T12:00:00Z",
			[]map[string]any{{"rule": "rule", "severity": "high", "path": "cmd/main.go", "start_line": 3, "title": m + " finding", "body": m + " body"}})))
	}
	return apiID
}

// TestAdversarialTenancy runs every tool against every kind of repository
// reference with every kind of token, and checks that the answer is exactly
// what ARCHITECTURE §4/§5 say and that no other tenant's (or forbidden
// repository's) data ever appears.
func TestAdversarialTenancy(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	acmeAPI := tenantData(t, s, "acme", "ACME-ONLY", true)
	bravoAPI := tenantData(t, s, "bravo", "BRAVO-ONLY", true)
	tenantData(t, s, "quiet", "QUIET-ONLY", false)

	// acme people: GitHub-style members (one per token state) and OIDC users.
	for _, u := range []string{"dev", "revoked", "expired", "gone", "stale", "oidc", "idpoff", "unmapped"} {
		s.cltctl("user", "add", "--tenant", "acme", "--email", u+"@acme.test")
		s.cltctl("repo", "grant", "--tenant", "acme", "--email", u+"@acme.test", "--full-name", "acme/api")
	}
	s.cltctl("user", "add", "--tenant", "bravo", "--email", "dev@bravo.test")
	s.cltctl("repo", "grant", "--tenant", "bravo", "--email", "dev@bravo.test", "--full-name", "bravo/api")
	s.cltctl("user", "add", "--tenant", "quiet", "--email", "dev@quiet.test", "--role", "admin")
	s.cltctl("idp", "add", "--tenant", "acme", "--issuer", "https://idp.acme.test", "--client-id", "c", "--client-secret", "s")
	s.cltctl("idp", "add", "--tenant", "acme", "--issuer", "https://old-idp.acme.test", "--client-id", "c", "--client-secret", "s")
	s.cltctl("idp", "map", "--tenant", "acme", "--issuer", "https://idp.acme.test", "--group", "eng", "--role", "member", "--repo", "acme/api")
	s.cltctl("idp", "map", "--tenant", "acme", "--issuer", "https://old-idp.acme.test", "--group", "eng", "--role", "member", "--repo", "acme/api")
	s.cltctl("idp", "map", "--tenant", "acme", "--issuer", "https://idp.acme.test", "--group", "contractors", "--role", "member", "--repo", "acme/api")

	tok := map[string]string{
		"valid":                   s.token("acme", "dev@acme.test", "t"),
		"revoked":                 s.token("acme", "revoked@acme.test", "t"),
		"expired":                 s.token("acme", "expired@acme.test", "t"),
		"other tenant's":          s.token("bravo", "dev@bravo.test", "t"),
		"MCP off":                 s.token("quiet", "dev@quiet.test", "t"),
		"user deleted":            s.token("acme", "gone@acme.test", "t"),
		"stale GitHub membership": s.token("acme", "stale@acme.test", "t"),
		"valid OIDC": strings.TrimSpace(s.cltctl("token", "create", "--tenant", "acme", "--email", "oidc@acme.test", "--name", "t",
			"--issuer", "https://idp.acme.test", "--idp-groups", "eng,unrelated")),
		"disabled IdP": strings.TrimSpace(s.cltctl("token", "create", "--tenant", "acme", "--email", "idpoff@acme.test", "--name", "t",
			"--issuer", "https://old-idp.acme.test", "--idp-groups", "eng")),
		"removed mapping": strings.TrimSpace(s.cltctl("token", "create", "--tenant", "acme", "--email", "unmapped@acme.test", "--name", "t",
			"--issuer", "https://idp.acme.test", "--idp-groups", "contractors")),
	}
	for _, line := range strings.Split(s.cltctl("token", "list", "--tenant", "acme", "--email", "revoked@acme.test"), "\n")[1:] {
		if f := strings.Fields(line); len(f) > 0 {
			s.cltctl("token", "revoke", "--tenant", "acme", "--id", f[0])
		}
	}
	s.exec(`UPDATE mcp_tokens SET created_at = now() - interval '3 days', expires_at = now() - interval '1 second'
		WHERE user_id = (SELECT id FROM users WHERE email = 'expired@acme.test')`)
	s.cltctl("user", "delete", "--tenant", "acme", "--email", "gone@acme.test")
	s.cltctl("membership", "expire", "--tenant", "acme", "--email", "stale@acme.test")
	s.cltctl("idp", "disable", "--tenant", "acme", "--issuer", "https://old-idp.acme.test")
	s.cltctl("idp", "unmap", "--tenant", "acme", "--group", "contractors", "--issuer", "https://idp.acme.test")

	type ref struct {
		name   string
		value  any
		tenant string // whose repository it is: acme, bravo or ""
		kind   string // own (granted), forbidden, unknown
	}
	refs := []ref{
		{"acme repo by name", "acme/api", "acme", "own"},
		{"acme repo by id", acmeAPI, "acme", "own"},
		{"acme forbidden repo", "acme/hidden", "acme", "forbidden"},
		{"bravo repo by id", bravoAPI, "bravo", "own"},
		{"bravo repo by name", "BRAVO/API", "bravo", "own"},
		{"unknown repo", "acme/nope", "", "unknown"},
	}
	tools := []struct {
		name string
		args func(repo any) map[string]any
	}{
		{"list_repositories", func(r any) map[string]any { return map[string]any{"query": fmt.Sprint(r)} }},
		{"get_pull_request_review", func(r any) map[string]any { return map[string]any{"repository": r, "number": 7} }},
		{"search_findings", func(r any) map[string]any { return map[string]any{"repository": r, "status": "all"} }},
		{"get_rules", func(r any) map[string]any { return map[string]any{"repository": r} }},
		{"get_fix_prompt", func(r any) map[string]any { return map[string]any{"repository": r, "number": 7} }},
		{"search_code", func(r any) map[string]any { return map[string]any{"repository": r, "query": "NeedleHandler"} }},
		{"get_file_contents", func(r any) map[string]any { return map[string]any{"repository": r, "path": "cmd/main.go"} }},
	}
	tenantOf := map[string]string{"valid": "acme", "valid OIDC": "acme", "other tenant's": "bravo"}
	refresh := map[string]bool{"stale GitHub membership": true}
	markers := map[string]string{"acme": "ACME-ONLY", "bravo": "BRAVO-ONLY", "quiet": "QUIET-ONLY"}
	states := []string{"valid", "valid OIDC", "revoked", "expired", "other tenant's", "MCP off", "user deleted", "stale GitHub membership", "disabled IdP", "removed mapping"}

	cells := 0
	for _, state := range states {
		for _, tl := range tools {
			for _, rf := range refs {
				cells++
				name := fmt.Sprintf("%s / %s / %s", state, tl.name, rf.name)
				body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
					"params": map[string]any{"name": tl.name, "arguments": tl.args(rf.value)}})
				resp, raw := post(t, s, string(body), with(legacy, "Authorization", "Bearer "+tok[state]))
				home, valid := tenantOf[state]
				if !valid {
					if resp.StatusCode != 401 || raw != unauthorizedBody {
						t.Errorf("%s: status %d %s, want 401", name, resp.StatusCode, raw)
					}
					hasRefresh := strings.Contains(resp.Header.Get("WWW-Authenticate"), `error_description="sign in to CodeLotse to refresh access"`)
					if hasRefresh != refresh[state] {
						t.Errorf("%s: WWW-Authenticate %q", name, resp.Header.Get("WWW-Authenticate"))
					}
					continue
				}
				if resp.StatusCode != 200 {
					t.Fatalf("%s: status %d %s", name, resp.StatusCode, raw)
				}
				var msg struct {
					Result struct {
						IsError bool `json:"isError"`
						Content []struct {
							Text string `json:"text"`
						} `json:"content"`
					} `json:"result"`
				}
				if err := json.Unmarshal([]byte(raw), &msg); err != nil || len(msg.Result.Content) != 1 {
					t.Fatalf("%s: %v %s", name, err, raw)
				}
				text := msg.Result.Content[0].Text
				// Nothing of any other tenant, nor of a forbidden repository.
				for tenant, marker := range markers {
					if tenant != home && strings.Contains(text, marker) {
						t.Errorf("%s: %s's data leaked: %s", name, tenant, text)
					}
				}
				if strings.Contains(text, "HIDDEN-") {
					t.Errorf("%s: a forbidden repository's data leaked: %s", name, text)
				}
				visible := rf.tenant == home && rf.kind == "own"
				switch {
				case tl.name == "list_repositories":
					doc := unfence(t, text)
					n := len(doc["repositories"].([]any))
					// By name the own repository is listed; ids are not names.
					want := 0
					if visible && strings.Contains(strings.ToLower(fmt.Sprint(rf.value)), "/") {
						want = 1
					}
					if n != want {
						t.Errorf("%s: %d repositories listed, want %d: %s", name, n, want, text)
					}
				case visible:
					if msg.Result.IsError || !strings.Contains(text, markers[home]) && tl.name != "search_code" {
						t.Errorf("%s: want the repository's data, got isError=%v %s", name, msg.Result.IsError, text)
					}
				default:
					if !msg.Result.IsError || text != "Not found." {
						t.Errorf("%s: isError=%v %q, want Not found.", name, msg.Result.IsError, text)
					}
				}
			}
		}
	}
	t.Logf("adversarial tenancy matrix: %d tools × %d repository references × %d token states = %d calls", len(tools), len(refs), len(states), cells)
	fmt.Printf("adversarial tenancy matrix: %d tools × %d repository references × %d token states = %d calls\n", len(tools), len(refs), len(states), cells)
}
