package secretscan

import (
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/rs/zerolog"
	"github.com/zricethezav/gitleaks/v8/logging"
)

const testPAT = "clt_rc7Tg8wTqet_87tMEK-QyWE_79DKDi0wOG1q2cwjKyo"

// TestRulesBuild checks the embedded configuration: gitleaks' default rules
// plus the clt_ rule, all usable.
func TestRulesBuild(t *testing.T) {
	t.Parallel()
	rs, err := rules()
	if err != nil {
		t.Fatal(err)
	}
	if len(rs.rules) < 200 {
		t.Fatalf("%d rules; gitleaks' defaults missing?", len(rs.rules))
	}
	var pat *rule
	for _, r := range rs.rules {
		if r.id == PATRuleID {
			pat = r
		}
		for _, v := range r.variants {
			if v.whole {
				t.Logf("%s: runs over whole strings (no anchors)", r.id)
			}
		}
	}
	if pat == nil {
		t.Fatalf("rule %s missing", PATRuleID)
	}
	for _, p := range rs.patterns {
		if p == "" || !isASCII(p) || strings.ToLower(p) != p {
			t.Errorf("pattern %q is not lowercase ASCII", p)
		}
	}
	if New().rs != rs {
		t.Error("New built a second ruleset")
	}
}

func TestGitleaksLoggingSilenced(t *testing.T) {
	t.Parallel()
	New()
	if lvl := logging.Logger.GetLevel(); lvl != zerolog.Disabled {
		t.Fatalf("gitleaks logger level %v, want disabled: it logs secrets at debug level", lvl)
	}
}

func TestRedactPAT(t *testing.T) {
	t.Parallel()
	out, counts := New().Redact("Authorization: Bearer " + testPAT)
	if out != "Authorization: Bearer [REDACTED:codelotse-pat]" {
		t.Fatalf("got %q", out)
	}
	if counts[PATRuleID] != 1 || len(counts) != 1 {
		t.Fatalf("counts %v", counts)
	}
}

func TestRedactKeepsSurroundingText(t *testing.T) {
	t.Parallel()
	in := "export GITHUB_TOKEN=ghp_oMsCzDLuR6lljHyUPS6fhG6fFFAuHimfY1oa"
	out, counts := New().Redact(in)
	if out != "export GITHUB_TOKEN=[REDACTED:github-pat]" {
		t.Fatalf("got %q", out)
	}
	if counts["github-pat"] != 1 || total(counts) != 1 {
		t.Fatalf("counts %v", counts)
	}
}

// TestRedactSecretGroup: where gitleaks reports a secret group, only it is
// replaced.
func TestRedactSecretGroup(t *testing.T) {
	t.Parallel()
	out, counts := New().Redact(`db_password = "wR62KUyUeZjRbz1QtCoM"`)
	if !strings.HasPrefix(out, `db_password = "[REDACTED:`) || !strings.HasSuffix(out, `]"`) {
		t.Fatalf("got %q", out)
	}
	if total(counts) != 1 {
		t.Fatalf("counts %v", counts)
	}
}

func TestRedactNothing(t *testing.T) {
	t.Parallel()
	r := New()
	for _, s := range []string{
		"",
		"clt_",
		"clt_short",
		"clt_" + strings.Repeat("a", 42),
		"a plain sentence about tokens, keys and passwords",
		"pkg/authn/token.go:42",
		`{"severity":"high","rule":"hardcoded-credential"}`,
	} {
		out, counts := r.Redact(s)
		if out != s || counts != nil {
			t.Errorf("Redact(%q) = %q, %v; want it unchanged, nil", s, out, counts)
		}
	}
}

func TestRedactPATBoundaries(t *testing.T) {
	t.Parallel()
	r := New()
	for _, s := range []string{
		testPAT,
		"x" + testPAT + "y",
		testPAT + testPAT,
		"clt_" + testPAT,
	} {
		out, counts := r.Redact(s)
		if strings.Contains(out, testPAT[4:]) || counts[PATRuleID] == 0 {
			t.Errorf("Redact(%q) = %q, %v", s, out, counts)
		}
	}
}

func TestRedactInvalidUTF8(t *testing.T) {
	t.Parallel()
	r := New()
	bad := []string{
		"\xff\xfe\xfd",
		"token=\xff" + testPAT + "\xc3",
		string([]byte{0xe2, 0x84}) + "key = \"" + testPAT + "\"",
		strings.Repeat("\x80api_key=", 500),
		"secret\x00=\x00" + "ghp_oMsCzDLuR6lljHyUPS6fhG6fFFAuHimfY1oa\xf4\x90\x80\x80",
	}
	for _, s := range bad {
		out, _ := r.Redact(s)
		if strings.Contains(out, testPAT) || strings.Contains(out, "ghp_oMsCzDLuR6lljHyUPS6fhG6fFFAuHimfY1oa") {
			t.Errorf("secret survives in %q", out)
		}
		if utf8.ValidString(s) && !utf8.ValidString(out) {
			t.Errorf("valid input %q became invalid", s)
		}
	}
}

