package httpserver

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
	"github.com/codelotse/codelotse/pkg/ratelimit"
)

// countingEnqueuer counts the jobs webhooks enqueue, and records them
// (the queue itself is pkg/jobs', tested there).
type countingEnqueuer struct {
	n     atomic.Int64
	mu    sync.Mutex
	calls []string
}

func (e *countingEnqueuer) record(call string) error {
	e.n.Add(1)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = append(e.calls, call)
	return nil
}

// take returns the calls recorded since the last take.
func (e *countingEnqueuer) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.calls
	e.calls = nil
	return c
}

func (e *countingEnqueuer) EnqueueInstallationSync(context.Context, *postgres.Tx) error {
	return e.record("installation")
}
func (e *countingEnqueuer) EnqueueRepositorySync(context.Context, *postgres.Tx, int64) error {
	return e.record("repository")
}
func (e *countingEnqueuer) EnqueuePullSync(_ context.Context, _ *postgres.Tx, _ int64, number int) error {
	return e.record(fmt.Sprintf("pull %d", number))
}
func (e *countingEnqueuer) EnqueueIndex(context.Context, *postgres.Tx, int64, string) error {
	return e.record("index")
}
func (e *countingEnqueuer) EnqueueMembershipRefresh(context.Context, *postgres.Tx) error {
	return e.record("memberships")
}

// countingReader records how much of a body was read.
type countingReader struct {
	r    io.Reader
	read atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read.Add(int64(n))
	return n, err
}

var webhookSecret = []byte("webhook-test-secret")

func webhookFixture(t *testing.T, limits Limits) (*Server, *countingEnqueuer) {
	t.Helper()
	env := pgtest.New(t)
	inst := int64(42)
	if _, err := env.Admin.CreateTenant(context.Background(), postgres.NewTenant{Slug: "acme", Name: "Acme", GitHubInstallationID: &inst}, "test"); err != nil {
		t.Fatal(err)
	}
	jobs := &countingEnqueuer{}
	srv, err := New(Config{PublicURL: "http://127.0.0.1:8080", DB: env.App, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		WebhookSecret: webhookSecret, Jobs: jobs, Limiter: ratelimit.NewMemory(), Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	return srv, jobs
}

func delivery(id, body string, r io.Reader) *http.Request {
	if r == nil {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(http.MethodPost, "/webhooks/github", r)
	m := hmac.New(sha256.New, webhookSecret)
	m.Write([]byte(body))
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
	req.Header.Set("X-GitHub-Event", "installation")
	req.Header.Set("X-GitHub-Delivery", id)
	req.Header.Set("Content-Type", "application/json")
	return req
}

const installationBody = `{"action":"created","installation":{"id":42}}`

// TestWebhookReplayedBodyIsRecognised: the same signed body under a fresh
// delivery id is a duplicate, not a second job.
func TestWebhookReplayedBodyIsRecognised(t *testing.T) {
	srv, jobs := webhookFixture(t, DefaultLimits)
	var first int64
	for i, id := range []string{"d-1", "d-2", "d-1"} {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, delivery(id, installationBody, nil))
		if i == 0 {
			// An installation event enqueues its jobs (a sync and a
			// membership refresh) once; the replays must add none.
			first = jobs.n.Load()
		}
		want := "queued"
		if i > 0 {
			want = "duplicate delivery"
		}
		if rec.Code != http.StatusAccepted || !strings.Contains(rec.Body.String(), want) {
			t.Errorf("delivery %s (#%d): %d %s, want %q", id, i+1, rec.Code, rec.Body, want)
		}
	}
	if n := jobs.n.Load(); first == 0 || n != first {
		t.Errorf("%d jobs enqueued after the replays, %d after the first delivery; want the same, and some", n, first)
	}
}

// TestWebhookIsLimitedBeforeTheBodyIsRead: over the per-address limit, a
// delivery is refused without reading its body; an unsigned one is refused
// without reading it either.
func TestWebhookIsLimitedBeforeTheBodyIsRead(t *testing.T) {
	limits := DefaultLimits
	limits.Webhook = ratelimit.Rule{Limit: 2, Period: time.Minute}
	srv, _ := webhookFixture(t, limits)

	unsigned := &countingReader{r: strings.NewReader(installationBody)}
	req := delivery("u-1", installationBody, unsigned)
	req.Header.Del("X-Hub-Signature-256")
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized || unsigned.read.Load() != 0 {
		t.Errorf("unsigned delivery: %d, %d bytes read", rec.Code, unsigned.read.Load())
	}
	rec = httptest.NewRecorder()
	srv.ServeHTTP(rec, delivery("ok-1", installationBody, nil))
	if rec.Code != http.StatusAccepted {
		t.Fatalf("second delivery: %d %s", rec.Code, rec.Body)
	}
	body := &countingReader{r: strings.NewReader(installationBody)}
	rec = httptest.NewRecorder()
	srv.ServeHTTP(rec, delivery("ok-2", installationBody, body))
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
		t.Errorf("third delivery with a limit of 2: %d", rec.Code)
	}
	if body.read.Load() != 0 {
		t.Errorf("a rate-limited delivery's body was read (%d bytes)", body.read.Load())
	}
}

// endless is an unending body (a chunked upload without a length).
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}

