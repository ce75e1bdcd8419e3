package oauth

import (
	"encoding/json"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/codelotse/codelotse/pkg/shape"
)

// MaxMetadataBytes caps a client ID metadata document (the draft suggests
// 5 KiB; a document is a few hundred bytes).
const MaxMetadataBytes = 5 << 10

// Client is a client as the authorization server knows it, from a Client ID
// Metadata Document or a dynamic registration.
type Client struct {
	ClientID     string   `json:"client_id"`
	Name         string   `json:"client_name,omitempty"`
	RedirectURIs []string `json:"redirect_uris"`
	ClientURI    string   `json:"client_uri,omitempty"`
}

// DisplayName is the name shown on the consent page: the metadata's name,
// else the client_id's host (CIMD) or "Unnamed client".
//
// The name is cleaned again here: a client registered before names were
// cleaned of invisible and bidirectional characters keeps its stored name.
func (c Client) DisplayName() string {
	if n := cleanName(c.Name); n != "" {
		return n
	}
	if h := ClientHost(c.ClientID); h != "" {
		return h
	}
	return "Unnamed client"
}

// ClientHost is the host of a URL client_id, or "" for registered ids.
func ClientHost(clientID string) string {
	if u, err := url.Parse(clientID); err == nil && u.Scheme == "https" {
		return u.Hostname()
	}
	return ""
}

// IsMetadataURL reports whether a client_id names a Client ID Metadata
// Document (an https URL) rather than a registered client.
func IsMetadataURL(clientID string) bool { return strings.HasPrefix(clientID, "https://") }

// CheckClientIDURL validates a CIMD client_id: an https URL with a path,
// no fragment, no credentials, no dot segments (the draft's rules).
func CheckClientIDURL(raw string) *Error {
	bad := func(why string) *Error { return Errorf(ErrInvalidClient, "client_id URL "+why) }
	if len(raw) > 2000 {
		return bad("is too long")
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return bad("is not a URL")
	case u.Scheme != "https":
		return bad("must use https")
	case u.User != nil:
		return bad("must not contain credentials")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return bad("must not contain a fragment")
	case u.Hostname() == "":
		return bad("has no host")
	case u.Path == "" || u.Path == "/":
		return bad("must have a path")
	}
	for _, seg := range strings.Split(u.Path, "/") {
		if seg == "." || seg == ".." {
			return bad("must not contain dot segments")
		}
	}
	return nil
}

// ParseMetadataDocument validates a Client ID Metadata Document fetched
// from clientID: JSON, its client_id equal to the URL it came from, at
// least one acceptable redirect URI, a public client (no secret, token
// endpoint auth "none"), and the authorization_code grant if grants are
// listed.
func ParseMetadataDocument(clientID string, body []byte) (Client, *Error) {
	var doc struct {
		ClientID                string   `json:"client_id"`
		ClientName              string   `json:"client_name"`
		ClientURI               string   `json:"client_uri"`
		RedirectURIs            []string `json:"redirect_uris"`
		GrantTypes              []string `json:"grant_types"`
		ResponseTypes           []string `json:"response_types"`
		TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
		ClientSecret            *string  `json:"client_secret"`
	}
	bad := func(why string) (Client, *Error) {
		return Client{}, Errorf(ErrInvalidClient, "client metadata document "+why)
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return bad("is not a JSON object")
	}
	if doc.ClientID != clientID {
		return bad("names a different client_id than its URL")
	}
	if doc.ClientSecret != nil {
		return bad("must not contain a client_secret")
	}
	if m := doc.TokenEndpointAuthMethod; m != "" && m != "none" {
		return bad("asks for token endpoint authentication " + strconv.Quote(m) + "; only public clients (\"none\") are supported")
	}
	if len(doc.GrantTypes) > 0 && !contains(doc.GrantTypes, "authorization_code") {
		return bad("does not list the authorization_code grant")
	}
	if len(doc.ResponseTypes) > 0 && !contains(doc.ResponseTypes, "code") {
		return bad("does not list the code response type")
	}
	c, e := newClient(clientID, doc.ClientName, doc.ClientURI, doc.RedirectURIs)
	if e != nil {
		e.Code = ErrInvalidClient
		return Client{}, e
	}
	return c, nil
}

