package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"strings"
	"time"
	"unicode"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// cmdHealth: cltctl health [--url URL]
//
// Asks an API's /readyz and exits 0 only when it answers 200: the health
// check of the container image, which has no shell or curl.
//
// Without --url it asks the address the API listens on with the same
// settings (LISTEN_ADDR, or PUBLIC_URL's port on loopback in development),
// on loopback; a --url without a path means that API's /readyz.
func cmdHealth(e *env, args []string) error {
	fs := e.flags("health")
	url := fs.String("url", defaultHealthURL(e.cfg.ListenAddr), "the API (its /readyz) or a readiness URL to ask")
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for the answer")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	u, err := neturl.Parse(*url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageError{fmt.Sprintf("--url must be an http(s) URL, not %q", *url)}
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/readyz"
		*url = u.String()
	}
	if *timeout <= 0 {
		return usageError{"--timeout must be positive"}
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
		// One line: the start of the answer's first line, without the
		// control characters a server could send to a terminal.
		first, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
		first = strings.TrimSpace(strings.Map(func(r rune) rune {
			if unicode.IsControl(r) {
				return -1
			}
			return r
		}, first))
		if first == "" {
			return codelotse.Errorf(codelotse.Unavailable, "%s answered %d", *url, resp.StatusCode)
		}
		return codelotse.Errorf(codelotse.Unavailable, "%s answered %d: %s", *url, resp.StatusCode, codelotse.Clip(first, 120))
	}
	fmt.Fprintf(e.stdout, "%s: ready\n", *url)
	return nil
}

// defaultHealthURL is /readyz at the API's listen address, on loopback when
// it listens on every address.
func defaultHealthURL(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil || port == "" {
		return "http://127.0.0.1:8080/readyz"
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/readyz"
}
