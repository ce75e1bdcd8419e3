package githubapp

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/githubapp/githubtest"
)

const reposPath = "/installation/repositories"

// warm issues the installation token, so that the failures a test queues
// meet the request under test and not the token exchange.
func warm(t *testing.T, c *InstallationClient) {
	t.Helper()
	if _, err := c.Repositories(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestRetriesServerErrors(t *testing.T) {
	s, a, clk := appFixture(t)
	c := a.Installation(instID)
	warm(t, c)
	s.FailNextOn(reposPath, githubtest.ServerError)
	s.FailNextOn(reposPath, githubtest.ServerError)
	repos, err := c.Repositories(context.Background())
	if err != nil || len(repos) != 2 {
		t.Fatalf("after two 502s: %d repos, %v", len(repos), err)
	}
	if n := count(s, "GET /api/v3"+reposPath); n != 4 {
		t.Errorf("%d requests, want 1 + 3", n)
	}
	// Exponential backoff with jitter: 250-500 ms, then 500 ms-1 s.
	slept := clk.Slept()
	if len(slept) != 2 || slept[0] < 250*time.Millisecond || slept[0] > 500*time.Millisecond || slept[1] < 500*time.Millisecond || slept[1] > time.Second {
		t.Errorf("waits = %v", slept)
	}
}

func TestRetriesConnectionErrors(t *testing.T) {
	s := appServer(t)
	// Without keep-alive net/http cannot retry a dropped connection
	// itself, so the App's own retry is what is tested.
	tr := s.Client().Transport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true
	a, clk := newApp(t, s, s.APIURL, &http.Client{Transport: tr})
	c := a.Installation(instID)
	warm(t, c)
	s.FailNextOn(reposPath, githubtest.ConnectionReset)
	if _, err := c.Repositories(context.Background()); err != nil {
		t.Fatalf("after a dropped connection: %v", err)
	}
	if len(clk.Slept()) != 1 {
		t.Errorf("waits = %v, want one backoff", clk.Slept())
	}
}

func TestRetriesGiveUp(t *testing.T) {
	s, a, clk := appFixture(t)
	c := a.Installation(instID)
	warm(t, c)
	for range 6 {
		s.FailNextOn(reposPath, githubtest.ServerError)
	}
	_, err := c.Repositories(context.Background())
	if err == nil || codelotse.ErrorCode(err) != codelotse.Unavailable || !strings.Contains(err.Error(), "HTTP 502") || errors.Is(err, ErrRateLimited) {
		t.Fatalf("err = %v", err)
	}
	if n := count(s, "GET /api/v3"+reposPath); n != 1+5 {
		t.Errorf("%d requests after the first, want 5 attempts", n-1)
	}
	var total time.Duration
	for _, d := range clk.Slept() {
		total += d
	}
	if len(clk.Slept()) != 4 || total > 60*time.Second {
		t.Errorf("waits = %v", clk.Slept())
	}
}

func TestRetriesRateLimits(t *testing.T) {
	for name, f := range map[string]githubtest.Failure{
		"429":             githubtest.TooManyRequests,
		"secondary 403":   githubtest.SecondaryRateLimit,
		"primary limit":   githubtest.PrimaryRateLimit,
		"secondary twice": githubtest.SecondaryRateLimit,
	} {
		t.Run(name, func(t *testing.T) {
			s, a, clk := appFixture(t)
			c := a.Installation(instID)
			warm(t, c)
			s.SetRetryAfter(7 * time.Second)
			s.FailNextOn(reposPath, f)
			if name == "secondary twice" {
				s.FailNextOn(reposPath, f)
			}
			if _, err := c.Repositories(context.Background()); err != nil {
				t.Fatalf("err = %v", err)
			}
			slept := clk.Slept()
			if name == "secondary twice" && len(slept) != 2 || name != "secondary twice" && len(slept) != 1 {
				t.Fatalf("waits = %v", slept)
			}
			// Retry-After (or X-RateLimit-Reset, to the second) is
			// honoured, plus a little jitter.
			for _, d := range slept {
				if d < 6*time.Second || d > 8*time.Second {
					t.Errorf("waited %v, want about 7 s", d)
				}
			}
		})
	}
}

func TestRateLimitTooLongToWait(t *testing.T) {
	s, a, clk := appFixture(t)
	c := a.Installation(instID)
	warm(t, c)
	s.AddPullRequest(apiRepo, githubtest.PullRequest{Number: 1})
	s.SetRetryAfter(2 * time.Minute)
	s.FailNextOn(reposPath, githubtest.TooManyRequests)
	start := clk.Now()
	_, err := c.Repositories(context.Background())
	var rl *RateLimitError
	if !errors.Is(err, ErrRateLimited) || !errors.As(err, &rl) {
		t.Fatalf("err = %v, want a rate limit", err)
	}
	if rl.Status != http.StatusTooManyRequests || !rl.Secondary || rl.RetryAt.Sub(start) != 2*time.Minute {
		t.Errorf("rate limit = %+v, want 429 until two minutes on", rl)
	}
	if codelotse.ErrorCode(err) != codelotse.Unavailable || !strings.Contains(codelotse.ErrorMessage(err), "rate limiting") {
		t.Errorf("code %s, message %q", codelotse.ErrorCode(err), codelotse.ErrorMessage(err))
	}
	if len(clk.Slept()) != 0 {
		t.Errorf("waited %v for a limit beyond the budget", clk.Slept())
	}

	// The limit holds every client of the installation: no request is
	// sent until it ends.
	before := len(s.Requests())
	_, err = a.Installation(instID).Reviews(context.Background(), "acme/api", 1)
	if !errors.Is(err, ErrRateLimited) {
		t.Errorf("second call: err = %v, want the remembered rate limit", err)
	}
	if after := len(s.Requests()); after != before {
		t.Errorf("requests sent during the limit: %v", s.Requests()[before:])
	}
	// The app's own requests are counted apart.
	if _, _, err := a.Installation(instID).Account(context.Background()); err != nil {
		t.Errorf("Account during the installation's limit: %v", err)
	}
	clk.Advance(2*time.Minute + time.Second)
	if _, err := a.Installation(instID).Reviews(context.Background(), "acme/api", 1); err != nil {
		t.Errorf("after the limit: %v", err)
	}
}

func TestRetryBudget(t *testing.T) {
	s, a, clk := appFixture(t)
	c := a.Installation(instID)
	warm(t, c)
	s.SetRetryAfter(40 * time.Second)
	s.FailNextOn(reposPath, githubtest.SecondaryRateLimit)
	s.FailNextOn(reposPath, githubtest.SecondaryRateLimit)
	_, err := c.Repositories(context.Background())
	if !errors.Is(err, ErrRateLimited) {
		t.Fatalf("err = %v", err)
	}
	// 40 s waited once; another 40 s would pass the 60 s budget.
	if slept := clk.Slept(); len(slept) != 1 || slept[0] < 40*time.Second || slept[0] > 44*time.Second {
		t.Errorf("waits = %v", slept)
	}
	if n := count(s, "GET /api/v3"+reposPath); n != 1+2 {
		t.Errorf("%d attempts, want 2", n-1)
	}
}

func TestRetryRespectsContext(t *testing.T) {
	s, a, clk := appFixture(t)
	c := a.Installation(instID)
	warm(t, c)
	s.SetRetryAfter(30 * time.Second)
	s.FailNextOn(reposPath, githubtest.TooManyRequests)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Waiting 30 s would outlast the deadline: the rate limit is reported
	// at once instead of a later "deadline exceeded".
	if _, err := c.Repositories(ctx); !errors.Is(err, ErrRateLimited) {
		t.Errorf("err = %v, want the rate limit", err)
	}
	if len(clk.Slept()) != 0 {
		t.Errorf("waits = %v", clk.Slept())
	}

	canceled, cancelNow := context.WithCancel(context.Background())
	cancelNow()
	_, err := a.Installation(instID).Repositories(canceled)
	if err == nil || codelotse.ErrorCode(err) != codelotse.Unavailable || !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: err = %v", err)
	}
	// A fresh App must not leave a half-issued token behind either.
	b, _ := newApp(t, s, s.APIURL, nil)
	if _, err := b.Installation(instID).Repositories(canceled); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled before the token: err = %v", err)
	}
}

