package httpserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/codelotse/codelotse/pkg/authn"
	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/oauth"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/ratelimit"
	"github.com/codelotse/codelotse/pkg/safehttp"
	"github.com/codelotse/codelotse/pkg/shape"
	"github.com/codelotse/codelotse/pkg/tokens"
)

// OAuthConfig configures the OAuth 2.1 authorization server of each tenant
// (ARCHITECTURE §4a). Each tenant's issuer is <PUBLIC_URL>/t/{slug} and its
// resource <PUBLIC_URL>/t/{slug}/mcp; the root /mcp is the endpoint for
// header-configured personal access tokens and never advertises OAuth.
type OAuthConfig struct {
	// Enabled publishes the discovery documents and serves the endpoints.
	// Off: no authorization-server discovery at all, and 401s carry no
	// resource_metadata.
	Enabled bool
	// DynamicRegistration serves RFC 7591 registration.
	DynamicRegistration bool
	// MetadataClient fetches Client ID Metadata Documents (a pkg/safehttp
	// client); nil means the strict default.
	MetadataClient *http.Client
	// RegisterLimit rate-limits registrations per client address.
	RegisterLimit ratelimit.Rule
	// TokenLimit rate-limits the token and revocation endpoints per address.
	TokenLimit ratelimit.Rule
}

// DefaultRegisterLimit allows a few registrations per address and hour:
// a client registers once per installation.
var DefaultRegisterLimit = ratelimit.Rule{Limit: 20, Period: time.Hour}

// DefaultTokenLimit bounds code and refresh exchanges per address.
var DefaultTokenLimit = ratelimit.Rule{Limit: 60, Period: time.Minute}

// discoveryCache is how long a tenant's discovery documents may be cached:
// minutes, so that a tenant admin's switch is seen soon.
const discoveryCache = "public, max-age=300"

func (s *Server) issuer(slug string) string   { return s.cfg.PublicURL + "/t/" + slug }
func (s *Server) resource(slug string) string { return s.cfg.PublicURL + "/t/" + slug + "/mcp" }
func (s *Server) resourceMetadataURL(slug string) string {
	return s.cfg.PublicURL + "/.well-known/oauth-protected-resource/t/" + slug + "/mcp"
}

const (
	keyEndpointSlug = "mcp_endpoint_slug"
	// keyEndpointTenant is the tenant of keyEndpointSlug once a refusal
	// looked it up (resourceMetadataOf then need not again).
	keyEndpointTenant = "mcp_endpoint_tenant"
)

// tenantMCPPost is POST /t/:slug/mcp: the same endpoint as POST /mcp, for
// one tenant. Personal access tokens of that tenant work here too; OAuth
// access tokens work only at the resource they were issued for.
func (s *Server) tenantMCPPost(c echo.Context) error {
	c.Set(keyEndpointSlug, c.Param("slug"))
	return s.mcpPost(c)
}

// authenticate runs the token checks for the endpoint that was called.
func (s *Server) authenticate(c echo.Context, ahead bool) (res authn.Result, p *authn.Pending, err error) {
	ctx := c.Request().Context()
	h := c.Request().Header.Get("Authorization")
	resource := s.cfg.PublicURL + "/mcp"
	slug, _ := c.Get(keyEndpointSlug).(string)
	if slug != "" && !postgres.ValidSlug(slug) {
		// Not even the shape of a slug: no tenant, no lookup, no metadata.
		c.Set(keyEndpointSlug, "")
		return authn.Result{Failure: &authn.Failure{Reason: "unknown_tenant"}}, nil, nil
	}
	if slug != "" {
		resource = s.resource(slug)
	}
	if ahead {
		res, p, err = s.cfg.Bearer.AuthenticateAhead(ctx, h, resource, slug)
	} else {
		res, err = s.cfg.Bearer.Authenticate(ctx, h, resource, slug)
	}
	if err != nil || slug == "" || res.Failure == nil {
		return res, p, err
	}
	// Refused at a tenant endpoint: when no tenant has that slug, say so,
	// and point to no metadata (there is none). Only refusals pay for
	// this lookup; an accepted token's facts named the slug's tenant.
	tid, err := s.cfg.DB.TenantIDBySlug(ctx, slug)
	if codelotse.ErrorCode(err) == codelotse.NotFound {
		c.Set(keyEndpointSlug, "")
		return authn.Result{Failure: &authn.Failure{Reason: "unknown_tenant"}}, nil, nil
	} else if err != nil {
		return authn.Result{}, nil, err
	}
	c.Set(keyEndpointTenant, tid)
	return res, p, nil
}

