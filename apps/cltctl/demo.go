package main

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/codelotse/codelotse/apps/internal/config"
	"github.com/codelotse/codelotse/pkg/codeindex"
	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/importer"
	"github.com/codelotse/codelotse/pkg/postgres"
)

// Demo data seeded by `make run` (cltctl demo).
const (
	demoSlug      = "demo"
	demoAdmin     = "admin@demo.codelotse.test"
	demoMember    = "member@demo.codelotse.test"
	demoRepo      = "codelotse/codelotse"
	demoTokenName = "make run demo"
	demoTokenDays = 7
)

var demoRules = []struct {
	repo bool
	rule codelotse.Rule
}{
	{false, codelotse.Rule{Key: "security/no-secrets", Title: "No secrets in code or reviews", Severity: codelotse.SeverityCritical,
		Instructions: "Credentials, tokens and keys never appear in source, tests, fixtures or review comments. Load them from the environment or a secret store."}},
	{false, codelotse.Rule{Key: "errors/wrap-with-context", Title: "Errors carry context", Severity: codelotse.SeverityMedium, PathGlobs: []string{"**/*.go"},
		Instructions: "Return errors with the operation that failed; never discard an error silently."}},
	{true, codelotse.Rule{Key: "tenancy/explicit-tenant", Title: "Tenant data is read in a tenant transaction", Severity: codelotse.SeverityHigh, PathGlobs: []string{"pkg/postgres/**"},
		Instructions: "Every query on a tenant table runs inside postgres.InTenant or ReadTenant and filters by tenant_id explicitly; row-level security is the backstop, not the only guard."}},
	{true, codelotse.Rule{Key: "mcp/read-only", Title: "MCP tools never write", Severity: codelotse.SeverityHigh, PathGlobs: []string{"pkg/mcpserver/**"},
		Instructions: "A tool reads through row-level security and returns a shaped result; it never writes, calls another service or forwards the token."}},
}