func TestOnlyGETsAreRetried(t *testing.T) {
	s, a, clk := appFixture(t)
	s.FailNextOn("/app/installations/100/access_tokens", githubtest.ServerError)
	_, err := a.Installation(instID).Repositories(context.Background())
	if err == nil || codelotse.ErrorCode(err) != codelotse.Unavailable {
		t.Fatalf("err = %v", err)
	}
	if n := count(s, "POST /api/v3/app/installations/100/access_tokens"); n != 1 {
		t.Errorf("%d token requests, want 1: a POST is not retried", n)
	}
	if len(clk.Slept()) != 0 {
		t.Errorf("waits = %v", clk.Slept())
	}
	// The next call gets a token.
	if _, err := a.Installation(instID).Repositories(context.Background()); err != nil {
		t.Fatal(err)
	}
	// GETs made as the app are retried like the rest.
	s.FailNextOn("/app/installations/100", githubtest.ServerError)
	if _, _, err := a.Installation(instID).Account(context.Background()); err != nil {
		t.Errorf("Account after a 502: %v", err)
	}
}

// TestRetryAfterRealTime waits for real once, with the App's own clock.
func TestRetryAfterRealTime(t *testing.T) {
	s := appServer(t)
	a, err := NewApp(AppConfig{AppID: s.AppID, PrivateKeyPEM: s.AppPrivateKeyPEM(), APIURL: s.APIURL, HTTPClient: s.Client()})
	if err != nil {
		t.Fatal(err)
	}
	c := a.Installation(instID)
	warm(t, c)
	s.SetRetryAfter(time.Second)
	s.FailNextOn(reposPath, githubtest.TooManyRequests)
	start := time.Now()
	if _, err := c.Repositories(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("retried after %v, before Retry-After", d)
	}
}