// resourceMetadataOf is the resource_metadata of a 401 from the endpoint
// that was called: only tenant endpoints have an authorization server, and
// only while the operator enables OAuth and the tenant has not switched
// OAuth clients off (complete discovery or none). Only a 401 pays for
// reading the tenant's switch; an accepted request never asks. When the
// switch cannot be read, the 401 names no metadata: a client is never
// sent into a flow that may not finish.
func (s *Server) resourceMetadataOf(c echo.Context) string {
	slug, _ := c.Get(keyEndpointSlug).(string)
	if slug == "" || !s.cfg.OAuth.Enabled {
		return ""
	}
	ctx := c.Request().Context()
	tid, _ := c.Get(keyEndpointTenant).(string)
	if tid == "" {
		var err error
		if tid, err = s.cfg.DB.TenantIDBySlug(ctx, slug); err != nil {
			if codelotse.ErrorCode(err) != codelotse.NotFound {
				s.cfg.Logger.Warn("reading the tenant of a refused request failed", "err", err)
			}
			return ""
		}
	}
	on, err := s.tenantOAuthOn(ctx, tid)
	if err != nil {
		s.cfg.Logger.Warn("reading the tenant's OAuth switch failed", "err", err)
		return ""
	}
	if !on {
		return ""
	}
	return s.resourceMetadataURL(slug)
}

// tenantOAuthOn reads the tenant admin's switch for OAuth clients.
func (s *Server) tenantOAuthOn(ctx context.Context, tid string) (bool, error) {
	var on bool
	err := s.cfg.DB.InTenant(ctx, tid, func(tx *postgres.Tx) error {
		var err error
		on, err = tx.OAuthEnabled(ctx)
		return err
	})
	return on, err
}

// oauthSwitchedOff is the 404 of a tenant's discovery documents while the
// tenant has switched OAuth clients off: complete discovery or none
// (ARCHITECTURE §4).
func oauthSwitchedOff(c echo.Context) error {
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusNotFound, map[string]string{"error": "not_found",
		"error_description": "this organisation has switched OAuth clients off; use a personal access token in the Authorization header"})
}

// protectedResource is the root RFC 9728 document (/.well-known/
// oauth-protected-resource[/mcp]). The root /mcp has no authorization
// server (a person's tenant is not known there), and metadata is complete
// or absent, so it is absent: header-configured clients are never sent
// into a flow that cannot finish. Tenants' documents are below.
func (s *Server) protectedResource(c echo.Context) error {
	return c.JSON(http.StatusNotFound, map[string]string{
		"error":             "not_found",
		"error_description": "the endpoint " + s.cfg.PublicURL + "/mcp takes personal access tokens in the Authorization header; for OAuth, use your organisation's endpoint " + s.cfg.PublicURL + "/t/{slug}/mcp",
	})
}

// tenantSlug resolves :slug for the public OAuth routes.
func (s *Server) tenantSlug(c echo.Context) (string, string, bool, error) {
	slug := c.Param("slug")
	tid, err := s.cfg.DB.TenantIDBySlug(c.Request().Context(), slug)
	if codelotse.ErrorCode(err) == codelotse.NotFound {
		return "", "", false, nil
	}
	return slug, tid, err == nil, err
}

// tenantProtectedResource is RFC 9728 metadata of /t/:slug/mcp; absent
// while the tenant has switched OAuth clients off.
func (s *Server) tenantProtectedResource(c echo.Context) error {
	slug, tid, ok, err := s.tenantSlug(c)
	if err != nil {
		return err
	}
	if !ok {
		return c.JSON(http.StatusNotFound, map[string]string{"error": "not_found", "error_description": "there is no such organisation"})
	}
	if on, err := s.tenantOAuthOn(c.Request().Context(), tid); err != nil {
		return err
	} else if !on {
		return oauthSwitchedOff(c)
	}
	c.Response().Header().Set("Cache-Control", discoveryCache)
	return c.JSON(http.StatusOK, map[string]any{
		"resource":                 s.resource(slug),
		"authorization_servers":    []string{s.issuer(slug)},
		"bearer_methods_supported": []string{"header"},
		"scopes_supported":         []string{oauth.Scope},
		"resource_name":            "CodeLotse MCP (" + slug + ")",
		"resource_documentation":   s.cfg.PublicURL + "/#oauth",
	})
}

// authServerMetadata is RFC 8414 metadata of the tenant's issuer, at the
// path-inserted well-known URLs and the appended variants clients use;
// absent, like the resource's, while the tenant has switched OAuth off.
func (s *Server) authServerMetadata(c echo.Context) error {
	slug, tid, ok, err := s.tenantSlug(c)
	if err != nil {
		return err
	}
	if !ok {
		return c.JSON(http.StatusNotFound, map[string]string{"error": "not_found", "error_description": "there is no such organisation"})
	}
	if on, err := s.tenantOAuthOn(c.Request().Context(), tid); err != nil {
		return err
	} else if !on {
		return oauthSwitchedOff(c)
	}
	iss := s.issuer(slug)
	m := map[string]any{
		"issuer":                                         iss,
		"authorization_endpoint":                         iss + "/oauth/authorize",
		"token_endpoint":                                 iss + "/oauth/token",
		"revocation_endpoint":                            iss + "/oauth/revoke",
		"response_types_supported":                       []string{"code"},
		"response_modes_supported":                       []string{"query"},
		"grant_types_supported":                          []string{"authorization_code", "refresh_token"},
		"code_challenge_methods_supported":               []string{"S256"},
		"token_endpoint_auth_methods_supported":          []string{"none"},
		"revocation_endpoint_auth_methods_supported":     []string{"none"},
		"scopes_supported":                               []string{oauth.Scope},
		"client_id_metadata_document_supported":          true,
		"authorization_response_iss_parameter_supported": true,
		"service_documentation":                          s.cfg.PublicURL + "/#oauth",
	}
	if s.cfg.OAuth.DynamicRegistration {
		m["registration_endpoint"] = iss + "/oauth/register"
	}
	c.Response().Header().Set("Cache-Control", discoveryCache)
	return c.JSON(http.StatusOK, m)
}

