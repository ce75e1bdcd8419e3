package httpserver

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/codelotse/codelotse/pkg/githubapp"
	"github.com/codelotse/codelotse/pkg/postgres"
)

// Enqueuer puts background jobs on the queue inside the caller's
// transaction (implemented by pkg/jobs).
type Enqueuer interface {
	EnqueueInstallationSync(ctx context.Context, tx *postgres.Tx) error
	EnqueueRepositorySync(ctx context.Context, tx *postgres.Tx, repoID int64) error
	// EnqueuePullSync is a repository sync that reads the pull request
	// even when it is closed and its updated_at did not move.
	EnqueuePullSync(ctx context.Context, tx *postgres.Tx, repoID int64, number int) error
	// EnqueueIndex indexes the repository's default branch; commit is the
	// pushed head, which makes the job distinct from one already running
	// for an earlier push.
	EnqueueIndex(ctx context.Context, tx *postgres.Tx, repoID int64, commit string) error
	EnqueueMembershipRefresh(ctx context.Context, tx *postgres.Tx) error
}

// maxWebhookBytes is GitHub's largest payload (25 MB).
const maxWebhookBytes = 25 << 20

// webhookSlots is how many delivery bodies are read at once, bounding the
// memory webhooks can hold (slots × 25 MB); webhookSlotWait is how long a
// delivery waits for a slot before a 503 asks GitHub to redeliver.
const (
	webhookSlots    = 4
	webhookSlotWait = 5 * time.Second
)

var webhookActor = postgres.Actor{Label: "github-webhook"}

// githubWebhook is POST /webhooks/github. It answers within GitHub's 10 s
// by only verifying, de-duplicating and enqueueing: the work happens in
// the worker.
func (s *Server) githubWebhook(c echo.Context) error {
	if len(s.cfg.WebhookSecret) == 0 || s.cfg.Jobs == nil {
		return c.JSON(http.StatusNotFound, map[string]string{"error": "GitHub webhooks are not configured on this server"})
	}
	// Per address, before a byte of the body is read.
	if d := s.limitBucket(c, "webhook:ip:"+c.RealIP(), s.cfg.Limits.Webhook); !d.Allowed {
		c.Response().Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(d.RetryAfter.Seconds())))))
		return c.JSON(http.StatusTooManyRequests, map[string]string{"error": "too many deliveries from this address"})
	}
	r := c.Request()
	if r.ContentLength > maxWebhookBytes {
		return c.JSON(http.StatusRequestEntityTooLarge, map[string]string{"error": "payload too large"})
	}
	// A few bodies at a time: each may hold up to 25 MB while it is parsed.
	select {
	case s.webhookSlots <- struct{}{}:
		defer func() { <-s.webhookSlots }()
	case <-time.After(webhookSlotWait):
		c.Response().Header().Set("Retry-After", "5")
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"error": "busy; redeliver shortly"})
	case <-r.Context().Done():
		return r.Context().Err()
	}
	d, err := githubapp.ReadWebhook(s.cfg.WebhookSecret, r.Header, r.Body, maxWebhookBytes)
	switch {
	case errors.Is(err, githubapp.ErrBadSignature):
		s.cfg.Logger.Warn("webhook with a bad signature refused")
		return c.JSON(http.StatusUnauthorized, map[string]string{"error": "bad signature"})
	case errors.Is(err, githubapp.ErrTooLarge):
		return c.JSON(http.StatusRequestEntityTooLarge, map[string]string{"error": "payload too large"})
	case err != nil:
		s.cfg.Logger.Warn("webhook refused", "err", err)
		return c.JSON(http.StatusBadRequest, map[string]string{"error": "invalid delivery"})
	}
	ev := d.Event
	if ev.InstallationID == 0 {
		return c.JSON(http.StatusAccepted, map[string]string{"status": "ignored: no installation"})
	}
	ctx := c.Request().Context()
	tid, err := s.cfg.DB.TenantIDByInstallation(ctx, ev.InstallationID)
	if err != nil {
		return err
	}
	if tid == "" {
		s.cfg.Logger.Info("webhook for an installation without a tenant", "event", ev.Event)
		return c.JSON(http.StatusAccepted, map[string]string{"status": "ignored: installation not bound to a tenant"})
	}
	status := "queued"
	err = s.cfg.DB.InTenant(ctx, tid, func(tx *postgres.Tx) error {
		first, err := tx.RecordDelivery(ctx, ev.DeliveryID, ev.Event, d.Digest[:])
		if err != nil {
			return err
		}
		if !first {
			status = "duplicate delivery"
			return nil
		}
		return s.dispatch(ctx, tx, ev, &status)
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, map[string]string{"status": status})
}

