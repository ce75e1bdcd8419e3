package githubtest

import (
	"net/http"
	"slices"
	"strings"
)

// Served to installation tokens, for the worker's membership refresh:
//
//	GET /orgs/{org}                                   the organization; default_repository_permission
//	                                                  only while the installation has "administration"
//	GET /orgs/{org}/members?role=all|admin|member     active members, paginated (403 without "members")
//	GET /repos/{owner}/{repo}/collaborators?affiliation=outside|direct|all
//	                                                  collaborators with permissions and role_name, paginated
//
// Access is computed as GitHub does: organization owners have admin on
// every repository; active members have the base permission (SetBasePermission)
// and the permissions of their teams (SetTeam); anyone may have a direct
// permission (SetPermission); the highest wins.

// team is an organization team with its members and repositories.
type team struct {
	orgID   int64
	slug    string
	members []int64
	repos   map[int64]string // repository → permission
}

// SetTeam creates or replaces a team of an organization: its members and
// its repositories with the team's permission on each ("pull" … "admin").
// Members who are not active members of the organization get nothing from
// it, as on GitHub.
func (s *Server) SetTeam(orgID int64, slug string, memberIDs []int64, repos map[int64]string) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.orgs[orgID]; !ok {
		s.t.Fatalf("githubtest: SetTeam: no organization %d", orgID)
	}
	for rid, p := range repos {
		if _, ok := s.repos[rid]; !ok || !slices.Contains(permissions, p) {
			s.t.Fatalf("githubtest: SetTeam: no repository %d or unknown permission %q", rid, p)
		}
	}
	if s.teams == nil {
		s.teams = map[string]*team{}
	}
	key := s.orgs[orgID] + "/" + slug
	if memberIDs == nil && repos == nil {
		delete(s.teams, key)
		return
	}
	rs := map[int64]string{}
	for k, v := range repos {
		rs[k] = v
	}
	s.teams[key] = &team{orgID: orgID, slug: slug, members: slices.Clone(memberIDs), repos: rs}
}

// SetBasePermission sets an organization's base (default repository)
// permission: "none" (the fake's default), "read", "write" or "admin".
func (s *Server) SetBasePermission(orgID int64, perm string) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.orgs[orgID]; !ok || !slices.Contains([]string{"none", "read", "write", "admin"}, perm) {
		s.t.Fatalf("githubtest: SetBasePermission(%d, %q)", orgID, perm)
	}
	if s.basePerms == nil {
		s.basePerms = map[int64]string{}
	}
	s.basePerms[orgID] = perm
}

// RevokeInstallationPermission takes an organization permission away from
// an installation, as an organization that never accepted it would have:
// "members" (members listing answers 403) or "administration" (the
// organization's default_repository_permission is not shown).
func (s *Server) RevokeInstallationPermission(installationID int64, perm string) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.installation(installationID)
	if in == nil || perm != "members" && perm != "administration" {
		s.t.Fatalf("githubtest: RevokeInstallationPermission(%d, %q)", installationID, perm)
	}
	if in.revoked == nil {
		in.revoked = map[string]bool{}
	}
	in.revoked[perm] = true
}

// basePermission maps the organization setting to a repository permission.
func (s *Server) basePermission(orgID int64) string {
	switch s.basePerms[orgID] {
	case "read":
		return "pull"
	case "write":
		return "push"
	case "admin":
		return "admin"
	}
	return ""
}

func higher(a, b string) string {
	if slices.Index(permissions, b) > slices.Index(permissions, a) {
		return b
	}
	return a
}

// memberPermission is what an active member gets on r from the base
// permission and teams.
func (s *Server) memberPermission(userID int64, r *repo) string {
	acct := s.installation(r.installationID).accountID
	m, ok := s.memberships[[2]int64{userID, acct}]
	if !ok || m.state != "active" {
		return ""
	}
	if m.role == "admin" {
		return "admin"
	}
	p := s.basePermission(acct)
	for _, t := range s.teams {
		if t.orgID == acct && slices.Contains(t.members, userID) {
			if tp, ok := t.repos[r.ID]; ok {
				p = higher(p, tp)
			}
		}
	}
	return p
}

