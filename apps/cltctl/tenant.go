package main

import (
	"fmt"
	"strconv"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/postgres"
)

// cmdTenantCreate: cltctl tenant create --slug SLUG --name NAME [--mcp-enabled] [--github-installation ID]
func cmdTenantCreate(e *env, args []string) error {
	fs := e.flags("tenant create")
	slug := fs.String("slug", "", "URL name of the tenant: lowercase letters, digits and dashes")
	name := fs.String("name", "", "display name")
	mcp := fs.Bool("mcp-enabled", false, "switch MCP on at once (default off)")
	inst := fs.String("github-installation", "", "GitHub App installation id to bind the tenant to")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if err := need("slug", *slug, "name", *name); err != nil {
		return err
	}
	if err := displayName("name", *name); err != nil {
		return err
	}
	nt := postgres.NewTenant{Slug: *slug, Name: *name, MCPEnabled: *mcp}
	if *inst != "" {
		id, err := strconv.ParseInt(*inst, 10, 64)
		if err != nil || id <= 0 {
			return usageError{fmt.Sprintf("--github-installation must be a positive number, not %q", *inst)}
		}
		nt.GitHubInstallationID = &id
	}
	db, err := e.admin()
	if err != nil {
		return err
	}
	defer db.Close()
	t, err := db.CreateTenant(e.ctx, nt, operator.Label)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "created tenant %s (%s), MCP %s\n", t.Slug, t.ID, onOff(t.MCPEnabled))
	return nil
}

// cmdTenantSetMCP: cltctl tenant set-mcp --slug SLUG --enabled=true|false
func cmdTenantSetMCP(e *env, args []string) error {
	fs := e.flags("tenant set-mcp")
	slug := fs.String("slug", "", "tenant slug")
	enabled := fs.String("enabled", "", "true or false")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if err := need("slug", *slug, "enabled", *enabled); err != nil {
		return err
	}
	on, err := strconv.ParseBool(*enabled)
	if err != nil {
		return usageError{fmt.Sprintf("--enabled must be true or false, not %q", *enabled)}
	}
	var changed bool
	err = e.inTenant(*slug, func(tx *postgres.Tx) error {
		changed, err = tx.SetMCPEnabled(e.ctx, on, operator)
		return err
	})
	if err != nil {
		return err
	}
	if changed {
		fmt.Fprintf(e.stdout, "MCP is now %s for %s\n", onOff(on), *slug)
	} else {
		fmt.Fprintf(e.stdout, "MCP was already %s for %s\n", onOff(on), *slug)
	}
	return nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// roleFlag parses --role.
func roleFlag(s string) (codelotse.Role, error) {
	r, err := codelotse.ParseRole(s)
	if err != nil {
		return "", usageError{"--role must be admin or member"}
	}
	return r, nil
}
