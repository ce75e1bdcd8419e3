package importer

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// row is the part of a finding the fixture tables compare.
type row struct {
	Key    string
	Sev    codelotse.Severity
	Status string
	Path   string
	Start  int // 0: no line
	End    int
	Title  string
}

func rows(fs []codelotse.Finding) []row {
	out := make([]row, len(fs))
	for i, f := range fs {
		out[i] = row{f.RuleKey, f.Severity, f.Status, f.Path, deref(f.StartLine), deref(f.EndLine), f.Title}
	}
	return out
}

const (
	open      = codelotse.StatusOpen
	dismissed = codelotse.StatusDismissed
	resolved  = codelotse.StatusResolved

	info     = codelotse.SeverityInfo
	low      = codelotse.SeverityLow
	medium   = codelotse.SeverityMedium
	high     = codelotse.SeverityHigh
	critical = codelotse.SeverityCritical
)

func TestParseSARIFFixtures(t *testing.T) {
	const (
		glAPIKey = "Detected a Generic API Key, potentially exposing access to various services and sensitive operations."
		glKey    = "Identified a Private Key, which may compromise cryptographic security and sensitive data encryption."
		glPAT    = "Uncovered a GitHub Personal Access Token, potentially leading to unauthorized repository access and sensitive content exposure."
		sg       = "Semgrep OSS/"
		sgTaint  = "go.lang.security.injection.tainted-sql-string.tainted-sql-string"
		sgSQL    = "go.lang.security.audit.database.string-formatted-query.string-formatted-query"
		sgRand   = "go.lang.security.audit.crypto.math_random.math-random-used"
		sgTLS    = "go.lang.security.audit.net.use-tls.use-tls"
		sgEq     = "go.lang.correctness.useless-eqeq.eqeq-is-bad"
	)
	tests := []struct {
		file    string
		tool    string
		want    []row
		bodies  map[int]string // finding index → body
		suggest map[int]string // finding index → suggestion
	}{
		{
			file: "gitleaks.sarif", tool: "gitleaks",
			// gitleaks sets no level and no default: every secret is medium.
			want: []row{
				{"gitleaks/generic-api-key", medium, open, "config.yaml", 14, 14, glAPIKey},
				{"gitleaks/private-key", medium, open, "deploy/keys/staging.pem", 1, 27, glKey},
				{"gitleaks/github-pat", medium, open, "scripts/release.sh", 9, 9, glPAT},
				// The same secret seen at another commit is another finding.
				{"gitleaks/generic-api-key", medium, open, "config.yaml", 14, 14, glAPIKey},
			},
			bodies: map[int]string{0: "generic-api-key has detected secret for file config.yaml at commit 4f1c2e9a7b3d5c8e0f6a1b2c3d4e5f6a7b8c9d0e."},
		},
		{
			file: "golangci-lint.sarif", tool: "golangci-lint",
			// No rules: the title is the linter's name.
			want: []row{
				{"golangci-lint/errcheck", high, open, "pkg/postgres/tokens.go", 88, 88, "errcheck"},
				{"golangci-lint/staticcheck", high, open, "pkg/httpserver/mcp.go", 141, 141, "staticcheck"},
				{"golangci-lint/govet", high, open, "apps/cltctl/token.go", 57, 57, "govet"},
				{"golangci-lint/gosec", medium, open, "pkg/shape/shape.go", 203, 203, "gosec"},
				{"golangci-lint/unused", medium, open, "pkg/tokens/tokens.go", 112, 112, "unused"},
				{"golangci-lint/errcheck", high, open, "pkg/postgres/repositories.go", 64, 64, "errcheck"},
			},
			bodies: map[int]string{
				0: "Error return value of `tx.Rollback` is not checked",
				3: "G115: integer overflow conversion int -> int32",
			},
		},
		{
			file: "codeql.sarif", tool: "CodeQL",
			want: []row{
				{"CodeQL/go/sql-injection", high, open, "internal/store/orders.go", 57, 57, "Database query built from user-controlled sources"},
				// ruleIndex only: the id comes from the rule.
				{"CodeQL/go/command-injection", critical, open, "cmd/worker/exec.go", 33, 33, "Command built from user-controlled sources"},
				{"CodeQL/go/path-injection", high, open, "internal/files/download.go", 41, 43, "Uncontrolled data used in path expression"},
				// Suppressed in source.
				{"CodeQL/go/reflected-xss", medium, dismissed, "internal/api/search.go", 66, 66, "Reflected cross-site scripting"},
				// No security-severity: the rule's default level.
				{"CodeQL/go/unhandled-writable-file-close", medium, open, "internal/export/csv.go", 88, 88, "Writable file handle closed without error handling"},
				{"CodeQL/go/useless-assignment-to-local", low, open, "internal/store/orders.go", 112, 112, "Useless assignment to local variable"},
				// ruleId only, no index.
				{"CodeQL/go/sql-injection", high, open, "internal/store/customers.go", 74, 74, "Database query built from user-controlled sources"},
			},
			bodies: map[int]string{0: "This query depends on a [user-provided value](1)."},
		},
		{
			file: "semgrep.sarif", tool: "Semgrep OSS",
			// Semgrep results carry no level: the rule's default decides.
			want: []row{
				{sg + sgTaint, high, open, "internal/store/orders.go", 55, 57, "Semgrep Finding: " + sgTaint},
				{sg + sgSQL, medium, open, "internal/store/customers.go", 74, 74, "Semgrep Finding: " + sgSQL},
				{sg + sgRand, medium, open, "internal/auth/session.go", 9, 9, "Semgrep Finding: " + sgRand},
				{sg + sgTLS, medium, open, "cmd/server/main.go", 42, 42, "Semgrep Finding: " + sgTLS},
				{sg + sgEq, low, open, "internal/api/pagination.go", 31, 31, "Semgrep Finding: " + sgEq},
			},
			suggest: map[int]string{
				0: "",
				2: "Do not use `math/rand`. Use `crypto/rand` instead.\n Autofix: Semgrep rule suggested fix",
				3: "Found an HTTP server without TLS. Use 'http.ListenAndServeTLS' instead. See https://golang.org/pkg/net/http/#ListenAndServeTLS for more information.\n Autofix: Semgrep rule suggested fix",
			},
		},
	}
	hex32 := regexp.MustCompile(`^[0-9a-f]{32}$`)
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile("testdata/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseSARIF(data, SARIFOptions{Repository: "acme/shop"})
			if err != nil {
				t.Fatalf("ParseSARIF: %v", err)
			}
			if g := rows(got.Findings); !reflect.DeepEqual(g, tc.want) {
				t.Errorf("findings\n got: %s\nwant: %s", dump(g), dump(tc.want))
			}
			for i, body := range tc.bodies {
				if got.Findings[i].Body != body {
					t.Errorf("finding %d body = %q, want %q", i, got.Findings[i].Body, body)
				}
			}
			for i, s := range tc.suggest {
				if got.Findings[i].Suggestion != s {
					t.Errorf("finding %d suggestion = %q, want %q", i, got.Findings[i].Suggestion, s)
				}
			}
			wantReview := codelotse.Review{ExternalID: "sarif:" + tc.tool, Status: "completed", Author: tc.tool,
				Summary: fmt.Sprintf("%s reported %d findings.", tc.tool, len(tc.want))}
			if got.Repository != "acme/shop" || got.PullRequest != nil || got.Source != "sarif:"+tc.tool || got.Review != wantReview {
				t.Errorf("repository %q, pull request %v, source %q, review %+v; want acme/shop, none, sarif:%s, %+v",
					got.Repository, got.PullRequest, got.Source, got.Review, tc.tool, wantReview)
			}
			again, err := ParseSARIF(data, SARIFOptions{Repository: "acme/shop"})
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]int{}
			for i, f := range got.Findings {
				if f.Source != "sarif:"+tc.tool || f.CommitSHA != "" {
					t.Errorf("finding %d: source %q, commit %q", i, f.Source, f.CommitSHA)
				}
				if !hex32.MatchString(f.Fingerprint) {
					t.Errorf("finding %d: fingerprint %q is not 32 hex digits", i, f.Fingerprint)
				}
				if again.Findings[i].Fingerprint != f.Fingerprint {
					t.Errorf("finding %d: fingerprint not stable: %s then %s", i, f.Fingerprint, again.Findings[i].Fingerprint)
				}
				if j, dup := seen[f.Fingerprint]; dup {
					t.Errorf("findings %d and %d share fingerprint %s", j, i, f.Fingerprint)
				}
				seen[f.Fingerprint] = i
			}
		})
	}
}

