package oidcop

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"errors"
	"slices"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// Lifetimes close to what real providers use, so a client that holds a code
// or token too long fails here as it would there.
const (
	authRequestLifetime = 10 * time.Minute
	codeLifetime        = time.Minute
	accessTokenLifetime = 5 * time.Minute
	idTokenLifetime     = time.Hour
)

// storage is the provider's whole state, in memory, behind one mutex. It
// implements op.Storage (plus op.CanSetUserinfoFromRequest, through which op
// asks for the ID token's claims) and nothing optional: no refresh tokens,
// no client credentials, no JWT profile, no device flow.
type storage struct {
	mu sync.Mutex

	client       client
	users        map[string]*User
	groupsClaim  string
	omitGroups   bool
	userinfoOnly bool
	audience     []string // nil: as op issues them (the client id)
	signInAs     string   // consumed by the next authorization request

	authRequests map[string]*authRequest
	codes        map[string]string // code → auth request id
	tokens       map[string]*accessToken

	key *rsa.PrivateKey
	kid string

	requests map[string]int // path → count, for tests of client-side caching
}

var (
	_ op.Storage                   = (*storage)(nil)
	_ op.CanSetUserinfoFromRequest = (*storage)(nil)
)

type accessToken struct {
	subject  string
	clientID string
	scopes   []string
	expires  time.Time
}

// notFound lets op answer "not found" conditions as client errors rather
// than as server errors.
type notFound string

func (e notFound) Error() string { return string(e) }
func (notFound) IsNotFound()     {}

func randomID() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// CreateAuthRequest stores a validated authorization request. It insists on
// PKCE with S256, which op alone would leave optional for a confidential
// client, so that a client which forgets PKCE fails here first. A pending
// SignInAs completes the request at once.
func (s *storage) CreateAuthRequest(_ context.Context, req *oidc.AuthRequest, userID string) (op.AuthRequest, error) {
	if req.CodeChallenge == "" || req.CodeChallengeMethod != oidc.CodeChallengeMethodS256 {
		return nil, oidc.ErrInvalidRequest().WithDescription("this provider requires PKCE with code_challenge_method=S256")
	}
	if req.Nonce == "" {
		return nil, oidc.ErrInvalidRequest().WithDescription("this provider requires a nonce")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ar := &authRequest{
		id:          randomID(),
		created:     time.Now(),
		clientID:    req.ClientID,
		redirectURI: req.RedirectURI,
		state:       req.State,
		nonce:       req.Nonce,
		scopes:      slices.Clone(req.Scopes),
		respType:    req.ResponseType,
		respMode:    req.ResponseMode,
		challenge:   &oidc.CodeChallenge{Challenge: req.CodeChallenge, Method: req.CodeChallengeMethod},
	}
	if s.signInAs != "" {
		ar.complete(s.signInAs)
		s.signInAs = ""
	}
	s.authRequests[ar.id] = ar
	// op gets copies, so a sign-in completed on the login page while op
	// reads an earlier answer is not a data race.
	c := *ar
	return &c, nil
}

func (s *storage) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ar, ok := s.authRequests[id]
	if !ok || time.Since(ar.created) > authRequestLifetime {
		return nil, notFound("auth request not found or expired")
	}
	c := *ar
	return &c, nil
}

// AuthRequestByCode redeems a code: it works once, like at real providers,
// even when the exchange then fails (say, on a wrong PKCE verifier).
func (s *storage) AuthRequestByCode(_ context.Context, code string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.codes[code]
	delete(s.codes, code)
	ar := s.authRequests[id]
	delete(s.authRequests, id)
	if !ok || ar == nil || time.Since(ar.codeIssued) > codeLifetime {
		return nil, notFound("code invalid, used or expired")
	}
	return ar, nil
}

func (s *storage) SaveAuthCode(_ context.Context, id, code string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ar, ok := s.authRequests[id]
	if !ok {
		return notFound("auth request not found")
	}
	ar.codeIssued = time.Now()
	s.codes[code] = id
	return nil
}

func (s *storage) DeleteAuthRequest(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.authRequests, id)
	for code, rid := range s.codes {
		if rid == id {
			delete(s.codes, code)
		}
	}
	return nil
}

func (s *storage) CreateAccessToken(_ context.Context, req op.TokenRequest) (string, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var clientID string
	if ar, ok := req.(*authRequest); ok {
		clientID = ar.clientID
	}
	id := randomID()
	exp := time.Now().Add(accessTokenLifetime)
	s.tokens[id] = &accessToken{subject: req.GetSubject(), clientID: clientID, scopes: slices.Clone(req.GetScopes()), expires: exp}
	return id, exp, nil
}

// Refresh tokens are not offered: the client registration does not list the
// refresh_token grant, so op never asks for one.
func (s *storage) CreateAccessAndRefreshTokens(context.Context, op.TokenRequest, string) (string, string, time.Time, error) {
	return "", "", time.Time{}, oidc.ErrUnsupportedGrantType()
}

func (s *storage) TokenRequestByRefreshToken(context.Context, string) (op.RefreshTokenRequest, error) {
	return nil, op.ErrInvalidRefreshToken
}

func (s *storage) GetRefreshTokenInfo(context.Context, string, string) (string, string, error) {
	return "", "", op.ErrInvalidRefreshToken
}

