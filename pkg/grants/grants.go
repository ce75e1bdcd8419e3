// Package grants computes what a token principal may see, as a pure function
// of the cached GitHub membership or the token's OIDC group snapshot, the
// tenant's current group mappings, and the time (ARCHITECTURE §5).
//
// It never performs I/O and never refreshes anything: a token has no GitHub
// user token behind it, so only a web sign-in refreshes the cache.
package grants

import (
	"slices"
	"time"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// Reason says why a principal has no grants.
type Reason string

const (
	// OK: the principal has grants.
	OK Reason = ""
	// Stale: the GitHub tenant membership is missing or older than
	// codelotse.GrantMaxAge; a web sign-in refreshes it.
	Stale Reason = "stale"
	// NoMapping: none of the OIDC groups maps to a role in the tenant.
	NoMapping Reason = "no_mapping"
	// ProviderDisabled: the token's identity provider is disabled.
	ProviderDisabled Reason = "provider_disabled"
)

// GitHub computes grants from a cached membership (nil when missing) and the
// cached repository memberships.
//
// A local membership (source "local": written by an operator with cltctl
// user add, membership refresh or the demo) is not a cache of anything: no
// GitHub sign-in can refresh it, so it does not age. It lasts until the
// operator ends it (user delete, or membership expire, which stamps it at
// codelotse.MembershipExpired). Its grants say Source "local".
func GitHub(m *codelotse.Membership, repoIDs []int64, now time.Time) (codelotse.Grants, Reason) {
	if m == nil || m.RefreshedAt.After(now.Add(time.Minute)) {
		return codelotse.Grants{}, Stale
	}
	source := "github"
	if m.Source == codelotse.MembershipLocal {
		if !m.RefreshedAt.After(codelotse.MembershipExpired) {
			return codelotse.Grants{}, Stale
		}
		source = codelotse.MembershipLocal
	} else if now.Sub(m.RefreshedAt) > codelotse.GrantMaxAge {
		return codelotse.Grants{}, Stale
	}
	g := codelotse.Grants{Admin: m.Role == codelotse.RoleAdmin, Source: source, AsOf: m.RefreshedAt}
	if !g.Admin {
		g.RepoIDs = sortedUnique(repoIDs)
	}
	return g, OK
}

// OIDC computes grants from a token's group snapshot and the tenant's
// current mappings for the token's provider. A mapping with a repository
// grants its role and that repository; the admin role sees everything.
func OIDC(providerEnabled bool, groups []string, mappings []codelotse.GroupMapping) (codelotse.Grants, Reason) {
	if !providerEnabled {
		return codelotse.Grants{}, ProviderDisabled
	}
	g := codelotse.Grants{Source: "oidc", Groups: slices.Clone(groups)}
	matched := false
	var repos []int64
	for _, m := range mappings {
		if !slices.Contains(groups, m.Group) {
			continue
		}
		matched = true
		if m.Role == codelotse.RoleAdmin {
			g.Admin = true
		}
		if m.RepositoryID != nil {
			repos = append(repos, *m.RepositoryID)
		}
	}
	if !matched {
		return codelotse.Grants{}, NoMapping
	}
	if !g.Admin {
		g.RepoIDs = sortedUnique(repos)
	}
	return g, OK
}

func sortedUnique(ids []int64) []int64 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}