// clientError is a client that cannot be used; it is shown to the person,
// never sent to a redirect URI that was not verified.
type clientError struct{ msg string }

func (e *clientError) Error() string { return e.msg }

// resolveClient finds the client of a request: a Client ID Metadata
// Document (fetched SSRF-safe, cached as HTTP caching allows) or a dynamic
// registration of this tenant.
func (s *Server) resolveClient(ctx context.Context, tid, clientID string) (postgres.OAuthClient, error) {
	var cached postgres.OAuthClient
	var found bool
	if clientID == "" {
		return cached, &clientError{"The request names no client (client_id is missing)."}
	}
	if err := s.cfg.DB.InTenant(ctx, tid, func(tx *postgres.Tx) error {
		var err error
		cached, found, err = tx.GetOAuthClient(ctx, clientID)
		return err
	}); err != nil {
		return cached, err
	}
	if !oauth.IsMetadataURL(clientID) {
		if !found || cached.Kind != "dcr" {
			return cached, &clientError{"This client is not registered with this organisation (or its registration expired unused). Let the client register again."}
		}
		return cached, nil
	}
	if e := oauth.CheckClientIDURL(clientID); e != nil {
		return cached, &clientError{"The client's identifier is not valid: " + e.Description + "."}
	}
	now := time.Now()
	if found && cached.CacheUntil != nil && now.Before(*cached.CacheUntil) {
		return cached, nil
	}
	doc, hdr, status, err := s.fetchMetadata(ctx, clientID, cached.ETag, found)
	if err != nil {
		s.cfg.Logger.Info("fetching a client metadata document failed", "err", err)
		var mt *mediaTypeError
		if errors.As(err, &mt) {
			got := "no content type"
			if mt.got != "" {
				got = "content type " + strconv.Quote(clip(mt.got, 100))
			}
			return cached, &clientError{"The client's metadata document is not JSON: its address answered with " + got + ", and a metadata document must be served as application/json."}
		}
		if safehttp.IsForbidden(err) {
			return cached, &clientError{"The client's metadata document is at an address this server does not fetch from (only public https addresses are allowed)."}
		}
		if errors.Is(err, safehttp.ErrTooLarge) {
			return cached, &clientError{"The client's metadata document is larger than 5 KiB."}
		}
		return cached, &clientError{"The client's metadata document could not be fetched. Try again later."}
	}
	until := now.Add(oauth.CacheFor(hdr, now))
	if status == http.StatusNotModified && found {
		cached.CacheUntil = &until
		return cached, s.cfg.DB.InTenant(ctx, tid, func(tx *postgres.Tx) error {
			return tx.ExtendMetadataCache(ctx, cached.Ref, until)
		})
	}
	if status >= 300 && status < 400 && status != http.StatusNotModified {
		return cached, &clientError{"The client's metadata document could not be fetched: its address answered with a redirect (HTTP " + strconv.Itoa(status) + "), and metadata documents are never fetched through redirects. The client must serve its document at its client_id URL itself."}
	}
	if status != http.StatusOK {
		return cached, &clientError{"The client's metadata document could not be fetched (HTTP " + strconv.Itoa(status) + " " + http.StatusText(status) + ")."}
	}
	cl, e := oauth.ParseMetadataDocument(clientID, doc)
	if e != nil {
		return cached, &clientError{"The client's metadata document is not valid: " + e.Description + "."}
	}
	var ref string
	err = s.cfg.DB.InTenant(ctx, tid, func(tx *postgres.Tx) error {
		var err error
		ref, err = tx.SaveMetadataClient(ctx, cl, until, hdr.Get("ETag"))
		return err
	})
	if err != nil {
		return cached, err
	}
	return postgres.OAuthClient{Ref: ref, ClientID: cl.ClientID, Kind: "cimd", Name: cl.Name, ClientURI: cl.ClientURI, RedirectURIs: cl.RedirectURIs, CacheUntil: &until}, nil
}