// cmdDemo: cltctl demo [--public-url URL]
//
// Seeds (idempotently) the demo tenant with MCP on, an admin and a member,
// this project's repository and its rules; refreshes the memberships;
// revokes the previous demo token and prints a fresh one with a ready
// `claude mcp add` line.
func cmdDemo(e *env, args []string) error {
	fs := e.flags("demo")
	public := fs.String("public-url", e.cfg.PublicURL, "the API's PUBLIC_URL")
	source := fs.String("source", ".", "this project's git checkout: indexed as the demo repository, and its testdata/review-example.json imported as the demo review")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	// Checked before anything changes: the demo revokes the previous demo
	// token, and a URL it cannot print a connect line for must not.
	*public = strings.TrimRight(*public, "/")
	if u, err := url.Parse(*public); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" ||
		(u.Port() != "" && !validPort(u.Port())) {
		return usageError{fmt.Sprintf("--public-url must be the API's absolute http(s) URL, such as http://127.0.0.1:8080, not %q", *public)}
	}
	// The API refuses to serve plain http off loopback: a demo for such a
	// URL would print links that cannot work.
	if err := (config.Config{PublicURL: *public}).CheckServePublicURL(); err != nil {
		return usageError{"--public-url: " + err.Error()}
	}
	db, err := e.admin()
	if err != nil {
		return err
	}
	defer db.Close()

	tid, err := db.TenantIDBySlug(e.ctx, demoSlug)
	if codelotse.ErrorCode(err) == codelotse.NotFound {
		t, cerr := db.CreateTenant(e.ctx, postgres.NewTenant{Slug: demoSlug, Name: "CodeLotse demo", MCPEnabled: true}, operator.Label)
		if cerr != nil {
			return cerr
		}
		tid, err = t.ID, nil
	}
	if err != nil {
		return err
	}
	err = db.InTenant(e.ctx, tid, func(tx *postgres.Tx) error {
		if _, err := tx.SetMCPEnabled(e.ctx, true, operator); err != nil {
			return err
		}
		if _, err := tx.AddLocalMember(e.ctx, demoAdmin, "Demo Admin", codelotse.RoleAdmin, e.now, operator); err != nil {
			return err
		}
		member, err := tx.AddLocalMember(e.ctx, demoMember, "Demo Member", codelotse.RoleMember, e.now, operator)
		if err != nil {
			return err
		}
		repo, err := e.ingester().AddRepository(e.ctx, tx, postgres.NewRepository{FullName: demoRepo, DefaultBranch: "main"})
		if err != nil {
			return err
		}
		if err := tx.GrantRepositoryAudited(e.ctx, member, repo, operator); err != nil {
			return err
		}
		for _, r := range demoRules {
			var rid *int64
			if r.repo {
				rid = &repo.ID
			}
			if _, err := e.ingester().UpsertRule(e.ctx, tx, rid, r.rule); err != nil {
				return err
			}
		}
		// Revoke the previous demo tokens so re-running never hits the
		// ten-token limit.
		list, err := tx.ListTokens(e.ctx, member.ID)
		if err != nil {
			return err
		}
		for _, t := range list {
			if t.Name == demoTokenName && t.State(e.now) == "active" {
				if err := tx.RevokeToken(e.ctx, t.ID, member.ID, operator); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := seedDemoContent(e, db, tid, *source); err != nil {
		return err
	}
	secret, err := createToken(e, db, tid, demoMember, demoTokenName, demoTokenDays)
	if err != nil {
		return err
	}
	// Development sign-in links for the demo member (the MCP access page)
	// and the demo admin (the admin page). The API accepts these only when
	// its PUBLIC_URL is http on loopback.
	e.cfg.PublicURL = *public
	links := map[string]string{}
	if err := db.InTenant(e.ctx, tid, func(tx *postgres.Tx) error {
		for _, email := range []string{demoMember, demoAdmin} {
			u, err := tx.UserByEmail(e.ctx, email)
			if err != nil {
				return err
			}
			if links[email], err = oneTimeLink(e, tx, u.ID, "dev", time.Hour); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, `
%sDemo tenant %q is ready (MCP on). Demo member %s can view %s.
The demo accounts were added by cltctl (local, not GitHub): their access does not expire after 24 hours.

Demo token (shown once, valid %d days):
  %s

Connect Claude Code:
  claude mcp add --transport http codelotse %s/mcp --header "Authorization: Bearer %s"

Then ask your agent: "What did the review of pull request #1 in %s find, and how would you fix the open findings?"

Sign in as the demo member, to the MCP access page (development only, single use, 1 hour):
  %s
Sign in as the demo admin (same rules), then open %s/t/%s/admin:
  %s
`, e.demoNotes.String(), demoSlug, demoMember, demoRepo, demoTokenDays, secret, *public, secret, demoRepo, links[demoMember], *public, demoSlug, links[demoAdmin])
	return nil
}

// seedDemoContent indexes the demo repository from the project's own git
// checkout and imports the demo review, when they are there. The index is
// taken at the commit the demo review was made on, so that the findings'
// line numbers point at the code they describe; a checkout without that
// commit (a shallow clone) is indexed at HEAD, and the tools then say that
// the findings' lines may have moved. A missing checkout is a note, not an
// error: the rest of the demo still works.
func seedDemoContent(e *env, db *postgres.DB, tid, source string) error {
	path := filepath.Join(source, "testdata", "review-example.json")
	data, rerr := os.ReadFile(path)
	var imp codelotse.ReviewImport
	if rerr == nil {
		var err error
		if imp, err = importer.ParseReview(data); err != nil {
			return prefixed(path, err)
		}
	}
	ref, why := "HEAD", ""
	if imp.Review.CommitSHA != "" {
		ref = imp.Review.CommitSHA
	}
	snap, err := codeindex.ReadGit(e.ctx, source, ref)
	if err != nil && ref != "HEAD" {
		why = fmt.Sprintf(" (the demo review's commit %.12s is not in this checkout, so the findings' lines may not match)", ref)
		snap, err = codeindex.ReadGit(e.ctx, source, "HEAD")
	} else if ref != "HEAD" {
		why = " (the commit of the demo review, so its findings point at the indexed lines)"
	}
	if err != nil {
		fmt.Fprintf(&e.demoNotes, "Note: %s is not a git checkout with a commit, so the demo repository has no code index (%s).\n", source, codelotse.ErrorMessage(err))
	} else {
		var res postgres.IndexResult
		err = db.InTenant(e.ctx, tid, func(tx *postgres.Tx) error {
			r, err := tx.RepositoryByName(e.ctx, demoRepo)
			if err != nil {
				return err
			}
			res, err = e.ingester().Index(e.ctx, tx, r.ID, snap, operator)
			return err
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(&e.demoNotes, "Indexed %s at %s%s: %d files, %d chunks.\n", demoRepo, res.Commit[:12], why, res.Files-len(res.Skipped), res.Chunks)
	}
	if rerr != nil {
		fmt.Fprintf(&e.demoNotes, "Note: no demo review imported (%v).\n", rerr)
		return nil
	}
	var res postgres.ImportResult
	if err := db.InTenant(e.ctx, tid, func(tx *postgres.Tx) error {
		res, err = e.ingester().Import(e.ctx, tx, imp, operator)
		return err
	}); err != nil {
		return prefixed(path, err)
	}
	fmt.Fprintf(&e.demoNotes, "Imported the demo review of %s#%d: %d findings.\n", demoRepo, imp.PullRequest.Number, res.Findings)
	return nil
}

// validPort reports a TCP port number, 1 to 65535.
func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535
}
