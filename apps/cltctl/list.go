package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/postgres"
)

// What an operator can see exists: tenants, users, repositories (issue 14).

// cmdTenantList: cltctl tenant list
func cmdTenantList(e *env, args []string) error {
	fs := e.flags("tenant list")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	db, err := e.admin()
	if err != nil {
		return err
	}
	defer db.Close()
	ids, err := db.TenantIDsForOperator(e.ctx)
	if err != nil {
		return codelotse.Wrap(codelotse.Unavailable, err, "cannot list tenants (has `cltctl migrate` run, and is DATABASE_URL the administrative connection?)")
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SLUG\tNAME\tMCP\tUSERS\tREPOSITORIES\tACTIVE TOKENS\tCREATED")
	for _, id := range ids {
		err := db.InTenant(e.ctx, id, func(tx *postgres.Tx) error {
			t, err := tx.GetTenant(e.ctx)
			if err != nil {
				return err
			}
			c, err := tx.CountTenant(e.ctx)
			if err != nil {
				return err
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\n", t.Slug, t.Name, onOff(t.MCPEnabled), c.Users, c.Repositories, c.ActiveTokens,
				t.CreatedAt.UTC().Format(time.RFC3339))
			return nil
		})
		if err != nil {
			return err
		}
	}
	return tw.Flush()
}

// cmdUserList: cltctl user list --tenant SLUG
func cmdUserList(e *env, args []string) error {
	fs := e.flags("user list")
	slug := fs.String("tenant", "", "tenant slug")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if err := need("tenant", *slug); err != nil {
		return err
	}
	var list []postgres.Member
	if err := e.inTenant(*slug, func(tx *postgres.Tx) error {
		var err error
		list, err = tx.ListMembers(e.ctx)
		return err
	}); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "EMAIL\tNAME\tROLE\tACCESS\tSIGN-IN\tREPOS GRANTED\tACCESS SINCE\tADDED")
	for _, m := range list {
		role, access, since := string(m.Role), membershipAccess(m, e.now), "-"
		if role == "" {
			role = "-"
		}
		if m.RefreshedAt != nil && m.RefreshedAt.After(codelotse.MembershipExpired) {
			since = m.RefreshedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", m.Email, dash(m.Name), role, access, m.Identity, m.Repos, since,
			m.CreatedAt.UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}

// membershipAccess says where a member's access comes from and whether it
// holds now: local (no expiry), github (valid or stale after 24 hours),
// expired, or none (OIDC groups, break-glass).
func membershipAccess(m postgres.Member, now time.Time) string {
	switch {
	case m.Source == "":
		return "none (groups or break-glass)"
	case m.RefreshedAt == nil || !m.RefreshedAt.After(codelotse.MembershipExpired):
		return m.Source + ", expired"
	case m.Source == codelotse.MembershipLocal:
		return "local"
	case now.Sub(*m.RefreshedAt) > codelotse.GrantMaxAge:
		return "github, stale (sign in again)"
	default:
		return "github, valid"
	}
}

// cmdRepoList: cltctl repo list --tenant SLUG
func cmdRepoList(e *env, args []string) error {
	fs := e.flags("repo list")
	slug := fs.String("tenant", "", "tenant slug")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if err := need("tenant", *slug); err != nil {
		return err
	}
	var list []postgres.RepoStatus
	if err := e.inTenant(*slug, func(tx *postgres.Tx) error {
		var err error
		list, err = tx.ListRepoStatus(e.ctx)
		return err
	}); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tREPOSITORY\tBRANCH\tVISIBILITY\tINDEX\tINDEXED AT\tFILES\tFINDINGS\tUSERS GRANTED")
	for _, r := range list {
		vis, index, at := "public", "not indexed", "-"
		if r.Private {
			vis = "private"
		}
		if r.IndexedCommit != "" {
			index = r.IndexedCommit[:min(12, len(r.IndexedCommit))]
		}
		if r.IndexedAt != nil {
			at = r.IndexedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\n", r.ID, r.FullName, r.DefaultBranch, vis, index, at, r.Files, r.Findings, r.Granted)
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