// fetchMetadata fetches a Client ID Metadata Document. It never follows a
// redirect, whatever the configured client does: the client_id's host is
// what the consent page shows as the client's identity, so a redirect (an
// open redirect on a trusted host) would let anyone present a document of
// their own under that host. A 3xx comes back as its status. A 200 must be
// a JSON media type (application/json or application/*+json); anything
// else is a *mediaTypeError, and its body is not read.
func (s *Server) fetchMetadata(ctx context.Context, u, etag string, revalidate bool) ([]byte, http.Header, int, error) {
	configured := s.cfg.OAuth.MetadataClient
	if configured == nil {
		configured = safehttp.NewClient(safehttp.Options{Timeout: 5 * time.Second})
	}
	hc := *configured // a copy: the configured client keeps its own redirect policy
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, nil, 0, err
	}
	req.Header.Set("Accept", "application/json")
	if revalidate && etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, nil, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, resp.Header, resp.StatusCode, nil
	}
	if ct := resp.Header.Get("Content-Type"); !oauth.IsJSONMediaType(ct) {
		return nil, resp.Header, resp.StatusCode, &mediaTypeError{got: ct}
	}
	b, err := safehttp.ReadAll(resp.Body, oauth.MaxMetadataBytes)
	return b, resp.Header, resp.StatusCode, err
}

// mediaTypeError is a metadata document served with a content type that is
// not JSON.
type mediaTypeError struct{ got string }

func (e *mediaTypeError) Error() string {
	return "client metadata document has content type " + strconv.Quote(e.got)
}

// consentData is the consent page's data.
type consentData struct {
	ClientName, ClientHost, RedirectHost, ClientURI string
	Tenant, Scope, Duration                         string
	Fields                                          map[string]string
	AtLimit                                         bool
	Max                                             int
}

// oauthAuthorize is GET /t/:slug/oauth/authorize: check the request, have
// the person sign in as on the web pages, and ask for consent.
func (s *Server) oauthAuthorize(c echo.Context) error {
	return s.authorize(c, false)
}

// oauthDecide is POST /t/:slug/oauth/authorize: the consent form (behind
// the cross-origin check of every form). Approve issues a code; Deny
// returns access_denied.
func (s *Server) oauthDecide(c echo.Context) error {
	return s.authorize(c, true)
}

