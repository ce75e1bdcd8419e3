package httpserver

import (
	"crypto/hmac"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/codelotse/codelotse/pkg/authn"
	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/githubapp"
	"github.com/codelotse/codelotse/pkg/oidc"
	"github.com/codelotse/codelotse/pkg/postgres"
)

// signInTTL bounds a sign-in in progress (the provider round trip).
const signInTTL = 10 * time.Minute

// login is GET /t/:slug/login: start sign-in with the tenant's identity
// provider (OIDC), or with GitHub for a tenant bound to an installation.
func (s *Server) login(c echo.Context) error {
	slug := c.Get(keySlug).(string)
	// return_to resumes an OAuth authorization after sign-in; only that
	// page of this tenant, so the parameter is no open redirect.
	returnTo := c.QueryParam("return_to")
	if !strings.HasPrefix(returnTo, "/t/"+slug+"/oauth/authorize?") {
		returnTo = ""
	}
	if p := principal(c); p != nil && p.Member {
		return c.Redirect(http.StatusSeeOther, afterSignIn(slug, returnTo))
	}
	// Every unauthenticated start stores a sign-in state: bound per address.
	if d := s.limitBucket(c, "login:ip:"+c.RealIP(), s.cfg.Limits.Login); !d.Allowed {
		secs := max(1, int(math.Ceil(d.RetryAfter.Seconds())))
		c.Response().Header().Set("Retry-After", strconv.Itoa(secs))
		return s.page(c, http.StatusTooManyRequests, "Too many sign-in attempts",
			fmt.Sprintf("Too many sign-ins were started from your address. Try again in %d second%s.", secs, plural(secs)))
	}
	ctx := c.Request().Context()
	tid := c.Get(keyTenantID).(string)
	// The sign-in is bound to this browser: the callback needs this cookie.
	binding, bindCookie := s.cfg.Sessions.LoginCookie()
	bindHash := authn.HashValue(binding)
	var target string
	err := s.cfg.DB.InTenant(ctx, tid, func(tx *postgres.Tx) error {
		if p, err := tx.IdentityProviderByIssuer(ctx, ""); err == nil && p.Enabled && s.cfg.OIDC != nil {
			value, nonce, verifier := tid+"."+authn.NewSecret(), oidc.NewNonce(), oidc.NewVerifier()
			if err := tx.CreateLoginState(ctx, authn.HashValue(value), postgres.LoginState{Kind: "oidc", IdPID: p.ID, Verifier: verifier, Nonce: nonce, ReturnTo: returnTo, BrowserHash: bindHash}, signInTTL); err != nil {
				return err
			}
			target, err = s.cfg.OIDC.AuthURL(ctx, s.oidcProvider(p), value, nonce, verifier)
			return err
		}
		g, err := tx.GetTenantGitHub(ctx)
		if err != nil {
			return err
		}
		if g.InstallationID != nil && s.cfg.GitHub != nil {
			value, verifier := tid+"."+authn.NewSecret(), githubapp.NewVerifier()
			if err := tx.CreateLoginState(ctx, authn.HashValue(value), postgres.LoginState{Kind: "github", Verifier: verifier, ReturnTo: returnTo, BrowserHash: bindHash}, signInTTL); err != nil {
				return err
			}
			target = s.cfg.GitHub.AuthCodeURL(value, verifier)
		}
		return nil
	})
	if err != nil {
		s.cfg.Logger.Warn("starting sign-in failed", "err", err)
		return s.page(c, http.StatusBadGateway, "Sign-in unavailable", "The sign-in provider could not be reached. Try again in a moment, or ask an admin to check the provider settings.")
	}
	if target == "" {
		return s.page(c, http.StatusServiceUnavailable, "Sign-in not configured", "This organisation has no sign-in configured yet. Ask an operator for a sign-in link.")
	}
	c.SetCookie(bindCookie)
	return c.Redirect(http.StatusFound, target)
}

func (s *Server) oidcProvider(p postgres.IdentityProvider) oidc.Provider {
	return oidc.Provider{Issuer: p.Issuer, ClientID: p.ClientID, ClientSecret: p.ClientSecret, GroupsClaim: p.GroupsClaim,
		Scopes: p.Scopes, RedirectURL: s.cfg.PublicURL + "/auth/oidc/callback"}
}

