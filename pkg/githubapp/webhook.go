package githubapp

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/go-github/v62/github"
)

// ErrBadSignature means a webhook delivery's X-Hub-Signature-256 is missing
// or does not match the secret.
var ErrBadSignature = errors.New("webhook signature missing or invalid")

// WebhookEvent is what the service needs of a webhook delivery.
type WebhookEvent struct {
	Event          string // X-GitHub-Event
	DeliveryID     string // X-GitHub-Delivery
	Action         string
	InstallationID int64
	RepoID         int64  // the repository the event is about, if any
	Ref            string // push: the pushed ref
	After          string // push: the commit the ref points to now
	DefaultBranch  string // push: the repository's default branch
	// Pull is the pull request a pull-request event is about (0 for
	// others), and PullOpen whether it is open now.
	Pull     int
	PullOpen bool
	// UserIDs are the GitHub users whose access changed (member and
	// membership events).
	UserIDs []int64
}

// ParseWebhook verifies a delivery's HMAC-SHA256 signature with secret and
// reads it. An empty secret is refused: go-github accepts unsigned payloads
// when the secret is empty, so it must never be called with one.
func ParseWebhook(secret []byte, h http.Header, body []byte) (WebhookEvent, error) {
	var ev WebhookEvent
	if len(secret) == 0 {
		return ev, errors.New("webhook secret not configured")
	}
	sig := h.Get(github.SHA256SignatureHeader)
	if !strings.HasPrefix(sig, "sha256=") {
		return ev, ErrBadSignature
	}
	if err := github.ValidateSignature(sig, body, secret); err != nil {
		return ev, ErrBadSignature
	}
	return parseVerified(h, body)
}

// ErrTooLarge means a delivery's body is over the limit given to
// ReadWebhook.
var ErrTooLarge = errors.New("webhook payload too large")

// SignedDelivery is a verified delivery: its event, its body and the
// SHA-256 of the body (to recognise a replayed body under a fresh
// delivery id).
type SignedDelivery struct {
	Event  WebhookEvent
	Digest [32]byte
}

// ReadWebhook reads at most limit bytes of body through the HMAC-SHA256 of
// secret and a SHA-256 digest, then checks the signature and reads the
// event. A delivery without a well-formed signature header is refused
// before any of the body is read; one over limit stops at limit bytes. The
// body is kept only while it is parsed.
func ReadWebhook(secret []byte, h http.Header, body io.Reader, limit int64) (SignedDelivery, error) {
	var d SignedDelivery
	if len(secret) == 0 {
		return d, errors.New("webhook secret not configured")
	}
	want, err := hex.DecodeString(strings.TrimPrefix(h.Get(github.SHA256SignatureHeader), "sha256="))
	if !strings.HasPrefix(h.Get(github.SHA256SignatureHeader), "sha256=") || err != nil || len(want) != sha256.Size {
		return d, ErrBadSignature
	}
	mac, digest := hmac.New(sha256.New, secret), sha256.New()
	var buf bytes.Buffer
	n, err := io.Copy(io.MultiWriter(mac, digest, &buf), io.LimitReader(body, limit+1))
	if err != nil {
		return d, fmt.Errorf("reading webhook body: %w", err)
	}
	if n > limit {
		return d, ErrTooLarge
	}
	if !hmac.Equal(mac.Sum(nil), want) {
		return d, ErrBadSignature
	}
	copy(d.Digest[:], digest.Sum(nil))
	d.Event, err = parseVerified(h, buf.Bytes())
	return d, err
}

// ErrInvalidPayload means a signed delivery's body is not the JSON its
// event names (or, for a webhook set to the form content type, its payload
// parameter is not): refused rather than ignored, so that GitHub shows the
// delivery as failed instead of delivered.
var ErrInvalidPayload = errors.New("webhook payload is not valid JSON for its event")

// pullRequestEvent is what the events about a pull request have in common
// (pull_request, pull_request_review, its comments and threads).
type pullRequestEvent interface {
	GetAction() string
	GetInstallation() *github.Installation
	GetRepo() *github.Repository
	GetPullRequest() *github.PullRequest
}

// knownEvents are the event types go-github parses; others are ignored.
var knownEvents = func() map[string]bool {
	m := map[string]bool{}
	for _, t := range github.MessageTypes() {
		m[t] = true
	}
	return m
}()