func (s *Server) authorize(c echo.Context, decided bool) error {
	ctx := c.Request().Context()
	slug, tid := c.Get(keySlug).(string), c.Get(keyTenantID).(string)
	noStore(c)
	// Bounded per address before anything else: a request may fetch a
	// client's metadata document and store it, and sends a signed-out
	// visitor on to a sign-in that stores a state.
	if d := s.limitBucket(c, "oauth:authorize:ip:"+c.RealIP(), s.cfg.Limits.Authorize); !d.Allowed {
		secs := max(1, int(math.Ceil(d.RetryAfter.Seconds())))
		c.Response().Header().Set("Retry-After", strconv.Itoa(secs))
		return s.page(c, http.StatusTooManyRequests, "Too many authorization requests",
			fmt.Sprintf("Too many authorization requests came from your address. Try again in %d second%s.", secs, plural(secs)))
	}
	var params url.Values
	if decided {
		fp, err := c.FormParams()
		if err != nil {
			return s.page(c, http.StatusBadRequest, "Authorization failed", "The consent form could not be read. Start again from your client.")
		}
		params = fp
	} else {
		params = c.QueryParams()
	}
	req, e := oauth.ParseAuthRequest(params)
	if e != nil {
		return s.requestRefused(c, e)
	}
	var on, mcpOn bool
	if err := s.cfg.DB.InTenant(ctx, tid, func(tx *postgres.Tx) error {
		var err error
		if on, err = tx.OAuthEnabled(ctx); err != nil {
			return err
		}
		mcpOn, err = tx.MCPEnabled(ctx)
		return err
	}); err != nil {
		return err
	}
	if !on {
		return s.page(c, http.StatusForbidden, "OAuth clients switched off", "This organisation has switched OAuth clients off, so no client can be connected. Ask a tenant admin to switch them on, or use a personal access token from the MCP access page.")
	}
	if !mcpOn {
		// Its token would be refused by every request while the client
		// believed it was connected.
		return s.page(c, http.StatusForbidden, "MCP switched off", "This organisation has switched MCP off, so no client can be connected. Ask a tenant admin to switch it on.")
	}
	// The person signs in before the client is looked at: resolving a
	// client may fetch its metadata document from any public address and
	// store it, which a signed-out visitor must not be able to cause.
	p := principal(c)
	if p == nil {
		if decided {
			return s.page(c, http.StatusForbidden, "Signed out", "Your session ended. Start again from your client.")
		}
		// Sign in exactly as on the web pages, then come back here.
		return c.Redirect(http.StatusSeeOther, "/t/"+slug+"/login?return_to="+url.QueryEscape(c.Request().URL.RequestURI()))
	}
	if p.Session.BreakGlass {
		return s.page(c, http.StatusForbidden, "Not allowed", "Break-glass sessions can never authorize a client. Sign in with your organisation's sign-in instead.")
	}
	if !p.Member {
		return s.page(c, http.StatusForbidden, "No access", "Your access to this organisation is not current. Sign in again to refresh it.")
	}
	cl, err := s.resolveClient(ctx, tid, req.ClientID)
	var ce *clientError
	if errors.As(err, &ce) {
		return s.page(c, http.StatusBadRequest, "Authorization failed", ce.msg)
	}
	if err != nil {
		return err
	}
	if e := req.CheckRedirect(cl.Client()); e != nil {
		return s.page(c, http.StatusBadRequest, "Authorization failed", "The client's redirect URI is not one it registered, so nobody is sent back to it: "+e.Description+".")
	}
	// Errors are shown here, not sent to the client's redirect URI, until
	// the person has seen the consent page for this client and answered
	// it. Anyone can register a redirect URI (dynamic registration, or a
	// metadata document of their own), so an error redirected before that
	// would make this origin an open redirector (RFC 9700 §4.11.2): a link
	// to .../oauth/authorize with a bad parameter would bounce anyone to
	// any address. The consent form's answer is a same-origin POST of a
	// signed-in person (the cross-origin check), so only it goes back.
	if e := req.Check(s.resource(slug)); e != nil {
		return s.requestRefused(c, e)
	}
	var active int
	if err := s.cfg.DB.InTenant(ctx, tid, func(tx *postgres.Tx) error {
		var err error
		active, err = tx.ActiveAccess(ctx, p.Session.UserID, time.Now())
		return err
	}); err != nil {
		return err
	}
	if !decided {
		fields := map[string]string{}
		for k, v := range req.Values() {
			fields[k] = v[0]
		}
		d := consentData{ClientName: cl.Client().DisplayName(), ClientHost: oauth.ClientHost(cl.ClientID), RedirectHost: oauth.RedirectHost(req.RedirectURI),
			ClientURI: cl.ClientURI, Tenant: slug, Scope: "read-only: repositories, reviews, findings, rules and code you can see",
			Duration: "an hour at a time, renewed by the client for up to 90 days, until you revoke it",
			Fields:   fields, AtLimit: active >= tokens.MaxActive, Max: tokens.MaxActive}
		// The form's redirect after Approve or Deny leaves this origin; CSP
		// form-action must allow that one target, and nothing else.
		c.Response().Header().Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self' "+formTarget(req.RedirectURI))
		return s.render(c, http.StatusOK, "consent.html", s.data(c, "Authorize "+d.ClientName, d))
	}
	// The person answered the consent page: from here on the answer goes
	// back to the client at its verified redirect URI, with state and iss.
	iss := s.issuer(slug)
	back := func(code, desc string) error {
		return c.Redirect(http.StatusSeeOther, oauth.RedirectURL(req.RedirectURI, url.Values{"error": {code}, "error_description": {desc}}, req.State, iss))
	}
	if c.FormValue("decision") != "approve" {
		return back(oauth.ErrAccessDenied, "the person denied access")
	}
	if active >= tokens.MaxActive {
		return back(oauth.ErrAccessDenied, "the person already has the most active tokens and connected clients allowed")
	}
	code := oauth.NewCode()
	now := time.Now()
	err = s.cfg.DB.InTenant(ctx, tid, func(tx *postgres.Tx) error {
		return tx.CreateOAuthCode(ctx, postgres.NewCode{Hash: oauth.Hash(code), UserID: p.Session.UserID, ClientRef: cl.Ref,
			RedirectURI: req.RedirectURI, Challenge: req.CodeChallenge, Resource: req.Resource, IdPID: p.Session.IdPID, IdPGroups: p.Session.IdPGroups}, now)
	})
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, oauth.RedirectURL(req.RedirectURI, url.Values{"code": {code}}, req.State, iss))
}

// requestRefused shows the person why the client's authorization request
// cannot go on, with the OAuth error code for the client's developer.
func (s *Server) requestRefused(c echo.Context, e *oauth.Error) error {
	return s.page(c, http.StatusBadRequest, "Authorization failed", "The client's request is not valid: "+e.Description+" (OAuth error "+e.Code+"). Nothing was sent back to the client; tell its developer, or start again from the client.")
}

// formTarget is the CSP source of a redirect URI: its origin, or its scheme
// for a native app's private-use scheme.
func formTarget(redirectURI string) string {
	u, err := url.Parse(redirectURI)
	if err != nil {
		return ""
	}
	if u.Host != "" && (u.Scheme == "http" || u.Scheme == "https") {
		return u.Scheme + "://" + u.Host
	}
	return u.Scheme + ":"
}

// knownClient refuses, as RFC 6749 §5.2's invalid_client, a client_id that
// this organisation never registered nor fetched the metadata document of
// (every client that was given a code or a refresh token has been), before
// any code or token is looked at.
func knownClient(ctx context.Context, tx *postgres.Tx, clientID string) (*oauth.Error, error) {
	ok, err := tx.OAuthClientKnown(ctx, clientID)
	if err != nil || ok {
		return nil, err
	}
	return oauth.Errorf(oauth.ErrInvalidClient, "unknown client_id: register the client or use a client ID metadata document, then authorize again"), nil
}

