package httpserver

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/codelotse/codelotse/pkg/authn"
	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/postgres"
)

// linkPage is GET /auth/link: the confirmation page of a single-use
// sign-in link. Nothing is consumed by GET, so link scanners and
// prefetching cannot burn or use a link.
func (s *Server) linkPage(c echo.Context) error {
	v := c.QueryParam("v")
	if _, ok := authn.SplitValue(v); !ok {
		return s.page(c, http.StatusBadRequest, "Invalid link", "This sign-in link is not valid.")
	}
	noStore(c)
	return s.render(c, http.StatusOK, "link.html", s.data(c, "Sign in", map[string]string{"Value": v}))
}

// linkSignIn is POST /auth/link: consume a break-glass or development
// sign-in link and start a session.
func (s *Server) linkSignIn(c echo.Context) error {
	v := c.FormValue("v")
	tid, ok := authn.SplitValue(v)
	if !ok {
		return s.page(c, http.StatusBadRequest, "Invalid link", "This sign-in link is not valid.")
	}
	ctx := c.Request().Context()
	var cookie *http.Cookie
	var slug string
	err := s.cfg.DB.InTenant(ctx, tid, func(tx *postgres.Tx) error {
		st, err := tx.ConsumeLoginState(ctx, authn.HashValue(v))
		if err != nil {
			return err
		}
		switch {
		case st.Kind == "dev" && !s.cfg.DevSignIn:
			return codelotse.Errorf(codelotse.Forbidden, "Development sign-in links work only on a local development server.")
		case st.Kind != "dev" && st.Kind != "break-glass":
			return codelotse.Errorf(codelotse.NotFound, "this sign-in link is unknown, expired or already used")
		}
		t, err := tx.GetTenant(ctx)
		if err != nil {
			return err
		}
		slug = t.Slug
		cookie, err = s.cfg.Sessions.Start(ctx, tx, st.UserID, st.Kind == "break-glass", "", nil)
		if err != nil {
			return err
		}
		// A break-glass sign-in sees everything: audited with the session.
		return tx.AuditLinkSignIn(ctx, st.UserID, st.Kind)
	})
	switch codelotse.ErrorCode(err) {
	case codelotse.NotFound, codelotse.Forbidden, codelotse.Invalid:
		return s.page(c, http.StatusForbidden, "Link not valid", codelotse.ErrorMessage(err)+". Ask an operator for a new one.")
	}
	if err != nil {
		return err
	}
	c.SetCookie(cookie)
	return c.Redirect(http.StatusSeeOther, "/t/"+slug+"/mcp")
}

// logout is GET or POST /logout: revoke the session and clear the cookie.
func (s *Server) logout(c echo.Context) error {
	if s.cfg.Sessions != nil {
		if tid, value, ok := s.cfg.Sessions.CookieTenant(c.Request()); ok {
			if err := s.cfg.DB.InTenant(c.Request().Context(), tid, func(tx *postgres.Tx) error {
				return tx.RevokeWebSession(c.Request().Context(), authn.HashValue(value))
			}); err != nil {
				return err
			}
		}
		c.SetCookie(s.cfg.Sessions.Clear())
	}
	return c.Redirect(http.StatusSeeOther, "/")
}

// logoutPage is GET /logout: a confirmation form. Signing out changes
// state, so it happens only on POST, behind the cross-origin check; a
// cross-site link cannot sign anyone out.
func (s *Server) logoutPage(c echo.Context) error {
	noStore(c)
	return s.render(c, http.StatusOK, "logout.html", s.data(c, "Sign out", nil))
}
