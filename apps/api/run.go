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
	"github.com/codelotse/codelotse/pkg/jobs"
	"github.com/codelotse/codelotse/pkg/mcpserver"
	"github.com/codelotse/codelotse/pkg/oidc"
	"github.com/codelotse/codelotse/pkg/ratelimit"
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
	if err := cfg.CheckServePublicURL(); err != nil {
		return err
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))

	tel, err := telemetry.Setup(ctx, telemetry.Config{ServiceName: "codelotse-api", ServiceVersion: mcpserver.Version, OTLPEndpoint: getenv("OTEL_EXPORTER_OTLP_ENDPOINT")})
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
	if id, secret := getenv("GITHUB_CLIENT_ID"), getenv("GITHUB_CLIENT_SECRET"); id != "" || secret != "" {
		if id == "" || secret == "" {
			return fmt.Errorf("GITHUB_CLIENT_ID and GITHUB_CLIENT_SECRET must be set together")
		}
		gh, err = githubapp.New(githubapp.Config{ClientID: id, ClientSecret: secret, APIURL: getenv("GITHUB_API_URL"), WebURL: getenv("GITHUB_WEB_URL"),
			RedirectURL: cfg.PublicURL + "/auth/github/callback"})
		if err != nil {
			return err
		}
	}

	// GitHub webhooks enqueue jobs for the worker. Signatures are required:
	// with an App configured, a missing secret is a configuration error.
	secret := getenv("GITHUB_WEBHOOK_SECRET")
	if secret == "" && getenv("GITHUB_APP_ID") != "" {
		return fmt.Errorf("GITHUB_WEBHOOK_SECRET is required when GITHUB_APP_ID is set: webhooks must be signed")
	}
	var enqueuer httpserver.Enqueuer
	if secret != "" {
		jc, err := jobs.NewInsertOnly(db.Pool, logger)
		if err != nil {
			return err
		}
		enqueuer = jc
	}

	srv, err := httpserver.New(httpserver.Config{
		PublicURL:      cfg.PublicURL,
		AllowedOrigins: cfg.AllowedOrigins,
		DB:             db,
		Bearer:         bearer,
		MCP: &mcpserver.Deps{
			DB:          db,
			Shaper:      shape.New(secretscan.New()),
			Logger:      logger,
			SchemaCache: mcpserver.NewSchemaCache(),
			Known:       &mcpserver.KnownSecrets{DB: db},
		},
		Logger:         logger,
		Telemetry:      tel,
		Sessions:       &authn.Sessions{DB: db, Secure: !cfg.LoopbackHTTP()},
		GitHub:         gh,
		WebhookSecret:  []byte(secret),
		Jobs:           enqueuer,
		OIDC:           oidc.NewClient(nil),
		DevSignIn:      cfg.LoopbackHTTP(),
		Limiter:        limiter,
		Limits:         httpserver.Limits{PerIP: perMinute(cfg.RatePerIP), PerToken: perMinute(cfg.RatePerToken)},
		TrustedProxies: cfg.TrustedProxies,
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

func perMinute(n int) ratelimit.Rule { return ratelimit.Rule{Limit: n, Period: time.Minute} }