// tokenError writes an RFC 6749 §5.2 error.
func tokenError(c echo.Context, e *oauth.Error) error {
	status := http.StatusBadRequest
	if e.Code == oauth.ErrInvalidClient {
		status = http.StatusUnauthorized
		if c.Request().Header.Get("Authorization") != "" {
			// §5.2: a client that authenticated with a header is told
			// the scheme it used.
			c.Response().Header().Set("WWW-Authenticate", `Basic realm="oauth"`)
		}
	}
	if e.Code == oauth.ErrTemporarilyUnavailable {
		status = http.StatusServiceUnavailable
	}
	return c.JSON(status, map[string]string{"error": e.Code, "error_description": e.Description})
}

// clientIDOf reads a public client's client_id from the form or from HTTP
// Basic authentication with an empty secret (what OAuth libraries send
// when they auto-detect the authentication style).
func clientIDOf(c echo.Context) (string, *oauth.Error) {
	form := c.FormValue("client_id")
	h := c.Request().Header.Get("Authorization")
	if h == "" {
		return form, nil
	}
	scheme, val, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return "", oauth.Errorf(oauth.ErrInvalidClient, "only public clients are supported: send client_id without a secret")
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(val))
	if err != nil {
		return "", oauth.Errorf(oauth.ErrInvalidClient, "malformed Basic authentication")
	}
	user, secret, _ := strings.Cut(string(raw), ":")
	id, err := url.QueryUnescape(user)
	if err != nil || secret != "" || (form != "" && form != id) {
		return "", oauth.Errorf(oauth.ErrInvalidClient, "only public clients are supported: send client_id without a secret")
	}
	return id, nil
}

// oauthEndpointLimit applies a rate limit to a public OAuth endpoint.
func (s *Server) oauthEndpointLimit(c echo.Context, name string, rule ratelimit.Rule) bool {
	if s.cfg.Limiter == nil || rule.Limit <= 0 {
		return true
	}
	d, err := s.cfg.Limiter.Allow(c.Request().Context(), "oauth:"+name+":"+c.RealIP(), rule)
	if err != nil {
		s.cfg.Logger.Warn("rate limiter failed; allowing the request", "err", err)
		return true
	}
	if !d.Allowed {
		c.Response().Header().Set("Retry-After", retryAfter(d))
	}
	return d.Allowed
}

// tokenRequest is what the token and revocation endpoints check first: the
// per-address limit, the tenant of the path, the form and the client id.
// When done is true the answer has been chosen (err is what to return).
func (s *Server) tokenRequest(c echo.Context) (tid, clientID string, done bool, err error) {
	if !s.oauthEndpointLimit(c, "token", s.cfg.OAuth.TokenLimit) {
		return "", "", true, c.JSON(http.StatusTooManyRequests, map[string]string{"error": oauth.ErrTemporarilyUnavailable, "error_description": "too many requests; retry after the Retry-After seconds"})
	}
	_, tid, ok, err := s.tenantSlug(c)
	if err != nil {
		return "", "", true, tokenError(c, oauth.Errorf(oauth.ErrTemporarilyUnavailable, "try again shortly"))
	}
	if !ok {
		return "", "", true, tokenError(c, oauth.Errorf(oauth.ErrInvalidRequest, "there is no such organisation"))
	}
	if e := checkForm(c); e != nil {
		return "", "", true, tokenError(c, e)
	}
	clientID, e := clientIDOf(c)
	if e != nil {
		return "", "", true, tokenError(c, e)
	}
	return tid, clientID, false, nil
}

