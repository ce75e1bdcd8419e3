package oidc

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// Claims is what a sign-in tells CodeLotse about the user.
type Claims struct {
	Subject       string
	Email         string
	Name          string
	EmailVerified bool
	// Groups is never nil after a successful Finish: an empty slice means
	// the provider said the user is in no group, which removes every
	// group-based grant.
	Groups []string
}

// Finish completes a sign-in: it exchanges code (with the PKCE verifier)
// for tokens, verifies the ID token with go-oidc (issuer, audience = client
// id, expiry, signature) and that its nonce is the one sent, and returns the
// claims.
//
// Claims come from the ID token. When it lacks the groups claim or the email,
// and the provider has a userinfo endpoint, they are read from there with
// the access token: OpenID Connect Core §5.4 lets providers return
// scope-requested claims only at userinfo when an access token is issued,
// and several do.
//
// A missing groups claim is an error (a *GroupsClaimError wrapping
// ErrNoGroupsClaim) rather than "no groups", because it almost always means
// the provider is not configured to send it, and treating that as "in no
// group" would quietly strip every member of their access. The claim may be
// an array of strings, a single string (one group) or null (no groups).
func (c *Client) Finish(ctx context.Context, p Provider, code, verifier, nonce string) (Claims, error) {
	if err := p.validate(c.httpOK); err != nil {
		return Claims{}, err
	}
	if code == "" || nonce == "" {
		return Claims{}, fail(ErrConfig, "code and nonce must not be empty")
	}
	if err := checkVerifier(verifier); err != nil {
		return Claims{}, err
	}
	d, err := c.discover(ctx, p.Issuer)
	if err != nil {
		return Claims{}, err
	}

	// secrets grows as values appear, and every error detail below is
	// redacted with all of them.
	secrets := []string{code, verifier, p.ClientSecret}
	hctx := gooidc.ClientContext(ctx, c.http)
	tok, err := d.config(p).Exchange(hctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		return Claims{}, exchangeError(err, secrets)
	}
	secrets = append(secrets, tok.AccessToken, tok.RefreshToken)
	rawIDToken, _ := tok.Extra("id_token").(string)
	if rawIDToken == "" {
		return Claims{}, fail(ErrIDToken, "the token response has no id_token (is the openid scope granted?)")
	}
	secrets = append(secrets, rawIDToken)

	idToken, err := d.provider.Verifier(&gooidc.Config{ClientID: p.ClientID, Now: c.now}).Verify(hctx, rawIDToken)
	if err != nil {
		return Claims{}, fail(ErrIDToken, err.Error(), secrets...)
	}
	// go-oidc leaves the nonce to the caller. Constant time, although the
	// nonce is not secret once sent, costs nothing.
	if subtle.ConstantTimeCompare([]byte(idToken.Nonce), []byte(nonce)) != 1 {
		return Claims{}, fail(ErrIDToken, "the ID token's nonce is not the one this sign-in sent")
	}
	if idToken.Subject == "" {
		return Claims{}, fail(ErrIDToken, "the ID token has no subject")
	}
	var raw map[string]json.RawMessage
	if err := idToken.Claims(&raw); err != nil {
		return Claims{}, fail(ErrIDToken, err.Error(), secrets...)
	}
	if err := checkAuthorizedParty(raw, idToken.Audience, p.ClientID); err != nil {
		return Claims{}, err
	}

	claims := Claims{Subject: idToken.Subject}
	hasEmail := readProfile(raw, &claims)
	groupsRaw, hasGroups := lookupClaim(raw, p.groupsClaim())

	if (!hasGroups || !hasEmail) && d.provider.UserInfoEndpoint() != "" {
		info, err := userinfo(hctx, d.provider, idToken, tok, secrets)
		switch {
		case err != nil && !hasGroups:
			return Claims{}, &GroupsClaimError{Claim: p.groupsClaim(), Problem: ErrNoGroupsClaim,
				Detail: "not in the ID token, and the userinfo endpoint failed: " + redact(err.Error(), secrets...)}
		case err != nil:
			return Claims{}, err
		}
		if !hasEmail {
			fromInfo := Claims{}
			readProfile(info, &fromInfo)
			claims.Email, claims.EmailVerified = fromInfo.Email, fromInfo.EmailVerified
			if claims.Name == "" {
				claims.Name = fromInfo.Name
			}
		}
		if !hasGroups {
			groupsRaw, hasGroups = lookupClaim(info, p.groupsClaim())
		}
	}
	if !hasGroups {
		return Claims{}, &GroupsClaimError{Claim: p.groupsClaim(), Problem: ErrNoGroupsClaim}
	}
	groups, ok := parseGroups(groupsRaw)
	if !ok {
		return Claims{}, &GroupsClaimError{Claim: p.groupsClaim(), Problem: ErrInvalidGroupsClaim}
	}
	claims.Groups = groups
	return claims, nil
}

// exchangeError keeps what helps an administrator (the provider's error code
// and description, the HTTP status) and drops the response body, which
// oauth2's own message includes whole.
func exchangeError(err error, secrets []string) error {
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) {
		return fail(ErrExchange, err.Error(), secrets...)
	}
	detail := "token endpoint answered"
	if re.Response != nil {
		detail += " " + re.Response.Status
	}
	if re.ErrorCode != "" {
		detail += ": " + re.ErrorCode
	}
	if re.ErrorDescription != "" {
		detail += ": " + re.ErrorDescription
	}
	return fail(ErrExchange, detail, secrets...)
}