// parseVerified reads a delivery whose signature was checked.
func parseVerified(h http.Header, body []byte) (WebhookEvent, error) {
	var ev WebhookEvent
	ev.Event, ev.DeliveryID = h.Get(github.EventTypeHeader), h.Get(github.DeliveryIDHeader)
	if !headerToken(ev.Event) || !headerToken(ev.DeliveryID) {
		return ev, errors.New("webhook without a valid X-GitHub-Event or X-GitHub-Delivery")
	}
	if !knownEvents[ev.Event] {
		// Unknown event types are not an error for the sender: ignore them.
		return ev, nil
	}
	// A webhook may be set to the form content type (GitHub's other
	// choice): its JSON is the payload parameter.
	if mt, _, _ := mime.ParseMediaType(h.Get("Content-Type")); mt == "application/x-www-form-urlencoded" {
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return ev, fmt.Errorf("%w: %v", ErrInvalidPayload, err)
		}
		body = []byte(form.Get("payload"))
	}
	if !json.Valid(body) || !bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) {
		return ev, ErrInvalidPayload
	}
	payload, err := github.ParseWebHook(ev.Event, body)
	if err != nil {
		return ev, fmt.Errorf("%w: %v", ErrInvalidPayload, err)
	}
	repo := func(r *github.Repository) {
		if r != nil {
			ev.RepoID = r.GetID()
			ev.DefaultBranch = r.GetDefaultBranch()
		}
	}
	pull := func(pr *github.PullRequest) {
		if pr != nil {
			ev.Pull, ev.PullOpen = pr.GetNumber(), pr.GetState() == "open"
		}
	}
	inst := func(i *github.Installation) {
		if i != nil {
			ev.InstallationID = i.GetID()
		}
	}
	// X-GitHub-Event is not covered by the signature: a signed body sent
	// with another event name must not be read as that event. Each event's
	// own object must be in the payload.
	if !consistent(payload) {
		return ev, ErrEventMismatch
	}
	switch p := payload.(type) {
	case *github.InstallationEvent:
		ev.Action = p.GetAction()
		inst(p.Installation)
	case *github.InstallationRepositoriesEvent:
		ev.Action = p.GetAction()
		inst(p.Installation)
	case pullRequestEvent:
		ev.Action = p.GetAction()
		inst(p.GetInstallation())
		repo(p.GetRepo())
		pull(p.GetPullRequest())
	case *github.RepositoryEvent:
		ev.Action = p.GetAction()
		inst(p.Installation)
		repo(p.Repo)
	case *github.CodeScanningAlertEvent:
		ev.Action = p.GetAction()
		inst(p.Installation)
		repo(p.Repo)
	case *github.PushEvent:
		inst(p.Installation)
		ev.Ref, ev.After = p.GetRef(), p.GetAfter()
		if r := p.GetRepo(); r != nil {
			ev.RepoID, ev.DefaultBranch = r.GetID(), r.GetDefaultBranch()
		}
	case *github.OrganizationEvent:
		ev.Action = p.GetAction()
		inst(p.Installation)
		if m := p.GetMembership(); m != nil && m.GetUser() != nil {
			ev.UserIDs = append(ev.UserIDs, m.GetUser().GetID())
		}
	case *github.MemberEvent:
		ev.Action = p.GetAction()
		inst(p.Installation)
		repo(p.Repo)
		if m := p.GetMember(); m != nil {
			ev.UserIDs = append(ev.UserIDs, m.GetID())
		}
	case *github.MembershipEvent:
		ev.Action = p.GetAction()
		inst(p.Installation)
		if m := p.GetMember(); m != nil {
			ev.UserIDs = append(ev.UserIDs, m.GetID())
		}
	case *github.TeamEvent:
		ev.Action = p.GetAction()
		inst(p.Installation)
	case *github.TeamAddEvent:
		inst(p.Installation)
		ev.Action = "added"
	}
	return ev, nil
}

// ErrEventMismatch means a delivery's body is not of the event its
// X-GitHub-Event header names.
var ErrEventMismatch = errors.New("the payload does not match X-GitHub-Event")

func consistent(payload any) bool {
	switch p := payload.(type) {
	case *github.InstallationEvent:
		return p.Installation != nil
	case *github.InstallationRepositoriesEvent:
		return p.Installation != nil && p.RepositorySelection != nil
	case *github.PullRequestEvent:
		return p.PullRequest != nil
	case *github.PullRequestReviewEvent:
		return p.Review != nil
	case *github.PullRequestReviewCommentEvent:
		return p.Comment != nil
	case *github.PullRequestReviewThreadEvent:
		return p.Thread != nil && p.PullRequest != nil
	case *github.RepositoryEvent:
		return p.Repo != nil && p.Action != nil
	case *github.CodeScanningAlertEvent:
		return p.Alert != nil
	case *github.PushEvent:
		return p.Ref != nil && p.Repo != nil
	case *github.OrganizationEvent:
		return p.Organization != nil && p.Action != nil
	case *github.MemberEvent:
		return p.Member != nil && p.Repo != nil
	case *github.MembershipEvent:
		return p.Member != nil && p.Team != nil
	case *github.TeamEvent:
		return p.Team != nil
	case *github.TeamAddEvent:
		return p.Team != nil && p.Repo != nil
	}
	return true
}

// headerToken reports whether v is a plausible event name or delivery id:
// 1 to 100 printable ASCII characters (GitHub sends a name and a GUID; the
// id is stored, and PostgreSQL refuses invalid UTF-8).
func headerToken(v string) bool {
	if v == "" || len(v) > 100 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x21 || v[i] > 0x7e {
			return false
		}
	}
	return true
}