func TestParseSARIFOptions(t *testing.T) {
	data, err := os.ReadFile("testdata/gitleaks.sarif")
	if err != nil {
		t.Fatal(err)
	}
	const sha = "b7e0d1c2a3f4e5d6c7b8a9f0e1d2c3b4a5f6e7d8"
	tests := []struct {
		name   string
		opts   SARIFOptions
		pr     *codelotse.PullRequest
		ext    string
		commit string
	}{
		{"repository only", SARIFOptions{Repository: "acme/shop"}, nil, "sarif:gitleaks", ""},
		{"pull request and commit", SARIFOptions{Repository: "acme/shop", PRNumber: 12, Commit: sha},
			&codelotse.PullRequest{Number: 12, HeadSHA: sha}, "sarif:gitleaks:pr12:" + sha, sha},
		{"pull request only", SARIFOptions{Repository: "acme/shop", PRNumber: 12},
			&codelotse.PullRequest{Number: 12}, "sarif:gitleaks:pr12", ""},
		{"commit only", SARIFOptions{Repository: "acme/shop", Commit: "b7e0d1c"}, nil, "sarif:gitleaks:b7e0d1c", "b7e0d1c"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSARIF(data, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.PullRequest, tc.pr) {
				t.Errorf("pull request = %+v, want %+v", got.PullRequest, tc.pr)
			}
			if got.Review.ExternalID != tc.ext || got.Review.CommitSHA != tc.commit {
				t.Errorf("review external id %q, commit %q; want %q, %q", got.Review.ExternalID, got.Review.CommitSHA, tc.ext, tc.commit)
			}
			for i, f := range got.Findings {
				if f.CommitSHA != tc.commit {
					t.Errorf("finding %d commit = %q, want %q", i, f.CommitSHA, tc.commit)
				}
			}
		})
	}
}

