package githubtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Fixed timestamps keep payloads stable across runs.
const timestamp = "2024-01-02T03:04:05Z"

// rateLimitReset is how far ahead the ordinary X-RateLimit-Reset points.
const rateLimitReset = time.Hour

// api serves the REST endpoints, at the root and under /api/v3.
func (s *Server) api(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	if p, ok := strings.CutPrefix(path, "/api/v3"); ok && (p == "" || p[0] == '/') {
		path = p
	}
	w.Header().Set("X-GitHub-Media-Type", "github.v3; format=json")

	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.takeFailure(path); ok {
		s.fail(w, f)
		return
	}
	s.rateHeaders(w)
	if s.installationAPI(w, r, path) {
		return
	}
	if r.Method != http.MethodGet {
		writeJSON(w, http.StatusNotFound, notFound())
		return
	}
	userID, status := s.authenticate(r)
	if status != 0 {
		msg := "Bad credentials"
		if status == http.StatusUnauthorized && r.Header.Get("Authorization") == "" {
			msg = "Requires authentication"
		}
		writeJSON(w, status, map[string]any{"message": msg, "documentation_url": "https://docs.github.com/rest", "status": strconv.Itoa(status)})
		return
	}
	u := s.users[userID]

	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case path == "/user":
		writeJSON(w, http.StatusOK, s.privateUser(u))
	case path == "/user/emails":
		emails := make([]any, 0, len(u.Emails))
		for _, e := range u.Emails {
			emails = append(emails, map[string]any{
				"email":      e.Email,
				"primary":    e.Primary,
				"verified":   e.Verified,
				"visibility": nullable(e.Visibility),
			})
		}
		page, ok := s.paginate(w, r, emails)
		if ok {
			writeJSON(w, http.StatusOK, page)
		}
	case path == "/user/installations":
		var list []any
		for _, in := range s.installations {
			if s.canReach(u, in) {
				list = append(list, s.installationJSON(in))
			}
		}
		page, ok := s.paginate(w, r, list)
		if ok {
			writeJSON(w, http.StatusOK, map[string]any{"total_count": len(list), "installations": page})
		}
	case len(parts) == 4 && parts[0] == "user" && parts[1] == "installations" && parts[3] == "repositories":
		id, err := strconv.ParseInt(parts[2], 10, 64)
		in := s.installation(id)
		if err != nil || in == nil || !s.canReach(u, in) {
			writeJSON(w, http.StatusNotFound, notFound())
			return
		}
		if in.suspended {
			writeJSON(w, http.StatusForbidden, map[string]any{"message": "This installation has been suspended", "documentation_url": "https://docs.github.com/rest", "status": "403"})
			return
		}
		var list []any
		for _, rid := range in.repoIDs {
			if perm := s.permission(u, s.repos[rid]); perm != "" {
				list = append(list, s.repoJSON(s.repos[rid], perm))
			}
		}
		page, ok := s.paginate(w, r, list)
		if ok {
			writeJSON(w, http.StatusOK, map[string]any{"total_count": len(list), "repository_selection": "selected", "repositories": page})
		}
	case len(parts) == 4 && parts[0] == "user" && parts[1] == "memberships" && parts[2] == "orgs":
		orgID, ok := s.accountByLogin(parts[3])
		m, member := s.memberships[[2]int64{userID, orgID}]
		if _, isOrg := s.orgs[orgID]; !ok || !isOrg || !member {
			writeJSON(w, http.StatusNotFound, notFound())
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"url":              s.APIURL + "orgs/" + s.orgs[orgID] + "/memberships/" + u.Login,
			"state":            m.state,
			"role":             m.role,
			"organization_url": s.APIURL + "orgs/" + s.orgs[orgID],
			"organization":     s.orgJSON(orgID),
			"user":             s.simpleUser(userID),
		})
	default:
		writeJSON(w, http.StatusNotFound, notFound())
	}
}

// takeFailure removes and returns the first queued failure for path.
func (s *Server) takeFailure(path string) (Failure, bool) {
	for i, f := range s.failures {
		if f.path == "" || f.path == path {
			s.failures = slices.Delete(s.failures, i, i+1)
			return f.kind, true
		}
	}
	return 0, false
}

