package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
)

// Found by a black-box probe of cltctl: each was an internal error, a
// silent change, or a change made from a bad argument.

// TestArgumentsMustBeText: invalid UTF-8 in a flag's value is a usage
// error (exit 2) before anything runs; it reached PostgreSQL as an
// internal error. Nothing is written.
func TestArgumentsMustBeText(t *testing.T) {
	env := pgtest.New(t)
	for _, args := range [][]string{
		{"tenant", "create", "--slug", "acme", "--name", "Ac\xffme"},
		{"tenant", "create", "--slug", "ac\xffme", "--name", "Acme"},
	} {
		_, err := cltctl(t, env, args...)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(ue.msg, "not valid UTF-8") {
			t.Errorf("cltctl %q: %v, want a usage error naming the flag", args, err)
		}
	}
	if _, err := env.Admin.TenantIDBySlug(context.Background(), "acme"); err == nil {
		t.Error("a refused command created the tenant")
	}
}

// TestIdPAddChecksTheIssuer: issuers with a query, a fragment, credentials,
// a space or plain http off loopback are refused (one rule with the admin
// page, oidc.CheckIssuer). A second provider stays possible from cltctl (its
// tokens keep working until it is disabled), and adding one says that web
// sign-in then stops working.
func TestIdPAddChecksTheIssuer(t *testing.T) {
	env := pgtest.New(t)
	mustCltctl(t, env, "tenant", "create", "--slug", "acme", "--name", "Acme")
	add := func(issuer string) (string, error) {
		_, errOut, err := cltctlStreams(t, env, "idp", "add", "--tenant", "acme", "--issuer", issuer, "--client-id", "c", "--client-secret", "s")
		return errOut, err
	}
	for _, bad := range []string{"http://idp.example.com", "https://idp.example.com/x?y=1", "https://idp.example.com/x#z", "https://u:p@idp.example.com", "https://idp.example.com/a b"} {
		var ue usageError
		if _, err := add(bad); !errors.As(err, &ue) {
			t.Errorf("issuer %s: %v, want a usage error", bad, err)
		}
	}
	if errOut, err := add("https://login.example.com"); err != nil || errOut != "" {
		t.Fatalf("first provider: %v %q", err, errOut)
	}
	errOut, err := add("https://old.example.com")
	if err != nil || !strings.Contains(errOut, "two identity providers") {
		t.Errorf("second provider: %v, note %q", err, errOut)
	}
	if n := env.AdminStrings(t, `SELECT issuer FROM identity_providers ORDER BY issuer`); len(n) != 2 {
		t.Errorf("providers: %q", n)
	}
}

// TestDemoRefusesABadPublicURL: the demo revokes the previous demo token;
// with a URL it cannot print a connect line for, it printed a broken one
// and revoked the working token. It is refused before anything changes.
func TestDemoRefusesABadPublicURL(t *testing.T) {
	env := pgtest.New(t)
	for _, u := range []string{"not a url", "javascript:alert(1)", "http://", "http://127.0.0.1:99999", "http://example.com"} {
		_, err := cltctl(t, env, "demo", "--public-url", u)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(ue.msg, "--public-url") {
			t.Errorf("--public-url %q: %v, want a usage error", u, err)
		}
	}
	if _, err := env.Admin.TenantIDBySlug(context.Background(), demoSlug); err == nil {
		t.Error("a refused demo seeded the demo tenant")
	}
}

func TestDefaultHealthURL(t *testing.T) {
	for listen, want := range map[string]string{
		":8080":          "http://127.0.0.1:8080/readyz",
		"127.0.0.1:8096": "http://127.0.0.1:8096/readyz",
		"0.0.0.0:9000":   "http://127.0.0.1:9000/readyz",
		"[::1]:8081":     "http://[::1]:8081/readyz",
		"":               "http://127.0.0.1:8080/readyz",
	} {
		if got := defaultHealthURL(listen); got != want {
			t.Errorf("defaultHealthURL(%q) = %q, want %q", listen, got, want)
		}
	}
}

