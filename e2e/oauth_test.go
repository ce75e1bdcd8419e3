//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// callbackServer is the client's loopback redirect URI: it hands the
// authorization response to the waiting fetcher.
type callbackServer struct {
	srv *httptest.Server
	got chan *auth.AuthorizationResult
}

func newCallback(t *testing.T) *callbackServer {
	cb := &callbackServer{got: make(chan *auth.AuthorizationResult, 1)}
	cb.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Only the redirect itself: the browser also asks for /favicon.ico,
		// which must not pass for an authorization response.
		if r.URL.Path != "/callback" {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		if e := q.Get("error"); e != "" {
			fmt.Fprintf(w, "error %s", e)
			cb.got <- &auth.AuthorizationResult{State: q.Get("state"), Iss: q.Get("iss")}
			return
		}
		fmt.Fprint(w, "You can close this window.")
		cb.got <- &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}
	}))
	t.Cleanup(cb.srv.Close)
	return cb
}

func (cb *callbackServer) redirectURI() string { return cb.srv.URL + "/callback" }

// browserFetcher completes the person's side in Chromium: open the
// authorization URL (the person is signed in already), approve on the
// consent page, and wait for the redirect to reach the callback.
func browserFetcher(t *testing.T, ctx context.Context, cb *callbackServer, consent *string) auth.AuthorizationCodeFetcher {
	return func(_ context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
		if err := chromedp.Do(ctx,
			chromedp.Navigate(args.URL),
			chromedp.WaitVisible(chromedp.CSS(`#approve`)),
		); err != nil {
			return nil, fmt.Errorf("consent page: %w", err)
		}
		text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main")))
		if err != nil {
			return nil, err
		}
		*consent = text
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#approve`))); err != nil {
			return nil, fmt.Errorf("approve: %w", err)
		}
		select {
		case r := <-cb.got:
			return r, nil
		case <-time.After(30 * time.Second):
			return nil, fmt.Errorf("no authorization response at the redirect URI")
		}
	}
}

// oauthConnect connects the SDK client with its OAuth handler.
func oauthConnect(t *testing.T, endpoint string, h auth.OAuthHandler) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "codelotse-e2e-oauth", Version: "1.0.0"}, nil)
	transport := &mcp.StreamableClientTransport{Endpoint: endpoint, OAuthHandler: h, DisableStandaloneSSE: true, MaxRetries: -1,
		HTTPClient: &http.Client{Timeout: 60 * time.Second}}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		t.Fatalf("connect with OAuth: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// listedRepos returns the repository names of a list_repositories answer.
func listedRepos(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	text, isErr := call(t, cs, "list_repositories", nil)
	if isErr {
		t.Fatalf("list_repositories: %s", text)
	}
	var names []string
	for _, candidate := range []string{"codelotse/codelotse", "codelotse/hidden"} {
		if strings.Contains(text, candidate) {
			names = append(names, candidate)
		}
	}
	sort.Strings(names)
	return names
}

// TestOAuthSDKClient: the official Go SDK's client-side OAuth connects to a
// tenant's endpoint end to end, once with a Client ID Metadata Document
// served by the test and once through dynamic registration; the person signs
// in (development link) and consents in headless Chromium; the client lists
// tools and sees exactly the person's repositories.
func TestOAuthSDKClient(t *testing.T) {
	t.Parallel()
	// The client's metadata document, on https at 127.0.0.1 with a test
	// certificate the API is told to trust (development settings).
	cb := newCallback(t)
	var docURL string
	cimd := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"client_id": docURL, "client_name": "E2E Doc Client",
			"redirect_uris": []string{"http://127.0.0.1/callback"}, "grant_types": []string{"authorization_code", "refresh_token"},
			"response_types": []string{"code"}, "token_endpoint_auth_method": "none"})
	}))
	defer cimd.Close()
	docURL = cimd.URL + "/client.json"
	caFile := filepath.Join(t.TempDir(), "cimd-ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cimd.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}

	s := newStack(t, "OAUTH_CIMD_ALLOW_CIDRS=127.0.0.1/32", "OAUTH_CIMD_CA_FILE="+caFile)
	demo := s.cltctl("demo", "--public-url", s.url, "--source", t.TempDir())
	memberLink := linkRE.FindString(demo)
	if memberLink == "" {
		t.Fatalf("no sign-in link in cltctl demo output:\n%s", demo)
	}
	// A repository of the tenant the member cannot see.
	s.cltctl("repo", "add", "--tenant", "demo", "--full-name", "codelotse/hidden")

	ctx := browser(t)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(memberLink),
		chromedp.Click(chromedp.CSS(`form[action="/auth/link"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`#list-h`)),
	); err != nil {
		t.Fatalf("signing in: %v", err)
	}
	endpoint := s.url + "/t/demo/mcp"

	t.Run("client ID metadata document", func(t *testing.T) {
		var consent string
		h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
			ClientIDMetadataDocumentConfig: &auth.ClientIDMetadataDocumentConfig{URL: docURL},
			RedirectURL:                    cb.redirectURI(),
			AuthorizationCodeFetcher:       browserFetcher(t, ctx, cb, &consent),
			RequestRefreshToken:            true,
		})
		if err != nil {
			t.Fatal(err)
		}
		cs := oauthConnect(t, endpoint, h)
		for _, want := range []string{"E2E Doc Client", "127.0.0.1", "demo", "read-only", "90 days"} {
			if !strings.Contains(consent, want) {
				t.Errorf("consent page lacks %q:\n%s", want, consent)
			}
		}
		tools, err := cs.ListTools(context.Background(), nil)
		if err != nil || len(tools.Tools) == 0 {
			t.Fatalf("tools/list: %v %v", err, tools)
		}
		if got := listedRepos(t, cs); strings.Join(got, ",") != "codelotse/codelotse" {
			t.Fatalf("repositories seen through OAuth = %v, want exactly the member's", got)
		}
		screenshotConsentList(t, ctx, s.url)
	})

	t.Run("dynamic registration", func(t *testing.T) {
		var consent string
		h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
			DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
				ClientName: "E2E Registered Client", RedirectURIs: []string{cb.redirectURI()},
				GrantTypes: []string{"authorization_code", "refresh_token"}, TokenEndpointAuthMethod: "none"}},
			AuthorizationCodeFetcher: browserFetcher(t, ctx, cb, &consent),
		})
		if err != nil {
			t.Fatal(err)
		}
		cs := oauthConnect(t, endpoint, h)
		if !strings.Contains(consent, "E2E Registered Client") {
			t.Errorf("consent page lacks the registered name:\n%s", consent)
		}
		if got := listedRepos(t, cs); strings.Join(got, ",") != "codelotse/codelotse" {
			t.Fatalf("repositories seen through OAuth = %v", got)
		}
	})

	// Both grants are on the member's MCP access page.
	if err := chromedp.Do(ctx, chromedp.Navigate(s.url+"/t/demo/mcp"), chromedp.WaitVisible(chromedp.CSS(`#oauth-h`))); err != nil {
		t.Fatal(err)
	}
	text := pageText(t, ctx)
	for _, want := range []string{"E2E Doc Client — via OAuth", "E2E Registered Client — via OAuth", endpoint} {
		if !strings.Contains(text, want) {
			t.Errorf("MCP access page lacks %q", want)
		}
	}
	// The header-configured personal access token keeps working at /mcp.
	tok := s.token("demo", "member@demo.codelotse.test", "header client")
	if text, isErr := call(t, connect(t, s.url+"/mcp", tok, ""), "list_repositories", nil); isErr || !strings.Contains(text, "codelotse/codelotse") {
		t.Fatalf("PAT at /mcp: %s", text)
	}
}

