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
//go:embed auth.sql
var Admin string

// FS is every file of this directory, for tools that list them.
//
//go:embed *.sql
var FS embed.FS
