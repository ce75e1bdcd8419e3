package oauth

import (
	"net/url"
)

// AuthRequest is an authorization request (RFC 6749 §4.1.1 with PKCE and
// RFC 8707's resource).
type AuthRequest struct {
	ResponseType        string
	ClientID            string
	RedirectURI         string
	State               string
	Scope               string
	CodeChallenge       string
	CodeChallengeMethod string
	Resource            string
}

// ParseAuthRequest reads an authorization request from query or form
// values. A parameter given twice is refused (RFC 6749 §3.1).
func ParseAuthRequest(v url.Values) (AuthRequest, *Error) {
	for _, k := range []string{"response_type", "client_id", "redirect_uri", "state", "scope", "code_challenge", "code_challenge_method", "resource"} {
		if len(v[k]) > 1 {
			return AuthRequest{}, Errorf(ErrInvalidRequest, "parameter "+k+" is repeated")
		}
	}
	return AuthRequest{
		ResponseType: v.Get("response_type"), ClientID: v.Get("client_id"), RedirectURI: v.Get("redirect_uri"),
		State: v.Get("state"), Scope: v.Get("scope"), CodeChallenge: v.Get("code_challenge"),
		CodeChallengeMethod: v.Get("code_challenge_method"), Resource: v.Get("resource"),
	}, nil
}

// Values is the request as form values (for the consent form).
func (r AuthRequest) Values() url.Values {
	v := url.Values{}
	set := func(k, val string) {
		if val != "" {
			v.Set(k, val)
		}
	}
	set("response_type", r.ResponseType)
	set("client_id", r.ClientID)
	set("redirect_uri", r.RedirectURI)
	set("state", r.State)
	set("scope", r.Scope)
	set("code_challenge", r.CodeChallenge)
	set("code_challenge_method", r.CodeChallengeMethod)
	set("resource", r.Resource)
	return v
}

// CheckRedirect decides whether errors may be sent back to the client: only
// when the redirect URI is one the client registered. Otherwise the error is
// shown to the person and nobody is redirected (RFC 6749 §4.1.2.1), so the
// endpoint cannot be used as an open redirector.
func (r AuthRequest) CheckRedirect(c Client) *Error {
	if r.RedirectURI == "" {
		return Errorf(ErrInvalidRequest, "redirect_uri is required")
	}
	if !MatchRedirectURI(c.RedirectURIs, r.RedirectURI) {
		return Errorf(ErrInvalidRequest, "redirect_uri is not one the client registered")
	}
	return nil
}

// Check validates the rest of the request once the redirect URI is known to
// be the client's: response type code, PKCE S256 only (plain is refused),
// the resource equal to the endpoint's (RFC 8707), and the scope. Errors
// are shown to the person, never redirected: the caller sends only the
// answer to its consent page back to the client.
func (r AuthRequest) Check(resource string) *Error {
	switch {
	case r.ResponseType != "code":
		return Errorf(ErrUnsupportedResponseType, "only response_type=code is supported")
	case r.CodeChallenge == "":
		return Errorf(ErrInvalidRequest, "code_challenge is required (PKCE with S256)")
	case r.CodeChallengeMethod != "S256":
		return Errorf(ErrInvalidRequest, "code_challenge_method must be S256; plain is not supported")
	case !ValidChallenge(r.CodeChallenge):
		return Errorf(ErrInvalidRequest, "code_challenge must be the base64url SHA-256 of the verifier")
	case r.Resource == "":
		return Errorf(ErrInvalidTarget, "resource is required (RFC 8707): the MCP endpoint URL")
	case r.Resource != resource:
		return Errorf(ErrInvalidTarget, "resource must be this authorization server's MCP endpoint, "+resource)
	case len(r.State) > 1000:
		return Errorf(ErrInvalidRequest, "state is too long")
	}
	if _, e := ParseScope(r.Scope); e != nil {
		return e
	}
	return nil
}

// RedirectURL builds the client's redirect with the given parameters plus
// state and iss (RFC 9207), keeping the redirect URI's own query.
func RedirectURL(redirectURI string, params url.Values, state, issuer string) string {
	u, err := url.Parse(redirectURI)
	if err != nil {
		return redirectURI
	}
	q := u.Query()
	for k, vs := range params {
		for _, v := range vs {
			q.Add(k, v)
		}
	}
	if state != "" {
		q.Set("state", state)
	}
	q.Set("iss", issuer)
	u.RawQuery = q.Encode()
	return u.String()
}
