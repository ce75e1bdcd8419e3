// Package policies embeds the row-level security policies, SQL roles and
// SECURITY DEFINER functions that `cltctl migrate` applies after the
// migrations, and (from the full tool surface on) the gitleaks configuration.
package policies

import "embed"

// Owner holds the SQL applied as the owner role: RLS on every tenant table
// and the runtime role's privileges.
//
//go:embed tenancy.sql
var Owner string

// Admin holds the SQL applied as the administrative role: the narrow
// cross-tenant functions and the NOLOGIN roles that own them.
//
//go:embed auth.sql search.sql findings.sql
var adminFS embed.FS

// Admin returns the admin-phase SQL files in the order they are applied.
func Admin() []string {
	var out []string
	for _, name := range []string{"auth.sql", "search.sql", "findings.sql"} {
		b, err := adminFS.ReadFile(name)
		if err != nil {
			panic(err) // embedded at build time
		}
		out = append(out, string(b))
	}
	return out
}

// GitleaksTOML is the gitleaks configuration of pkg/secretscan: gitleaks'
// default rules plus CodeLotse's own token rule.
//
//go:embed gitleaks.toml
var GitleaksTOML string

// FS is every file of this directory, for tools that list them.
//
//go:embed *.sql
var FS embed.FS