// orgAPI serves /orgs/{org}[/members] to an installation token of that
// organization's installation.
func (s *Server) orgAPI(w http.ResponseWriter, r *http.Request, installationID int64, path string) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) < 2 {
		writeJSON(w, http.StatusNotFound, notFound())
		return
	}
	in := s.installation(installationID)
	orgID, ok := s.accountByLogin(parts[1])
	if _, isOrg := s.orgs[orgID]; !ok || !isOrg || in.accountID != orgID || r.Method != http.MethodGet {
		writeJSON(w, http.StatusNotFound, notFound())
		return
	}
	forbidden := func() {
		writeJSON(w, http.StatusForbidden, map[string]any{"message": "Resource not accessible by integration",
			"documentation_url": "https://docs.github.com/rest/orgs/members#list-organization-members", "status": "403"})
	}
	switch {
	case len(parts) == 2:
		o := s.orgJSON(orgID)
		o["type"] = TypeOrganization
		o["html_url"] = s.WebURL + s.orgs[orgID]
		if !in.revoked["administration"] {
			base := s.basePerms[orgID]
			if base == "" {
				base = "none"
			}
			o["default_repository_permission"] = base
			o["members_can_create_repositories"] = true
		}
		writeJSON(w, http.StatusOK, o)
	case len(parts) == 3 && parts[2] == "members":
		if in.revoked["members"] {
			forbidden()
			return
		}
		role := r.URL.Query().Get("role")
		if role == "" {
			role = "all"
		}
		if role != "all" && role != "admin" && role != "member" {
			unprocessable(w, "role must be all, admin or member")
			return
		}
		var ids []int64
		for k, m := range s.memberships {
			if k[1] == orgID && m.state == "active" && (role == "all" || role == m.role) {
				ids = append(ids, k[0])
			}
		}
		slices.Sort(ids)
		list := make([]any, 0, len(ids))
		for _, id := range ids {
			list = append(list, s.simpleUser(id))
		}
		if page, ok := s.paginate(w, r, list); ok {
			writeJSON(w, http.StatusOK, page)
		}
	default:
		writeJSON(w, http.StatusNotFound, notFound())
	}
}

// listCollaborators serves GET /repos/{owner}/{repo}/collaborators.
func (s *Server) listCollaborators(w http.ResponseWriter, r *http.Request, rp *repo) {
	affiliation := r.URL.Query().Get("affiliation")
	if affiliation == "" {
		affiliation = "all"
	}
	if affiliation != "all" && affiliation != "direct" && affiliation != "outside" {
		unprocessable(w, "affiliation must be all, direct or outside")
		return
	}
	acct := s.installation(rp.installationID).accountID
	_, isOrg := s.orgs[acct]
	perms := map[int64]string{}
	for k, p := range s.perms {
		if k[1] != rp.ID {
			continue
		}
		m, member := s.memberships[[2]int64{k[0], acct}]
		member = member && m.state == "active"
		if affiliation == "outside" && (member || !isOrg) {
			continue
		}
		perms[k[0]] = p
	}
	if affiliation == "all" {
		if !isOrg {
			perms[acct] = "admin"
		}
		for k := range s.memberships {
			if k[1] == acct {
				if p := s.memberPermission(k[0], rp); p != "" {
					perms[k[0]] = higher(perms[k[0]], p)
				}
			}
		}
	}
	ids := make([]int64, 0, len(perms))
	for id := range perms {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	list := make([]any, 0, len(ids))
	for _, id := range ids {
		u := s.simpleUser(id)
		rank := slices.Index(permissions, perms[id])
		u["permissions"] = map[string]bool{"admin": rank >= 4, "maintain": rank >= 3, "push": rank >= 2, "triage": rank >= 1, "pull": rank >= 0}
		u["role_name"] = map[string]string{"pull": "read", "triage": "triage", "push": "write", "maintain": "maintain", "admin": "admin"}[perms[id]]
		list = append(list, u)
	}
	if page, ok := s.paginate(w, r, list); ok {
		writeJSON(w, http.StatusOK, page)
	}
}
