package githubapp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/codeindex"
	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/githubapp/githubtest"
)

// recorder notes, for every request the App sends, its path and whether it
// carried credentials.
type recorder struct {
	base http.RoundTripper
	mu   sync.Mutex
	seen []seenRequest
}

type seenRequest struct {
	path, query, authorization string
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.seen = append(r.seen, seenRequest{req.URL.Path, req.URL.RawQuery, req.Header.Get("Authorization")})
	r.mu.Unlock()
	return r.base.RoundTrip(req)
}

func (r *recorder) requests() []seenRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

const (
	mainSHA = "1111111111111111111111111111111111111111"
	featSHA = "2222222222222222222222222222222222222222"
)

func TestArchive(t *testing.T) {
	s := appServer(t)
	rec := &recorder{base: s.Client().Transport}
	a, _ := newApp(t, s, s.APIURL, &http.Client{Transport: rec})
	s.SetRepoFiles(apiRepo, mainSHA, map[string]string{
		"README.md":        "# api\n",
		"cmd/api/main.go":  "package main\n\nfunc main() {}\n",
		"assets/logo.png":  "\x89PNG\r\n\x1a\n\x00\x00",
		"docs/latin1.txt":  "caf\xe9\n",
		"internal/x/y.go":  "package x\n",
		"internal/x/z.txt": "",
	})
	s.SetRepoFiles(apiRepo, featSHA, map[string]string{"only.go": "package only\n"})
	s.SetBranchHead(apiRepo, "feature/x", featSHA)
	c := a.Installation(instID)

	rc, err := c.Archive(context.Background(), "acme/api", mainSHA)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := codeindex.ReadTarball(rc, mainSHA)
	if cerr := rc.Close(); cerr != nil {
		t.Errorf("Close: %v", cerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range snap.Files {
		got = append(got, f.Path+" "+f.SkipReason)
	}
	want := []string{"README.md ", "assets/logo.png binary", "cmd/api/main.go ", "docs/latin1.txt ", "internal/x/y.go ", "internal/x/z.txt "}
	if !slices.Equal(got, want) {
		t.Errorf("files = %q, want %q", got, want)
	}

	// The installation token went to the API, and not to the download,
	// though the fake serves both on one host.
	reqs := rec.requests()
	var tarball, download *seenRequest
	for i, r := range reqs {
		switch {
		case strings.HasSuffix(r.path, "/repos/acme/api/tarball/"+mainSHA):
			tarball = &reqs[i]
		case strings.HasPrefix(r.path, "/_codeload/"):
			download = &reqs[i]
		}
	}
	if tarball == nil || download == nil {
		t.Fatalf("requests = %+v", reqs)
	}
	if !strings.HasPrefix(tarball.authorization, "token ghs_") {
		t.Errorf("the tarball request was sent with %q, want the installation token", tarball.authorization)
	}
	if download.authorization != "" {
		t.Errorf("the download was sent with credentials %q", download.authorization)
	}
	if !strings.Contains(download.query, "token=") {
		t.Errorf("the download lost its URL token: %+v", download)
	}

	// A branch (with a slash) and the default branch.
	for ref, wantCommit := range map[string]string{"feature/x": featSHA, "": mainSHA, "main": mainSHA} {
		rc, err := c.Archive(context.Background(), "acme/api", ref)
		if err != nil {
			t.Fatalf("Archive(%q): %v", ref, err)
		}
		snap, err := codeindex.ReadTarball(rc, "")
		rc.Close()
		if err != nil || snap.Commit != wantCommit {
			t.Errorf("Archive(%q): commit %q, %v; want %s", ref, snap.Commit, err, wantCommit)
		}
	}

	if _, err := c.Archive(context.Background(), "acme/api", "nope"); codelotse.ErrorCode(err) != codelotse.NotFound {
		t.Errorf("unknown ref: err = %v", err)
	}
}

func TestArchiveRetries(t *testing.T) {
	s, a, clk := appFixture(t)
	s.SetRepoFiles(apiRepo, mainSHA, map[string]string{"a.go": "package a\n"})
	c := a.Installation(instID)
	warm(t, c)
	s.FailNextOn("/repos/acme/api/tarball/"+mainSHA, githubtest.ServerError)
	s.FailNextOn("/_codeload/acme/api/legacy.tar.gz/"+mainSHA, githubtest.ServerError)
	rc, err := c.Archive(context.Background(), "acme/api", mainSHA)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if snap, err := codeindex.ReadTarball(rc, mainSHA); err != nil || len(snap.Files) != 1 {
		t.Errorf("after retries: %+v, %v", snap, err)
	}
	if len(clk.Slept()) != 2 {
		t.Errorf("waits = %v, want a backoff for each step", clk.Slept())
	}
}

func TestArchiveTooLarge(t *testing.T) {
	s, a, _ := appFixture(t)
	s.SetRepoFiles(apiRepo, mainSHA, map[string]string{"a.txt": strings.Repeat("compressible ", 100)})
	c := a.Installation(instID)

	// The fake sends Content-Length: refused before reading.
	a.maxArchive = 100
	_, err := c.Archive(context.Background(), "acme/api", mainSHA)
	if !errors.Is(err, ErrArchiveTooLarge) || codelotse.ErrorCode(err) != codelotse.Invalid {
		t.Errorf("with Content-Length: err = %v", err)
	}

	// Without Content-Length the stream fails (never ends short).
	body := strings.Repeat("x", 1000)
	srv := downloadServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.(http.Flusher).Flush() // chunked: no Content-Length
		_, _ = io.WriteString(w, body)
	})
	b := srvApp(t, srv)
	for limit, wantErr := range map[int64]bool{999: true, 1000: false} {
		b.maxArchive = limit
		rc, err := b.Installation(1).Archive(context.Background(), "a/b", "")
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if wantErr && (!errors.Is(err, ErrArchiveTooLarge) || int64(len(got)) != limit) {
			t.Errorf("limit %d: read %d bytes, err %v; want %d bytes and ErrArchiveTooLarge", limit, len(got), err, limit)
		}
		if !wantErr && (err != nil || string(got) != body) {
			t.Errorf("limit %d: read %d bytes, err %v; want all", limit, len(got), err)
		}
	}
}

