package safehttp

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

func TestForbidden(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"127.0.0.1", true},
		{"127.1.2.3", true},
		{"::1", true},
		{"10.0.0.1", true},
		{"172.16.5.4", true},
		{"192.168.1.1", true},
		{"169.254.169.254", true}, // cloud metadata
		{"100.100.100.200", true}, // carrier-grade NAT range (Alibaba metadata)
		{"fd00:ec2::254", true},   // AWS IPv6 metadata (ULA)
		{"fe80::1", true},
		{"0.0.0.0", true},
		{"::", true},
		{"::ffff:127.0.0.1", true}, // IPv4-mapped loopback
		{"::ffff:10.0.0.1", true},
		{"64:ff9b::a00:1", true},                       // NAT64 of 10.0.0.1
		{"2002:7f00:1::", true},                        // 6to4 of 127.0.0.1
		{"2002:a9fe:a9fe::1", true},                    // 6to4 of 169.254.169.254
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", true}, // Teredo
		{"::7f00:1", true},                             // IPv4-compatible 127.0.0.1
		{"2001:4860:4860::8888", false},                // a public address next to Teredo's /32
		{"224.0.0.1", true},
		{"255.255.255.255", true},
		{"192.0.2.10", true},
		{"8.8.8.8", false},
		{"140.82.112.3", false},
		{"2606:4700::1111", false},
	} {
		if got := Forbidden(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("Forbidden(%s) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}

func TestClientRefusesLoopbackAfterDNS(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("secret internal page"))
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))

	strict := NewClient(Options{AllowHTTP: true})
	// "localhost" is resolved by DNS to a loopback address; the check runs on
	// the resolved address, so a name is no way around it.
	for _, u := range []string{srv.URL, "http://localhost:" + port + "/"} {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, u, nil)
		resp, err := strict.Do(req)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("GET %s: want refusal, got %s", u, resp.Status)
		}
		if !IsForbidden(err) {
			t.Fatalf("GET %s: want a forbidden-address error, got %v", u, err)
		}
	}

	allow, err := ParseAllow("127.0.0.0/8, ::1")
	if err != nil {
		t.Fatal(err)
	}
	dev := NewClient(Options{AllowHTTP: true, Allow: allow})
	resp, err := dev.Get(srv.URL)
	if err != nil {
		t.Fatalf("allowed range refused: %v", err)
	}
	resp.Body.Close()
}

func TestClientRefusesSchemesAndRedirects(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	defer target.Close()
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
	}))
	defer redirector.Close()
	allow, _ := ParseAllow("127.0.0.1")

	if _, err := NewClient(Options{Allow: allow}).Get(target.URL); !IsForbidden(err) {
		t.Fatalf("http without AllowHTTP: want refusal, got %v", err)
	}
	if _, err := NewClient(Options{Allow: allow, AllowHTTP: true}).Get(redirector.URL); err == nil {
		t.Fatal("redirect to file:// followed")
	}
	if _, err := NewClient(Options{Allow: allow, AllowHTTP: true}).Get("http://user:pw@127.0.0.1:1/"); !IsForbidden(err) {
		t.Fatalf("credentials in URL: want refusal, got %v", err)
	}
}

func TestReadAllCaps(t *testing.T) {
	if _, err := ReadAll(strings.NewReader(strings.Repeat("a", 11)), 10); err != ErrTooLarge {
		t.Fatalf("want ErrTooLarge, got %v", err)
	}
	b, err := ReadAll(strings.NewReader(strings.Repeat("a", 10)), 10)
	if err != nil || len(b) != 10 {
		t.Fatalf("exactly at the limit: %d %v", len(b), err)
	}
}

func TestParseAllowRejectsGarbage(t *testing.T) {
	if _, err := ParseAllow("127.0.0.1, nonsense"); err == nil {
		t.Fatal("garbage accepted")
	}
}