func screenshotConsentList(t *testing.T, ctx context.Context, base string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/t/demo/mcp"), chromedp.WaitVisible(chromedp.CSS(`#oauth-h`))); err != nil {
		t.Fatal(err)
	}
	screenshot(t, ctx, "mcp-access-oauth.png")
}

// TestOAuthBreakGlassCannotAuthorize: a break-glass session sees a refusal
// instead of the consent page.
func TestOAuthBreakGlassCannotAuthorize(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.cltctl("demo", "--public-url", s.url, "--source", t.TempDir())
	out := s.cltctl("break-glass", "--tenant", "demo", "--email", "admin@demo.codelotse.test")
	link := linkRE.FindString(out)
	if link == "" {
		t.Fatalf("no link: %s", out)
	}
	// A dynamically registered client to authorize.
	clientID := registerPublicClient(t, s, "x", "http://127.0.0.1/cb")
	ctx := browser(t)
	authURL := s.url + "/t/demo/oauth/authorize?response_type=code&client_id=" + clientID +
		"&redirect_uri=http%3A%2F%2F127.0.0.1%2Fcb&state=s&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256&resource=" +
		strings.ReplaceAll(s.url, ":", "%3A") + "%2Ft%2Fdemo%2Fmcp"
	if err := chromedp.Do(ctx,
		chromedp.Navigate(link),
		chromedp.Click(chromedp.CSS(`form[action="/auth/link"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`.breakglass`)),
		chromedp.Navigate(authURL),
		chromedp.WaitVisible(chromedp.CSS(`main`)),
	); err != nil {
		t.Fatal(err)
	}
	text := pageText(t, ctx)
	if !strings.Contains(text, "Break-glass sessions can never authorize") || strings.Contains(pageHTML(t, ctx), `id="approve"`) {
		t.Fatalf("break-glass authorization page:\n%s", text)
	}
}

// TestOAuthGitHubSignInResumes: a person who is not signed in follows the
// client's authorization URL, signs in with GitHub exactly as on the web
// pages, lands back on the consent page, and the client then sees exactly
// the repositories that person can see on GitHub.
func TestOAuthGitHubSignInResumes(t *testing.T) {
	t.Parallel()
	gh, s := githubSignInStack(t)

	ctx := browser(t)
	gh.SignInAs(1001)
	cb := newCallback(t)
	var consent string
	h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			ClientName: "E2E GitHub Client", RedirectURIs: []string{cb.redirectURI()}, TokenEndpointAuthMethod: "none"}},
		AuthorizationCodeFetcher: browserFetcher(t, ctx, cb, &consent),
	})
	if err != nil {
		t.Fatal(err)
	}
	cs := oauthConnect(t, s.url+"/t/acme/mcp", h)
	if !strings.Contains(consent, "E2E GitHub Client") || !strings.Contains(consent, "acme") {
		t.Errorf("consent page after GitHub sign-in:\n%s", consent)
	}
	text, isErr := call(t, cs, "list_repositories", nil)
	if isErr || !strings.Contains(text, "acme-org/api") || strings.Contains(text, "acme-org/secret") {
		t.Fatalf("GitHub user's OAuth client: isError=%v %s", isErr, text)
	}
}

// registerPublicClient registers a public client (no secret) of the demo
// tenant by dynamic registration and returns its client_id.
func registerPublicClient(t *testing.T, s *stack, name, redirect string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"client_name": name, "redirect_uris": []string{redirect}, "token_endpoint_auth_method": "none"})
	resp, err := http.Post(s.url+"/t/demo/oauth/register", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var reg struct {
		ClientID string `json:"client_id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&reg); err != nil || reg.ClientID == "" {
		t.Fatalf("registering %s: status %d, %v", name, resp.StatusCode, err)
	}
	return reg.ClientID
}
