//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium returns the path of Debian's Chromium, installing it when the
// test runs as root on a machine without it (the CI set-up does the same).
// No test tool downloads a browser of its own.
func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p != "" {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	if os.Geteuid() == 0 {
		cmd := exec.Command("apt-get", "install", "-y", "-qq", "chromium")
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err == nil {
			return "/usr/bin/chromium"
		} else {
			t.Logf("apt-get install chromium: %v\n%s", err, out)
		}
	}
	t.Fatal("headless Chromium is required for the browser tests: apt-get install -y chromium")
	return ""
}

// browser starts a headless Chromium and returns a context for chromedp.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Headless,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1366, 900),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelT(); cancelC(); cancelA() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	return ctx
}

// screenshot saves a full-page PNG under e2e/artifacts and, when
// UPDATE_SCREENSHOTS is set, into docs/screenshots.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	for _, dir := range []string{"artifacts", map[bool]string{true: "../docs/screenshots"}[os.Getenv("UPDATE_SCREENSHOTS") != ""]} {
		if dir == "" {
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func pageText(t *testing.T, ctx context.Context) string {
	t.Helper()
	text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
	if err != nil {
		t.Fatal(err)
	}
	return text
}

var linkRE = regexp.MustCompile(`http://127\.0\.0\.1:\d+/auth/link\?v=\S+`)

// TestBrowserTokenLifecycle: a member signs in (development link), creates
// a token on the MCP access page, uses it with the MCP SDK client, revokes
// it on the page, and the next call gets 401; an admin (break-glass)
// switches MCP off and calls get 401; break-glass cannot create tokens; a
// member cannot reach the admin page; a cross-site POST is refused.
func TestBrowserTokenLifecycle(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	demo := s.cltctl("demo", "--public-url", s.url)
	memberLink := linkRE.FindString(demo)
	if memberLink == "" {
		t.Fatalf("no sign-in link in cltctl demo output:\n%s", demo)
	}
	ctx := browser(t)

	// Sign in as the member and create a token.
	err := chromedp.Do(ctx,
		chromedp.Navigate(memberLink),
		chromedp.Click(chromedp.CSS(`form[action="/auth/link"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`#name`)),
		chromedp.SendKeys(chromedp.CSS(`#name`), "laptop – Claude Code"),
		chromedp.SetValue(chromedp.CSS(`#expires_days`), "14"),
		chromedp.Click(chromedp.CSS(`form.create button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#secret`)),
	)
	if err != nil {
		t.Fatalf("creating a token in the browser: %v\n%s", err, s.logs.String())
	}
	secret, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS(`#secret`)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(secret, "clt_") || len(secret) != 47 {
		t.Fatalf("token on the page = %q", secret)
	}
	text := pageText(t, ctx)
	for _, want := range []string{"shown only once", "claude mcp add --transport http codelotse " + s.url + "/mcp", "does not expire after 24 hours"} {
		if !strings.Contains(text, want) && !strings.Contains(pageHTML(t, ctx), want) {
			t.Errorf("token page lacks %q", want)
		}
	}
	screenshot(t, ctx, "mcp-access-created.png")
	checkAccessible(t, ctx, "MCP access page")

	// The POST redirected (303) to the page that shows the token once.
	if loc, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.pathname + location.search`)); err != nil || !strings.HasPrefix(loc, "/t/demo/mcp?created=") {
		t.Errorf("after creating a token the browser is at %q (%v), want the handoff page", loc, err)
	}
	// The VS Code file holds no token, only the prompt for it.
	vscode, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS(`#snip-vscode`)))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(vscode, secret) || strings.Contains(vscode, "clt_") || !strings.Contains(vscode, `"promptString"`) ||
		!strings.Contains(vscode, "${input:codelotse-token}") {
		t.Errorf("VS Code snippet:\n%s", vscode)
	}
	// No snippet box cuts off its last line.
	clipped, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll(".created textarea")].filter(e => e.scrollHeight > e.clientHeight + 1).map(e => e.id)`))
	if err != nil || len(clipped) > 0 {
		t.Errorf("snippet boxes clipped: %v (%v)", clipped, err)
	}
	// Reloading that page creates nothing and never shows the token again.
	laptopTokens := func() int {
		return strings.Count(s.cltctl("token", "list", "--tenant", "demo", "--email", "member@demo.codelotse.test"), "laptop")
	}
	if n := laptopTokens(); n != 1 {
		t.Fatalf("%d tokens after one creation", n)
	}
	if err := chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#list-h`))); err != nil {
		t.Fatal(err)
	}
	if n := laptopTokens(); n != 1 {
		t.Errorf("%d tokens after reloading the created page, want 1", n)
	}
	if html := pageHTML(t, ctx); strings.Contains(html, secret) || !strings.Contains(html, "already shown once") {
		t.Error("the reloaded page shows the token again, or does not say that it was shown")
	}

	// The token works with the MCP SDK client.
	cs := connect(t, s.url+"/mcp", secret, "")
	if text, isErr := call(t, cs, "list_repositories", nil); isErr || !strings.Contains(text, "codelotse/codelotse") {
		t.Fatalf("new token: isError=%v %s", isErr, text)
	}

	// After a reload the secret is gone from the page.
	if err := chromedp.Do(ctx, chromedp.Navigate(s.url+"/t/demo/mcp"), chromedp.WaitVisible(chromedp.CSS(`#list-h`))); err != nil {
		t.Fatal(err)
	}
	if html := pageHTML(t, ctx); strings.Contains(html, secret) || !strings.Contains(html, "clt_…"+secret[len(secret)-4:]) {
		t.Error("the list page shows the secret, or not its last four characters")
	}

	// Revoke it on the page (the newest token is listed first); the next call gets 401.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`button[aria-label="Revoke laptop – Claude Code"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`button[aria-label="Revoke laptop – Claude Code"]`))); err != nil {
		t.Fatal(err)
	}
	if resp, _ := post(t, s, listCall, with(legacy, "Authorization", "Bearer "+secret)); resp.StatusCode != 401 {
		t.Errorf("revoked token: status %d, want 401", resp.StatusCode)
	}

	// A member cannot reach the admin page.
	if err := chromedp.Do(ctx, chromedp.Navigate(s.url+"/t/demo/admin"), chromedp.WaitVisible(chromedp.CSS(`h1`))); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(pageText(t, ctx), "Admins only") {
		t.Error("a member reached the admin page")
	}

	// A cross-site POST with the member's cookie is refused.
	req, _ := http.NewRequest(http.MethodPost, s.url+"/t/demo/mcp/tokens", strings.NewReader("name=evil"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Errorf("cross-site POST: status %d, want 403", resp.StatusCode)
	}

	// Break-glass: marked, admin page reachable, no token creation; switching
	// MCP off makes a fresh member token answer 401.
	fresh := s.token("demo", "member@demo.codelotse.test", "fresh")
	// Break-glass needs an existing user (it never creates or revives one).
	s.cltctl("user", "add", "--tenant", "demo", "--email", "ops@codelotse.test")
	bg := strings.TrimSpace(s.cltctl("break-glass", "--tenant", "demo", "--email", "ops@codelotse.test"))
	ctx2 := browser(t)
	if err := chromedp.Do(ctx2, chromedp.Navigate(bg), chromedp.Click(chromedp.CSS(`form[action="/auth/link"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`#create-h`))); err != nil {
		t.Fatal(err)
	}
	if text := pageText(t, ctx2); !strings.Contains(text, "Break-glass session") || !strings.Contains(text, "Break-glass sessions cannot create tokens") {
		t.Errorf("break-glass page:\n%s", text)
	}
	if err := chromedp.Do(ctx2, chromedp.Navigate(s.url+"/t/demo/admin"), chromedp.WaitVisible(chromedp.CSS(`#mcp-h`)),
		chromedp.Click(chromedp.CSS(`form[action="/t/demo/admin/mcp"] button`)), chromedp.WaitVisible(chromedp.CSS(`p.flash`))); err != nil {
		t.Fatal(err)
	}
	if text := pageText(t, ctx2); !strings.Contains(text, "MCP is off") || !strings.Contains(text, "mcp.switched") || !strings.Contains(text, "break_glass.signed_in") {
		t.Errorf("admin page after switching MCP off:\n%s", text)
	}
	// At 1280 px the audit table fits: nothing sticks out of the page and no
	// cell is cut off (long details wrap).
	if err := chromedp.Do(ctx2, chromedp.EmulateViewport(1280, 900), chromedp.Navigate(s.url+"/t/demo/admin"), chromedp.WaitVisible(chromedp.CSS(`table.audit`))); err != nil {
		t.Fatal(err)
	}
	overflow, err := chromedp.Run(ctx2, chromedp.Evaluate[[]string](`(() => {
		const out = [], page = document.documentElement.clientWidth;
		const tbl = document.querySelector("table.audit");
		if (tbl.getBoundingClientRect().right > page) out.push("table right edge " + tbl.getBoundingClientRect().right + " > " + page);
		if (document.documentElement.scrollWidth > page) out.push("page scrolls sideways: " + document.documentElement.scrollWidth);
		for (const td of tbl.querySelectorAll("td")) if (td.scrollWidth > td.clientWidth + 1) out.push("cell cut: " + td.textContent.slice(0, 40));
		return out;
	})()`))
	if err != nil || len(overflow) > 0 {
		t.Errorf("audit table at 1280 px: %v %v", overflow, err)
	}
	if text := pageText(t, ctx2); !strings.Contains(text, "member@demo.codelotse.test") || !strings.Contains(text, "local (set by an operator, no expiry)") {
		t.Errorf("members view:\n%s", text)
	}
	screenshot(t, ctx2, "admin.png")
	// The audit log filters by action and by actor.
	if err := chromedp.Do(ctx2, chromedp.Navigate(s.url+"/t/demo/admin?action=mcp.switched"), chromedp.WaitVisible(chromedp.CSS(`#audit-h`))); err != nil {
		t.Fatal(err)
	}
	actions, err := chromedp.Run(ctx2, chromedp.Evaluate[[]string](`[...document.querySelectorAll("table.audit tbody tr")].map(r => r.cells[2].textContent)`))
	if err != nil || len(actions) == 0 || slices.ContainsFunc(actions, func(a string) bool { return a != "mcp.switched" }) {
		t.Errorf("audit filtered by action: %v %v", actions, err)
	}
	if err := chromedp.Do(ctx2, chromedp.Navigate(s.url+"/t/demo/admin?actor=cltctl"), chromedp.WaitVisible(chromedp.CSS(`#audit-h`))); err != nil {
		t.Fatal(err)
	}
	actors, err := chromedp.Run(ctx2, chromedp.Evaluate[[]string](`[...document.querySelectorAll("table.audit tbody tr")].map(r => r.cells[1].textContent)`))
	if err != nil || len(actors) == 0 || slices.ContainsFunc(actors, func(a string) bool { return a != "cltctl" }) {
		t.Errorf("audit filtered by actor: %v %v", actors, err)
	}
	if err := chromedp.Do(ctx2, chromedp.Navigate(s.url+"/t/demo/admin"), chromedp.WaitVisible(chromedp.CSS(`#audit-h`))); err != nil {
		t.Fatal(err)
	}
	if html := pageHTML(t, ctx2); strings.Contains(html, secret) || strings.Contains(html, fresh) {
		t.Error("a token secret appears on the admin page")
	}
	checkAccessible(t, ctx2, "admin page")
	if resp, _ := post(t, s, listCall, with(legacy, "Authorization", "Bearer "+fresh)); resp.StatusCode != 401 {
		t.Errorf("MCP off: status %d, want 401", resp.StatusCode)
	}
	// A direct POST from the break-glass session is refused too.
	created, err := chromedp.Run(ctx2, chromedp.Evaluate[string](`fetch("/t/demo/mcp/tokens", {method: "POST", headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: "name=x"}).then(r => String(r.status))`, chromedp.EvalAwaitPromise))
	if err != nil || created != "403" {
		t.Errorf("break-glass token creation: status %s, want 403", created)
	}

	// Secrets never reach the server's logs.
	if strings.Contains(s.logs.String(), secret) || strings.Contains(s.logs.String(), fresh) {
		t.Error("a token appears in the server logs")
	}
}

func pageHTML(t *testing.T, ctx context.Context) string {
	t.Helper()
	html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html")))
	if err != nil {
		t.Fatal(err)
	}
	return html
}

// checkAccessible checks what a screen-reader and keyboard user relies on:
// one h1, every visible form control labelled (a <label for>, a wrapping
// label or aria-label), every button with a name, and no positive
// tabindex that would break the keyboard order.
func checkAccessible(t *testing.T, ctx context.Context, page string) {
	t.Helper()
	problems, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(() => {
		const p = [];
		if (document.querySelectorAll("h1").length !== 1) p.push("expected exactly one h1");
		for (const el of document.querySelectorAll("input, select, textarea")) {
			if (el.type === "hidden") continue;
			const labelled = (el.id && document.querySelector('label[for="' + el.id + '"]')) || el.closest("label") || el.getAttribute("aria-label");
			if (!labelled) p.push("unlabelled " + el.tagName.toLowerCase() + " " + (el.name || el.id));
		}
		for (const b of document.querySelectorAll("button")) {
			if (!(b.textContent.trim() || b.getAttribute("aria-label"))) p.push("button without a name");
		}
		for (const el of document.querySelectorAll("[tabindex]")) {
			if (el.tabIndex > 0) p.push("positive tabindex");
		}
		return p;
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range problems {
		t.Errorf("%s: %s", page, pr)
	}
}
