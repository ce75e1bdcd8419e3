package oidcop

import (
	"net/url"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// client is the one registered relying party: confidential (a web
// application with a secret), authorization code flow only.
type client struct {
	id           string
	secret       string
	redirectURIs []string
	store        *storage
}

var _ op.Client = (*client)(nil)

func (c *client) GetID() string                       { return c.id }
func (c *client) RedirectURIs() []string              { return c.redirectURIs }
func (c *client) PostLogoutRedirectURIs() []string    { return nil }
func (c *client) ApplicationType() op.ApplicationType { return op.ApplicationTypeWeb }
func (c *client) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodBasic }
func (c *client) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c *client) GrantTypes() []oidc.GrantType        { return []oidc.GrantType{oidc.GrantTypeCode} }
func (c *client) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeBearer }
func (c *client) IDTokenLifetime() time.Duration      { return idTokenLifetime }
func (c *client) ClockSkew() time.Duration            { return 0 }
func (c *client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(scopes []string) []string { return scopes }
}
func (c *client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(scopes []string) []string { return scopes }
}

// DevMode stays off: op then accepts the http redirect URIs of loopback test
// servers for this confidential client anyway (code flow), and refuses
// anything not registered, as a real provider would.
func (c *client) DevMode() bool { return false }

// IsScopeAllowed lets "groups" through; op drops unknown scopes otherwise.
func (c *client) IsScopeAllowed(scope string) bool { return scope == "groups" }

// IDTokenUserinfoClaimsAssertion puts email and profile claims into the ID
// token, as most providers do, unless the test asked for them at userinfo
// only (the letter of OpenID Connect Core §5.4).
func (c *client) IDTokenUserinfoClaimsAssertion() bool {
	c.store.mu.Lock()
	defer c.store.mu.Unlock()
	return !c.store.userinfoOnly
}

// LoginURL is where op sends the browser after storing an authorization
// request: straight to the callback when SignInAs already completed it, else
// to the "sign in as" page.
func (c *client) LoginURL(id string) string {
	if c.store.isDone(id) {
		return callbackPath + "?id=" + url.QueryEscape(id)
	}
	return loginPath + "?id=" + url.QueryEscape(id)
}

// authRequest is a stored authorization request.
type authRequest struct {
	id          string
	created     time.Time
	clientID    string
	redirectURI string
	state       string
	nonce       string
	scopes      []string
	respType    oidc.ResponseType
	respMode    oidc.ResponseMode
	challenge   *oidc.CodeChallenge

	done       bool
	subject    string
	authTime   time.Time
	codeIssued time.Time
}

var _ op.AuthRequest = (*authRequest)(nil)

func (a *authRequest) complete(subject string) {
	a.done, a.subject, a.authTime = true, subject, time.Now()
}

func (a *authRequest) GetID() string                         { return a.id }
func (a *authRequest) GetACR() string                        { return "" }
func (a *authRequest) GetAudience() []string                 { return []string{a.clientID} }
func (a *authRequest) GetAuthTime() time.Time                { return a.authTime }
func (a *authRequest) GetClientID() string                   { return a.clientID }
func (a *authRequest) GetCodeChallenge() *oidc.CodeChallenge { return a.challenge }
func (a *authRequest) GetNonce() string                      { return a.nonce }
func (a *authRequest) GetRedirectURI() string                { return a.redirectURI }
func (a *authRequest) GetResponseType() oidc.ResponseType    { return a.respType }
func (a *authRequest) GetResponseMode() oidc.ResponseMode    { return a.respMode }
func (a *authRequest) GetScopes() []string                   { return a.scopes }
func (a *authRequest) GetState() string                      { return a.state }
func (a *authRequest) GetSubject() string                    { return a.subject }
func (a *authRequest) Done() bool                            { return a.done }

// GetAMR says how the user authenticated: "sign in as" stands in for a
// password-less login, hence "user" (presence) rather than "pwd".
func (a *authRequest) GetAMR() []string {
	if a.done {
		return []string{"user"}
	}
	return nil
}
