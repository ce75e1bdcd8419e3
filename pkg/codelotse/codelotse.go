// Package codelotse holds the domain of the CodeLotse MCP service: the types
// every other package speaks (tenants, users, tokens, grants, repositories,
// rules) and the one error type that each edge translates into an HTTP
// status, a JSON-RPC error or an in-band tool error.
//
// It imports only the standard library and never performs I/O.
package codelotse

import (
	"time"
)

// GrantMaxAge is how long a cached GitHub tenant membership stays valid for
// token requests. Past it, a token has no grants until the user signs in to
// the web interface again (ADR-0018, ARCHITECTURE §5). It is the one constant
// every part of the system uses for that rule.
const GrantMaxAge = 24 * time.Hour

// MembershipLocal is the source of a tenant membership that an operator
// wrote (cltctl), as opposed to "github", a cache of a GitHub sign-in. Local
// memberships do not age by GrantMaxAge (docs/decisions.md, issue 14).
const MembershipLocal = "local"

// MembershipExpired is the refreshed_at stamp of a membership that an
// operator expired (cltctl membership expire): stale whatever its source.
var MembershipExpired = time.Unix(0, 0).UTC()

// ScopeMCPRead is the only scope a personal access token can carry.
const ScopeMCPRead = "mcp:read"

// Role is a person's role in a tenant.
type Role string

const (
	RoleAdmin  Role = "admin"
	RoleMember Role = "member"
)

// ParseRole accepts "admin" or "member".
func ParseRole(s string) (Role, error) {
	switch Role(s) {
	case RoleAdmin, RoleMember:
		return Role(s), nil
	}
	return "", Errorf(Invalid, "role must be admin or member, not %q", s)
}

// Severity orders findings and rules from least to most severe.
type Severity string

const (
	SeverityInfo     Severity = "info"
	SeverityLow      Severity = "low"
	SeverityMedium   Severity = "medium"
	SeverityHigh     Severity = "high"
	SeverityCritical Severity = "critical"
)

// Severities lists every severity, least severe first.
var Severities = []Severity{SeverityInfo, SeverityLow, SeverityMedium, SeverityHigh, SeverityCritical}

// ParseSeverity accepts one of Severities.
func ParseSeverity(s string) (Severity, error) {
	for _, v := range Severities {
		if string(v) == s {
			return v, nil
		}
	}
	return "", Errorf(Invalid, "severity must be one of info, low, medium, high, critical, not %q", s)
}

// Rank is the position of s in Severities (0 for info); -1 if unknown.
func (s Severity) Rank() int {
	for i, v := range Severities {
		if v == s {
			return i
		}
	}
	return -1
}

// Tenant is one organisation.
type Tenant struct {
	ID         string
	Slug       string
	Name       string
	MCPEnabled bool
	CreatedAt  time.Time
}

// User is a person inside one tenant. A person who belongs to two tenants
// has two users, which keeps every row about them behind that tenant's RLS.
type User struct {
	ID        string
	TenantID  string
	Email     string
	Name      string
	CreatedAt time.Time
}

// Token is the stored form of a personal access token: never the secret.
type Token struct {
	ID         string
	TenantID   string
	UserID     string
	UserEmail  string
	Name       string
	Last4      string
	Scope      string
	CreatedAt  time.Time
	ExpiresAt  time.Time
	RevokedAt  *time.Time
	LastUsedAt *time.Time
}

// State is "active", "revoked" or "expired" at now.
func (t Token) State(now time.Time) string {
	switch {
	case t.RevokedAt != nil:
		return "revoked"
	case !now.Before(t.ExpiresAt):
		return "expired"
	}
	return "active"
}

// Display is the form shown in lists: clt_…abcd.
func (t Token) Display() string { return "clt_…" + t.Last4 }

// Principal is who a request acts for. A token principal is bound to exactly
// one tenant; nothing about it reaches another tenant.
type Principal struct {
	TenantID string
	UserID   string
	TokenID  string
	// Kind says how the principal authenticated: "token" for the MCP bearer
	// path. Instance-admin and break-glass rights never apply to tokens.
	Kind string
}

// Repository is a repository of a tenant.
type Repository struct {
	ID            int64
	TenantID      string
	FullName      string
	DefaultBranch string
	Private       bool
	URL           string
	IndexedCommit string
	IndexedAt     *time.Time
	OpenReviews   int
	CreatedAt     time.Time
}

// Rule is a review rule, tenant-wide when RepositoryID is nil.
type Rule struct {
	ID           int64
	TenantID     string
	RepositoryID *int64
	RepoFullName string
	Key          string
	Title        string
	Severity     Severity
	PathGlobs    []string
	Instructions string
}

// Membership is a cached tenant membership (written at GitHub sign-in or by
// an operator), the source of a GitHub user's grants.
type Membership struct {
	Role        Role
	Source      string
	RefreshedAt time.Time
}

// GroupMapping maps an identity-provider group to a role and, optionally, a
// repository of the tenant.
type GroupMapping struct {
	Group        string
	Role         Role
	RepositoryID *int64
}

// Grants is what a principal may see in its tenant. Repository roles are
// capped at reader: every tool needs only repo:view.
type Grants struct {
	// Admin principals see every repository of the tenant.
	Admin bool
	// RepoIDs are the viewable repositories when not Admin, sorted.
	RepoIDs []int64
	// Source says where the grants come from: "github" (cached memberships)
	// or "oidc" (the token's group snapshot and the current mappings).
	Source string
	// AsOf is when the GitHub cache was refreshed (zero for OIDC).
	AsOf time.Time
	// Groups is the OIDC snapshot the grants were computed from.
	Groups []string
}

// CanView reports whether the grants include repository id.
func (g Grants) CanView(id int64) bool {
	if g.Admin {
		return true
	}
	for _, r := range g.RepoIDs {
		if r == id {
			return true
		}
	}
	return false
}

// PullRequest is a pull request of a repository.
type PullRequest struct {
	ID           int64
	RepositoryID int64
	Number       int
	Title        string
	Author       string
	State        string // open, closed, merged
	BaseRef      string
	HeadRef      string
	HeadSHA      string
	URL          string
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// Review is one review of a pull request (or, for analyser imports without a
// pull request, of a repository at a commit).
type Review struct {
	ID            int64
	RepositoryID  int64
	PullRequestID *int64
	ExternalID    string
	CommitSHA     string
	Status        string
	Summary       string
	Author        string
	CreatedAt     time.Time
}

// Finding statuses.
const (
	StatusOpen      = "open"
	StatusResolved  = "resolved"
	StatusDismissed = "dismissed"
)

// Finding is one claim of a review about the code.
type Finding struct {
	ID            int64
	RepositoryID  int64
	RepoFullName  string
	PullRequestID *int64
	PRNumber      *int
	ReviewID      *int64
	RuleKey       string
	Severity      Severity
	Status        string
	Path          string
	StartLine     *int
	EndLine       *int
	Title         string
	Body          string
	Suggestion    string
	Fingerprint   string
	CommitSHA     string
	Source        string
	CreatedAt     time.Time
	// RepoIndexedCommit is the commit of the repository's code index when
	// the finding was read ("" when not indexed): when it differs from
	// CommitSHA, the finding's lines may not match the indexed code.
	RepoIndexedCommit string
}

// ReviewImport is a pull request, one review and its findings, as read from
// an import file (native review JSON or SARIF) before it is stored.
type ReviewImport struct {
	Repository  string // full name, must be registered in the tenant
	PullRequest *PullRequest
	Review      Review
	Findings    []Finding
	// Source names the importer ("review-json", "sarif:<tool>").
	Source string
}
