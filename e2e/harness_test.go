//go:build e2e

// Package e2e tests the built binaries (api, worker, cltctl) against a real
// PostgreSQL, driving them with the official MCP Go SDK client and raw HTTP,
// as a user or operator would.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
)

// binDir holds the binaries built once for the whole run.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "codelotse-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	build := exec.Command("go", "build", "-o", dir+string(os.PathSeparator), "./apps/api", "./apps/worker", "./apps/cltctl")
	build.Dir = ".."
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building the binaries failed:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// stack is one fresh database with the API running against it.
type stack struct {
	t    *testing.T
	db   *pgtest.Env
	url  string // PUBLIC_URL
	env  []string
	logs *syncBuffer
	// api is the API process started last (the soak reads its RSS).
	api *os.Process
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newStack creates a database, migrates it with cltctl, and starts the API
// on a free loopback port. extraEnv adds settings such as MCP_ALLOWED_ORIGINS.
func newStack(t *testing.T, extraEnv ...string) *stack {
	t.Helper()
	db := pgtest.New(t)
	port := freePort(t)
	s := &stack{t: t, db: db, url: fmt.Sprintf("http://127.0.0.1:%d", port), logs: &syncBuffer{}}
	s.env = append(os.Environ(),
		"DATABASE_URL="+db.AdminURL,
		"DB_ROLE_PREFIX="+db.RolePrefix,
		"PUBLIC_URL="+s.url,
		"APP_DATABASE_URL=",
		"LISTEN_ADDR=",
		// The tests' identity provider (e2e/oidcop) runs on loopback http:
		// allowed here only, never by default.
		"OIDC_ALLOW_PRIVATE_CIDRS=127.0.0.0/8,::1/128",
		"OIDC_ALLOW_HTTP=true",
	)
	s.env = append(s.env, extraEnv...)
	s.cltctl("migrate")
	s.startAPI(s.url, s.logs)
	return s
}

// startAPI starts an api process serving publicURL (its port is the
// listening port) with the stack's environment plus extra settings, and
// waits until it is healthy. It stops when the test ends.
func (s *stack) startAPI(publicURL string, logs *syncBuffer, extra ...string) {
	t := s.t
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "api"))
	cmd.Env = append(append(append([]string{}, s.env...), "PUBLIC_URL="+publicURL), extra...)
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.api = cmd.Process
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("api output (%s):\n%s", publicURL, logs.String())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(publicURL + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("api did not become healthy: %v\n%s", err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cltctl runs a cltctl command that must succeed and returns its stdout.
func (s *stack) cltctl(args ...string) string {
	s.t.Helper()
	out, errOut, code := s.cltctlRun(args...)
	if code != 0 {
		s.t.Fatalf("cltctl %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// cltctlRun runs a cltctl command and returns stdout, stderr and exit code.
func (s *stack) cltctlRun(args ...string) (string, string, int) {
	s.t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "cltctl"), args...)
	cmd.Env = s.env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		s.t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

// token creates a token with cltctl and returns it.
func (s *stack) token(tenant, email, name string) string {
	s.t.Helper()
	return strings.TrimSpace(s.cltctl("token", "create", "--tenant", tenant, "--email", email, "--name", name))
}

// exec runs SQL as the administrator of the test database.
func (s *stack) exec(sql string, args ...any) {
	s.t.Helper()
	if _, err := s.db.Admin.Pool.Exec(context.Background(), sql, args...); err != nil {
		s.t.Fatalf("%s: %v", sql, err)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// bearerTransport adds the Authorization header: the SDK client has no
// header option.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// connect opens an MCP client session; version "" uses the SDK's default
// (2026-07-28 with server/discover).
func connect(t *testing.T, endpoint, token, version string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "codelotse-e2e", Version: "1.0.0"}, nil)
	transport := &mcp.StreamableClientTransport{
		Endpoint:             endpoint,
		HTTPClient:           &http.Client{Transport: bearerTransport{token}, Timeout: 30 * time.Second},
		DisableStandaloneSSE: true,
		MaxRetries:           -1,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := client.Connect(ctx, transport, opts)
	if err != nil {
		t.Fatalf("connect (%q): %v", version, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// call calls a tool and returns its text and isError.
func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	text, isErr, _ := callMeta(t, cs, name, args)
	return text, isErr
}

// callMeta is call that also returns the result's _meta.
func callMeta(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool, mcp.Meta) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError, res.Meta
}

// stoppableWorker starts a worker like stack.startWorker, and returns a
// function that stops it (and waits for it), so a test can show what
// happens without a worker.
func stoppableWorker(s *stack, logs *syncBuffer, extra ...string) (stop func()) {
	t := s.t
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "worker"))
	cmd.Env = append(append([]string{}, s.env...), extra...)
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		_ = cmd.Wait()
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("worker output:\n%s", logs.String())
		}
	})
	return stop
}

// startWorker starts a worker process with the stack's environment plus
// extra settings; it stops when the test ends (stoppableWorker also lets a
// test stop it earlier).
func (s *stack) startWorker(logs *syncBuffer, extra ...string) {
	s.t.Helper()
	stoppableWorker(s, logs, extra...)
}
