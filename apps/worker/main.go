// Command worker runs CodeLotse's background jobs (GitHub sync and code
// indexing, on River). For now it connects as the runtime role, verifies
// that the role cannot bypass row-level security, and waits: the jobs
// arrive with the GitHub integration.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/codelotse/codelotse/apps/internal/config"
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
	fmt.Fprintln(stdout, "worker started; no job kinds are registered yet")
	logger.Info("worker started")
	<-ctx.Done()
	logger.Info("worker stopped")
	return nil
}