// sarif1 is a log with one run of tool "lint" with the given rules and
// results (JSON array members).
func sarif1(rules, results string) []byte {
	return []byte(`{"version":"2.1.0","runs":[{"tool":{"driver":{"name":"lint","rules":[` + rules + `]}},"results":[` + results + `]}]}`)
}

// parse1 parses a log and returns its only finding.
func parse1(t *testing.T, data []byte) codelotse.Finding {
	t.Helper()
	got, err := ParseSARIF(data, SARIFOptions{Repository: "acme/shop"})
	if err != nil {
		t.Fatalf("ParseSARIF: %v", err)
	}
	if len(got.Findings) != 1 {
		t.Fatalf("%d findings, want 1", len(got.Findings))
	}
	return got.Findings[0]
}

func TestSARIFSeverity(t *testing.T) {
	rule := func(props string) string { return `{"id":"r","properties":{` + props + `}}` }
	res := func(extra string) string { return `{"ruleId":"r","message":{"text":"m"}` + extra + `}` }
	tests := []struct {
		name         string
		rules, resul string
		want         codelotse.Severity
	}{
		{"security-severity 10", rule(`"security-severity":"10.0"`), res(""), critical},
		{"security-severity 9.0", rule(`"security-severity":"9.0"`), res(""), critical},
		{"security-severity 8.9", rule(`"security-severity":"8.9"`), res(""), high},
		{"security-severity 7.0", rule(`"security-severity":"7.0"`), res(""), high},
		{"security-severity 6.9", rule(`"security-severity":"6.9"`), res(""), medium},
		{"security-severity 4", rule(`"security-severity":"4"`), res(""), medium},
		{"security-severity 3.9", rule(`"security-severity":"3.9"`), res(""), low},
		{"security-severity 0.1", rule(`"security-severity":"0.1"`), res(""), low},
		{"security-severity 0.0", rule(`"security-severity":"0.0"`), res(""), info},
		{"security-severity with spaces", rule(`"security-severity":" 7.5 "`), res(""), high},
		{"security-severity as a number", rule(`"security-severity":9.8`), res(""), critical},
		{"security-severity beats level", rule(`"security-severity":"8.1"`), res(`,"level":"note"`), high},
		{"result security-severity beats rule", rule(`"security-severity":"9.8"`), res(`,"properties":{"security-severity":"2.0"}`), low},
		{"level error", "", res(`,"level":"error"`), high},
		{"level warning", "", res(`,"level":"warning"`), medium},
		{"level note", "", res(`,"level":"note"`), low},
		{"level none", "", res(`,"level":"none"`), info},
		{"no level: warning", "", res(""), medium},
		{"rule default level", `{"id":"r","defaultConfiguration":{"level":"error"}}`, res(""), high},
		{"result level beats rule default", `{"id":"r","defaultConfiguration":{"level":"error"}}`, res(`,"level":"note"`), low},
		{"rule found by ruleIndex", `{"id":"x"},{"id":"r","defaultConfiguration":{"level":"none"}}`, `{"ruleIndex":1,"message":{"text":"m"}}`, info},
		{"rule found by rule.index", `{"id":"x"},{"id":"r","defaultConfiguration":{"level":"none"}}`, `{"rule":{"index":1},"message":{"text":"m"}}`, info},
		{"rule found by rule.id", `{"id":"x"},{"id":"r","defaultConfiguration":{"level":"none"}}`, `{"rule":{"id":"r"},"message":{"text":"m"}}`, info},
		{"other properties ignored", rule(`"precision":"high","tags":["security"]`), res(`,"level":"error"`), high},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if f := parse1(t, sarif1(tc.rules, tc.resul)); f.Severity != tc.want {
				t.Errorf("severity = %q, want %q", f.Severity, tc.want)
			}
		})
	}
}