func TestArchiveStalls(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv := downloadServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "first bytes")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	a := srvApp(t, srv)
	a.archiveIdle = 200 * time.Millisecond
	rc, err := a.Installation(1).Archive(context.Background(), "a/b", "main")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	start := time.Now()
	got, err := io.ReadAll(rc)
	if string(got) != "first bytes" || err == nil || !strings.Contains(err.Error(), "stalled") {
		t.Errorf("read %q, err %v; want the first bytes, then a stall", got, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the stall was noticed after %v", d)
	}
}

// TestArchiveRedirects covers redirects GitHub.com makes (to codeload on
// another host) and ones CodeLotse must refuse.
func TestArchiveRedirects(t *testing.T) {
	var mu sync.Mutex
	var downloadAuth []string
	download := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		downloadAuth = append(downloadAuth, r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = io.WriteString(w, "archive bytes")
	}))
	t.Cleanup(download.Close)
	var location string
	srv := tokenServer(t, func(w http.ResponseWriter, r *http.Request) {
		if location == "" {
			_, _ = io.WriteString(w, "served directly")
			return
		}
		w.Header().Set("Location", location)
		w.WriteHeader(http.StatusFound)
	})
	a := srvApp(t, srv)

	for _, tt := range []struct {
		location, want string
		ok             bool
	}{
		{download.URL + "/acme/api/legacy.tar.gz/refs/heads/main?token=AAAA", "archive bytes", true},
		{"", "served directly", true},
		{"ftp://codeload.example/x", "", false},
		{"https://user:pw@codeload.example/x", "", false},
		{"//", "", false}, // back to the API root, which redirects again: a loop
	} {
		location = tt.location
		rc, err := a.Installation(1).Archive(context.Background(), "acme/api", "main")
		if !tt.ok {
			if err == nil || codelotse.ErrorCode(err) != codelotse.Unavailable {
				t.Errorf("redirect to %q: err = %v", tt.location, err)
			}
			if err != nil && strings.Contains(err.Error(), "pw@") {
				t.Errorf("error quotes the URL: %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("redirect to %q: %v", tt.location, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || string(got) != tt.want {
			t.Errorf("redirect to %q: %q, %v", tt.location, got, err)
		}
	}
	if len(downloadAuth) != 1 || downloadAuth[0] != "" {
		t.Errorf("the download host saw Authorization %q", downloadAuth)
	}

	// An https API may not be redirected to plain http.
	tlsAPI := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/access_tokens") {
			writeToken(w)
			return
		}
		http.Redirect(w, r, download.URL+"/x", http.StatusFound)
	}))
	t.Cleanup(tlsAPI.Close)
	s := githubtest.New(t)
	b, err := NewApp(AppConfig{AppID: 1, PrivateKeyPEM: s.AppPrivateKeyPEM(), APIURL: tlsAPI.URL, HTTPClient: tlsAPI.Client()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Installation(1).Archive(context.Background(), "acme/api", "main"); err == nil || !strings.Contains(err.Error(), "downgrades") {
		t.Errorf("https to http: err = %v", err)
	}
}

// TestArchiveErrorsHideDownloadURL: the download URL's query is a token,
// so no error may quote it.
func TestArchiveErrorsHideDownloadURL(t *testing.T) {
	srv := tokenServer(t, func(w http.ResponseWriter, r *http.Request) {
		// A port nothing listens on: the download fails to connect.
		w.Header().Set("Location", "http://127.0.0.1:1/acme/api/legacy.tar.gz/main?token=SECRETDOWNLOADTOKEN")
		w.WriteHeader(http.StatusFound)
	})
	a := srvApp(t, srv)
	a.clock = &fakeClock{now: time.Now()}
	_, err := a.Installation(1).Archive(context.Background(), "acme/api", "main")
	if err == nil || codelotse.ErrorCode(err) != codelotse.Unavailable {
		t.Fatalf("err = %v", err)
	}
	if strings.Contains(fmt.Sprintf("%v %+v %#v", err, err, err), "SECRETDOWNLOADTOKEN") {
		t.Errorf("error quotes the download URL: %v", err)
	}
}

func writeToken(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = fmt.Fprintf(w, `{"token":"ghs_archiveTest","expires_at":%q}`, time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
}

// tokenServer issues installation tokens and answers everything else with
// handler.
func tokenServer(t *testing.T, handler http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/access_tokens") {
			writeToken(w)
			return
		}
		handler(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// downloadServer redirects tarball requests to /download, served by
// handler.
func downloadServer(t *testing.T, handler http.HandlerFunc) *httptest.Server {
	t.Helper()
	var srv *httptest.Server
	srv = tokenServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/download" {
			handler(w, r)
			return
		}
		http.Redirect(w, r, srv.URL+"/download", http.StatusFound)
	})
	return srv
}

func srvApp(t *testing.T, srv *httptest.Server) *App {
	t.Helper()
	s := githubtest.New(t)
	a, err := NewApp(AppConfig{AppID: 1, PrivateKeyPEM: s.AppPrivateKeyPEM(), APIURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestArchiveOutlivesClientTimeout: the HTTP client's Timeout bounds API
// requests, not a download that keeps delivering.
func TestArchiveOutlivesClientTimeout(t *testing.T) {
	srv := downloadServer(t, func(w http.ResponseWriter, r *http.Request) {
		for i := range 5 {
			_, _ = fmt.Fprintf(w, "chunk %d\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(60 * time.Millisecond)
		}
	})
	s := githubtest.New(t)
	a, err := NewApp(AppConfig{AppID: 1, PrivateKeyPEM: s.AppPrivateKeyPEM(), APIURL: srv.URL, HTTPClient: &http.Client{Timeout: 150 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := a.Installation(1).Archive(context.Background(), "a/b", "main")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil || !strings.HasSuffix(string(got), "chunk 4\n") {
		t.Errorf("read %q, %v", got, err)
	}
}