// oauthToken is POST /t/:slug/oauth/token (authorization_code and
// refresh_token grants). Answers are never cached.
func (s *Server) oauthToken(c echo.Context) error {
	h := c.Response().Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	tid, clientID, done, err := s.tokenRequest(c)
	if done {
		return err
	}
	if clientID == "" {
		return tokenError(c, oauth.Errorf(oauth.ErrInvalidRequest, "client_id is required"))
	}
	ctx := c.Request().Context()
	access, refresh := tokens.Generate(), oauth.NewRefreshToken()
	var in postgres.Issued
	var oe *oauth.Error
	now := time.Now()
	switch c.FormValue("grant_type") {
	case "authorization_code":
		code := c.FormValue("code")
		if !oauth.ValidCode(code) {
			return tokenError(c, oauth.Errorf(oauth.ErrInvalidGrant, "the authorization code is malformed"))
		}
		err = s.cfg.DB.InTenant(ctx, tid, func(tx *postgres.Tx) error {
			var err error
			if oe, err = knownClient(ctx, tx, clientID); oe != nil || err != nil {
				return err
			}
			in, oe, err = tx.ExchangeOAuthCode(ctx, postgres.CodeExchange{CodeHash: oauth.Hash(code), ClientID: clientID,
				RedirectURI: c.FormValue("redirect_uri"), Verifier: c.FormValue("code_verifier"), Resource: c.FormValue("resource"),
				Access: access, Refresh: refresh, Now: now})
			return err
		})
	case "refresh_token":
		rt := c.FormValue("refresh_token")
		if !oauth.ValidRefreshToken(rt) {
			return tokenError(c, oauth.Errorf(oauth.ErrInvalidGrant, "the refresh token is malformed"))
		}
		if _, se := oauth.ParseScope(c.FormValue("scope")); se != nil {
			return tokenError(c, se)
		}
		err = s.cfg.DB.InTenant(ctx, tid, func(tx *postgres.Tx) error {
			var err error
			if oe, err = knownClient(ctx, tx, clientID); oe != nil || err != nil {
				return err
			}
			in, oe, err = tx.RefreshOAuthToken(ctx, postgres.RefreshExchange{TokenHash: oauth.Hash(rt), ClientID: clientID,
				Resource: c.FormValue("resource"), Access: access, Refresh: refresh, Now: now})
			return err
		})
	case "":
		return tokenError(c, oauth.Errorf(oauth.ErrInvalidRequest, "grant_type is required"))
	default:
		return tokenError(c, oauth.Errorf(oauth.ErrUnsupportedGrantType, "supported grant types: authorization_code, refresh_token"))
	}
	if err != nil {
		s.cfg.Logger.Error("token endpoint failed", "err", err)
		return tokenError(c, oauth.Errorf(oauth.ErrTemporarilyUnavailable, "try again shortly"))
	}
	if oe != nil {
		s.cfg.Logger.Info("token request refused", "error", oe.Code)
		return tokenError(c, oe)
	}
	return c.JSON(http.StatusOK, map[string]any{
		"access_token":  access,
		"token_type":    "Bearer",
		"expires_in":    int(in.ExpiresIn.Seconds()),
		"refresh_token": refresh,
		"scope":         oauth.Scope,
	})
}

// checkForm requires a form body (RFC 6749 §3.2) without repeated
// parameters, and nothing in the query string: parameters belong in the
// body (§4.1.3), and the handlers' FormValue would read the query too.
func checkForm(c echo.Context) *oauth.Error {
	if c.Request().URL.RawQuery != "" {
		return oauth.Errorf(oauth.ErrInvalidRequest, "send parameters in the request body, not the URL")
	}
	ct := c.Request().Header.Get("Content-Type")
	if !strings.HasPrefix(strings.ToLower(ct), "application/x-www-form-urlencoded") {
		return oauth.Errorf(oauth.ErrInvalidRequest, "send parameters as application/x-www-form-urlencoded")
	}
	c.Request().Body = http.MaxBytesReader(c.Response(), c.Request().Body, 64<<10)
	fp, err := c.FormParams()
	if err != nil {
		return oauth.Errorf(oauth.ErrInvalidRequest, "the form could not be read")
	}
	for k, v := range fp {
		if len(v) > 1 {
			return oauth.Errorf(oauth.ErrInvalidRequest, "parameter "+k+" is repeated")
		}
	}
	return nil
}

// oauthRevoke is POST /t/:slug/oauth/revoke (RFC 7009): a refresh token or
// access token of the client revokes its grant. The answer is 200 whether
// or not the token was known.
func (s *Server) oauthRevoke(c echo.Context) error {
	c.Response().Header().Set("Cache-Control", "no-store")
	tid, clientID, done, err := s.tokenRequest(c)
	if done {
		return err
	}
	tok := c.FormValue("token")
	if tok == "" || clientID == "" {
		return tokenError(c, oauth.Errorf(oauth.ErrInvalidRequest, "token and client_id are required"))
	}
	if oauth.ValidRefreshToken(tok) || tokens.Valid(tok) {
		ctx := c.Request().Context()
		if err := s.cfg.DB.InTenant(ctx, tid, func(tx *postgres.Tx) error {
			return tx.RevokeByToken(ctx, oauth.Hash(tok), clientID)
		}); err != nil {
			s.cfg.Logger.Error("revocation failed", "err", err)
			return tokenError(c, oauth.Errorf(oauth.ErrTemporarilyUnavailable, "try again shortly"))
		}
	}
	return c.NoContent(http.StatusOK)
}