// callbackState consumes the state of a callback and checks its kind.
func (s *Server) callbackState(c echo.Context, kind string) (string, postgres.LoginState, error) {
	value := c.QueryParam("state")
	tid, ok := authn.SplitValue(value)
	if !ok {
		return "", postgres.LoginState{}, codelotse.Errorf(codelotse.Invalid, "The sign-in attempt is not valid; start again.")
	}
	var st postgres.LoginState
	err := s.cfg.DB.InTenant(c.Request().Context(), tid, func(tx *postgres.Tx) error {
		var err error
		st, err = tx.ConsumeLoginState(c.Request().Context(), authn.HashValue(value))
		return err
	})
	if err != nil {
		if codelotse.ErrorCode(err) == codelotse.NotFound {
			return "", st, codelotse.Errorf(codelotse.Invalid, "The sign-in attempt expired or was already used; start again.")
		}
		return "", st, err
	}
	if st.Kind != kind {
		return "", st, codelotse.Errorf(codelotse.Invalid, "The sign-in attempt is not valid; start again.")
	}
	// Login CSRF: only the browser that started the sign-in may finish it.
	bc, err := c.Cookie(s.cfg.Sessions.LoginCookieName())
	if err != nil || len(st.BrowserHash) == 0 || !hmac.Equal(authn.HashValue(bc.Value), st.BrowserHash) {
		return "", st, codelotse.Errorf(codelotse.Invalid, "This sign-in was started in another browser (or its cookie expired); start again.")
	}
	c.SetCookie(s.cfg.Sessions.ClearLoginCookie())
	return tid, st, nil
}

// oidcCallback is GET /auth/oidc/callback: finish the OIDC sign-in, update
// the user, replace the groups snapshot on their active tokens of this
// provider, and start a session.
func (s *Server) oidcCallback(c echo.Context) error {
	if s.cfg.OIDC == nil {
		return s.page(c, http.StatusServiceUnavailable, "Sign-in not configured", "OIDC sign-in is not configured on this server.")
	}
	tid, st, err := s.callbackState(c, "oidc")
	if err != nil {
		return s.signInFailed(c, err)
	}
	if e := c.QueryParam("error"); e != "" {
		return s.page(c, http.StatusForbidden, "Sign-in refused", "The identity provider did not sign you in ("+clip(e, 80)+").")
	}
	ctx := c.Request().Context()
	var p postgres.IdentityProvider
	var slug string
	if err := s.cfg.DB.InTenant(ctx, tid, func(tx *postgres.Tx) error {
		var err error
		if p, err = tx.IdentityProviderByIssuer(ctx, ""); err != nil {
			return err
		}
		g, err := tx.GetTenantGitHub(ctx)
		slug = g.Slug
		return err
	}); err != nil {
		return s.signInFailed(c, err)
	}
	if p.ID != st.IdPID || !p.Enabled {
		return s.page(c, http.StatusForbidden, "Sign-in refused", "This identity provider is no longer enabled for the organisation.")
	}
	claims, err := s.cfg.OIDC.Finish(ctx, s.oidcProvider(p), c.QueryParam("code"), st.Verifier, st.Nonce)
	var gce *oidc.GroupsClaimError
	if errors.As(err, &gce) {
		return s.page(c, http.StatusForbidden, "Groups missing", fmt.Sprintf("Your identity provider did not send the groups claim %q, which this organisation uses to decide what you can see. Ask your admin to add it to the ID token.", gce.Claim))
	}
	if err != nil {
		s.cfg.Logger.Warn("OIDC sign-in failed", "err", err)
		return s.page(c, http.StatusForbidden, "Sign-in failed", "The identity provider's answer could not be verified. Start again; if it keeps failing, ask an admin to check the provider settings.")
	}
	var cookie *http.Cookie
	err = s.cfg.DB.InTenant(ctx, tid, func(tx *postgres.Tx) error {
		u, err := tx.UpsertOIDCUser(ctx, p.ID, claims.Subject, claims.Email, claims.Name, claims.EmailVerified)
		if err != nil {
			return err
		}
		if _, err := tx.ReplaceGroupSnapshot(ctx, u.ID, p.ID, claims.Groups); err != nil {
			return err
		}
		if err := tx.AuditSignIn(ctx, u.ID, u.Email, "oidc"); err != nil {
			return err
		}
		cookie, err = s.cfg.Sessions.Start(ctx, tx, u.ID, false, p.ID, claims.Groups)
		return err
	})
	if err != nil {
		return s.signInFailed(c, err)
	}
	c.SetCookie(cookie)
	return c.Redirect(http.StatusSeeOther, afterSignIn(slug, st.ReturnTo))
}