// Registration is an RFC 7591 registration request (the fields used).
type Registration struct {
	ClientName              string   `json:"client_name"`
	ClientURI               string   `json:"client_uri"`
	RedirectURIs            []string `json:"redirect_uris"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	Scope                   string   `json:"scope"`
}

// CheckRegistration validates a dynamic registration and returns the client
// to store under clientID. Only public clients are registered.
func CheckRegistration(clientID string, r Registration) (Client, *Error) {
	if m := r.TokenEndpointAuthMethod; m != "" && m != "none" {
		return Client{}, Errorf(ErrInvalidClientMetadata, "only public clients are supported: token_endpoint_auth_method must be \"none\"")
	}
	for _, g := range r.GrantTypes {
		if g != "authorization_code" && g != "refresh_token" {
			return Client{}, Errorf(ErrInvalidClientMetadata, "unsupported grant type "+strconv.Quote(g))
		}
	}
	for _, t := range r.ResponseTypes {
		if t != "code" {
			return Client{}, Errorf(ErrInvalidClientMetadata, "unsupported response type "+strconv.Quote(t))
		}
	}
	if _, e := ParseScope(r.Scope); e != nil {
		return Client{}, Errorf(ErrInvalidClientMetadata, e.Description)
	}
	return newClient(clientID, r.ClientName, r.ClientURI, r.RedirectURIs)
}

func newClient(clientID, name, clientURI string, redirects []string) (Client, *Error) {
	if len(redirects) == 0 || len(redirects) > 10 {
		return Client{}, Errorf(ErrInvalidRedirectURI, "list 1 to 10 redirect_uris")
	}
	for _, r := range redirects {
		if e := CheckRedirectURI(r); e != nil {
			return Client{}, e
		}
	}
	name = cleanName(name)
	if clientURI != "" {
		if u, err := url.Parse(clientURI); err != nil || u.Scheme != "https" {
			clientURI = "" // shown only as text; an odd URI is dropped, not fatal
		}
	}
	return Client{ClientID: clientID, Name: name, RedirectURIs: redirects, ClientURI: clientURI}, nil
}

// cleanName trims a client name to 100 characters without control,
// invisible or bidirectional-override characters (shape.Sanitize, as for
// what agents read): it is shown on the consent page and the access page,
// where "Claude\u202e..." would read as another client's name.
func cleanName(s string) string {
	s = shape.Sanitize(strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, strings.TrimSpace(s)))
	if !utf8.ValidString(s) {
		return ""
	}
	if utf8.RuneCountInString(s) > 100 {
		s = string([]rune(s)[:100])
	}
	return strings.TrimSpace(s)
}

// CheckRedirectURI validates a redirect URI a client registers: an absolute
// URI without fragment; https, http only on a loopback address (RFC 8252
// §7.3; "localhost" is tolerated as clients use it), or a private-use scheme
// of a native app (RFC 8252 §7.1). Schemes that run code in a browser are
// refused.
func CheckRedirectURI(raw string) *Error {
	bad := func(why string) *Error {
		return Errorf(ErrInvalidRedirectURI, "redirect URI "+strconv.Quote(clip(raw, 200))+" "+why)
	}
	if len(raw) > 2000 {
		return bad("is too long")
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return bad("is not an absolute URI")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return bad("must not contain a fragment")
	}
	if u.User != nil {
		// https://user:pw@host/cb: credentials in a redirect end up in
		// logs and histories, and "user@" can disguise the host to a
		// person reading it (as client_id URLs, which refuse them too).
		return bad("must not contain a user name or password")
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		if u.Host == "" {
			return bad("has no host")
		}
	case "http":
		if !isLoopbackHost(u.Hostname()) {
			return bad("may use http only on a loopback address (127.0.0.1 or [::1])")
		}
	case "javascript", "data", "vbscript", "file", "blob", "about", "ws", "wss":
		return bad("uses a forbidden scheme")
	default:
		// A private-use scheme of a native app (cursor://, vscode://).
	}
	return nil
}

func isLoopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// MatchRedirectURI reports whether got is one of the registered redirect
// URIs: an exact string match, or, for an http loopback URI, a match in
// everything but the port (RFC 8252 §7.3: native apps bind any free port).
func MatchRedirectURI(registered []string, got string) bool {
	if got == "" {
		return false
	}
	for _, r := range registered {
		if r == got {
			return true
		}
	}
	g, err := url.Parse(got)
	if err != nil || g.Scheme != "http" || !isLoopbackHost(g.Hostname()) || g.User != nil || g.Fragment != "" {
		return false
	}
	for _, r := range registered {
		ru, err := url.Parse(r)
		if err != nil || ru.Scheme != "http" || !isLoopbackHost(ru.Hostname()) {
			continue
		}
		if strings.EqualFold(ru.Hostname(), g.Hostname()) && ru.EscapedPath() == g.EscapedPath() && ru.RawQuery == g.RawQuery {
			return true
		}
	}
	return false
}

// RedirectHost is the host a redirect URI sends the person to, for the
// consent page (the scheme for a private-use scheme).
func RedirectHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	if u.Host != "" {
		return u.Host
	}
	return u.Scheme + ":"
}

// IsJSONMediaType reports whether a Content-Type header names a JSON media
// type: application/json or a structured-syntax type application/*+json,
// with any parameters (charset). The Client ID Metadata Document draft
// makes any other content type an error.
func IsJSONMediaType(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	typ, sub, ok := strings.Cut(mt, "/")
	return ok && typ == "application" && (sub == "json" || (strings.HasSuffix(sub, "+json") && len(sub) > len("+json")))
}

// CacheFor reads how long a fetched metadata document may be reused from
// its response headers: no-store/no-cache mean not at all, max-age (or
// Expires) is honoured within [0, 24h], and a document without caching
// headers is reused for 5 minutes, so a busy client is not fetched on every
// authorization but a changed document is seen soon.
func CacheFor(h http.Header, now time.Time) time.Duration {
	const maxCache, defaultCache = 24 * time.Hour, 5 * time.Minute
	cc := strings.ToLower(h.Get("Cache-Control"))
	for _, d := range strings.Split(cc, ",") {
		d = strings.TrimSpace(d)
		switch {
		case d == "no-store" || d == "no-cache" || d == "private":
			return 0
		case strings.HasPrefix(d, "max-age="):
			n, err := strconv.Atoi(strings.TrimPrefix(d, "max-age="))
			if err != nil || n < 0 {
				return 0
			}
			return min(time.Duration(n)*time.Second, maxCache)
		}
	}
	if e := h.Get("Expires"); e != "" {
		t, err := http.ParseTime(e)
		if err != nil || !t.After(now) {
			return 0
		}
		return min(t.Sub(now), maxCache)
	}
	return defaultCache
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