func (s *storage) TerminateSession(_ context.Context, userID, clientID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, t := range s.tokens {
		if t.subject == userID && t.clientID == clientID {
			delete(s.tokens, id)
		}
	}
	return nil
}

func (s *storage) RevokeToken(_ context.Context, tokenID, _ string, clientID string) *oidc.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.tokens[tokenID]; ok {
		if t.clientID != clientID {
			return oidc.ErrInvalidClient().WithDescription("token was not issued to this client")
		}
		delete(s.tokens, tokenID)
	}
	return nil
}

type signingKey struct {
	key *rsa.PrivateKey
	kid string
}

func (k signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k signingKey) Key() any                                    { return k.key }
func (k signingKey) ID() string                                  { return k.kid }

type publicKey struct{ signingKey }

func (k publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k publicKey) Use() string                        { return "sig" }
func (k publicKey) Key() any                           { return &k.key.PublicKey }

func (s *storage) SigningKey(context.Context) (op.SigningKey, error) {
	return signingKey{key: s.key, kid: s.kid}, nil
}

func (s *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (s *storage) KeySet(context.Context) ([]op.Key, error) {
	return []op.Key{publicKey{signingKey{key: s.key, kid: s.kid}}}, nil
}

// GetClientByClientID returns a copy of the one registered client, so a test
// may change its redirect URIs while op holds an earlier answer.
func (s *storage) GetClientByClientID(_ context.Context, clientID string) (op.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if clientID != s.client.id {
		return nil, notFound("client not found")
	}
	c := s.client
	c.redirectURIs = slices.Clone(c.redirectURIs)
	return &c, nil
}

func (s *storage) AuthorizeClientIDSecret(_ context.Context, clientID, secret string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if clientID != s.client.id || secret != s.client.secret {
		return errors.New("invalid client id or secret")
	}
	return nil
}

// SetUserinfoFromScopes is deprecated in op in favour of
// SetUserinfoFromRequest, and must be empty.
func (s *storage) SetUserinfoFromScopes(context.Context, *oidc.UserInfo, string, string, []string) error {
	return nil
}

// SetUserinfoFromRequest fills the ID token's claims.
func (s *storage) SetUserinfoFromRequest(_ context.Context, info *oidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.userinfo(info, req.GetSubject(), scopes, true)
}

// SetUserinfoFromToken answers the userinfo endpoint.
func (s *storage) SetUserinfoFromToken(_ context.Context, info *oidc.UserInfo, tokenID, subject, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tokens[tokenID]
	if !ok || t.subject != subject || time.Now().After(t.expires) {
		return notFound("access token invalid or expired")
	}
	return s.userinfo(info, subject, t.scopes, false)
}

func (s *storage) SetIntrospectionFromToken(_ context.Context, resp *oidc.IntrospectionResponse, tokenID, subject, clientID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tokens[tokenID]
	if !ok || t.subject != subject || t.clientID != clientID || time.Now().After(t.expires) {
		return notFound("access token invalid or expired")
	}
	info := new(oidc.UserInfo)
	if err := s.userinfo(info, subject, t.scopes, false); err != nil {
		return err
	}
	resp.SetUserInfo(info)
	resp.Scope = t.scopes
	resp.ClientID = t.clientID
	resp.Expiration = oidc.FromTime(t.expires)
	return nil
}

// userinfo sets the claims the scopes ask for. The groups claim is sent
// whatever the scopes, as most providers configured with a groups mapper do,
// except in the ID token when claims are configured for userinfo only.
// Callers hold s.mu.
func (s *storage) userinfo(info *oidc.UserInfo, subject string, scopes []string, idToken bool) error {
	u, ok := s.users[subject]
	if !ok {
		return notFound("user not found")
	}
	info.Subject = u.Subject
	for _, scope := range scopes {
		switch scope {
		case oidc.ScopeEmail:
			info.Email = u.Email
			info.EmailVerified = oidc.Bool(u.EmailVerified)
		case oidc.ScopeProfile:
			info.Name = u.Name
		}
	}
	if s.omitGroups || (idToken && s.userinfoOnly) {
		return nil
	}
	var groups any = slices.Clone(u.Groups)
	if u.Groups == nil {
		groups = []string{}
	}
	if u.GroupsValue != nil {
		groups = u.GroupsValue
	}
	info.AppendClaims(s.groupsClaim, groups)
	return nil
}

// GetPrivateClaimsFromScopes is for JWT access tokens, which the client does
// not use.
func (s *storage) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}

// GetKeyByIDAndClientID and ValidateJWTProfileScopes serve the JWT profile
// grant, which this provider does not offer.
func (s *storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, notFound("no client keys: the JWT profile grant is not supported")
}

func (s *storage) ValidateJWTProfileScopes(context.Context, string, []string) ([]string, error) {
	return nil, oidc.ErrUnsupportedGrantType()
}

func (s *storage) Health(context.Context) error { return nil }

// completeAuthRequest signs the user in for a pending request, as the login
// page's button does.
func (s *storage) completeAuthRequest(id, subject string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ar, ok := s.authRequests[id]
	if !ok {
		return notFound("auth request not found or expired")
	}
	if _, ok := s.users[subject]; !ok {
		return notFound("no such user")
	}
	ar.complete(subject)
	return nil
}

func (s *storage) isDone(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ar, ok := s.authRequests[id]
	return ok && ar.done
}