// afterSignIn is where a finished sign-in goes: back to the OAuth
// authorization it interrupted, else the MCP access page.
func afterSignIn(slug, returnTo string) string {
	if returnTo != "" && strings.HasPrefix(returnTo, "/t/"+slug+"/oauth/authorize?") {
		return returnTo
	}
	return "/t/" + slug + "/mcp"
}

// githubCallback is GET /auth/github/callback: finish the GitHub App user
// sign-in and refresh the cached memberships (tenant role and the
// repositories the user can see through the tenant's installation).
func (s *Server) githubCallback(c echo.Context) error {
	if s.cfg.GitHub == nil {
		return s.page(c, http.StatusServiceUnavailable, "Sign-in not configured", "GitHub sign-in is not configured on this server.")
	}
	tid, st, err := s.callbackState(c, "github")
	if err != nil {
		return s.signInFailed(c, err)
	}
	ctx := c.Request().Context()
	id, insts, err := s.cfg.GitHub.SignIn(ctx, c.QueryParam("code"), st.Verifier)
	if err != nil {
		s.cfg.Logger.Warn("GitHub sign-in failed", "err", err)
		return s.page(c, http.StatusForbidden, "Sign-in failed", "GitHub did not complete the sign-in. Start again.")
	}
	var cookie *http.Cookie
	var slug string
	noAccess := false
	err = s.cfg.DB.InTenant(ctx, tid, func(tx *postgres.Tx) error {
		g, err := tx.GetTenantGitHub(ctx)
		if err != nil {
			return err
		}
		slug = g.Slug
		var inst *githubapp.Installation
		for i := range insts {
			if g.InstallationID != nil && insts[i].ID == *g.InstallationID && (g.AccountID == nil || *g.AccountID == insts[i].AccountID) {
				inst = &insts[i]
			}
		}
		if inst == nil {
			noAccess = true
			return nil
		}
		if err := tx.SetTenantGitHubAccount(ctx, inst.AccountID); err != nil {
			return err
		}
		email := id.Email
		if email == "" {
			email = fmt.Sprintf("%d+%s@users.noreply.github.com", id.UserID, id.Login)
		}
		u, err := tx.UpsertGitHubUser(ctx, id.UserID, id.Login, id.Name, email)
		if err != nil {
			return err
		}
		role := codelotse.RoleMember
		if inst.Role == "admin" {
			role = codelotse.RoleAdmin
		}
		if err := tx.RefreshMembership(ctx, u.ID, role, "github", time.Now()); err != nil {
			return err
		}
		var repoIDs []int64
		for _, r := range inst.Repos {
			rid, err := s.cfg.Ingest.UpsertGitHubRepository(ctx, tx, r.ID, r.FullName, r.DefaultBranch, r.URL, r.Private, false)
			if c := codelotse.ErrorCode(err); c == codelotse.Invalid || c == codelotse.Conflict {
				// A name that looks like a secret is not stored; a new
				// repository whose name a stored one still holds waits for
				// the installation sync (UpsertGitHubRepository).
				continue
			}
			if err != nil {
				return err
			}
			repoIDs = append(repoIDs, rid)
		}
		if err := tx.ReplaceRepoMemberships(ctx, u.ID, repoIDs); err != nil {
			return err
		}
		if err := tx.AuditSignIn(ctx, u.ID, u.Email, "github"); err != nil {
			return err
		}
		cookie, err = s.cfg.Sessions.Start(ctx, tx, u.ID, false, "", nil)
		return err
	})
	if err != nil {
		return s.signInFailed(c, err)
	}
	if noAccess {
		return s.page(c, http.StatusForbidden, "No access", "Your GitHub account cannot see this organisation's CodeLotse installation.")
	}
	c.SetCookie(cookie)
	return c.Redirect(http.StatusSeeOther, afterSignIn(slug, st.ReturnTo))
}

func (s *Server) signInFailed(c echo.Context, err error) error {
	if codelotse.ErrorCode(err) == codelotse.Invalid {
		return s.page(c, http.StatusBadRequest, "Sign-in failed", codelotse.ErrorMessage(err))
	}
	return err
}

func clip(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 {
			return -1
		}
		return r
	}, s)
	return codelotse.Clip(s, n)
}