func TestSARIFTitleAndRuleKey(t *testing.T) {
	tests := []struct {
		name         string
		rules, resul string
		key, title   string
		body         string
	}{
		{"short description", `{"id":"r","name":"RuleName","shortDescription":{"text":"Short text"}}`, `{"ruleId":"r","message":{"text":"m"}}`, "lint/r", "Short text", "m"},
		{"name when the short description is empty", `{"id":"r","name":"RuleName","shortDescription":{"text":""}}`, `{"ruleId":"r","message":{"text":"m"}}`, "lint/r", "RuleName", "m"},
		{"id when there is no name", `{"id":"r","fullDescription":{"text":"long"}}`, `{"ruleId":"r","message":{"text":"m"}}`, "lint/r", "r", "m"},
		{"id of a rule the run does not describe", "", `{"ruleId":"SA1019","message":{"text":"m"}}`, "lint/SA1019", "SA1019", "m"},
		{"first line of the message without a rule", "", `{"message":{"text":"  Something is off\nDetails follow."}}`, "lint", "Something is off", "  Something is off\nDetails follow."},
		// Cut at 200 characters, not bytes: a cut inside "é" would leave
		// invalid UTF-8, which PostgreSQL refuses to store.
		{"long message cut at 200 characters", "", `{"message":{"text":"a` + strings.Repeat("é", 250) + `"}}`, "lint", "a" + strings.Repeat("é", 199), "a" + strings.Repeat("é", 250)},
		{"markdown message", `{"id":"r"}`, `{"ruleId":"r","message":{"markdown":"**bold**"}}`, "lint/r", "r", "**bold**"},
		{"text beats markdown", `{"id":"r"}`, `{"ruleId":"r","message":{"text":"plain","markdown":"**bold**"}}`, "lint/r", "r", "plain"},
		{"ruleIndex out of range falls back to the id", `{"id":"r","name":"N"}`, `{"ruleId":"r","ruleIndex":5,"message":{"text":"m"}}`, "lint/r", "N", "m"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := parse1(t, sarif1(tc.rules, tc.resul))
			if f.RuleKey != tc.key || f.Title != tc.title || f.Body != tc.body {
				t.Errorf("key %q, title %q, body %q; want %q, %q, %q", f.RuleKey, f.Title, f.Body, tc.key, tc.title, tc.body)
			}
		})
	}
}

// CodeQL keeps its queries' rules in the query pack, an extension of the
// tool; results point at them through rule.toolComponent.
func TestSARIFExtensionRules(t *testing.T) {
	data := []byte(`{"version":"2.1.0","runs":[{"tool":{
		"driver":{"name":"CodeQL","rules":[]},
		"extensions":[{"name":"codeql/go-queries","rules":[
			{"id":"go/path-injection","shortDescription":{"text":"Uncontrolled data used in path expression"},"properties":{"security-severity":"7.5"}},
			{"id":"go/command-injection","shortDescription":{"text":"Command built from user-controlled sources"},"properties":{"security-severity":"9.8"}}]}]},
		"results":[
			{"ruleId":"go/command-injection","rule":{"id":"go/command-injection","index":1,"toolComponent":{"index":0}},"message":{"text":"a"}},
			{"ruleId":"go/path-injection","message":{"text":"b"}},
			{"rule":{"index":0,"toolComponent":{"index":0}},"message":{"text":"c"}},
			{"ruleId":"go/command-injection","rule":{"index":0,"toolComponent":{"index":7}},"message":{"text":"d"}}]}]}`)
	got, err := ParseSARIF(data, SARIFOptions{Repository: "acme/shop"})
	if err != nil {
		t.Fatal(err)
	}
	want := []row{
		{"CodeQL/go/command-injection", critical, open, "", 0, 0, "Command built from user-controlled sources"},
		{"CodeQL/go/path-injection", high, open, "", 0, 0, "Uncontrolled data used in path expression"},
		{"CodeQL/go/path-injection", high, open, "", 0, 0, "Uncontrolled data used in path expression"},
		// No extension 7: found by id.
		{"CodeQL/go/command-injection", critical, open, "", 0, 0, "Command built from user-controlled sources"},
	}
	if g := rows(got.Findings); !reflect.DeepEqual(g, want) {
		t.Errorf("findings\n got: %s\nwant: %s", dump(g), dump(want))
	}
}