// fail writes the GitHub answer for f.
func (s *Server) fail(w http.ResponseWriter, f Failure) {
	if f == ConnectionReset {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		// Not hijackable (HTTP/2): an empty 502 is the closest.
		f = ServerError
	}
	retry := int(s.retryAfter / time.Second)
	const secondaryMessage = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID 0000:0000:0000000:0000000:00000000."
	const secondaryDocs = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"
	switch f {
	case SecondaryRateLimit:
		s.rateHeaders(w)
		w.Header().Set("Retry-After", strconv.Itoa(retry))
		writeJSON(w, http.StatusForbidden, map[string]any{"message": secondaryMessage, "documentation_url": secondaryDocs})
	case TooManyRequests:
		s.rateHeaders(w)
		w.Header().Set("Retry-After", strconv.Itoa(retry))
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"message": secondaryMessage, "documentation_url": secondaryDocs})
	case PrimaryRateLimit:
		h := w.Header()
		h.Set("X-RateLimit-Limit", "5000")
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("X-RateLimit-Used", "5000")
		h.Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(s.retryAfter).Unix(), 10))
		h.Set("X-RateLimit-Resource", "core")
		writeJSON(w, http.StatusForbidden, map[string]any{
			"message":           "API rate limit exceeded for user ID 1. If you reach out to GitHub Support for help, please include the request ID 0000:0000:0000000:0000000:00000000.",
			"documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-the-primary-rate-limits",
		})
	case BadCredentials:
		writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest", "status": "401"})
	case Forbidden:
		s.rateHeaders(w)
		writeJSON(w, http.StatusForbidden, map[string]any{"message": "Resource not accessible by integration", "documentation_url": "https://docs.github.com/rest", "status": "403"})
	default:
		writeJSON(w, http.StatusBadGateway, map[string]any{"message": "Server Error"})
	}
}

// rateHeaders sets the primary rate-limit headers GitHub sends on every
// API answer.
func (s *Server) rateHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("X-RateLimit-Limit", "5000")
	h.Set("X-RateLimit-Remaining", "4999")
	h.Set("X-RateLimit-Used", "1")
	h.Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(rateLimitReset).Unix(), 10))
	h.Set("X-RateLimit-Resource", "core")
}

// authenticate accepts "Authorization: Bearer T" or "token T", as GitHub
// does, and returns the token's user or a 401.
func (s *Server) authenticate(r *http.Request) (int64, int) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") && !strings.EqualFold(scheme, "token") {
		return 0, http.StatusUnauthorized
	}
	userID, ok := s.tokens[strings.TrimSpace(tok)]
	if !ok {
		return 0, http.StatusUnauthorized
	}
	if _, ok := s.users[userID]; !ok {
		return 0, http.StatusUnauthorized
	}
	return userID, 0
}

// canReach says whether /user/installations lists the installation for u:
// it is on u's own account, u is an active member of its organization, or u
// has a permission on one of its repositories.
func (s *Server) canReach(u *User, in *installation) bool {
	if in.accountID == u.ID {
		return true
	}
	if m, ok := s.memberships[[2]int64{u.ID, in.accountID}]; ok && m.state == "active" {
		return true
	}
	for _, rid := range in.repoIDs {
		if _, ok := s.perms[[2]int64{u.ID, rid}]; ok {
			return true
		}
	}
	return false
}

// permission is u's effective permission on r: the owner and active
// organization admins have admin; active members have the base permission
// and their teams'; anyone may have what SetPermission gave them; the
// highest wins.
func (s *Server) permission(u *User, r *repo) string {
	acct := s.installation(r.installationID).accountID
	if acct == u.ID {
		return "admin"
	}
	return higher(s.perms[[2]int64{u.ID, r.ID}], s.memberPermission(u.ID, r))
}

// paginate cuts list into the page the request asks for (page, per_page;
// GitHub's default of 30 and maximum of 100, capped by SetMaxPerPage) and
// sets GitHub's Link header.
func (s *Server) paginate(w http.ResponseWriter, r *http.Request, list []any) ([]any, bool) {
	q := r.URL.Query()
	perPage, page := 30, 1
	if v := q.Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Invalid per_page", "documentation_url": "https://docs.github.com/rest"})
			return nil, false
		}
		perPage = n
	}
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Invalid page", "documentation_url": "https://docs.github.com/rest"})
			return nil, false
		}
		page = max(n, 1)
	}
	perPage = min(max(perPage, 1), 100, s.maxPerPage)
	last := max((len(list)+perPage-1)/perPage, 1)

	link := func(p int) string {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		u := url.URL{Scheme: scheme, Host: r.Host, Path: r.URL.Path}
		lq := r.URL.Query()
		lq.Set("page", strconv.Itoa(p))
		u.RawQuery = lq.Encode()
		return "<" + u.String() + ">"
	}
	var links []string
	if page > 1 {
		links = append(links, link(min(page-1, last))+`; rel="prev"`)
	}
	if page < last {
		links = append(links, link(page+1)+`; rel="next"`, link(last)+`; rel="last"`)
	}
	if page > 1 {
		links = append(links, link(1)+`; rel="first"`)
	}
	if len(links) > 0 {
		w.Header().Set("Link", strings.Join(links, ", "))
	}

	start := min((page-1)*perPage, len(list))
	end := min(start+perPage, len(list))
	out := list[start:end]
	if out == nil {
		out = []any{}
	}
	return out, true
}

func (s *Server) privateUser(u *User) map[string]any {
	m := s.simpleUser(u.ID)
	m["name"] = nullable(u.Name)
	m["company"] = nil
	m["blog"] = ""
	m["location"] = nil
	m["email"] = nullable(u.PublicEmail)
	m["hireable"] = nil
	m["bio"] = nil
	m["twitter_username"] = nil
	m["public_repos"] = 0
	m["public_gists"] = 0
	m["followers"] = 0
	m["following"] = 0
	m["created_at"] = timestamp
	m["updated_at"] = timestamp
	return m
}

