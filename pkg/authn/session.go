package authn

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/grants"
	"github.com/codelotse/codelotse/pkg/postgres"
)

// Sessions manages browser sessions: a random secret in a cookie, only its
// SHA-256 stored (web_sessions, under the tenant's RLS). The cookie value is
// "<tenant id>.<secret>", so a session is looked up inside its tenant.
// Cookie sessions never authenticate bearer routes, and tokens never
// authenticate cookie routes.
type Sessions struct {
	DB *postgres.DB
	// Secure selects the __Host- cookie with the Secure attribute; it may be
	// false only for an http://127.0.0.1 (or localhost) PUBLIC_URL.
	Secure bool
	TTL    time.Duration
}

// SessionTTL is how long a browser session lasts (shorter than the 24-hour
// membership cache, so a session never outlives its user's access).
const SessionTTL = 12 * time.Hour

// CookieName is the session cookie's name.
func (s *Sessions) CookieName() string {
	if s.Secure {
		return "__Host-codelotse_session"
	}
	return "codelotse_session"
}

func (s *Sessions) ttl() time.Duration {
	if s.TTL > 0 {
		return s.TTL
	}
	return SessionTTL
}

// NewSecret returns a fresh random value for cookies and one-time links.
func NewSecret() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// HashValue is the stored form of a cookie or link value.
func HashValue(v string) []byte {
	h := sha256.Sum256([]byte(v))
	return h[:]
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// SplitValue returns the tenant id of a "<tenant>.<secret>" value; values
// that are not of that shape are refused before they reach the database.
func SplitValue(v string) (tenantID string, ok bool) {
	t, secret, ok := strings.Cut(v, ".")
	if !ok || !uuidRE.MatchString(t) || len(secret) < 40 || len(v) > 200 {
		return "", false
	}
	return t, true
}

// LoginCookieName is the cookie that binds a sign-in to its browser.
func (s *Sessions) LoginCookieName() string {
	if s.Secure {
		return "__Host-codelotse_login"
	}
	return "codelotse_login"
}

// LoginCookie returns a fresh binding value and its cookie (10 minutes).
func (s *Sessions) LoginCookie() (string, *http.Cookie) {
	v := NewSecret()
	return v, &http.Cookie{Name: s.LoginCookieName(), Value: v, Path: "/", MaxAge: 600, Secure: s.Secure, HttpOnly: true, SameSite: http.SameSiteLaxMode}
}

// ClearLoginCookie removes the binding cookie.
func (s *Sessions) ClearLoginCookie() *http.Cookie {
	return &http.Cookie{Name: s.LoginCookieName(), Value: "", Path: "/", MaxAge: -1, Secure: s.Secure, HttpOnly: true, SameSite: http.SameSiteLaxMode}
}

// Start creates a session for the user in tx (a new secret every time: the
// session id rotates at every sign-in) and returns its cookie.
func (s *Sessions) Start(ctx context.Context, tx *postgres.Tx, userID string, breakGlass bool, idpID string, groups []string) (*http.Cookie, error) {
	value := tx.TenantID() + "." + NewSecret()
	if _, err := tx.CreateWebSession(ctx, HashValue(value), userID, breakGlass, idpID, groups, s.ttl()); err != nil {
		return nil, err
	}
	return s.cookie(value, int(s.ttl().Seconds())), nil
}

func (s *Sessions) cookie(value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: s.CookieName(), Value: value, Path: "/", MaxAge: maxAge,
		Secure: s.Secure, HttpOnly: true, SameSite: http.SameSiteLaxMode}
}

// Clear is the cookie that removes the session cookie.
func (s *Sessions) Clear() *http.Cookie { return s.cookie("", -1) }

// WebPrincipal is who a cookie request acts for.
type WebPrincipal struct {
	Session postgres.WebSession
	Grants  codelotse.Grants
	// Member is false when the person has no current access to the tenant
	// (stale GitHub cache, no mapped group, disabled provider).
	Member bool
	// Admin is true for tenant admins and break-glass sessions.
	Admin bool
}

// Read returns the session of r in tenant tenantID, or nil when r has none.
func (s *Sessions) Read(ctx context.Context, r *http.Request, tenantID string) (*WebPrincipal, error) {
	c, err := r.Cookie(s.CookieName())
	if err != nil || c.Value == "" {
		return nil, nil
	}
	t, ok := SplitValue(c.Value)
	if !ok || t != tenantID {
		return nil, nil
	}
	ws, found, err := s.DB.Tenant(tenantID).WebSessionByHash(ctx, HashValue(c.Value))
	if err != nil || !found {
		return nil, err
	}
	p := &WebPrincipal{Session: ws}
	var reason grants.Reason
	if ws.IdPID != "" {
		p.Grants, reason = grants.OIDC(true, ws.IdPGroups, ws.Mappings)
	} else {
		p.Grants, reason = grants.GitHub(ws.Membership, ws.RepoIDs, time.Now())
	}
	p.Member = reason == grants.OK || ws.BreakGlass
	p.Admin = (reason == grants.OK && p.Grants.Admin) || ws.BreakGlass
	return p, nil
}

// CookieTenant returns the tenant id named by r's session cookie, if any.
func (s *Sessions) CookieTenant(r *http.Request) (string, string, bool) {
	c, err := r.Cookie(s.CookieName())
	if err != nil {
		return "", "", false
	}
	t, ok := SplitValue(c.Value)
	return t, c.Value, ok
}