func TestSARIFPaths(t *testing.T) {
	const bases = `"originalUriBaseIds":{"%SRCROOT%":{"uri":"file:///home/runner/work/shop/shop/"},"ROOT":{"uri":"file:///home/runner/"},"NOSLASH":{"uri":"file:///srv/checkout"}},`
	tests := []struct {
		name string
		loc  string // the artifactLocation
		want string
	}{
		{"relative", `{"uri":"internal/api/orders.go"}`, "internal/api/orders.go"},
		{"relative to %SRCROOT%", `{"uri":"internal/api/orders.go","uriBaseId":"%SRCROOT%"}`, "internal/api/orders.go"},
		{"percent-encoded", `{"uri":"docs/read%20me.md"}`, "docs/read me.md"},
		{"percent-encoded percent", `{"uri":"web/100%25.css"}`, "web/100%.css"},
		{"invalid percent-encoding kept", `{"uri":"web/100%.css"}`, "web/100%.css"},
		{"leading ./", `{"uri":"./cmd/server/main.go"}`, "cmd/server/main.go"},
		{"backslashes", `{"uri":"cmd\\server\\main.go"}`, "cmd/server/main.go"},
		{"file URI inside the longest base", `{"uri":"file:///home/runner/work/shop/shop/internal/api/orders.go"}`, "internal/api/orders.go"},
		{"file URI percent-encoded", `{"uri":"file:///home/runner/work/shop/shop/docs/read%20me.md"}`, "docs/read me.md"},
		{"file URI with a base without trailing slash", `{"uri":"file:///srv/checkout/go.mod"}`, "go.mod"},
		{"file URI with a host", `{"uri":"file://localhost/home/runner/work/shop/shop/go.mod"}`, "go.mod"},
		{"file URI outside every base keeps its path", `{"uri":"file:///opt/src/go.mod"}`, "opt/src/go.mod"},
		{"empty", `{"uri":""}`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := `{"version":"2.1.0","runs":[{"tool":{"driver":{"name":"lint"}},` + bases +
				`"results":[{"message":{"text":"m"},"locations":[{"physicalLocation":{"artifactLocation":` + tc.loc + `}}]}]}]}`
			if f := parse1(t, []byte(data)); f.Path != tc.want {
				t.Errorf("path = %q, want %q", f.Path, tc.want)
			}
		})
	}
}

func TestSARIFRegions(t *testing.T) {
	loc := func(region string) string {
		return `{"message":{"text":"m"},"locations":[{"physicalLocation":{"artifactLocation":{"uri":"a.go"}` + region + `}}]}`
	}
	tests := []struct {
		name       string
		result     string
		start, end int
	}{
		{"start and end", loc(`,"region":{"startLine":3,"endLine":5}`), 3, 5},
		{"start only", loc(`,"region":{"startLine":3,"startColumn":7}`), 3, 3},
		{"end only is dropped", loc(`,"region":{"endLine":5}`), 0, 0},
		{"byte offsets only", loc(`,"region":{"charOffset":120,"charLength":8}`), 0, 0},
		{"no region", loc(""), 0, 0},
		{"logical location only", `{"message":{"text":"m"},"locations":[{"logicalLocations":[{"fullyQualifiedName":"pkg.F"}]}]}`, 0, 0},
		{"no location", `{"message":{"text":"m"}}`, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := parse1(t, sarif1("", tc.result))
			if deref(f.StartLine) != tc.start || deref(f.EndLine) != tc.end {
				t.Errorf("lines %v-%v, want %d-%d", deref(f.StartLine), deref(f.EndLine), tc.start, tc.end)
			}
			if (f.StartLine == nil) != (f.EndLine == nil) {
				t.Errorf("start %v and end %v must be both set or both absent", f.StartLine, f.EndLine)
			}
		})
	}
}

func TestSARIFStatus(t *testing.T) {
	res := func(extra string) string { return `{"message":{"text":"m"}` + extra + `}` }
	tests := []struct {
		name   string
		result string
		want   string
	}{
		{"plain", res(""), open},
		{"suppressed in source", res(`,"suppressions":[{"kind":"inSource"}]`), dismissed},
		{"suppression accepted", res(`,"suppressions":[{"kind":"external","status":"accepted","justification":"false positive"}]`), dismissed},
		{"suppression under review", res(`,"suppressions":[{"kind":"external","status":"underReview"}]`), open},
		{"suppression rejected", res(`,"suppressions":[{"kind":"inSource"},{"kind":"external","status":"rejected"}]`), open},
		{"empty suppressions", res(`,"suppressions":[]`), open},
		{"baseline absent", res(`,"baselineState":"absent"`), resolved},
		{"baseline new", res(`,"baselineState":"new"`), open},
		{"baseline unchanged", res(`,"baselineState":"unchanged"`), open},
		{"baseline updated", res(`,"baselineState":"updated"`), open},
		{"suppressed and absent", res(`,"baselineState":"absent","suppressions":[{"kind":"inSource"}]`), dismissed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if f := parse1(t, sarif1("", tc.result)); f.Status != tc.want {
				t.Errorf("status = %q, want %q", f.Status, tc.want)
			}
		})
	}
}