// TestRedactFoldRunes covers strings with non-ASCII runes that case-fold to
// ASCII (U+212A KELVIN SIGN, U+017F LONG S, U+0130): they take the slow
// path, gitleaks' own keyword check and whole-string scans.
func TestRedactFoldRunes(t *testing.T) {
	t.Parallel()
	r := New()
	for _, s := range []string{
		"\u212aey: " + testPAT,
		"\u017fecret " + testPAT + " \u0130",
		"api_\u212aey = \"wR62KUyUeZjRbz1QtCoM\"",
	} {
		out, counts := r.Redact(s)
		if strings.Contains(out, testPAT) || strings.Contains(out, "wR62KUyUeZjRbz1QtCoM") || total(counts) == 0 {
			t.Errorf("Redact(%q) = %q, %v", s, out, counts)
		}
	}
}

// TestRedactTruncatedPrivateKey: a key block cut off before its END line
// (an excerpt) is still redacted, though gitleaks needs the END line.
func TestRedactTruncatedPrivateKey(t *testing.T) {
	t.Parallel()
	var key string
	for _, e := range loadCorpus(t) {
		if e.Name == "private-key" {
			key = e.Secret
		}
	}
	lines := strings.Split(key, "\n")
	in := "The excerpt shows:\n" + strings.Join(lines[:6], "\n") + "\n... (truncated)"
	out, counts := New().Redact(in)
	for _, l := range lines[1:6] {
		if strings.Contains(out, l) {
			t.Fatalf("key line survives: %q", out)
		}
	}
	if counts["private-key"] != 1 || !strings.HasSuffix(out, "\n... (truncated)") {
		t.Fatalf("got %q, %v", out, counts)
	}
}

// TestRedactIdempotent: redacted output has nothing left to redact.
func TestRedactIdempotent(t *testing.T) {
	t.Parallel()
	r := New()
	for _, e := range loadCorpus(t) {
		once, _ := r.Redact(e.Line)
		twice, counts := r.Redact(once)
		if twice != once || counts != nil {
			t.Errorf("%s: second pass changed %q to %q", e.Name, once, twice)
		}
	}
}

func TestRedactConcurrent(t *testing.T) {
	t.Parallel()
	r := New()
	es := loadCorpus(t)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				e := es[(w+i)%len(es)]
				out, _ := r.Redact("x " + e.Line + " y")
				if strings.Contains(out, e.Secret) {
					t.Errorf("%s survives", e.Name)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestNilRedactorFailsClosed: a redactor without rules (a broken embedded
// config) hides everything rather than leak.
func TestNilRedactorFailsClosed(t *testing.T) {
	t.Parallel()
	out, counts := (&Redactor{}).Redact("ghp_oMsCzDLuR6lljHyUPS6fhG6fFFAuHimfY1oa")
	if strings.Contains(out, "ghp_") || counts[Unavailable] != 1 {
		t.Fatalf("got %q, %v", out, counts)
	}
	if out, counts := (&Redactor{}).Redact(""); out != "" || counts != nil {
		t.Fatalf("empty string: got %q, %v", out, counts)
	}
}

// TestPanicFailsClosed: a panic inside the rules (a bug on some input) hides
// the whole string, keeping a document's lines, and learns nothing; it
// neither crashes the caller nor lets the text through.
func TestPanicFailsClosed(t *testing.T) {
	t.Parallel()
	broken := &Redactor{rs: &ruleset{}} // no matcher: the scan panics
	const in = "token ghp_oMsCzDLuR6lljHyUPS6fhG6fFFAuHimfY1oa\nsecond line"
	if out, counts := broken.Redact(in); out != "[REDACTED:"+Unavailable+"]" || counts[Unavailable] != 1 {
		t.Errorf("Redact: %q %v", out, counts)
	}
	if out, counts := broken.RedactDocument(in); out != "[REDACTED:"+Unavailable+"]\n[REDACTED:"+Unavailable+"]" || counts[Unavailable] != 1 {
		t.Errorf("RedactDocument: %q %v", out, counts)
	}
	if found := broken.Find(in); found != nil {
		t.Errorf("Find: %v", found)
	}
	lines := []string{"-----BEGIN RSA PRIVATE KEY-----", "MIIEow", "-----END RSA PRIVATE KEY-----"}
	if out, counts := broken.RedactLines(lines); len(out) != 3 || strings.Contains(strings.Join(out, ""), "MIIEow") || counts[Unavailable] != 1 {
		t.Errorf("RedactLines: %q %v", out, counts)
	}
	// The pooled scratch memory is usable afterwards.
	if out, _ := New().Redact(in); strings.Contains(out, "ghp_") {
		t.Errorf("after a panic: %q", out)
	}
}
