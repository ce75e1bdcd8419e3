//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestOAuthConformance runs the official conformance suite's
// `authorization` command against a tenant's issuer: its metadata scenario,
// and its authorization-code-grant scenario with the person's sign-in and
// consent completed in Chromium. It runs the suite that e2e/conformance
// pins and installs (installSuite), with the Node.js that comes with it.
func TestOAuthConformance(t *testing.T) {
	t.Parallel()
	suite := installSuite(t)
	s := newStack(t)
	demo := s.cltctl("demo", "--public-url", s.url, "--source", t.TempDir())
	memberLink := linkRE.FindString(demo)
	port := freePort(t)
	redirect := fmt.Sprintf("http://127.0.0.1:%d/callback", port)
	clientID := registerPublicClient(t, s, "MCP conformance", redirect)

	ctx := browser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(memberLink), chromedp.Click(chromedp.CSS(`form[action="/auth/link"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`#list-h`))); err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(t.TempDir(), "results")
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, suite.node, suite.cli, "authorization", "--url", s.url+"/t/demo",
		"--client-id", clientID, "--resource", s.url+"/t/demo/mcp", "--port", strconv.Itoa(port), "-o", out)
	cmd.Dir = t.TempDir()
	// The suite's own child processes find the same Node.js first.
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(suite.node)+string(os.PathListSeparator)+os.Getenv("PATH"))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	cmd.Stderr = &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	authRE := regexp.MustCompile(`^https?://\S+/oauth/authorize\?\S+$`)
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		log.WriteString(line + "\n")
		if authRE.MatchString(strings.TrimSpace(line)) {
			if err := chromedp.Do(ctx, chromedp.Navigate(strings.TrimSpace(line)), chromedp.WaitVisible(chromedp.CSS(`#approve`)),
				chromedp.Click(chromedp.CSS(`#approve`))); err != nil {
				t.Errorf("consent for the conformance suite: %v", err)
			}
		}
	}
	err = cmd.Wait()
	t.Logf("conformance output:\n%s", log.String())
	if err != nil {
		t.Fatalf("conformance authorization: %v", err)
	}
	text := log.String()
	for _, want := range []string{"authorization-server-metadata-endpoint", "authorization-code-grant"} {
		if !strings.Contains(text, want) {
			t.Errorf("scenario %s did not run", want)
		}
	}
	if !regexp.MustCompile(`Total: [1-9]\d* passed, 0 failed`).MatchString(text) || strings.Contains(text, "✗") {
		t.Errorf("the conformance suite reported failures")
	}
}
