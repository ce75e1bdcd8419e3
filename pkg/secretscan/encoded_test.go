package secretscan

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/zricethezav/gitleaks/v8/detect"
)

// encodings are the ways a secret is hidden from the rules by encoding the
// text around it, or the secret alone. gitleaks' command line decodes base64,
// hex, percent and \u escapes five levels deep by default (--max-decode-depth
// 5), so a reference scan reports these; the redactor must not show them.
var encodings = []struct {
	name string
	enc  func(string) string
}{
	{"base64", func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }},
	{"base64-raw", func(s string) string { return base64.RawStdEncoding.EncodeToString([]byte(s)) }},
	{"base64url", func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }},
	{"hex", func(s string) string { return hex.EncodeToString([]byte(s)) }},
	{"HEX", func(s string) string { return strings.ToUpper(hex.EncodeToString([]byte(s))) }},
	{"base64-of-base64", func(s string) string {
		return base64.StdEncoding.EncodeToString([]byte(base64.StdEncoding.EncodeToString([]byte(s))))
	}},
	{"hex-of-base64", func(s string) string {
		return hex.EncodeToString([]byte(base64.StdEncoding.EncodeToString([]byte(s))))
	}},
	// The base64 command wraps its output at 76 columns, PEM at 64, and a
	// YAML block scalar indents every line.
	{"base64-wrapped", func(s string) string { return wrap(base64.StdEncoding.EncodeToString([]byte(s)), 76, "\n") }},
	{"base64-indented", func(s string) string {
		return wrap(base64.StdEncoding.EncodeToString([]byte(s)), 64, "\r\n    ")
	}},
	{"percent", eachByte("%%%02X")},
	{"backslash-x", eachByte(`\x%02x`)},
	{"octal", eachByte(`\%03o`)},
	{"backslash-U", eachByte(`\U%08x`)},
}

// wrap breaks s into lines of n bytes joined by sep.
func wrap(s string, n int, sep string) string {
	var lines []string
	for len(s) > n {
		lines = append(lines, s[:n])
		s = s[n:]
	}
	return strings.Join(append(lines, s), sep)
}

// eachByte encodes every byte of a string with format.
func eachByte(format string) func(string) string {
	return func(s string) string {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			fmt.Fprintf(&b, format, s[i])
		}
		return b.String()
	}
}

// encodedContexts are where an encoded value is found: a manifest or
// environment value, a shell pipe, JSON, a sentence, alone.
var encodedContexts = []struct {
	name  string
	build func(enc string) string
}{
	{"alone", func(e string) string { return e }},
	{"env", func(e string) string { return "UPSTREAM_CONFIG=" + e + "\nLOG_LEVEL=debug" }},
	{"shell", func(e string) string { return "echo '" + e + "' | base64 -d > /etc/app/config" }},
	{"json", func(e string) string { return `{"name":"upstream","config":"` + e + `","retries":3}` }},
	{"sentence", func(e string) string { return "The blob " + e + " was committed in 3f9c2d1." }},
}

// decodingDetector is gitleaks' detector with its command line's default
// decoding depth.
func decodingDetector(t testing.TB) *detect.Detector {
	d := naiveDetector(t)
	d.MaxDecodeDepth = 5
	return d
}

// TestRedactEncodedSecrets: a generated secret of every rule, its line
// encoded (and a self-identifying secret encoded alone) in every encoding
// and context: where gitleaks' decoding scan reports a secret, the encoded
// value is gone from the answer. The encodings gitleaks does not decode
// (\x, octal, \U) are held to the same standard as the ones it does.
func TestRedactEncodedSecrets(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("slow: runs gitleaks' decoding detector")
	}
	d := decodingDetector(t)
	red := New()
	checked, missed := 0, 0
	byEncoding := map[string]int{}
	for _, s := range ruleSamples(t) {
		plain := []string{s.Line}
		if s.bare {
			plain = append(plain, s.Secret)
		}
		for _, p := range plain {
			for _, e := range encodings {
				enc := e.enc(p)
				for _, c := range encodedContexts {
					in := c.build(enc)
					if !gitleaksDecodes(d, in, e.name) {
						continue
					}
					checked++
					out, counts := red.Redact(in)
					if strings.Contains(out, enc) || strings.Contains(out, p) || total(counts) == 0 {
						missed++
						byEncoding[e.name]++
						if byEncoding[e.name] <= 3 {
							t.Errorf("%s %s in %s: encoded secret survives in %.160q", s.Name, e.name, c.name, out)
						}
					}
				}
			}
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d encoded inputs checked", checked)
	}
	t.Logf("%d encoded inputs checked, %d missed %v", checked, missed, byEncoding)
}

// gitleaksDecodes reports whether gitleaks' decoding scan reports a secret
// in in; for the encodings it does not decode, whether it reports one in
// the same text decoded by hand (the test's own decoder) or unwrapped.
func gitleaksDecodes(d *detect.Detector, in, encoding string) bool {
	switch encoding {
	case "backslash-x", "octal", "backslash-U":
		in = decodeBackslashesForTest(in)
	case "base64-wrapped", "base64-indented":
		// gitleaks reads each line alone; the reference is the value
		// on one line.
		in = strings.NewReplacer("\r\n    ", "", "\n", "").Replace(in)
	}
	return len(d.DetectString(in)) > 0
}

