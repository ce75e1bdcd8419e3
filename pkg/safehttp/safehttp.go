// Package safehttp is the HTTP client for URLs that someone other than the
// operator chooses: an identity provider's issuer typed by a tenant admin, an
// OAuth client's metadata document URL chosen by whoever registers the client.
// Such a URL must never let the service reach what only it can reach: its own
// loopback, the private network it runs in, link-local addresses or a cloud
// metadata service.
//
// The check runs at connect time, on the address the dialer is about to use
// after DNS resolution, so a name that resolves to a private address (or that
// changes its answer between a check and the connection: DNS rebinding) is
// refused all the same. Redirects are followed only to URLs that pass the same
// scheme check, and every connection of a redirect goes through the same
// dialer. Bodies are capped by the caller with ReadAll.
//
// safehttp never logs URLs or bodies; callers decide what to tell the user.
package safehttp

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// ErrForbiddenAddress is returned (wrapped) when a URL resolves to an address
// the client refuses. Callers can test for it with errors.Is to show the user
// a specific message.
var ErrForbiddenAddress = errors.New("safehttp: address not allowed")

// ErrForbiddenScheme is returned (wrapped) for a URL or redirect whose scheme
// the client refuses.
var ErrForbiddenScheme = errors.New("safehttp: scheme not allowed")

// ErrTooLarge is returned by ReadAll when a body exceeds its limit.
var ErrTooLarge = errors.New("safehttp: response too large")

// Options configures a client. The zero value is the strict production
// client: https only, public unicast addresses only, 10 s timeout.
type Options struct {
	// Allow lists address ranges that are reachable although they would be
	// refused (for development and tests: a local identity provider on
	// 127.0.0.1). Empty in production.
	Allow []netip.Prefix
	// AllowHTTP permits plain http:// URLs (development only).
	AllowHTTP bool
	// Timeout bounds a whole request including redirects and reading the
	// body; zero means 10 seconds.
	Timeout time.Duration
	// MaxRedirects bounds the redirects followed; zero means 3.
	MaxRedirects int
	// RootCAs replaces the system's trusted roots (tests serving https
	// from 127.0.0.1 with their own certificate); nil in production.
	RootCAs *x509.CertPool
}

// NewClient returns an *http.Client that refuses forbidden addresses at
// connect time and forbidden schemes on every request and redirect.
func NewClient(o Options) *http.Client {
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.MaxRedirects <= 0 {
		o.MaxRedirects = 3
	}
	allow := append([]netip.Prefix(nil), o.Allow...)
	dialer := &net.Dialer{
		Timeout:   5 * time.Second,
		KeepAlive: 30 * time.Second,
		Control: func(network, address string, _ syscall.RawConn) error {
			return checkAddress(network, address, allow)
		},
	}
	transport := &http.Transport{
		Proxy:                  nil, // a proxy would make the connect-time check meaningless
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           16,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    5 * time.Second,
		ResponseHeaderTimeout:  5 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	if o.RootCAs != nil {
		transport.TLSClientConfig = &tls.Config{RootCAs: o.RootCAs, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{
		Transport: &schemeCheck{next: transport, allowHTTP: o.AllowHTTP},
		Timeout:   o.Timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= o.MaxRedirects {
				return fmt.Errorf("safehttp: stopped after %d redirects", len(via))
			}
			return CheckURL(req.URL, o.AllowHTTP)
		},
	}
}

// CheckURL refuses URLs the client would refuse before any connection:
// schemes other than https (and http when allowed), user information, and
// empty hosts. Callers use it to validate a URL when it is configured, so the
// user hears about a mistake at once rather than at the first fetch.
func CheckURL(u *url.URL, allowHTTP bool) error {
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && allowHTTP:
	default:
		return fmt.Errorf("%w: %q", ErrForbiddenScheme, u.Scheme)
	}
	if u.User != nil {
		return fmt.Errorf("%w: credentials in URL", ErrForbiddenScheme)
	}
	if u.Hostname() == "" {
		return fmt.Errorf("%w: no host", ErrForbiddenScheme)
	}
	return nil
}

// ReadAll reads at most limit bytes of r and fails with ErrTooLarge when
// there is more, so a hostile server cannot make the service buffer an
// unbounded body.
func ReadAll(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, ErrTooLarge
	}
	return b, nil
}

// Forbidden reports whether addr is an address the strict client refuses:
// anything but a public unicast address (loopback, private RFC 1918 and
// RFC 4193, link-local including the 169.254.169.254 metadata address,
// carrier-grade NAT, unspecified, multicast, broadcast, documentation and
// benchmarking ranges, IPv4-mapped, NAT64, 6to4, Teredo and IPv4-compatible
// forms).
func Forbidden(addr netip.Addr) bool {
	addr = addr.Unmap()
	if !addr.IsValid() || addr.IsLoopback() || addr.IsPrivate() || addr.IsLinkLocalUnicast() ||
		addr.IsLinkLocalMulticast() || addr.IsInterfaceLocalMulticast() || addr.IsMulticast() ||
		addr.IsUnspecified() {
		return true
	}
	for _, p := range forbiddenRanges {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

var forbiddenRanges = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT (also some cloud metadata)
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, broadcast
	netip.MustParsePrefix("64:ff9b::/96"),    // NAT64 can reach IPv4 private space
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	// IPv6 forms that carry an IPv4 address a relay or a host may route
	// to (6to4's 2002:7f00:1:: is 127.0.0.1), and the deprecated
	// IPv4-compatible ::a.b.c.d: none is a server a document lives on.
	netip.MustParsePrefix("2002::/16"), // 6to4
	netip.MustParsePrefix("2001::/32"), // Teredo
	netip.MustParsePrefix("::/96"),     // IPv4-compatible (deprecated)
	netip.MustParsePrefix("100::/64"),  // discard-only
	netip.MustParsePrefix("fec0::/10"), // deprecated site-local
}

func checkAddress(network, address string, allow []netip.Prefix) error {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return fmt.Errorf("%w: network %s", ErrForbiddenAddress, network)
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrForbiddenAddress, err)
	}
	addr := ap.Addr().Unmap()
	for _, p := range allow {
		if p.Contains(addr) {
			return nil
		}
	}
	if Forbidden(addr) {
		return fmt.Errorf("%w: %s", ErrForbiddenAddress, addr)
	}
	return nil
}

// schemeCheck refuses a forbidden scheme before the transport runs, also for
// the first request (CheckRedirect only sees redirects).
type schemeCheck struct {
	next      http.RoundTripper
	allowHTTP bool
}

func (s *schemeCheck) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := CheckURL(req.URL, s.allowHTTP); err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	return s.next.RoundTrip(req)
}

// IsForbidden reports whether err comes from a refused address or scheme,
// through any wrapping by net/http (*url.Error, *net.OpError).
func IsForbidden(err error) bool {
	return errors.Is(err, ErrForbiddenAddress) || errors.Is(err, ErrForbiddenScheme)
}

// ParseAllow parses a comma-separated list of CIDRs or single addresses, the
// format of the development settings that allow local providers.
func ParseAllow(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("safehttp: %q is neither an address nor a CIDR", f)
		}
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}