// dispatch turns one event into jobs or membership changes.
func (s *Server) dispatch(ctx context.Context, tx *postgres.Tx, ev githubapp.WebhookEvent, status *string) error {
	repoJob := func(index bool) error {
		id, ok, err := tx.RepositoryIDByGitHubID(ctx, ev.RepoID)
		if err != nil {
			return err
		}
		if !ok {
			// A repository we do not know yet: sync the installation.
			return s.cfg.Jobs.EnqueueInstallationSync(ctx, tx)
		}
		if index {
			return s.cfg.Jobs.EnqueueIndex(ctx, tx, id, ev.After)
		}
		if ev.Pull > 0 && !ev.PullOpen {
			// A sync skips a closed pull request whose updated_at did not
			// move, and a thread resolved on one does not move it.
			return s.cfg.Jobs.EnqueuePullSync(ctx, tx, id, ev.Pull)
		}
		return s.cfg.Jobs.EnqueueRepositorySync(ctx, tx, id)
	}
	switch ev.Event {
	case "installation":
		// new_permissions_accepted is when an organisation grants the
		// Members permission the membership refresh needs. A deleted or
		// suspended installation has nothing to refresh from.
		if ev.Action != "deleted" && ev.Action != "suspend" {
			if err := s.cfg.Jobs.EnqueueMembershipRefresh(ctx, tx); err != nil {
				return err
			}
		}
		return s.cfg.Jobs.EnqueueInstallationSync(ctx, tx)
	case "installation_repositories":
		if err := s.cfg.Jobs.EnqueueMembershipRefresh(ctx, tx); err != nil {
			return err
		}
		return s.cfg.Jobs.EnqueueInstallationSync(ctx, tx)
	case "pull_request", "pull_request_review", "pull_request_review_comment", "pull_request_review_thread", "code_scanning_alert":
		return repoJob(false)
	case "repository":
		// Renamed, transferred, deleted, made private or public, its
		// default branch changed: the installation sync reads it again.
		// Who can read it may have changed too, except for an edit or
		// an archive.
		switch ev.Action {
		case "edited", "archived", "unarchived":
		default:
			if err := s.cfg.Jobs.EnqueueMembershipRefresh(ctx, tx); err != nil {
				return err
			}
		}
		return s.cfg.Jobs.EnqueueInstallationSync(ctx, tx)
	case "push":
		if ev.DefaultBranch != "" && ev.Ref == "refs/heads/"+ev.DefaultBranch {
			return repoJob(true)
		}
		*status = "ignored: not the default branch"
		return nil
	case "organization", "member", "membership", "team", "team_add":
		// Any change of members, teams or their repositories: refresh
		// the tenant's caches from the installation now.
		if err := s.cfg.Jobs.EnqueueMembershipRefresh(ctx, tx); err != nil {
			return err
		}
		*status = "membership refresh queued"
		if (ev.Event == "organization" || ev.Event == "member" || ev.Event == "membership") && removal(ev.Action) && len(ev.UserIDs) > 0 {
			// A removal takes effect at once, before the refresh runs.
			_, err := tx.ExpireGitHubMemberships(ctx, ev.UserIDs, webhookActor)
			*status = "memberships expired"
			return err
		}
		if ev.Event == "team" || ev.Event == "team_add" {
			// Team changes can move access for many people at once. When
			// the installation cannot refresh memberships (it lacks a
			// permission), the caches are expired instead, so nobody
			// keeps access a team change took away.
			st, err := tx.GetMembershipRefresh(ctx)
			if err != nil {
				return err
			}
			if st == nil || st.State != "ok" {
				_, err := tx.ExpireAllGitHubMemberships(ctx, webhookActor)
				*status = "memberships expired"
				return err
			}
		}
		return nil
	}
	*status = "ignored: event " + ev.Event
	return nil
}

func removal(action string) bool {
	return strings.Contains(action, "removed") || action == "deleted"
}
