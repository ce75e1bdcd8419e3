package secretscan

import (
	"go/build"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zricethezav/gitleaks/v8/detect"
)

// These tests compare Redact with gitleaks' own detector (DetectString, the
// naive whole-string scan) on the same configuration: every secret gitleaks
// reports must be gone from Redact's output, and Redact's windowed scan with
// gitleaks' regexes alone must find exactly what gitleaks finds.

// fuzzPieces are the fragments random test strings are made of: keywords,
// assignment operators, quotes, separators and secrets, whole and cut.
func fuzzPieces(es []corpusEntry) []string {
	p := []string{
		"api_key", "API_KEY", "apiKey", "token", "Token", "secret", "password", "passwd", "auth", "access",
		"credentials", "key", "aws_secret_access_key", "client_secret", "Authorization: Bearer ",
		"kind: Secret", "data:", "curl -H ", "curl -u ", "--header ", "-----BEGIN RSA PRIVATE KEY-----",
		"-----END RSA PRIVATE KEY-----", "heroku", "facebook", "sourcegraph", "okta", "twilio", "SK",
		"=", " = ", ":", ": ", ":=", "=>", ",", "?=", "||", "\"", "'", "`", "\\\"", "\\n", ";", "&", "<", ">",
		"(", ")", "[", "]", "{", "}", "/", ".", "-", "_", " ", "  ", "\t", "\n", "\n\n", "\r\n",
		"the", "config", "value", "https://example.com/?", "file.go:12", "\u00e9", "\xff",
	}
	for _, e := range es {
		p = append(p, e.Secret, e.Line, e.Secret[:len(e.Secret)/2], e.Secret[len(e.Secret)/3:])
	}
	return p
}

func randToken(r *rand.Rand) string {
	const alpha = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	const hexa = "0123456789abcdef"
	n := 4 + r.IntN(90)
	b := make([]byte, n)
	set := alpha
	if r.IntN(3) == 0 {
		set = hexa
	}
	for i := range b {
		b[i] = set[r.IntN(len(set))]
	}
	return string(b)
}

// fuzzString builds a random string of pieces and random tokens.
func fuzzString(r *rand.Rand, pieces []string) string {
	var b strings.Builder
	n := 1 + r.IntN(60)
	for i := 0; i < n; i++ {
		if r.IntN(4) == 0 {
			b.WriteString(randToken(r))
		} else {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
	}
	return b.String()
}

// differentialInputs are generated reviews with planted corpus lines, random
// strings, and Go sources (which hold test keys and key-like identifiers).
func differentialInputs(t *testing.T) []string {
	es := loadCorpus(t)
	var ins []string
	for seed := uint64(0); seed < 12; seed++ {
		g := newReviewGen(1000 + seed)
		var lines []string
		for i := 0; i < 1+g.r.IntN(4); i++ {
			lines = append(lines, es[g.r.IntN(len(es))].Line)
		}
		ins = append(ins, g.withSecrets(4096+g.r.IntN(28*1024), lines))
	}
	r := rand.New(rand.NewPCG(1, 2))
	pieces := fuzzPieces(es)
	n := 3000
	if testing.Short() {
		n = 300
	}
	for i := 0; i < n; i++ {
		ins = append(ins, fuzzString(r, pieces))
	}
	for _, s := range ruleSamples(t) {
		ins = append(ins, s.Line, "x "+s.Line+"\n", s.Line+s.Line)
	}
	for _, s := range adversarialInputs() {
		ins = append(ins, s)
	}
	for _, dir := range []string{"crypto/tls", "crypto/x509", "net/http", "net/smtp", "encoding/pem"} {
		files, _ := filepath.Glob(filepath.Join(build.Default.GOROOT, "src", dir, "*.go"))
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil && len(b) < 256*1024 {
				ins = append(ins, string(b))
			}
		}
	}
	return ins
}

// TestRedactCoversGitleaks: no secret gitleaks finds survives Redact. A
// generic-api-key "secret" that reads like an identifier
// (testRSA2048PrivateKey) is only redacted where gitleaks found it, not
// where the code uses the identifier elsewhere.
// narrowed reports whether the policy deliberately reports less than
// gitleaks for a finding: a Basic credential that does not decode to
// user:password (base64UserInfo).
func narrowed(ruleID, secret string) bool {
	rs, err := rules()
	if err != nil {
		return false // TestRulesBuild reports it
	}
	for _, r := range rs.rules {
		if r.id == ruleID && r.userInfo {
			return !isBasicUserInfo(strings.Trim(secret, quotes))
		}
	}
	return false
}

func TestRedactCoversGitleaks(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("slow: runs gitleaks' detector")
	}
	d := naiveDetector(t)
	red := New()
	before := edgeFallbacks.Load()
	findings := 0
	for _, in := range differentialInputs(t) {
		out, _ := red.Redact(in)
		found := map[string]int{}
		for _, f := range d.DetectString(in) {
			findings++
			if f.Secret == "" || narrowed(f.RuleID, f.Secret) {
				continue
			}
			if strings.Contains(f.RuleID, "generic") && !looksRandom(f.Secret) {
				found[f.Secret]++
				continue
			}
			if strings.Contains(out, f.Secret) {
				t.Errorf("%s finding survives (%d-byte secret) in input of %d bytes", f.RuleID, len(f.Secret), len(in))
			}
		}
		for secret, n := range found {
			if strings.Count(out, secret) > strings.Count(in, secret)-n {
				t.Errorf("generic finding survives (%d-byte secret) in input of %d bytes", len(secret), len(in))
			}
		}
	}
	t.Logf("%d gitleaks findings, all redacted; %d window-edge fallbacks", findings, edgeFallbacks.Load()-before)
}

// TestWindowsMatchGitleaks: with gitleaks' regexes alone, the windowed scan
// reports the same (rule, secret) pairs as gitleaks' whole-string scan,
// except where gitleaks cannot report (rules limited to file paths, which
// Redact applies everywhere; generic findings that gitleaks drops in favour
// of a specific rule on the same line).
func TestWindowsMatchGitleaks(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("slow: runs gitleaks' detector")
	}
	full, err := rules()
	if err != nil {
		t.Fatal(err)
	}
	strict, err := buildRuleset(full.cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	d := detect.NewDetector(full.cfg)
	key := func(rule, secret string) string { return rule + "\x00" + strings.Trim(secret, quotes) }
	for _, in := range differentialInputs(t) {
		mine := map[string]bool{}
		sc := new(scratch)
		for _, sp := range strict.find(in, sc) {
			if sp.encoded {
				// Found in a base64 or hex value's decoded text, which
				// DetectString does not read: the span is the encoded
				// run, not a secret gitleaks could name.
				continue
			}
			mine[key(strict.rules[sp.rule].id, in[sp.start:sp.end])] = true
		}
		theirs := map[string]bool{}
		for _, f := range d.DetectString(in) {
			theirs[key(f.RuleID, f.Secret)] = true
			if f.Secret != "" && !mine[key(f.RuleID, f.Secret)] && !narrowed(f.RuleID, f.Secret) {
				t.Errorf("gitleaks finds %s (%d-byte secret) in a %d-byte input; the windowed scan does not", f.RuleID, len(f.Secret), len(in))
			}
		}
		for k := range mine {
			id, _, _ := strings.Cut(k, "\x00")
			if !theirs[k] && full.cfg.Rules[id].Path == nil && !strings.Contains(id, "generic") {
				t.Errorf("the windowed scan finds %s where gitleaks does not", id)
			}
		}
	}
}