// TestWebhookBodyIsBounded: a body over GitHub's 25 MB is refused after at
// most 25 MB (+ one read) were consumed, and a declared length over it
// without reading anything.
func TestWebhookBodyIsBounded(t *testing.T) {
	srv, _ := webhookFixture(t, DefaultLimits)
	declared := &countingReader{r: strings.NewReader(installationBody)}
	req := delivery("big-1", installationBody, declared)
	req.ContentLength = maxWebhookBytes + 1
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge || declared.read.Load() != 0 {
		t.Errorf("declared 25 MB + 1: %d, %d bytes read", rec.Code, declared.read.Load())
	}
	stream := &countingReader{r: endless{}}
	req = delivery("big-2", installationBody, stream)
	req.ContentLength = -1
	rec = httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("endless body: %d %s", rec.Code, rec.Body)
	}
	if n := stream.read.Load(); n > maxWebhookBytes+64<<10 {
		t.Errorf("read %d bytes of an endless body", n)
	}
}

// TestWebhookSignedButMalformed: a signed delivery whose body is not its
// event's JSON is refused with 400, so that GitHub shows it as failed; it
// was answered 202 "ignored" and lost. A delivery id that is not printable
// ASCII is refused too (it was a 500 from the database). A webhook set to
// the form content type is read from its payload parameter. Unknown event
// types are still ignored with 202.
func TestWebhookSignedButMalformed(t *testing.T) {
	srv, jobs := webhookFixture(t, DefaultLimits)
	form := "payload=" + url.QueryEscape(installationBody)
	for _, tc := range []struct {
		name, id, event, ctype, body string
		status                       int
		want                         string
	}{
		{"not JSON", "m-1", "installation", "application/json", "not json", 400, "invalid delivery"},
		{"truncated JSON", "m-2", "installation", "application/json", `{"action":"created","installation":{"id":42}`, 400, "invalid delivery"},
		{"an empty body", "m-3", "installation", "application/json", ``, 400, "invalid delivery"},
		{"an array", "m-4", "installation", "application/json", `[]`, 400, "invalid delivery"},
		{"a mistyped id", "m-5", "installation", "application/json", `{"installation":{"id":"abc"}}`, 400, "invalid delivery"},
		{"a delivery id that is not ASCII", "m-\xff\xfe", "installation", "application/json", installationBody, 400, "invalid delivery"},
		{"a form-encoded delivery", "m-6", "installation", "application/x-www-form-urlencoded", form, 202, "queued"},
		{"a form-encoded delivery without payload", "m-7", "installation", "application/x-www-form-urlencoded", "x=1", 400, "invalid delivery"},
		{"an unknown event", "m-8", "no_such_event", "application/json", "not json", 202, "ignored"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := jobs.n.Load()
			req := delivery(tc.id, tc.body, nil)
			req.Header.Set("X-GitHub-Event", tc.event)
			req.Header.Set("Content-Type", tc.ctype)
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, req)
			if rec.Code != tc.status || !strings.Contains(rec.Body.String(), tc.want) {
				t.Errorf("%d %s, want %d %q", rec.Code, rec.Body, tc.status, tc.want)
			}
			if tc.status != 202 && jobs.n.Load() != before {
				t.Error("a refused delivery enqueued jobs")
			}
		})
	}
}

// TestWebhookEventsThatChangeWhatAgentsSee: a review thread resolved or
// reopened syncs its repository, and one on a closed pull request asks for
// that pull request by number (a sync skips closed ones whose updated_at
// did not move, and resolving a thread does not move it). A repository
// renamed, deleted, transferred or made private syncs the installation and
// refreshes who can read what; an edit (a new default branch) or an
// archive syncs the installation only. Both were ignored.
func TestWebhookEventsThatChangeWhatAgentsSee(t *testing.T) {
	srv, jobs := webhookFixture(t, DefaultLimits)
	tid, err := srv.cfg.DB.TenantIDByInstallation(context.Background(), 42)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.cfg.DB.InTenant(context.Background(), tid, func(tx *postgres.Tx) error {
		_, err := tx.UpsertGitHubRepository(context.Background(), 77, "acme/api", "main", "", false, true)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	thread := func(state string) string {
		return `{"action":"resolved","installation":{"id":42},"repository":{"id":77},"thread":{"node_id":"T1"},
			"pull_request":{"number":7,"state":"` + state + `"}}`
	}
	for i, tc := range []struct {
		event, body string
		want        []string
	}{
		{"pull_request_review_thread", thread("open"), []string{"repository"}},
		{"pull_request_review_thread", thread("closed"), []string{"pull 7"}},
		{"pull_request_review", `{"action":"dismissed","installation":{"id":42},"repository":{"id":77},"review":{"id":1},
			"pull_request":{"number":8,"state":"closed"}}`, []string{"pull 8"}},
		{"repository", `{"action":"renamed","installation":{"id":42},"repository":{"id":77}}`, []string{"memberships", "installation"}},
		{"repository", `{"action":"deleted","installation":{"id":42},"repository":{"id":77}}`, []string{"memberships", "installation"}},
		{"repository", `{"action":"edited","installation":{"id":42},"repository":{"id":77}}`, []string{"installation"}},
	} {
		req := delivery(fmt.Sprintf("e-%d", i), tc.body, nil)
		req.Header.Set("X-GitHub-Event", tc.event)
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if got := jobs.take(); rec.Code != http.StatusAccepted || !slices.Equal(got, tc.want) {
			t.Errorf("%s %s: %d %s, jobs %q; want 202 and %q", tc.event, tc.body[:30], rec.Code, rec.Body, got, tc.want)
		}
	}
}
