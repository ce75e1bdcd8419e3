// Package config reads the environment for the programs in apps/. It is
// the only place that reads environment variables; libraries take structs.
package config

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/safehttp"
)

// DefaultDatabaseURL is used when DATABASE_URL is not set: the local
// development cluster with trust authentication.
const DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/codelotse?sslmode=disable"

// DefaultPublicURL is where the API serves in development.
const DefaultPublicURL = "http://127.0.0.1:8080"

// Config is the service configuration (README, "Configuration").
type Config struct {
	DatabaseURL    string
	AppDatabaseURL string
	AppPassword    string
	Roles          postgres.Roles
	PublicURL      string
	ListenAddr     string
	AllowedOrigins []string
	LogLevel       slog.Level
	// RatePerToken and RatePerIP are requests a minute on /mcp (0: no limit).
	RatePerToken int
	RatePerIP    int
	// LoginRatePerIP is sign-ins started a minute per address on
	// GET /t/{slug}/login (0: no limit).
	LoginRatePerIP int
	// WebhookRatePerIP is webhook deliveries a minute per address on
	// POST /webhooks/github (0: no limit).
	WebhookRatePerIP int
	// RedisURL, when set, shares rate limits across replicas.
	RedisURL string
	// TrustedProxies are CIDRs whose X-Forwarded-For is believed.
	TrustedProxies []*net.IPNet
	// OIDCAllowPrivate are address ranges identity providers may resolve
	// to although they are not public (OIDC_ALLOW_PRIVATE_CIDRS, development
	// only); OIDCAllowHTTP permits plain-http issuers (OIDC_ALLOW_HTTP).
	OIDCAllowPrivate []netip.Prefix
	OIDCAllowHTTP    bool
	// CursorKey signs MCP cursors (CURSOR_KEY); empty: the key stored once
	// in the database (server_keys), shared by every replica.
	CursorKey []byte
}

// Load reads the configuration from getenv.
func Load(getenv func(string) string) (Config, error) {
	c := Config{
		DatabaseURL:    getenv("DATABASE_URL"),
		AppDatabaseURL: getenv("APP_DATABASE_URL"),
		AppPassword:    getenv("APP_DATABASE_PASSWORD"),
		PublicURL:      strings.TrimRight(getenv("PUBLIC_URL"), "/"),
		ListenAddr:     getenv("LISTEN_ADDR"),
	}
	if c.DatabaseURL == "" {
		c.DatabaseURL = DefaultDatabaseURL
	}
	roles, err := postgres.RolesFor(getenv("DB_ROLE_PREFIX"))
	if err != nil {
		return c, fmt.Errorf("DB_ROLE_PREFIX: %w", err)
	}
	c.Roles = roles
	if c.PublicURL == "" {
		c.PublicURL = DefaultPublicURL
	}
	u, err := url.Parse(c.PublicURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return c, fmt.Errorf("PUBLIC_URL %q must be an absolute http(s) URL", c.PublicURL)
	}
	if c.ListenAddr == "" {
		c.ListenAddr = ":8080"
		// In development (PUBLIC_URL on loopback) listen only on loopback.
		if ip := net.ParseIP(u.Hostname()); (ip != nil && ip.IsLoopback()) || u.Hostname() == "localhost" {
			port := u.Port()
			if port == "" {
				port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
			}
			c.ListenAddr = net.JoinHostPort(u.Hostname(), port)
		}
	}
	for _, o := range strings.Split(getenv("MCP_ALLOWED_ORIGINS"), ",") {
		if o = strings.TrimSpace(o); o != "" {
			c.AllowedOrigins = append(c.AllowedOrigins, o)
		}
	}
	var err2 error
	if c.RatePerToken, err2 = intEnv(getenv, "MCP_RATE_PER_TOKEN", 120); err2 != nil {
		return c, err2
	}
	if c.RatePerIP, err2 = intEnv(getenv, "MCP_RATE_PER_IP", 600); err2 != nil {
		return c, err2
	}
	if c.LoginRatePerIP, err2 = intEnv(getenv, "LOGIN_RATE_PER_IP", 30); err2 != nil {
		return c, err2
	}
	if c.WebhookRatePerIP, err2 = intEnv(getenv, "WEBHOOK_RATE_PER_IP", 600); err2 != nil {
		return c, err2
	}
	c.RedisURL = getenv("REDIS_URL")
	for _, p := range strings.Split(getenv("TRUSTED_PROXIES"), ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if !strings.Contains(p, "/") {
			if ip := net.ParseIP(p); ip != nil && ip.To4() != nil {
				p += "/32"
			} else {
				p += "/128"
			}
		}
		_, n, err := net.ParseCIDR(p)
		if err != nil {
			return c, fmt.Errorf("TRUSTED_PROXIES: %q is not an IP address or CIDR", p)
		}
		c.TrustedProxies = append(c.TrustedProxies, n)
	}
	if c.OIDCAllowPrivate, err = safehttp.ParseAllow(getenv("OIDC_ALLOW_PRIVATE_CIDRS")); err != nil {
		return c, fmt.Errorf("OIDC_ALLOW_PRIVATE_CIDRS: %v", err)
	}
	if v := getenv("OIDC_ALLOW_HTTP"); v != "" {
		if c.OIDCAllowHTTP, err = strconv.ParseBool(v); err != nil {
			return c, fmt.Errorf("OIDC_ALLOW_HTTP must be true or false, not %q", v)
		}
	}
	if k := getenv("CURSOR_KEY"); k != "" {
		if len(k) < 32 {
			return c, fmt.Errorf("CURSOR_KEY must be at least 32 characters (e.g. openssl rand -hex 32), or unset to use the key stored in the database")
		}
		c.CursorKey = []byte(k)
	}
	if lv := getenv("LOG_LEVEL"); lv != "" {
		if err := c.LogLevel.UnmarshalText([]byte(lv)); err != nil {
			return c, fmt.Errorf("LOG_LEVEL %q: use debug, info, warn or error", lv)
		}
	}
	return c, nil
}