// TestValuesGitHubWouldNeverSend: cltctl stored a repository named
// "acme/..", a javascript: web URL (shown to agents), a default branch
// with a space, an invalid rule glob and names with newlines. Each is a
// usage error now, with nothing written.
func TestValuesGitHubWouldNeverSend(t *testing.T) {
	env := pgtest.New(t)
	mustCltctl(t, env, "tenant", "create", "--slug", "acme", "--name", "Acme")
	for _, args := range [][]string{
		{"repo", "add", "--tenant", "acme", "--full-name", "acme/.."},
		{"repo", "add", "--tenant", "acme", "--full-name", "acme/" + strings.Repeat("n", 101)},
		{"repo", "add", "--tenant", "acme", "--full-name", "acme/api", "--url", "javascript:alert(1)"},
		{"repo", "add", "--tenant", "acme", "--full-name", "acme/api", "--url", "not a url"},
		{"repo", "add", "--tenant", "acme", "--full-name", "acme/api", "--default-branch", "x y"},
		{"repo", "add", "--tenant", "acme", "--full-name", "acme/api", "--default-branch", "a..b"},
		{"rule", "add", "--tenant", "acme", "--key", "k", "--title", "T", "--severity", "low", "--instructions", "i", "--paths", "["},
		{"rule", "add", "--tenant", "acme", "--key", "k", "--title", "two\nlines", "--severity", "low", "--instructions", "i"},
		{"tenant", "create", "--slug", "other", "--name", "two\nlines"},
		{"tenant", "create", "--slug", "other", "--name", "next\u0085line"},
		{"tenant", "create", "--slug", "other", "--name", "line\u2028separator"},
		{"idp", "map", "--tenant", "acme", "--group", "a\nb", "--role", "member"},
		{"user", "add", "--tenant", "acme", "--email", "dev@acme.test", "--name", strings.Repeat("n", 201)},
	} {
		_, err := cltctl(t, env, args...)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("cltctl %q: %v, want a usage error", args, err)
		}
	}
	out := mustCltctl(t, env, "repo", "add", "--tenant", "acme", "--full-name", "acme/api", "--default-branch", "release/v1.2", "--url", "https://git.example.com/acme/api")
	if !strings.Contains(out, "acme/api") {
		t.Errorf("a valid repository: %q", out)
	}
	if n := env.AdminStrings(t, `SELECT full_name FROM repositories`); len(n) != 1 {
		t.Errorf("repositories after the refusals: %q", n)
	}
}

// TestGroupHelpAndTokenIDs: "cltctl tenant -h" is help on the group's
// commands (exit 0, it printed the global usage and exited 2); "cltctl
// tenant" alone is a usage error naming what is missing; a malformed
// --id for token revoke is a usage error (it was "no token", exit 1).
func TestGroupHelpAndTokenIDs(t *testing.T) {
	env := pgtest.New(t)
	for _, args := range [][]string{{"tenant", "-h"}, {"token", "--help"}, {"user", "help"}, {"repo", "-help"}} {
		out, stderr, err := cltctlStreams(t, env, args...)
		if err != nil || !strings.HasPrefix(out, "usage: cltctl "+args[0]+" COMMAND") ||
			strings.Contains(out, "migrate") || stderr != "" {
			t.Errorf("cltctl %q: %v, stdout %q", args, err, out)
		}
	}
	_, stderr, err := cltctlStreams(t, env, "tenant")
	var ue usageError
	if !errors.As(err, &ue) || ue.msg != "tenant: missing command" || !strings.Contains(stderr, "tenant set-mcp") {
		t.Errorf("cltctl tenant: %v, stderr %q", err, stderr)
	}
	_, stderr, err = cltctlStreams(t, env, "tenant", "frob")
	if !errors.As(err, &ue) || !strings.Contains(ue.msg, `unknown command "tenant frob"`) || strings.Contains(stderr, "migrate") {
		t.Errorf("cltctl tenant frob: %v, stderr %q", err, stderr)
	}
	mustCltctl(t, env, "tenant", "create", "--slug", "acme", "--name", "Acme")
	_, err = cltctl(t, env, "token", "revoke", "--tenant", "acme", "--id", "notauuid")
	if !errors.As(err, &ue) || !strings.Contains(ue.msg, "not a token id") {
		t.Errorf("token revoke --id notauuid: %v", err)
	}
	_, err = cltctl(t, env, "token", "revoke", "--tenant", "acme", "--id", "0b8a6f0e-3c1d-4e2f-9a7b-5c6d7e8f9a0b")
	if err == nil || errors.As(err, &ue) || !strings.Contains(err.Error(), "no token") {
		t.Errorf("token revoke of an unknown id: %v", err)
	}
	// An id in capitals is the same token.
	mustCltctl(t, env, "user", "add", "--tenant", "acme", "--email", "dev@acme.test", "--role", "member")
	mustCltctl(t, env, "token", "create", "--tenant", "acme", "--email", "dev@acme.test", "--name", "laptop")
	list := mustCltctl(t, env, "token", "list", "--tenant", "acme")
	id := tokenIDIn(list)
	if id == "" {
		t.Fatalf("no token id in %q", list)
	}
	if out := mustCltctl(t, env, "token", "revoke", "--tenant", "acme", "--id", strings.ToUpper(id)); !strings.Contains(out, "revoked") {
		t.Errorf("revoke by an upper-case id: %q", out)
	}
}

// tokenIDIn returns the first token id in cltctl token list's output.
func tokenIDIn(list string) string {
	for _, f := range strings.Fields(list) {
		if tokenID.MatchString(f) {
			return f
		}
	}
	return ""
}