// decodeBackslashesForTest undoes \xXX, \NNN and \UXXXXXXXX the simple way.
func decodeBackslashesForTest(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		var v, n int
		if s[i] == '\\' {
			switch {
			case i+4 <= len(s) && s[i+1] == 'x':
				if _, err := fmt.Sscanf(s[i+2:i+4], "%02x", &v); err == nil {
					n = 4
				}
			case i+10 <= len(s) && s[i+1] == 'U':
				if _, err := fmt.Sscanf(s[i+2:i+10], "%08x", &v); err == nil {
					n = 10
				}
			case i+4 <= len(s) && s[i+1] >= '0' && s[i+1] <= '3':
				if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &v); err == nil {
					n = 4
				}
			}
		}
		if n > 0 {
			b.WriteByte(byte(v))
			i += n - 1
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// TestRedactEncodedKeepsSurroundings: only the encoded value is replaced,
// under the rule that found the decoded secret, and the text around it is
// kept.
func TestRedactEncodedKeepsSurroundings(t *testing.T) {
	t.Parallel()
	red := New()
	token := "ghp_" + strings.Repeat("A1b2C3d4E5", 3) + "f6G7h8"
	for _, e := range encodings[:7] {
		enc := e.enc("GITHUB_TOKEN=" + token)
		in := "config:\n  blob: " + enc + "\n  retries: 3\n"
		out, counts := red.Redact(in)
		want := "config:\n  blob: [REDACTED:github-pat]\n  retries: 3\n"
		if out != want || counts["github-pat"] != 1 {
			t.Errorf("%s: got %q %v, want %q", e.name, out, counts, want)
		}
	}
}

// TestRedactEncodedLeavesPlainText: encoded text without a secret, and
// identifiers and hashes that merely look encoded, are left alone.
func TestRedactEncodedLeavesPlainText(t *testing.T) {
	t.Parallel()
	red := New()
	for _, in := range []string{
		base64.StdEncoding.EncodeToString([]byte("The quick brown fox jumps over the lazy dog")),
		hex.EncodeToString([]byte("just a description of the change, nothing secret")),
		"h1:" + base64.StdEncoding.EncodeToString([]byte{0x9f, 0x1, 0xee, 0x42, 0x80, 0x12, 0x33, 0xfe, 0x71, 0x0, 0xaa, 0x5b, 0xc3, 0x19, 0x27, 0xd4}),
		"func TestRedactEncodedLeavesPlainText_with_long_name_2(t *testing.T) {}",
		"sha256:" + strings.Repeat("e3b0c44298fc1c149afbf4c8996fb924", 2),
		"path/to/some_file_name_v2/internal/handlers_test.go",
	} {
		if out, counts := red.Redact(in); out != in {
			t.Errorf("%q redacted: %q %v", in, out, counts)
		}
	}
}

// TestFindEncodedLearnsTheEncodedValue: the encoded value is what a tenant's
// known secrets learn, so the same blob elsewhere is hidden too.
func TestFindEncodedLearnsTheEncodedValue(t *testing.T) {
	t.Parallel()
	red := New()
	token := "ghp_" + strings.Repeat("Z9y8X7w6V5", 3) + "u4T3s2"
	enc := base64.StdEncoding.EncodeToString([]byte("token: " + token))
	found := red.Find("blob: " + enc)
	learnt := false
	for _, f := range found {
		if f.Fingerprint == sha256.Sum256([]byte(enc)) {
			learnt = true
		}
	}
	if !learnt {
		t.Fatalf("the encoded value is not among %d findings", len(found))
	}
}

// TestRedactWrappedBlocks: a wrapped block of binary (an image, key
// material) is skipped whole, and a wrapped secret after it is still found;
// two blocks of different widths are read apart.
func TestRedactWrappedBlocks(t *testing.T) {
	t.Parallel()
	bin := make([]byte, 40000)
	for i := range bin {
		bin[i] = byte(i*7919>>3) | 0x80
	}
	token := "ghp_" + strings.Repeat("Q1w2E3r4T5", 3) + "y6U7i8"
	secret := wrap(base64.StdEncoding.EncodeToString([]byte("export GITHUB_TOKEN="+token+"\n# rotated monthly by the platform team\n")), 64, "\n")
	image := wrap(base64.StdEncoding.EncodeToString(bin), 76, "\n")
	in := "image: |\n" + image + "\nconfig: |\n" + secret + "\nend\n"
	out, counts := New().Redact(in)
	if counts["github-pat"] != 1 || strings.Contains(out, secret[:64]) {
		t.Errorf("wrapped secret after a binary block: %v", counts)
	}
	if !strings.Contains(out, image) || !strings.HasSuffix(out, "config: |\n[REDACTED:github-pat]\nend\n") {
		t.Errorf("the binary block or the text around the secret changed: ...%q", out[max(0, len(out)-200):])
	}
}