// simpleUser is GitHub's "simple user" object, used for users and for
// accounts of either type.
func (s *Server) simpleUser(id int64) map[string]any {
	login, typ, _ := s.account(id)
	api := s.APIURL + "users/" + login
	return map[string]any{
		"login":               login,
		"id":                  id,
		"node_id":             fmt.Sprintf("MDQ6VXNlcj%d", id),
		"avatar_url":          fmt.Sprintf("%savatars/u/%d?v=4", s.WebURL, id),
		"gravatar_id":         "",
		"url":                 api,
		"html_url":            s.WebURL + login,
		"followers_url":       api + "/followers",
		"following_url":       api + "/following{/other_user}",
		"gists_url":           api + "/gists{/gist_id}",
		"starred_url":         api + "/starred{/owner}{/repo}",
		"subscriptions_url":   api + "/subscriptions",
		"organizations_url":   api + "/orgs",
		"repos_url":           api + "/repos",
		"events_url":          api + "/events{/privacy}",
		"received_events_url": api + "/received_events",
		"type":                typ,
		"site_admin":          false,
	}
}

// orgJSON is GitHub's "organization simple" object.
func (s *Server) orgJSON(id int64) map[string]any {
	login := s.orgs[id]
	api := s.APIURL + "orgs/" + login
	return map[string]any{
		"login":              login,
		"id":                 id,
		"node_id":            fmt.Sprintf("MDEyOk9yZ2FuaXphdGlvbj%d", id),
		"url":                api,
		"repos_url":          api + "/repos",
		"events_url":         api + "/events",
		"hooks_url":          api + "/hooks",
		"issues_url":         api + "/issues",
		"members_url":        api + "/members{/member}",
		"public_members_url": api + "/public_members{/member}",
		"avatar_url":         fmt.Sprintf("%savatars/u/%d?v=4", s.WebURL, id),
		"description":        nil,
	}
}

func (s *Server) installationJSON(in *installation) map[string]any {
	login, typ, _ := s.account(in.accountID)
	htmlURL := s.WebURL + "settings/installations/" + strconv.FormatInt(in.id, 10)
	if typ == TypeOrganization {
		htmlURL = s.WebURL + "organizations/" + login + "/settings/installations/" + strconv.FormatInt(in.id, 10)
	}
	var suspendedAt, suspendedBy any
	if in.suspended {
		suspendedAt = timestamp
		suspendedBy = s.simpleUser(in.accountID)
	}
	return map[string]any{
		"id":                   in.id,
		"account":              s.simpleUser(in.accountID),
		"repository_selection": "selected",
		"access_tokens_url":    fmt.Sprintf("%sapp/installations/%d/access_tokens", s.APIURL, in.id),
		"repositories_url":     s.APIURL + "installation/repositories",
		"html_url":             htmlURL,
		"app_id":               s.AppID,
		"app_slug":             "codelotse",
		"target_id":            in.accountID,
		"target_type":          typ,
		"permissions": map[string]string{
			"metadata": "read", "contents": "read", "pull_requests": "read",
			"security_events": "read", "members": "read", "emails": "read",
		},
		"events":           []string{"pull_request", "pull_request_review", "push"},
		"created_at":       timestamp,
		"updated_at":       timestamp,
		"single_file_name": nil,
		"suspended_by":     suspendedBy,
		"suspended_at":     suspendedAt,
	}
}

func (s *Server) repoJSON(r *repo, perm string) map[string]any {
	owner, _, _ := s.account(s.installation(r.installationID).accountID)
	full := owner + "/" + r.Name
	api := s.APIURL + "repos/" + full
	rank := slices.Index(permissions, perm)
	visibility := "public"
	if r.Private {
		visibility = "private"
	}
	return map[string]any{
		"id":             r.ID,
		"node_id":        fmt.Sprintf("MDEwOlJlcG9zaXRvcnk%d", r.ID),
		"name":           r.Name,
		"full_name":      full,
		"owner":          s.simpleUser(s.installation(r.installationID).accountID),
		"private":        r.Private,
		"visibility":     visibility,
		"html_url":       s.WebURL + full,
		"description":    nil,
		"fork":           false,
		"url":            api,
		"clone_url":      s.WebURL + full + ".git",
		"default_branch": r.DefaultBranch,
		"archived":       r.Archived,
		"disabled":       false,
		"created_at":     timestamp,
		"updated_at":     timestamp,
		"pushed_at":      timestamp,
		"permissions": map[string]bool{
			"admin":    rank >= 4,
			"maintain": rank >= 3,
			"push":     rank >= 2,
			"triage":   rank >= 1,
			"pull":     rank >= 0,
		},
	}
}

func notFound() map[string]any {
	return map[string]any{"message": "Not Found", "documentation_url": "https://docs.github.com/rest", "status": "404"}
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
