package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// cmdHealth: cltctl health [--url URL]
//
// Asks an API's /readyz and exits 0 only when it answers 200: the health
// check of the container image, which has no shell or curl.
func cmdHealth(e *env, args []string) error {
	fs := e.flags("health")
	url := fs.String("url", "http://127.0.0.1:8080/readyz", "the readiness URL to ask")
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for the answer")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if !strings.HasPrefix(*url, "http://") && !strings.HasPrefix(*url, "https://") {
		return usageError{fmt.Sprintf("--url must be an http(s) URL, not %q", *url)}
	}
	ctx, cancel := context.WithTimeout(e.ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
	if err != nil {
		return usageError{fmt.Sprintf("--url: %v", err)}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return codelotse.Errorf(codelotse.Unavailable, "%s did not answer: %v", *url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return codelotse.Errorf(codelotse.Unavailable, "%s answered %d: %s", *url, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	fmt.Fprintf(e.stdout, "%s: ready\n", *url)
	return nil
}