func TestSARIFFingerprintsAndDuplicates(t *testing.T) {
	at := func(line int, msg, extra string) string {
		return fmt.Sprintf(`{"ruleId":"r","message":{"text":%q},"locations":[{"physicalLocation":{"artifactLocation":{"uri":"a.go"},"region":{"startLine":%d}}}]%s}`, msg, line, extra)
	}
	tests := []struct {
		name    string
		results []string
		want    int
	}{
		{"identical results collapse", []string{at(3, "m", ""), at(3, "m", "")}, 1},
		{"another message is another finding", []string{at(3, "m", ""), at(3, "n", "")}, 2},
		{"another line is another finding", []string{at(3, "m", ""), at(4, "m", "")}, 2},
		{"equal partial fingerprints collapse whatever the message", []string{
			at(3, "m", `,"partialFingerprints":{"primaryLocationLineHash":"abc:1"}`),
			at(3, "n", `,"partialFingerprints":{"primaryLocationLineHash":"abc:1"}`)}, 1},
		{"other partial fingerprints are other findings", []string{
			at(3, "m", `,"partialFingerprints":{"primaryLocationLineHash":"abc:1"}`),
			at(3, "m", `,"partialFingerprints":{"primaryLocationLineHash":"abc:2"}`)}, 2},
		{"fingerprints when there are no partial ones", []string{
			at(3, "m", `,"fingerprints":{"matchBasedId/v1":"1"}`),
			at(3, "n", `,"fingerprints":{"matchBasedId/v1":"1"}`),
			at(3, "m", `,"fingerprints":{"matchBasedId/v1":"2"}`)}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSARIF(sarif1(`{"id":"r"}`, strings.Join(tc.results, ",")), SARIFOptions{Repository: "acme/shop"})
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Findings) != tc.want {
				t.Fatalf("%d findings, want %d", len(got.Findings), tc.want)
			}
			noun := "findings"
			if tc.want == 1 {
				noun = "finding"
			}
			if want := fmt.Sprintf("lint reported %d %s.", tc.want, noun); got.Review.Summary != want {
				t.Errorf("summary = %q, want %q", got.Review.Summary, want)
			}
		})
	}

	// Fingerprint key order does not matter.
	a := parse1(t, sarif1("", at(3, "m", `,"partialFingerprints":{"a":"1","b":"2"}`)))
	b := parse1(t, sarif1("", at(3, "m", `,"partialFingerprints":{"b":"2","a":"1"}`)))
	if a.Fingerprint != b.Fingerprint {
		t.Errorf("fingerprint depends on key order: %s, %s", a.Fingerprint, b.Fingerprint)
	}
}

func TestSARIFRuns(t *testing.T) {
	run := func(tool, msg string) string {
		return `{"tool":{"driver":{"name":"` + tool + `"}},"results":[{"ruleId":"r","message":{"text":"` + msg + `"}}]}`
	}
	data := []byte(`{"version":"2.1.0","runs":[` + run("Semgrep OSS", "m") + `,` + run("CodeQL", "m") + `,` + run("CodeQL", "n") + `,` +
		`{"tool":{"driver":{"name":"gitleaks"}},"results":[]}]}`)
	got, err := ParseSARIF(data, SARIFOptions{Repository: "acme/shop", PRNumber: 3})
	if err != nil {
		t.Fatal(err)
	}
	want := codelotse.Review{ExternalID: "sarif:CodeQL+Semgrep OSS+gitleaks:pr3", Status: "completed",
		Author: "CodeQL, Semgrep OSS, gitleaks", Summary: "CodeQL, Semgrep OSS, gitleaks reported 3 findings."}
	if got.Review != want || got.Source != "sarif:CodeQL+Semgrep OSS+gitleaks" {
		t.Errorf("review %+v, source %q; want %+v", got.Review, got.Source, want)
	}
	var sources []string
	for _, f := range got.Findings {
		sources = append(sources, f.RuleKey+" "+f.Source)
	}
	if w := []string{"Semgrep OSS/r sarif:Semgrep OSS", "CodeQL/r sarif:CodeQL", "CodeQL/r sarif:CodeQL"}; !reflect.DeepEqual(sources, w) {
		t.Errorf("findings %q, want %q", sources, w)
	}
}