// oauthRegister is POST /t/:slug/oauth/register (RFC 7591), for clients
// that do not use Client ID Metadata Documents. Public clients only;
// rate-limited per address; a registration expires when unused.
func (s *Server) oauthRegister(c echo.Context) error {
	c.Response().Header().Set("Cache-Control", "no-store")
	regErr := func(status int, code, desc string) error {
		return c.JSON(status, map[string]string{"error": code, "error_description": desc})
	}
	if !s.oauthEndpointLimit(c, "register", s.cfg.OAuth.RegisterLimit) {
		return regErr(http.StatusTooManyRequests, "too_many_requests", "too many registrations from this address; retry later")
	}
	_, tid, ok, err := s.tenantSlug(c)
	if err != nil {
		return err
	}
	if !ok {
		return regErr(http.StatusNotFound, "not_found", "there is no such organisation")
	}
	body, err := safehttp.ReadAll(http.MaxBytesReader(c.Response(), c.Request().Body, 16<<10), 16<<10)
	if err != nil {
		return regErr(http.StatusBadRequest, oauth.ErrInvalidClientMetadata, "the registration must be a JSON object of at most 16 KiB")
	}
	var r oauth.Registration
	if err := json.Unmarshal(body, &r); err != nil {
		return regErr(http.StatusBadRequest, oauth.ErrInvalidClientMetadata, "the registration must be a JSON object")
	}
	cl, e := oauth.CheckRegistration(oauth.NewClientID(), r)
	if e != nil {
		return regErr(http.StatusBadRequest, e.Code, e.Description)
	}
	now := time.Now()
	ctx := c.Request().Context()
	if err := s.cfg.DB.InTenant(ctx, tid, func(tx *postgres.Tx) error {
		return tx.RegisterClient(ctx, cl, now)
	}); err != nil {
		return err
	}
	out := map[string]any{
		"client_id":                  cl.ClientID,
		"client_id_issued_at":        now.Unix(),
		"redirect_uris":              cl.RedirectURIs,
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": "none",
		"scope":                      oauth.Scope,
	}
	if cl.Name != "" {
		out["client_name"] = cl.Name
	}
	return c.JSON(http.StatusCreated, out)
}

// sseNotAllowed answers an MCP client's GET of /t/:slug/mcp (a stream
// request) like GET /mcp: the page of the same path is for browsers.
func (s *Server) sseNotAllowed(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		a := c.Request().Header.Get("Accept")
		if strings.Contains(a, "text/event-stream") && !strings.Contains(a, "text/html") {
			return methodNotAllowed(c)
		}
		return next(c)
	}
}

// grantRow is a grant as the pages list it.
type grantRow struct {
	ID, Name, User, State, Connected, Expires, LastUsed string
	Active                                              bool
}

func grantRows(list []postgres.Grant, now time.Time) []grantRow {
	out := make([]grantRow, 0, len(list))
	for _, g := range list {
		// Sanitized for client names stored before registration cleaned
		// them (a right-to-left override reads as another client's name).
		r := grantRow{ID: g.ID, Name: shape.Sanitize(g.ClientName), User: g.UserEmail, State: g.State(now),
			Connected: g.CreatedAt.UTC().Format("2006-01-02 15:04 UTC"), Expires: g.ExpiresAt.UTC().Format("2006-01-02"), LastUsed: "never"}
		if g.LastUsedAt != nil {
			r.LastUsed = g.LastUsedAt.UTC().Format("2006-01-02 15:04 UTC")
		}
		r.Active = r.State == "active"
		out = append(out, r)
	}
	return out
}

// mcpRevokeGrant is POST /t/:slug/mcp/grants/:id/revoke (own grants only).
func (s *Server) mcpRevokeGrant(c echo.Context) error {
	p := principal(c)
	tid := c.Get(keyTenantID).(string)
	err := s.cfg.DB.InTenant(c.Request().Context(), tid, func(tx *postgres.Tx) error {
		return tx.RevokeGrant(c.Request().Context(), c.Param("id"), p.Session.UserID, postgres.Actor{UserID: p.Session.UserID, Label: p.Session.Email})
	})
	if codelotse.ErrorCode(err) == codelotse.NotFound {
		return s.page(c, http.StatusNotFound, "Not found", "No such connected client of yours.")
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/t/"+c.Get(keySlug).(string)+"/mcp")
}

// adminRevokeGrant is POST /t/:slug/admin/grants/:id/revoke.
func (s *Server) adminRevokeGrant(c echo.Context) error {
	return s.adminDo(c, "grant-revoked", func(ctx context.Context, tx *postgres.Tx, actor postgres.Actor) error {
		return tx.RevokeGrant(ctx, c.Param("id"), "", actor)
	})
}

// adminSetOAuth is POST /t/:slug/admin/oauth: switch OAuth clients on or off
// for the tenant. Off: every OAuth access token answers 401 at once;
// personal access tokens keep working.
func (s *Server) adminSetOAuth(c echo.Context) error {
	on, bad := switchValue(c, "enabled", "on", "off")
	done := "oauth-off"
	if on {
		done = "oauth-on"
	}
	return s.adminDo(c, done, func(ctx context.Context, tx *postgres.Tx, actor postgres.Actor) error {
		if bad != nil {
			return bad
		}
		_, err := tx.SetOAuthEnabled(ctx, on, actor)
		return err
	})
}

func retryAfter(d ratelimit.Decision) string {
	secs := int(d.RetryAfter.Seconds() + 0.999)
	if secs < 1 {
		secs = 1
	}
	return strconv.Itoa(secs)
}
