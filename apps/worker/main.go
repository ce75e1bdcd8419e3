// Command worker runs CodeLotse's background jobs on River: GitHub
// installation and repository syncs and default-branch indexing. Several
// workers may run against one database. Configuration comes from the
// environment (README).
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/codelotse/codelotse/apps/internal/config"
	"github.com/codelotse/codelotse/pkg/githubapp"
	"github.com/codelotse/codelotse/pkg/ingest"
	"github.com/codelotse/codelotse/pkg/jobs"
	"github.com/codelotse/codelotse/pkg/secretscan"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		return fmt.Errorf("worker takes no arguments; configure it with environment variables (see README)")
	}
	cfg, err := config.Load(getenv)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	db, err := cfg.OpenRuntime(ctx)
	if err != nil {
		return err
	}
	defer db.Close()

	var app *githubapp.App
	if id := getenv("GITHUB_APP_ID"); id != "" {
		appID, err := strconv.ParseInt(id, 10, 64)
		if err != nil || appID <= 0 {
			return fmt.Errorf("GITHUB_APP_ID must be the App's numeric id")
		}
		keyFile := getenv("GITHUB_APP_PRIVATE_KEY_FILE")
		if keyFile == "" {
			return fmt.Errorf("GITHUB_APP_PRIVATE_KEY_FILE is required with GITHUB_APP_ID")
		}
		pem, err := os.ReadFile(keyFile)
		if err != nil {
			return fmt.Errorf("reading GITHUB_APP_PRIVATE_KEY_FILE: %w", err)
		}
		if app, err = githubapp.NewApp(githubapp.AppConfig{AppID: appID, PrivateKeyPEM: pem, APIURL: getenv("GITHUB_API_URL")}); err != nil {
			return err
		}
	} else {
		logger.Warn("GITHUB_APP_ID is not set: GitHub jobs will be cancelled")
	}
	n := 4
	if v := getenv("WORKER_CONCURRENCY"); v != "" {
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > 100 {
			return fmt.Errorf("WORKER_CONCURRENCY must be 1 to 100")
		}
	}
	every := time.Hour
	if v := getenv("GITHUB_SYNC_INTERVAL"); v != "" {
		if every, err = time.ParseDuration(v); err != nil || (every != 0 && every < time.Minute) {
			return fmt.Errorf("GITHUB_SYNC_INTERVAL must be a duration of at least 1m (or 0 to switch the periodic sync off)")
		}
	}
	members, err := config.MembershipRefreshInterval(getenv)
	if err != nil {
		return err
	}
	if app == nil {
		every, members = 0, 0
	}
	w, err := jobs.NewWorker(&jobs.Deps{DB: db, GitHub: app, Logger: logger, SyncEvery: every, MembershipEvery: members,
		Ingest: ingest.New(secretscan.New())}, n)
	if err != nil {
		return err
	}
	if err := w.Start(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "worker started (%d concurrent jobs)\n", n)
	logger.Info("worker started", "concurrency", n, "sync_interval", every.String(), "membership_refresh_interval", members.String())
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.Stop(sctx); err != nil {
		return err
	}
	logger.Info("worker stopped")
	return nil
}
