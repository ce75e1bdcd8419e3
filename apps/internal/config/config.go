// Package config reads the environment for the programs in apps/. It is
// the only place that reads environment variables; libraries take structs.
package config

import (
	"context"
	"crypto/x509"
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
	// AuthorizeRatePerIP is OAuth authorization requests a minute per
	// address on /t/{slug}/oauth/authorize (OAUTH_AUTHORIZE_RATE_PER_IP;
	// 0: no limit).
	AuthorizeRatePerIP int
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
	// OTLPEndpoint (OTEL_EXPORTER_OTLP_ENDPOINT), when set, sends traces
	// and metrics over OTLP/HTTP; the OpenTelemetry exporters read it and
	// the other standard OTEL_EXPORTER_OTLP_* variables themselves.
	OTLPEndpoint string
	GitHub       GitHub
	OAuth        OAuth
	// WorkerConcurrency is the jobs a worker works at once
	// (WORKER_CONCURRENCY, 1-100).
	WorkerConcurrency int
	// SecretRescanInterval is how often the worker looks for tenants whose
	// stored text waits for a rescan by a secret learned since it was
	// stored (SECRET_RESCAN_INTERVAL, 1s to 1h; it cannot be switched off).
	SecretRescanInterval time.Duration
	// MCPMaxConcurrent is how many /mcp requests the API serves at once
	// before it sheds the next with 503 (MCP_MAX_CONCURRENT, 1-10000).
	MCPMaxConcurrent int
}

// GitHub is the GitHub App (docs/github-app.md). Which settings a program
// needs is its own check: CheckAPI and CheckWorker.
type GitHub struct {
	// AppID is GITHUB_APP_ID (0: no App); PrivateKeyFile is
	// GITHUB_APP_PRIVATE_KEY_FILE, read by PrivateKey.
	AppID          int64
	PrivateKeyFile string
	// ClientID and ClientSecret (GITHUB_CLIENT_ID, GITHUB_CLIENT_SECRET)
	// are the App's OAuth credentials for "sign in with GitHub".
	ClientID     string
	ClientSecret string
	// WebhookSecret (GITHUB_WEBHOOK_SECRET) verifies webhook deliveries.
	WebhookSecret string
	// APIURL and WebURL (GITHUB_API_URL, GITHUB_WEB_URL): empty is
	// GitHub.com.
	APIURL string
	WebURL string
	// SyncInterval (GITHUB_SYNC_INTERVAL) is the worker's periodic full
	// sync, MembershipRefresh (GITHUB_MEMBERSHIP_REFRESH_INTERVAL) its
	// membership refresh; 0 switches either off.
	SyncInterval      time.Duration
	MembershipRefresh time.Duration
}

// OAuth is the OAuth 2.1 authorization server's settings (README "OAuth").
type OAuth struct {
	Enabled             bool // OAUTH_ENABLED
	DynamicRegistration bool // OAUTH_DYNAMIC_REGISTRATION
	// CIMDAllow and CIMDCAFile (OAUTH_CIMD_ALLOW_CIDRS, OAUTH_CIMD_CA_FILE)
	// exist for development and tests only: address ranges and a root
	// certificate for client metadata documents served from e.g.
	// 127.0.0.1. CIMDRootCAs reads the file.
	CIMDAllow  []netip.Prefix
	CIMDCAFile string
}