// DefaultMembershipRefresh is how often the worker refreshes every GitHub
// tenant's membership caches from its installation: well inside the
// 24-hour bound (codelotse.GrantMaxAge), so members' tokens keep working
// without a daily sign-in and removed members lose access within the hour.
const DefaultMembershipRefresh = time.Hour

// MembershipRefreshInterval reads GITHUB_MEMBERSHIP_REFRESH_INTERVAL: a Go
// duration from 1s to below 24h (short intervals are for tests and small
// installations; each refresh costs API calls, see docs/github-app.md), or
// 0 to switch the periodic refresh off (webhooks still trigger one).
func MembershipRefreshInterval(getenv func(string) string) (time.Duration, error) {
	v := strings.TrimSpace(getenv("GITHUB_MEMBERSHIP_REFRESH_INTERVAL"))
	if v == "" {
		return DefaultMembershipRefresh, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d != 0 && (d < time.Second || d >= 24*time.Hour) {
		return 0, fmt.Errorf("GITHUB_MEMBERSHIP_REFRESH_INTERVAL must be a duration from 1s to under 24h (or 0 to switch the periodic refresh off), not %q", v)
	}
	return d, nil
}

// RuntimePoolConfig is the connection of the API and worker: APP_DATABASE_URL
// when set, otherwise DATABASE_URL with the runtime role as user.
func (c Config) RuntimePoolConfig() (*postgres.PoolConfig, error) {
	if c.AppDatabaseURL != "" {
		cfg, err := postgres.ParsePoolConfig(c.AppDatabaseURL)
		if err != nil {
			return nil, fmt.Errorf("APP_DATABASE_URL is not a valid PostgreSQL connection string")
		}
		return cfg, nil
	}
	return postgres.RuntimeConnString(c.DatabaseURL, c.Roles, c.AppPassword)
}

// OpenRuntime connects as the runtime role and refuses a role that could
// bypass row-level security.
func (c Config) OpenRuntime(ctx context.Context) (*postgres.DB, error) {
	pc, err := c.RuntimePoolConfig()
	if err != nil {
		return nil, err
	}
	db, err := postgres.Open(ctx, pc)
	if err != nil {
		return nil, err
	}
	if err := db.CheckRuntimeRole(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// CursorKeyFor returns the key that signs MCP cursors: CURSOR_KEY when set,
// else the key stored in the database, created by the first replica that
// asks. Never a per-process random key: a cursor made by one replica must
// verify on every other behind the same load balancer.
func (c Config) CursorKeyFor(ctx context.Context, db *postgres.DB) ([]byte, error) {
	if len(c.CursorKey) > 0 {
		return c.CursorKey, nil
	}
	return db.ServerKey(ctx, "mcp_cursor")
}

// Logger returns a JSON logger on w at the configured level.
func (c Config) Logger(w *os.File) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: c.LogLevel}))
}

func intEnv(getenv func(string) string, name string, def int) (int, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s must be a whole number of requests a minute (0: no limit), not %q", name, v)
	}
	return n, nil
}

// LoopbackHTTP reports whether PUBLIC_URL is plain http on a loopback host:
// development, where cookies may drop __Host-/Secure and the single-use
// development sign-in links of `cltctl demo` are accepted.
func (c Config) LoopbackHTTP() bool {
	u, err := url.Parse(c.PublicURL)
	if err != nil || u.Scheme != "http" {
		return false
	}
	ip := net.ParseIP(u.Hostname())
	return u.Hostname() == "localhost" || (ip != nil && ip.IsLoopback())
}

// CheckServePublicURL is the API's start-up check of PUBLIC_URL: plain http
// is accepted only on loopback (development). Anywhere else the session
// cookies are Secure, so a browser reaching the service over http would
// drop them and sign-in would fail without a word; better to refuse to
// start and say why.
func (c Config) CheckServePublicURL() error {
	u, err := url.Parse(c.PublicURL)
	if err != nil || u.Scheme != "http" || c.LoopbackHTTP() {
		return nil // https, or the development case; Load checked the form
	}
	return fmt.Errorf("PUBLIC_URL %s is plain http on a host that is not loopback: sign-in cookies are Secure there, so browsers would drop them over http and nobody could sign in. "+
		"Serve the API behind TLS (a reverse proxy) and set PUBLIC_URL to the https address users open, or use http://127.0.0.1:PORT for a local trial", c.PublicURL)
}
