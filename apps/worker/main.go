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
	if err := cfg.CheckWorker(); err != nil {
		return err
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	db, err := cfg.OpenRuntime(ctx)
	if err != nil {
		return err
	}
	defer db.Close()

	var app *githubapp.App
	if g := cfg.GitHub; g.AppID != 0 {
		pem, err := g.PrivateKey()
		if err != nil {
			return err
		}
		if app, err = githubapp.NewApp(githubapp.AppConfig{AppID: g.AppID, PrivateKeyPEM: pem, APIURL: g.APIURL}); err != nil {
			return err
		}
	} else {
		logger.Warn("GITHUB_APP_ID is not set: GitHub jobs will be cancelled")
	}
	n, every, members := cfg.WorkerConcurrency, cfg.GitHub.SyncInterval, cfg.GitHub.MembershipRefresh
	if app == nil {
		every, members = 0, 0
	}
	w, err := jobs.NewWorker(&jobs.Deps{DB: db, GitHub: app, Logger: logger, SyncEvery: every, MembershipEvery: members,
		SecretRescanEvery: cfg.SecretRescanInterval, Ingest: ingest.New(secretscan.New())}, n)
	if err != nil {
		return err
	}
	if err := w.Start(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "worker started (%d concurrent jobs)\n", n)
	logger.Info("worker started", "concurrency", n, "sync_interval", every.String(), "membership_refresh_interval", members.String(),
		"secret_rescan_interval", cfg.SecretRescanInterval.String())
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.Stop(sctx); err != nil {
		return err
	}
	logger.Info("worker stopped")
	return nil
}
