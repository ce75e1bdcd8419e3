package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/codelotse/codelotse/apps/internal/config"
	"github.com/codelotse/codelotse/pkg/authn"
	"github.com/codelotse/codelotse/pkg/githubapp"
	"github.com/codelotse/codelotse/pkg/httpserver"
	"github.com/codelotse/codelotse/pkg/ingest"
	"github.com/codelotse/codelotse/pkg/jobs"
	"github.com/codelotse/codelotse/pkg/mcpserver"
	"github.com/codelotse/codelotse/pkg/oidc"
	"github.com/codelotse/codelotse/pkg/ratelimit"
	"github.com/codelotse/codelotse/pkg/safehttp"
	"github.com/codelotse/codelotse/pkg/secretscan"
	"github.com/codelotse/codelotse/pkg/shape"
	"github.com/codelotse/codelotse/pkg/telemetry"
)

// run starts the API and blocks until ctx ends. It prints the address it
// listens on to stdout, so that tests can start it on port 0.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		return fmt.Errorf("api takes no arguments; configure it with environment variables (see README)")
	}
	cfg, err := config.Load(getenv)
	if err != nil {
		return err
	}
	if err := cfg.CheckAPI(); err != nil {
		return err
	}
	oauthCfg, err := oauthConfig(cfg.OAuth)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))

	tel, err := telemetry.Setup(ctx, telemetry.Config{ServiceName: "codelotse-api", ServiceVersion: mcpserver.Version, OTLPEndpoint: cfg.OTLPEndpoint})
	if err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tel.Shutdown(sctx)
	}()

	db, err := cfg.OpenRuntime(ctx)
	if err != nil {
		return err
	}
	defer db.Close()

	bearer := &authn.Bearer{DB: db, Logger: logger}
	defer bearer.Wait()

	cursorKey, err := cfg.CursorKeyFor(ctx, db)
	if err != nil {
		return fmt.Errorf("cursor key: %w", err)
	}

	// Rate limits: in memory for one process, in Redis when REDIS_URL is
	// set so that every replica shares one budget.
	var limiter ratelimit.Limiter = ratelimit.NewMemory()
	if cfg.RedisURL != "" {
		rl, err := ratelimit.NewRedis(ctx, cfg.RedisURL, "codelotse:rl:")
		if err != nil {
			return err
		}
		defer rl.Close()
		limiter = rl
	}
	// GitHub App user sign-in, when the app's OAuth credentials are set.
	var gh *githubapp.Client
	if g := cfg.GitHub; g.ClientID != "" {
		gh, err = githubapp.New(githubapp.Config{ClientID: g.ClientID, ClientSecret: g.ClientSecret, APIURL: g.APIURL, WebURL: g.WebURL,
			RedirectURL: cfg.PublicURL + "/auth/github/callback"})
		if err != nil {
			return err
		}
	}

	// GitHub webhooks enqueue jobs for the worker (CheckAPI made sure
	// they are signed whenever an App is configured).
	secret := cfg.GitHub.WebhookSecret
	var enqueuer httpserver.Enqueuer
	if secret != "" {
		jc, err := jobs.NewInsertOnly(db, logger)
		if err != nil {
			return err
		}
		enqueuer = jc
	}

	// One scanner for the process: shaping redacts answers with it, and
	// the sign-in's repository sync prepares what it stores with it.
	scanner := secretscan.New()
	srv, err := httpserver.New(httpserver.Config{
		PublicURL:      cfg.PublicURL,
		AllowedOrigins: cfg.AllowedOrigins,
		DB:             db,
		Bearer:         bearer,
		MCP: &mcpserver.Deps{
			DB:          db,
			Shaper:      shape.New(scanner),
			Logger:      logger,
			SchemaCache: mcpserver.NewSchemaCache(),
			Known:       &mcpserver.KnownSecrets{DB: db},
			CursorKey:   cursorKey,
		},
		Logger:        logger,
		Ingest:        ingest.New(scanner),
		Telemetry:     tel,
		Sessions:      &authn.Sessions{DB: db, Secure: !cfg.LoopbackHTTP()},
		GitHub:        gh,
		WebhookSecret: []byte(secret),
		Jobs:          enqueuer,
		OIDC:          newOIDCClient(cfg),
		DevSignIn:     cfg.LoopbackHTTP(),
		Limiter:       limiter,
		Limits: httpserver.Limits{PerIP: perMinute(cfg.RatePerIP), PerToken: perMinute(cfg.RatePerToken), Login: perMinute(cfg.LoginRatePerIP),
			Webhook: perMinute(cfg.WebhookRatePerIP), Authorize: perMinute(cfg.AuthorizeRatePerIP)},
		TrustedProxies:   cfg.TrustedProxies,
		MaxConcurrentMCP: cfg.MCPMaxConcurrent,
		OAuth:            oauthCfg,
	})
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.ListenAddr, err)
	}
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	fmt.Fprintf(stdout, "api listening on http://%s (PUBLIC_URL %s)\n", ln.Addr(), cfg.PublicURL)
	logger.Info("api started", "addr", ln.Addr().String(), "public_url", cfg.PublicURL)

	// Sign-in states expire after minutes; delete them on a schedule so that
	// unauthenticated GET /t/{slug}/login cannot grow the table without end.
	go purgeLoginStates(ctx, db, loginStatePurgeEvery, logger)

	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	logger.Info("api stopped")
	return nil
}

// loginStatePurgeEvery is how often the API deletes expired sign-in
// states. Every replica runs it; the delete is idempotent.
const loginStatePurgeEvery = 10 * time.Minute

// purgeLoginStates deletes expired sign-in states now and every interval
// until ctx ends. Failures are logged and retried at the next tick.
func purgeLoginStates(ctx context.Context, db interface {
	PurgeExpiredLoginStates(context.Context) (int64, error)
}, every time.Duration, logger *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if n, err := db.PurgeExpiredLoginStates(ctx); err != nil {
			if ctx.Err() == nil {
				logger.Warn("purging expired sign-in states failed", "err", err)
			}
		} else if n > 0 {
			logger.Info("purged expired sign-in states", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// oauthConfig is the OAuth server's configuration from its settings
// (README "OAuth"): client metadata documents are fetched through
// pkg/safehttp, from public addresses only unless the development settings
// allow a range and a root certificate.
func oauthConfig(o config.OAuth) (httpserver.OAuthConfig, error) {
	oc := httpserver.OAuthConfig{RegisterLimit: httpserver.DefaultRegisterLimit, TokenLimit: httpserver.DefaultTokenLimit,
		Enabled: o.Enabled, DynamicRegistration: o.DynamicRegistration}
	roots, err := o.CIMDRootCAs()
	if err != nil {
		return oc, err
	}
	oc.MetadataClient = safehttp.NewClient(safehttp.Options{Allow: o.CIMDAllow, Timeout: 5 * time.Second, RootCAs: roots})
	return oc, nil
}

func perMinute(n int) ratelimit.Rule { return ratelimit.Rule{Limit: n, Period: time.Minute} }

// newOIDCClient is the service's client for identity providers: every
// request goes through pkg/safehttp, so an issuer typed by a tenant admin
// can reach only public addresses unless the operator allowed a range or
// plain http for development (OIDC_ALLOW_PRIVATE_CIDRS, OIDC_ALLOW_HTTP).
func newOIDCClient(cfg config.Config) *oidc.Client {
	return oidc.New(oidc.Options{AllowPrivate: cfg.OIDCAllowPrivate, AllowHTTP: cfg.OIDCAllowHTTP})
}