func TestParseSARIFErrors(t *testing.T) {
	ok := SARIFOptions{Repository: "acme/shop"}
	loc := func(region string) string {
		return `{"message":{"text":"m"},"locations":[{"physicalLocation":{"artifactLocation":{"uri":"a.go"},"region":` + region + `}}]}`
	}
	typeErr := `{"version":"2.1.0","runs":[{"tool":{"driver":{"name":"lint"}},"results":[{"message":{"text":"m"},` +
		`"locations":[{"physicalLocation":{"region":{"startLine":"3"}}}]}]}]}`
	tests := []struct {
		name string
		data string
		opts SARIFOptions
		want string
	}{
		{"version 2.0.0", `{"version":"2.0.0","runs":[]}`, ok, `/version: must be "2.1.0" (only SARIF 2.1.0 is supported), not "2.0.0"`},
		{"no version", `{"runs":[]}`, ok, `/version: must be "2.1.0" (only SARIF 2.1.0 is supported), not ""`},
		{"not SARIF at all", `{"issues":[]}`, ok, `/version: must be "2.1.0" (only SARIF 2.1.0 is supported), not ""`},
		{"no runs", `{"version":"2.1.0","runs":[]}`, ok, `/runs: has no runs`},
		{"runs missing", `{"version":"2.1.0"}`, ok, `/runs: has no runs`},
		{"missing driver name", `{"version":"2.1.0","runs":[{"tool":{"driver":{"name":"a"}}},{"tool":{"driver":{}}}]}`, ok,
			`/runs/1/tool/driver/name: is required`},
		{"blank driver name", `{"version":"2.1.0","runs":[{"tool":{"driver":{"name":" "}}}]}`, ok, `/runs/0/tool/driver/name: is required`},
		{"missing message text", string(sarif1("", `{"message":{"text":"m"}},{"ruleId":"r","message":{}}`)), ok,
			`/runs/0/results/1/message/text: is required`},
		{"blank message", string(sarif1("", `{"message":{"text":" \n"}}`)), ok, `/runs/0/results/0/message/text: is required`},
		{"startLine 0", string(sarif1("", loc(`{"startLine":0}`))), ok,
			`/runs/0/results/0/locations/0/physicalLocation/region/startLine: must be 1 to 2147483647`},
		{"startLine too large", string(sarif1("", loc(`{"startLine":4294967296}`))), ok,
			`/runs/0/results/0/locations/0/physicalLocation/region/startLine: must be 1 to 2147483647`},
		{"endLine too large", string(sarif1("", loc(`{"startLine":1,"endLine":2147483648}`))), ok,
			`/runs/0/results/0/locations/0/physicalLocation/region/endLine: must be at most 2147483647`},
		{"endLine before startLine", string(sarif1("", loc(`{"startLine":9,"endLine":8}`))), ok,
			`/runs/0/results/0/locations/0/physicalLocation/region/endLine: must not be before startLine`},
		{"path outside the repository", string(sarif1("", `{"message":{"text":"m"},"locations":[{"physicalLocation":{"artifactLocation":{"uri":"../../etc/passwd"}}}]}`)), ok,
			`/runs/0/results/0/locations/0/physicalLocation/artifactLocation/uri: path must stay inside the repository, not "../../etc/passwd"`},
		{"bad level", string(sarif1("", `{"level":"fatal","message":{"text":"m"}}`)), ok,
			`/runs/0/results/0/level: must be none, note, warning or error, not "fatal"`},
		{"bad level despite security-severity", string(sarif1(`{"id":"r","properties":{"security-severity":"9.1"}}`, `{"ruleId":"r","level":"Error","message":{"text":"m"}}`)), ok,
			`/runs/0/results/0/level: must be none, note, warning or error, not "Error"`},
		{"bad default level of the rule", string(sarif1(`{"id":"x"},{"id":"r","defaultConfiguration":{"level":"critical"}}`, `{"ruleId":"r","message":{"text":"m"}}`)), ok,
			`/runs/0/tool/driver/rules/1/defaultConfiguration/level: must be none, note, warning or error, not "critical"`},
		{"non-numeric security-severity on the rule", string(sarif1(`{"id":"r","properties":{"security-severity":"high"}}`, `{"ruleId":"r","message":{"text":"m"}}`)), ok,
			`/runs/0/tool/driver/rules/0/properties/security-severity: must be a number, not "high"`},
		{"non-numeric security-severity on the result", string(sarif1("", `{"message":{"text":"m"},"properties":{"security-severity":"high"}}`)), ok,
			`/runs/0/results/0/properties/security-severity: must be a number, not "high"`},
		{"empty security-severity", string(sarif1(`{"id":"r","properties":{"security-severity":""}}`, `{"ruleId":"r","message":{"text":"m"}}`)), ok,
			`/runs/0/tool/driver/rules/0/properties/security-severity: must be a number, not ""`},
		{"NaN security-severity", string(sarif1(`{"id":"r","properties":{"security-severity":"NaN"}}`, `{"ruleId":"r","message":{"text":"m"}}`)), ok,
			`/runs/0/tool/driver/rules/0/properties/security-severity: must be a number, not "NaN"`},
		{"boolean security-severity", string(sarif1(`{"id":"r","properties":{"security-severity":true}}`, `{"ruleId":"r","message":{"text":"m"}}`)), ok,
			`/runs/0/tool/driver/rules/0/properties/security-severity: must be a number`},
		{"bad security-severity in an extension", `{"version":"2.1.0","runs":[{"tool":{"driver":{"name":"CodeQL"},"extensions":[{"name":"p","rules":[{"id":"a"},{"id":"r","properties":{"security-severity":"n/a"}}]}]},` +
			`"results":[{"ruleId":"r","message":{"text":"m"}}]}]}`, ok,
			`/runs/0/tool/extensions/0/rules/1/properties/security-severity: must be a number, not "n/a"`},

		// Options are checked before the file.
		{"bad commit option", "not even JSON", SARIFOptions{Repository: "acme/shop", Commit: "main"}, `commit must be a lowercase hex commit id`},
		{"upper-case commit option", "{}", SARIFOptions{Repository: "acme/shop", Commit: "B7E0D1C"}, `commit must be a lowercase hex commit id`},
		{"bad repository option", "{}", SARIFOptions{Repository: "shop"}, `repository must be OWNER/NAME, not "shop"`},
		{"missing repository option", "{}", SARIFOptions{}, `repository must be OWNER/NAME, not ""`},
		{"negative pull request option", "{}", SARIFOptions{Repository: "acme/shop", PRNumber: -1}, `pull request number must be positive`},
		{"pull request option too large", "{}", SARIFOptions{Repository: "acme/shop", PRNumber: 1 << 31}, `pull request number must be at most 2147483647`},

		// Decoding.
		{"wrong type", typeErr, ok, fmt.Sprintf(`line 1:%d: /runs/0/results/0/locations/0/physicalLocation/region/startLine: must be a whole number, not the string "3"`,
			strings.Index(typeErr, `"3"`)+1)},
		{"results as an object", `{"version":"2.1.0","runs":[{"results":{}}]}`, ok, `line 1:39: /runs/0/results: must be an array, not an object`},
		{"level as a number", "{\"version\":\"2.1.0\",\n\"runs\":[{\"results\":[{\"level\":3}]}]}", ok, `line 2:30: /runs/0/results/0/level: must be a string, not the number 3`},
		{"pointer escapes a slash in a key", string(sarif1("", `{"message":{"text":"m"},"fingerprints":{"matchBasedId/v1":7}}`)), ok,
			`line 1:143: /runs/0/results/0/fingerprints/matchBasedId~1v1: must be a string, not the number 7`},
		{"syntax error", "{\"version\":\"2.1.0\",\n\"runs\":[}", ok, `line 2:9: invalid JSON: invalid character '}' looking for beginning of value`},
		{"trailing data", `{"version":"2.1.0","runs":[]}]`, ok, `line 1:30: unexpected data after the JSON document`},
		{"empty", "", ok, `the file is empty`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSARIF([]byte(tc.data), tc.opts)
			if err == nil {
				t.Fatalf("ParseSARIF succeeded (%d findings), want %q", len(got.Findings), tc.want)
			}
			if code := codelotse.ErrorCode(err); code != codelotse.Invalid {
				t.Errorf("error code = %q, want %q", code, codelotse.Invalid)
			}
			if msg := codelotse.ErrorMessage(err); msg != tc.want {
				t.Errorf("error message\n got: %s\nwant: %s", msg, tc.want)
			}
		})
	}
}