// checkAuthorizedParty applies OpenID Connect Core §3.1.3.7 (4, 5), which
// go-oidc leaves out: a token for several audiences must say which party it
// was issued to, and that party must be us. Otherwise a token that another
// client obtained, naming us only as an extra audience, would sign a user in.
func checkAuthorizedParty(raw map[string]json.RawMessage, audience []string, clientID string) error {
	var azp string
	if v, ok := raw["azp"]; ok {
		if err := json.Unmarshal(v, &azp); err != nil {
			return fail(ErrIDToken, "the azp claim is not a string")
		}
	}
	switch {
	case azp != "" && azp != clientID:
		return fail(ErrIDToken, "the ID token was issued to another client ("+azp+")")
	case azp == "" && len(audience) > 1:
		return fail(ErrIDToken, "the ID token has several audiences and no azp claim")
	}
	return nil
}

// userinfo asks the provider's userinfo endpoint for the user's claims. The
// access token is checked against the ID token's at_hash first, when there is
// one, so that a token swapped in transit is not used; the answer must be
// about the ID token's subject (Core §5.3.2), or it is someone else's claims.
func userinfo(ctx context.Context, provider *gooidc.Provider, idToken *gooidc.IDToken, tok *oauth2.Token, secrets []string) (map[string]json.RawMessage, error) {
	if tok.AccessToken == "" {
		return nil, fail(ErrProvider, "no access token to ask the userinfo endpoint with")
	}
	if idToken.AccessTokenHash != "" {
		if err := idToken.VerifyAccessToken(tok.AccessToken); err != nil {
			return nil, fail(ErrIDToken, err.Error(), secrets...)
		}
	}
	info, err := provider.UserInfo(ctx, oauth2.StaticTokenSource(tok))
	if err != nil {
		return nil, fail(ErrProvider, "userinfo: "+err.Error(), secrets...)
	}
	if info.Subject != idToken.Subject {
		return nil, fail(ErrIDToken, "the userinfo endpoint answered for another subject")
	}
	var raw map[string]json.RawMessage
	if err := info.Claims(&raw); err != nil {
		return nil, fail(ErrProvider, "userinfo: "+err.Error(), secrets...)
	}
	return raw, nil
}

// readProfile fills email, email_verified and a display name from raw claims
// and reports whether an email was there. Malformed optional claims are
// ignored rather than failing the sign-in: none of them grants anything.
func readProfile(raw map[string]json.RawMessage, c *Claims) (hasEmail bool) {
	var email, name, given, family, preferred string
	unmarshalString(raw, "email", &email)
	unmarshalString(raw, "name", &name)
	unmarshalString(raw, "given_name", &given)
	unmarshalString(raw, "family_name", &family)
	unmarshalString(raw, "preferred_username", &preferred)
	c.Email = email
	c.EmailVerified = emailVerified(raw["email_verified"])
	// Not every provider sends "name"; the parts, or the user name, still
	// beat an empty label on the pages.
	switch {
	case name != "":
		c.Name = name
	case strings.TrimSpace(given+" "+family) != "":
		c.Name = strings.TrimSpace(given + " " + family)
	default:
		c.Name = preferred
	}
	return email != ""
}

func unmarshalString(raw map[string]json.RawMessage, key string, dst *string) {
	if v, ok := raw[key]; ok {
		_ = json.Unmarshal(v, dst)
	}
}

// emailVerified accepts a boolean or, as AWS Cognito and some others send it,
// the string "true".
func emailVerified(v json.RawMessage) bool {
	var b bool
	if json.Unmarshal(v, &b) == nil {
		return b
	}
	var s string
	return json.Unmarshal(v, &s) == nil && strings.EqualFold(s, "true")
}

// lookupClaim finds name as a top-level claim, or else as a dotted path into
// nested objects, as Keycloak's "realm_access.roles". The top-level lookup
// comes first because namespaced claims such as Auth0's
// "https://example.com/groups" contain dots themselves.
func lookupClaim(raw map[string]json.RawMessage, name string) (json.RawMessage, bool) {
	if v, ok := raw[name]; ok {
		return v, true
	}
	if !strings.Contains(name, ".") {
		return nil, false
	}
	parts := strings.Split(name, ".")
	cur := raw
	for i, part := range parts {
		v, ok := cur[part]
		if !ok {
			return nil, false
		}
		if i == len(parts)-1 {
			return v, true
		}
		// A fresh map each step: unmarshalling into cur itself would add
		// the nested keys to the caller's claims.
		var next map[string]json.RawMessage
		if err := json.Unmarshal(v, &next); err != nil {
			return nil, false
		}
		cur = next
	}
	return nil, false
}

// parseGroups reads the groups claim: an array of strings, a single string
// (one group; providers with "single value" mappers send that for a user in
// one group), or null (no groups). An empty string is no group too. Empty
// names and duplicates are dropped, order is kept. Anything else is
// malformed, and is reported instead of guessed at.
func parseGroups(v json.RawMessage) ([]string, bool) {
	v = bytes.TrimSpace(v)
	if bytes.Equal(v, []byte("null")) {
		return []string{}, true
	}
	var one string
	if err := json.Unmarshal(v, &one); err == nil {
		if one == "" {
			return []string{}, true
		}
		return []string{one}, true
	}
	var list []string
	if len(v) == 0 || v[0] != '[' || json.Unmarshal(v, &list) != nil {
		return nil, false
	}
	groups := make([]string, 0, len(list))
	for _, g := range list {
		if g != "" && !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}
	return groups, true
}
