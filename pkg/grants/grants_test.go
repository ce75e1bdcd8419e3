package grants

import (
	"slices"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

func id(n int64) *int64 { return &n }

func TestGrants(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	member := func(age time.Duration) *codelotse.Membership {
		return &codelotse.Membership{Role: codelotse.RoleMember, Source: "github", RefreshedAt: now.Add(-age)}
	}
	admin := &codelotse.Membership{Role: codelotse.RoleAdmin, Source: "github", RefreshedAt: now.Add(-time.Hour)}
	mappings := []codelotse.GroupMapping{
		{Group: "eng", Role: codelotse.RoleMember, RepositoryID: id(30)},
		{Group: "eng", Role: codelotse.RoleMember, RepositoryID: id(10)},
		{Group: "web", Role: codelotse.RoleMember, RepositoryID: id(30)},
		{Group: "everyone", Role: codelotse.RoleMember},
		{Group: "ops", Role: codelotse.RoleAdmin},
		{Group: "secret-team", Role: codelotse.RoleMember, RepositoryID: id(99)},
		{Group: "root", Role: codelotse.RoleAdmin, RepositoryID: id(5)},
	}

	type want struct {
		reason Reason
		admin  bool
		repos  []int64
		source string
		asOf   time.Time
		groups []string
	}
	tests := []struct {
		name string
		got  func() (codelotse.Grants, Reason)
		want want
	}{
		// GitHub users: the cached membership, never older than GrantMaxAge.
		{"github membership missing", func() (codelotse.Grants, Reason) { return GitHub(nil, []int64{1}, now) },
			want{reason: Stale}},
		{"github refreshed 24h+1s ago", func() (codelotse.Grants, Reason) {
			return GitHub(member(codelotse.GrantMaxAge+time.Second), []int64{1}, now)
		}, want{reason: Stale}},
		{"github refreshed a week ago, admin", func() (codelotse.Grants, Reason) {
			m := *admin
			m.RefreshedAt = now.Add(-7 * 24 * time.Hour)
			return GitHub(&m, nil, now)
		}, want{reason: Stale}},
		{"github never refreshed (zero time)", func() (codelotse.Grants, Reason) {
			return GitHub(&codelotse.Membership{Role: codelotse.RoleAdmin}, nil, now)
		}, want{reason: Stale}},
		{"github refreshed 23h59m ago", func() (codelotse.Grants, Reason) {
			return GitHub(member(23*time.Hour+59*time.Minute), []int64{7}, now)
		}, want{repos: []int64{7}, source: "github", asOf: now.Add(-(23*time.Hour + 59*time.Minute))}},
		{"github refreshed exactly 24h ago", func() (codelotse.Grants, Reason) {
			return GitHub(member(codelotse.GrantMaxAge), []int64{7}, now)
		}, want{repos: []int64{7}, source: "github", asOf: now.Add(-codelotse.GrantMaxAge)}},
		{"github refreshed 30s in the future (tolerated skew)", func() (codelotse.Grants, Reason) {
			return GitHub(member(-30*time.Second), []int64{7}, now)
		}, want{repos: []int64{7}, source: "github", asOf: now.Add(30 * time.Second)}},
		{"github refreshed 2m in the future (clock skew)", func() (codelotse.Grants, Reason) {
			return GitHub(member(-2*time.Minute), []int64{7}, now)
		}, want{reason: Stale}},
		{"github refreshed a year in the future", func() (codelotse.Grants, Reason) {
			return GitHub(member(-365*24*time.Hour), []int64{7}, now)
		}, want{reason: Stale}},
		{"github member sees its repos, sorted and deduplicated", func() (codelotse.Grants, Reason) {
			return GitHub(member(time.Hour), []int64{42, 3, 42, 17, 3}, now)
		}, want{repos: []int64{3, 17, 42}, source: "github", asOf: now.Add(-time.Hour)}},
		{"github member without repos", func() (codelotse.Grants, Reason) {
			return GitHub(member(time.Hour), nil, now)
		}, want{source: "github", asOf: now.Add(-time.Hour)}},
		// Local memberships (cltctl) are not a cache: they do not age, but
		// an operator's expiry (the epoch stamp) and the future still count.
		{"local refreshed 8 days ago", func() (codelotse.Grants, Reason) {
			m := member(8 * 24 * time.Hour)
			m.Source = codelotse.MembershipLocal
			return GitHub(m, []int64{7}, now)
		}, want{repos: []int64{7}, source: "local", asOf: now.Add(-8 * 24 * time.Hour)}},
		{"local admin a year old sees all", func() (codelotse.Grants, Reason) {
			m := &codelotse.Membership{Role: codelotse.RoleAdmin, Source: codelotse.MembershipLocal, RefreshedAt: now.Add(-365 * 24 * time.Hour)}
			return GitHub(m, []int64{1}, now)
		}, want{admin: true, source: "local", asOf: now.Add(-365 * 24 * time.Hour)}},
		{"local expired by an operator", func() (codelotse.Grants, Reason) {
			return GitHub(&codelotse.Membership{Role: codelotse.RoleAdmin, Source: codelotse.MembershipLocal, RefreshedAt: codelotse.MembershipExpired}, nil, now)
		}, want{reason: Stale}},
		{"local never refreshed (zero time)", func() (codelotse.Grants, Reason) {
			return GitHub(&codelotse.Membership{Role: codelotse.RoleAdmin, Source: codelotse.MembershipLocal}, nil, now)
		}, want{reason: Stale}},
		{"local refreshed 2m in the future (clock skew)", func() (codelotse.Grants, Reason) {
			m := member(-2 * time.Minute)
			m.Source = codelotse.MembershipLocal
			return GitHub(m, nil, now)
		}, want{reason: Stale}},
		{"github admin sees all", func() (codelotse.Grants, Reason) {
			return GitHub(admin, []int64{1, 2}, now)
		}, want{admin: true, source: "github", asOf: admin.RefreshedAt}},

		// OIDC users: the token's group snapshot against the current mappings.
		{"oidc provider disabled", func() (codelotse.Grants, Reason) {
			return OIDC(false, []string{"ops"}, mappings)
		}, want{reason: ProviderDisabled}},
		{"oidc no group matches", func() (codelotse.Grants, Reason) {
			return OIDC(true, []string{"marketing", "ENG"}, mappings)
		}, want{reason: NoMapping}},
		{"oidc no groups at all", func() (codelotse.Grants, Reason) {
			return OIDC(true, nil, mappings)
		}, want{reason: NoMapping}},
		{"oidc no mappings", func() (codelotse.Grants, Reason) {
			return OIDC(true, []string{"eng"}, nil)
		}, want{reason: NoMapping}},
		{"oidc member mapping without repository", func() (codelotse.Grants, Reason) {
			return OIDC(true, []string{"everyone"}, mappings)
		}, want{source: "oidc", groups: []string{"everyone"}}},
		{"oidc member mappings with repositories", func() (codelotse.Grants, Reason) {
			return OIDC(true, []string{"web", "eng", "everyone"}, mappings)
		}, want{repos: []int64{10, 30}, source: "oidc", groups: []string{"web", "eng", "everyone"}}},
		{"oidc admin mapping", func() (codelotse.Grants, Reason) {
			return OIDC(true, []string{"eng", "ops"}, mappings)
		}, want{admin: true, source: "oidc", groups: []string{"eng", "ops"}}},
		{"oidc admin mapping scoped to a repository still admin", func() (codelotse.Grants, Reason) {
			return OIDC(true, []string{"root"}, mappings)
		}, want{admin: true, source: "oidc", groups: []string{"root"}}},
		{"oidc mappings for groups not in the snapshot are ignored", func() (codelotse.Grants, Reason) {
			return OIDC(true, []string{"web"}, mappings)
		}, want{repos: []int64{30}, source: "oidc", groups: []string{"web"}}},
	}
	for _, tt := range tests {
		g, reason := tt.got()
		w := tt.want
		if reason != w.reason {
			t.Errorf("%s: reason %q, want %q", tt.name, reason, w.reason)
			continue
		}
		if reason != OK {
			// No grants at all: nothing is viewable.
			if g.Admin || len(g.RepoIDs) > 0 || g.CanView(1) || g.CanView(30) {
				t.Errorf("%s: %s but grants %+v", tt.name, reason, g)
			}
			continue
		}
		if g.Admin != w.admin || !slices.Equal(g.RepoIDs, w.repos) || g.Source != w.source || !g.AsOf.Equal(w.asOf) || !slices.Equal(g.Groups, w.groups) {
			t.Errorf("%s: got %+v, want %+v", tt.name, g, w)
		}
		if g.Admin && len(g.RepoIDs) != 0 {
			t.Errorf("%s: admin with RepoIDs %v", tt.name, g.RepoIDs)
		}
		if !g.Admin && g.CanView(99) {
			t.Errorf("%s: can view repository 99 of a group not in the snapshot", tt.name)
		}
	}
}

func TestOIDCMappingRemovalAppliesAtOnce(t *testing.T) {
	groups := []string{"eng", "ops"}
	with := []codelotse.GroupMapping{
		{Group: "eng", Role: codelotse.RoleMember, RepositoryID: id(1)},
		{Group: "ops", Role: codelotse.RoleAdmin},
	}
	g, r := OIDC(true, groups, with)
	if r != OK || !g.Admin {
		t.Fatalf("with admin mapping: %+v %q", g, r)
	}
	g, r = OIDC(true, groups, with[:1])
	if r != OK || g.Admin || !slices.Equal(g.RepoIDs, []int64{1}) || g.CanView(2) {
		t.Errorf("admin mapping removed: %+v %q, want only repository 1", g, r)
	}
	g, r = OIDC(true, groups, nil)
	if r != NoMapping || g.CanView(1) {
		t.Errorf("all mappings removed: %+v %q", g, r)
	}
	if _, r = OIDC(false, groups, with); r != ProviderDisabled {
		t.Errorf("provider disabled: %q", r)
	}
}

func TestInputsNotAliased(t *testing.T) {
	groups := []string{"eng", "ops"}
	mappings := []codelotse.GroupMapping{{Group: "eng", Role: codelotse.RoleMember, RepositoryID: id(5)}}
	g, _ := OIDC(true, groups, mappings)
	groups[0] = "changed"
	if !slices.Equal(g.Groups, []string{"eng", "ops"}) {
		t.Errorf("Groups changed with the input slice: %q", g.Groups)
	}
	*mappings[0].RepositoryID = 6
	if !slices.Equal(g.RepoIDs, []int64{5}) {
		t.Errorf("RepoIDs changed with the mapping: %v", g.RepoIDs)
	}

	repos := []int64{3, 1, 2}
	m := &codelotse.Membership{Role: codelotse.RoleMember, RefreshedAt: time.Now()}
	gh, _ := GitHub(m, repos, time.Now())
	if !slices.Equal(repos, []int64{3, 1, 2}) {
		t.Errorf("GitHub sorted the caller's slice: %v", repos)
	}
	repos[0] = 100
	if !slices.Equal(gh.RepoIDs, []int64{1, 2, 3}) {
		t.Errorf("RepoIDs changed with the input slice: %v", gh.RepoIDs)
	}
	if gh.Groups != nil {
		t.Errorf("GitHub grants carry groups: %q", gh.Groups)
	}
}