// SARIF producers add many fields of their own: they are ignored, whatever
// their shape, while the fields CodeLotse reads are checked.
func TestSARIFUnknownFieldsIgnored(t *testing.T) {
	data := []byte(`{"$schema":"https://json.schemastore.org/sarif-2.1.0.json","version":"2.1.0","inlineExternalProperties":[{"x":[1,{"y":null}]}],
		"runs":[{"tool":{"driver":{"name":"lint","fullName":"Lint 1.0","rules":[{"id":"r","messageStrings":{"default":{"text":"{0}"}}}]}},
		"invocations":[{"executionSuccessful":true}],"taxonomies":[],"webRequests":[],
		"results":[{"ruleId":"r","message":{"text":"m","arguments":["a"]},"codeFlows":[{"threadFlows":[{"locations":[]}]}],"rank":42.5,"kind":"fail"}]}]}`)
	if f := parse1(t, data); f.RuleKey != "lint/r" {
		t.Errorf("rule key %q", f.RuleKey)
	}
}

func TestParseSARIFTooManyResults(t *testing.T) {
	var b strings.Builder
	for i := range MaxFindings + 1 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"message":{"text":"m%d"}}`, i)
	}
	_, err := ParseSARIF(sarif1("", b.String()), SARIFOptions{Repository: "acme/shop"})
	want := fmt.Sprintf("/runs/0/results/%d: too many results; at most %d per import", MaxFindings, MaxFindings)
	if codelotse.ErrorCode(err) != codelotse.Invalid || codelotse.ErrorMessage(err) != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
}
