package githubapp

import (
	"context"
	"errors"
	"testing"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/githubapp/githubtest"
)

func TestReviewThreads(t *testing.T) {
	s, a, _ := appFixture(t)
	s.AddPullRequest(apiRepo, githubtest.PullRequest{Number: 5, HeadSHA: "0123456789abcdef0123456789abcdef01234567"})
	s.AddReviewComment(apiRepo, 5, githubtest.ReviewComment{ID: 11, ReviewID: 1, Path: "a.go", Line: 4, StartLine: 2, OriginalLine: 4, Body: "one"})
	s.AddReviewComment(apiRepo, 5, githubtest.ReviewComment{ID: 12, ReviewID: 1, InReplyTo: 11, Path: "a.go", Line: 4, Body: "reply"})
	s.AddReviewComment(apiRepo, 5, githubtest.ReviewComment{ID: 13, ReviewID: 1, Path: "b.go", OriginalLine: 9, Body: "outdated"})
	s.AddReviewComment(apiRepo, 5, githubtest.ReviewComment{ID: 14, ReviewID: 1, Path: "c.go", Line: 1, OriginalLine: 1, Body: "resolved"})
	s.ResolveThread(apiRepo, 5, 14, true)
	s.SetMaxPerPage(1) // one thread a page: the cursor is followed
	threads, err := a.Installation(instID).ReviewThreads(context.Background(), "acme/api", 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(threads) != 3 {
		t.Fatalf("threads = %+v, want 3 (the reply is part of the first)", threads)
	}
	one, old, done := threads[0], threads[1], threads[2]
	if one.RootCommentID != 11 || one.Resolved || one.Outdated || one.Comments != 2 || *one.Line != 4 || *one.StartLine != 2 {
		t.Errorf("open thread = %+v", one)
	}
	if old.RootCommentID != 13 || !old.Outdated || old.Resolved || old.Line != nil || *old.OriginalLine != 9 {
		t.Errorf("outdated thread = %+v", old)
	}
	if done.RootCommentID != 14 || !done.Resolved {
		t.Errorf("resolved thread = %+v", done)
	}
	if n := count(s, "POST /api/graphql"); n != 3 {
		t.Errorf("GraphQL requests = %d, want one per page", n)
	}

	if _, err := a.Installation(instID).ReviewThreads(context.Background(), "acme/api", 99); codelotse.ErrorCode(err) != codelotse.NotFound {
		t.Errorf("missing pull request: %v, want not found", err)
	}
	s.SetGraphQL(false)
	if _, err := a.Installation(instID).ReviewThreads(context.Background(), "acme/api", 5); !errors.Is(err, ErrGraphQLUnavailable) {
		t.Errorf("without GraphQL: %v, want ErrGraphQLUnavailable", err)
	}
}

func TestGraphQLURL(t *testing.T) {
	for api, want := range map[string]string{
		"https://api.github.com/":       "https://api.github.com/graphql",
		"https://ghe.example/api/v3/":   "https://ghe.example/api/graphql",
		"http://127.0.0.1:9/api/v3/":    "http://127.0.0.1:9/api/graphql",
		"https://proxy.example/github/": "https://proxy.example/github/graphql",
	} {
		s := githubtest.New(t)
		a, err := NewApp(AppConfig{AppID: 1, PrivateKeyPEM: s.AppPrivateKeyPEM(), APIURL: api})
		if err != nil {
			t.Fatal(err)
		}
		if got := a.graphQLURL(); got != want {
			t.Errorf("%s: %s, want %s", api, got, want)
		}
	}
}

// TestConditionalListings: a listing asked again sends the ETags of the
// pages it has, and GitHub's 304s (free of rate limit) give the same list.
func TestConditionalListings(t *testing.T) {
	s, a, _ := appFixture(t)
	s.SetMaxPerPage(1)
	first, err := a.Installation(instID).Repositories(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s.NotModified() != 0 {
		t.Fatalf("304s on a first listing: %d", s.NotModified())
	}
	again, err := a.Installation(instID).Repositories(context.Background())
	if err != nil || len(again) != len(first) || again[1] != first[1] {
		t.Fatalf("second listing = %+v, %v; want %+v", again, err, first)
	}
	if n := s.NotModified(); n != 2 {
		t.Errorf("304 answers = %d, want 2 (both pages unchanged)", n)
	}
	// A change shows: the changed page is sent in full.
	s.AddRepo(instID, githubtest.Repo{ID: 1009, Name: "new"})
	third, err := a.Installation(instID).Repositories(context.Background())
	if err != nil || len(third) != 3 {
		t.Fatalf("after a change: %+v, %v", third, err)
	}
}
