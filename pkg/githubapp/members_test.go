package githubapp

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/codelotse/codelotse/pkg/githubapp/githubtest"
)

// membersFixture: acme (base permission none) with an owner, a member who
// reads api through a team, a member with a direct grant on web, a member
// with nothing, an outside collaborator on api, and a pending invitee.
func membersFixture(t *testing.T) (*githubtest.Server, *App) {
	t.Helper()
	s, a, _ := appFixture(t)
	for id, login := range map[int64]string{11: "owner", 12: "teamie", 13: "direct", 14: "idle", 15: "outsider", 16: "invitee"} {
		s.AddUser(githubtest.User{ID: id, Login: login})
	}
	s.SetMembership(11, acmeID, "active", "admin")
	s.SetMembership(12, acmeID, "active", "member")
	s.SetMembership(13, acmeID, "active", "member")
	s.SetMembership(14, acmeID, "active", "member")
	s.SetMembership(16, acmeID, "pending", "member")
	s.SetTeam(acmeID, "backend", []int64{12, 16}, map[int64]string{apiRepo: "push"})
	s.SetPermission(13, webRepo, "triage")
	s.SetPermission(15, apiRepo, "pull")
	return s, a
}

func TestMembershipsFromTeamsAndCollaborators(t *testing.T) {
	s, a := membersFixture(t)
	s.SetMaxPerPage(1) // every listing pages
	m, err := a.Installation(instID).Memberships(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if m.AccountID != acmeID || m.AccountType != "Organization" || m.BasePermission != "none" || len(m.Repos) != 2 {
		t.Fatalf("memberships = %+v", m)
	}
	want := map[int64]Access{
		11: {Login: "owner", Admin: true, Member: true, RepoIDs: []int64{apiRepo, webRepo}},
		12: {Login: "teamie", Member: true, RepoIDs: []int64{apiRepo}},
		13: {Login: "direct", Member: true, RepoIDs: []int64{webRepo}},
		14: {Login: "idle", Member: true},
		15: {Login: "outsider", RepoIDs: []int64{apiRepo}},
	}
	if len(m.Users) != len(want) {
		t.Errorf("users = %v, want %d (the pending invitee has no access)", m.Users, len(want))
	}
	for id, w := range want {
		got := m.Users[id]
		if got == nil || got.Login != w.Login || got.Admin != w.Admin || got.Member != w.Member || !slices.Equal(got.RepoIDs, w.RepoIDs) {
			t.Errorf("user %d = %+v, want %+v", id, got, w)
		}
	}
	// Budget with base permission none: every repository's full
	// collaborator list, one user per page here.
	if n := countWith(s, "GET /api/v3/repos/acme/api/collaborators", "affiliation=all"); n != 3 {
		t.Errorf("api collaborator pages = %d, want 3 (owner, teamie, outsider at one a page)", n)
	}
}

func TestMembershipsWithBasePermission(t *testing.T) {
	s, a := membersFixture(t)
	s.SetBasePermission(acmeID, "read")
	m, err := a.Installation(instID).Memberships(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Every member reads every repository; only outside collaborators are
	// listed per repository.
	for _, id := range []int64{11, 12, 13, 14} {
		if got := m.Users[id]; got == nil || !slices.Equal(got.RepoIDs, []int64{apiRepo, webRepo}) {
			t.Errorf("member %d = %+v", id, got)
		}
	}
	if got := m.Users[15]; got == nil || got.Member || !slices.Equal(got.RepoIDs, []int64{apiRepo}) {
		t.Errorf("outside collaborator = %+v", got)
	}
	if n := countWith(s, "GET /api/v3/repos/", "affiliation=outside"); n != 2 {
		t.Errorf("outside-collaborator listings = %d, want one per repository", n)
	}
	if n := countWith(s, "GET /api/v3/repos/", "affiliation=all"); n != 0 {
		t.Errorf("full collaborator listings = %d, want none with a base permission", n)
	}
}

func TestMembershipsWithoutAdministration(t *testing.T) {
	s, a := membersFixture(t)
	s.SetBasePermission(acmeID, "read")
	s.RevokeInstallationPermission(instID, "administration")
	m, err := a.Installation(instID).Memberships(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The base permission is unknown, so every collaborator list is read
	// in full; the result is the same.
	if m.BasePermission != "" {
		t.Errorf("base permission = %q, want unknown", m.BasePermission)
	}
	if got := m.Users[14]; got == nil || !slices.Equal(got.RepoIDs, []int64{apiRepo, webRepo}) {
		t.Errorf("idle member with base read = %+v", got)
	}
}

func TestMembershipsWithoutMembersPermission(t *testing.T) {
	s, a := membersFixture(t)
	s.RevokeInstallationPermission(instID, "members")
	_, err := a.Installation(instID).Memberships(context.Background())
	if !errors.Is(err, ErrMissingPermission) {
		t.Fatalf("err = %v, want ErrMissingPermission", err)
	}
}

func TestMembershipsRateLimitIsNotMissingPermission(t *testing.T) {
	s, a := membersFixture(t)
	s.SetRetryAfter(3600e9)
	s.FailNextOn("/orgs/acme/members", githubtest.PrimaryRateLimit)
	_, err := a.Installation(instID).Memberships(context.Background())
	if err == nil || errors.Is(err, ErrMissingPermission) || !errors.Is(err, ErrRateLimited) {
		t.Fatalf("err = %v, want a rate limit", err)
	}
}

func TestMembershipsPersonalAccount(t *testing.T) {
	s := githubtest.New(t)
	s.AddUser(githubtest.User{ID: 21, Login: "solo"})
	s.AddUser(githubtest.User{ID: 22, Login: "friend"})
	s.AddInstallation(31, 21)
	s.AddRepo(31, githubtest.Repo{ID: 41, Name: "dotfiles"})
	s.AddRepo(31, githubtest.Repo{ID: 42, Name: "blog"})
	s.SetPermission(22, 42, "push")
	a, _ := newApp(t, s, s.APIURL, nil)
	m, err := a.Installation(31).Memberships(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Users[21]; got == nil || !got.Admin || !slices.Equal(got.RepoIDs, []int64{41, 42}) {
		t.Errorf("owner = %+v", got)
	}
	if got := m.Users[22]; got == nil || got.Admin || !slices.Equal(got.RepoIDs, []int64{42}) {
		t.Errorf("collaborator = %+v", got)
	}
	if n := count(s, "GET /api/v3/orgs/"); n != 0 {
		t.Errorf("a personal account has no organisation to read: %d requests", n)
	}
}