// Defaults of the settings that have one (README, "Configuration").
const (
	DefaultRatePerToken       = 120
	DefaultRatePerIP          = 600
	DefaultLoginRatePerIP     = 30
	DefaultWebhookRatePerIP   = 600
	DefaultAuthorizeRatePerIP = 60
	DefaultWorkerConcurrency  = 4
	// DefaultMCPMaxConcurrent is httpserver.DefaultMaxConcurrentMCP
	// (config does not import the server; TestDefaultsAgree checks it).
	DefaultMCPMaxConcurrent = 256
	DefaultSyncInterval     = time.Hour
	// DefaultSecretRescanInterval is jobs.DefaultSecretRescanEvery
	// (TestDefaultsAgree checks it).
	DefaultSecretRescanInterval = 30 * time.Second
)

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
	if c.RatePerToken, err = rateEnv(getenv, "MCP_RATE_PER_TOKEN", DefaultRatePerToken); err != nil {
		return c, err
	}
	if c.RatePerIP, err = rateEnv(getenv, "MCP_RATE_PER_IP", DefaultRatePerIP); err != nil {
		return c, err
	}
	if c.LoginRatePerIP, err = rateEnv(getenv, "LOGIN_RATE_PER_IP", DefaultLoginRatePerIP); err != nil {
		return c, err
	}
	if c.WebhookRatePerIP, err = rateEnv(getenv, "WEBHOOK_RATE_PER_IP", DefaultWebhookRatePerIP); err != nil {
		return c, err
	}
	if c.AuthorizeRatePerIP, err = rateEnv(getenv, "OAUTH_AUTHORIZE_RATE_PER_IP", DefaultAuthorizeRatePerIP); err != nil {
		return c, err
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
	c.OTLPEndpoint = getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	if c.GitHub, err = loadGitHub(getenv); err != nil {
		return c, err
	}
	if c.OAuth, err = loadOAuth(getenv); err != nil {
		return c, err
	}
	c.WorkerConcurrency = DefaultWorkerConcurrency
	if v := getenv("WORKER_CONCURRENCY"); v != "" {
		if c.WorkerConcurrency, err = strconv.Atoi(v); err != nil || c.WorkerConcurrency < 1 || c.WorkerConcurrency > 100 {
			return c, fmt.Errorf("WORKER_CONCURRENCY must be 1 to 100")
		}
	}
	c.SecretRescanInterval = DefaultSecretRescanInterval
	if v := strings.TrimSpace(getenv("SECRET_RESCAN_INTERVAL")); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second || d > time.Hour {
			return c, fmt.Errorf("SECRET_RESCAN_INTERVAL must be a duration from 1s to 1h, not %q", v)
		}
		c.SecretRescanInterval = d
	}
	c.MCPMaxConcurrent = DefaultMCPMaxConcurrent
	if v := getenv("MCP_MAX_CONCURRENT"); v != "" {
		if c.MCPMaxConcurrent, err = strconv.Atoi(v); err != nil || c.MCPMaxConcurrent < 1 || c.MCPMaxConcurrent > 10000 {
			return c, fmt.Errorf("MCP_MAX_CONCURRENT must be 1 to 10000")
		}
	}
	return c, nil
}

func loadGitHub(getenv func(string) string) (GitHub, error) {
	g := GitHub{
		PrivateKeyFile: getenv("GITHUB_APP_PRIVATE_KEY_FILE"),
		ClientID:       getenv("GITHUB_CLIENT_ID"),
		ClientSecret:   getenv("GITHUB_CLIENT_SECRET"),
		WebhookSecret:  getenv("GITHUB_WEBHOOK_SECRET"),
		APIURL:         getenv("GITHUB_API_URL"),
		WebURL:         getenv("GITHUB_WEB_URL"),
		SyncInterval:   DefaultSyncInterval,
	}
	if id := getenv("GITHUB_APP_ID"); id != "" {
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil || n <= 0 {
			return g, fmt.Errorf("GITHUB_APP_ID must be the App's numeric id")
		}
		g.AppID = n
	}
	if v := getenv("GITHUB_SYNC_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || (d != 0 && d < time.Minute) {
			return g, fmt.Errorf("GITHUB_SYNC_INTERVAL must be a duration of at least 1m (or 0 to switch the periodic sync off)")
		}
		g.SyncInterval = d
	}
	var err error
	g.MembershipRefresh, err = membershipRefreshInterval(getenv)
	return g, err
}

func loadOAuth(getenv func(string) string) (OAuth, error) {
	var o OAuth
	var err error
	if o.Enabled, err = boolEnv(getenv, "OAUTH_ENABLED", true); err != nil {
		return o, err
	}
	if o.DynamicRegistration, err = boolEnv(getenv, "OAUTH_DYNAMIC_REGISTRATION", true); err != nil {
		return o, err
	}
	if o.CIMDAllow, err = safehttp.ParseAllow(getenv("OAUTH_CIMD_ALLOW_CIDRS")); err != nil {
		return o, fmt.Errorf("OAUTH_CIMD_ALLOW_CIDRS: %w", err)
	}
	o.CIMDCAFile = getenv("OAUTH_CIMD_CA_FILE")
	return o, nil
}

// CheckAPI is the API's start-up check of the settings only it uses:
// PUBLIC_URL (CheckServePublicURL), the GitHub sign-in credentials as a
// pair, and a webhook secret whenever a GitHub App is configured.
func (c Config) CheckAPI() error {
	if err := c.CheckServePublicURL(); err != nil {
		return err
	}
	if (c.GitHub.ClientID == "") != (c.GitHub.ClientSecret == "") {
		return fmt.Errorf("GITHUB_CLIENT_ID and GITHUB_CLIENT_SECRET must be set together")
	}
	// Webhooks enqueue jobs; signatures are required, so with an App
	// configured a missing secret is a configuration error.
	if c.GitHub.WebhookSecret == "" && c.GitHub.AppID != 0 {
		return fmt.Errorf("GITHUB_WEBHOOK_SECRET is required when GITHUB_APP_ID is set: webhooks must be signed")
	}
	return nil
}

// CheckWorker is the worker's start-up check: an App needs its private key.
func (c Config) CheckWorker() error {
	if c.GitHub.AppID != 0 && c.GitHub.PrivateKeyFile == "" {
		return fmt.Errorf("GITHUB_APP_PRIVATE_KEY_FILE is required with GITHUB_APP_ID")
	}
	return nil
}

// PrivateKey reads the GitHub App's private key (GITHUB_APP_PRIVATE_KEY_FILE).
func (g GitHub) PrivateKey() ([]byte, error) {
	pem, err := os.ReadFile(g.PrivateKeyFile)
	if err != nil {
		return nil, fmt.Errorf("reading GITHUB_APP_PRIVATE_KEY_FILE: %w", err)
	}
	return pem, nil
}

// CIMDRootCAs reads OAUTH_CIMD_CA_FILE: nil when unset (the system roots).
func (o OAuth) CIMDRootCAs() (*x509.CertPool, error) {
	if o.CIMDCAFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(o.CIMDCAFile)
	if err != nil {
		return nil, fmt.Errorf("OAUTH_CIMD_CA_FILE: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("OAUTH_CIMD_CA_FILE: no PEM certificate in %s", o.CIMDCAFile)
	}
	return pool, nil
}

// DefaultMembershipRefresh is how often the worker refreshes every GitHub
// tenant's membership caches from its installation: well inside the
// 24-hour bound (codelotse.GrantMaxAge), so members' tokens keep working
// without a daily sign-in and removed members lose access within the hour.
const DefaultMembershipRefresh = time.Hour

// membershipRefreshInterval reads GITHUB_MEMBERSHIP_REFRESH_INTERVAL: a Go
// duration from 1s to below 24h (short intervals are for tests and small
// installations; each refresh costs API calls, see docs/github-app.md), or
// 0 to switch the periodic refresh off (webhooks still trigger one).
func membershipRefreshInterval(getenv func(string) string) (time.Duration, error) {
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

func rateEnv(getenv func(string) string, name string, def int) (int, error) {
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

func boolEnv(getenv func(string) string, name string, def bool) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(getenv(name))) {
	case "":
		return def, nil
	case "1", "true", "on", "yes":
		return true, nil
	case "0", "false", "off", "no":
		return false, nil
	}
	return false, fmt.Errorf("%s must be true or false", name)
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
