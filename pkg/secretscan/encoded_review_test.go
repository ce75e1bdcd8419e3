package secretscan

// Tests an independent review of the encoded-value decoding wrote, each
// failing before its fix (docs/decisions.md, "Secrets inside encoded
// values").

import (
	"encoding/base64"
	"strings"
	"testing"
)

// encodedReviewToken is a github-pat that the rules find without context.
const encodedReviewToken = "ghp_Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8"

// encodedReviewBlock returns a secret line of exactly n bytes (n%3 == 0, so that
// its base64 has no padding) with the token straddling byte 48, where a
// 64-column wrap breaks the base64.
func encodedReviewBlock(t *testing.T, n int) string {
	t.Helper()
	// The token starts at byte 44: the first 48 decoded bytes hold only
	// its "ghp_", the next line the rest.
	line := "# deploy credentials, rotated by platform\n##" + encodedReviewToken + "\n"
	if strings.Index(line, encodedReviewToken) != 44 {
		t.Fatalf("token at %d", strings.Index(line, encodedReviewToken))
	}
	for len(line) < n {
		line += "#"
	}
	if len(line) != n {
		t.Fatalf("line is %d bytes", len(line))
	}
	return line
}

// TestEncodedReviewWrappedExactMultipleFollowedByEOF: a wrapped block whose
// length is an exact multiple of its width (no short last line) is joined
// with the word that starts the next line. When that joined value does not
// decode, the block is read line by line and a secret across a line break
// is shown.
func TestEncodedReviewWrappedExactMultipleFollowedByEOF(t *testing.T) {
	t.Parallel()
	plain := encodedReviewBlock(t, 96) // 128 base64 chars: two full 64-column lines
	enc := base64.StdEncoding.EncodeToString([]byte(plain))
	if len(enc) != 128 || strings.HasSuffix(enc, "=") {
		t.Fatalf("enc %d %q", len(enc), enc)
	}
	if len(decodingDetector(t).DetectString("export CONFIG="+enc)) == 0 {
		t.Fatal("gitleaks reports nothing in the value on one line; the case is wrong")
	}
	block := wrap(enc, 64, "\n")
	for _, in := range []string{
		"cat <<EOF | base64 -d > .env\n" + block + "\nEOF\n",
		"cat <<EOF | base64 -d > .env\n" + block + "\n", // control: nothing after
		"  tls.crt: |\n    " + wrap(enc, 64, "\n    ") + "\n  tls.key: x\n",
	} {
		out, counts := New().Redact(in)
		if strings.Contains(out, enc[:64]) || strings.Contains(out, enc[64:]) {
			t.Errorf("wrapped secret shown (%v):\n%s", counts, out)
		}
	}
}

// TestEncodedReviewWrappedExactMultipleEatsNextWord: when the joined value does
// decode (the next line's first word is valid base64 that decodes to
// "printable" bytes, control characters included), the word is redacted
// with the block and learned as a tenant's known secret, so it is hidden
// from every later text of the tenant.
func TestEncodedReviewWrappedExactMultipleEatsNextWord(t *testing.T) {
	t.Parallel()
	plain := encodedReviewBlock(t, 96)
	enc := base64.StdEncoding.EncodeToString([]byte(plain))
	in := "cat <<EOF | base64 -d > .env\n" + wrap(enc, 64, "\n") + "\nFileSystem holds the files.\n"
	red := New()
	out, _ := red.Redact(in)
	if !strings.Contains(out, "FileSystem holds the files.") {
		t.Errorf("the line after the block was redacted with it:\n%s", out)
	}
	k := NewKnown(red.Find(in))
	code := "type FileSystem interface { Open(name string) (File, error) }"
	if got, _ := k.Redact(code); got != code {
		t.Errorf("an ordinary word was learned as a secret: %q", got)
	}
}

// TestEncodedReviewWrappedInJSONString: base64 wrapped with escaped newlines inside
// a JSON string (GitHub's contents API wraps at 60 columns and JSON-encodes
// the line breaks as \n), or with the slashes escaped as \/ (PHP's
// json_encode). The escape's letter joins the next line's run, which then
// decodes misaligned, so only the first line is read.
func TestEncodedReviewWrappedInJSONString(t *testing.T) {
	t.Parallel()
	plain := "# deploy credentials, rotated by the platform team every month\nexport GITHUB_TOKEN=" + encodedReviewToken + "\n"
	enc := base64.StdEncoding.EncodeToString([]byte(plain))
	if len(decodingDetector(t).DetectString(`"content":"`+enc+`"`)) == 0 {
		t.Fatal("gitleaks reports nothing in the value on one line; the case is wrong")
	}
	for name, in := range map[string]string{
		"json-newlines": `{"type":"file","encoding":"base64","content":"` + wrap(enc, 60, `\n`) + `\n"}`,
		"json-slashes":  `{"config":"` + strings.ReplaceAll(encodedReviewSlashy(t), "/", `\/`) + `"}`,
	} {
		out, counts := New().Redact(in)
		if total(counts) == 0 {
			t.Errorf("%s: encoded secret shown: %s", name, out)
		}
	}
}

// encodedReviewSlashy is base64 of a secret line with a '/' before the token.
func encodedReviewSlashy(t *testing.T) string {
	for pad := 0; pad < 64; pad++ {
		enc := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("?", pad) + "\nGITHUB_TOKEN=" + encodedReviewToken + "\n"))
		if k := strings.IndexByte(enc, '/'); k > 0 && k < 20 {
			return enc
		}
	}
	t.Fatal("no slash")
	return ""
}

// TestEncodedReviewEscapesInsideDecodedText: gitleaks decodes percent and \u
// escapes at every depth, so base64 of a percent-encoded or JSON-escaped
// secret is reported by it; the redactor undoes escapes only in the text as
// written (decodeEscapes runs before decodeEncoded, never on its output).
func TestEncodedReviewEscapesInsideDecodedText(t *testing.T) {
	t.Parallel()
	d := decodingDetector(t)
	var pct strings.Builder
	for i := 0; i < len(encodedReviewToken); i++ {
		pct.WriteString("%" + strings.ToUpper(hexByte(encodedReviewToken[i])))
	}
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	for name, in := range map[string]string{
		"base64-of-percent": "CALLBACK=" + b64("https://ci.example.test/hook?token="+pct.String()),
		"base64-of-json-u":  "CONFIG=" + b64(`{"token":"\u0067hp_`+encodedReviewToken[4:]+`"}`),
	} {
		if len(d.DetectString(in)) == 0 {
			t.Fatalf("%s: gitleaks reports nothing; the case is wrong", name)
		}
		if out, counts := New().Redact(in); total(counts) == 0 {
			t.Errorf("%s: gitleaks reports a secret, the redactor shows %q", name, out)
		}
	}
}

func hexByte(c byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[c>>4], digits[c&15]})
}

// TestEncodedReviewDecodeDepthBelowGitleaks: gitleaks' command line decodes five
// levels deep; the redactor three (maxDecodeDepth), so a fourth level that
// gitleaks reports is shown.
func TestEncodedReviewDecodeDepthBelowGitleaks(t *testing.T) {
	t.Parallel()
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	in := "BLOB=" + b64(b64(b64(b64("GITHUB_TOKEN="+encodedReviewToken))))
	if len(decodingDetector(t).DetectString(in)) == 0 {
		t.Fatal("gitleaks reports nothing; the case is wrong")
	}
	if out, counts := New().Redact(in); total(counts) == 0 {
		t.Errorf("four levels of base64: gitleaks reports a secret, the redactor shows %.80q…", out)
	}
}

// TestEncodedReviewNonASCIIDisablesDecoding: one non-ASCII character anywhere in
// the decoded text (a comment's umlaut, a name, a typographic dash) makes
// the whole value "binary", so a secret in a base64 config is shown. (gitleaks
// has the same limit; a reader decoding the value sees the token.)
func TestEncodedReviewNonASCIIDisablesDecoding(t *testing.T) {
	t.Parallel()
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	for _, plain := range []string{
		"# Zugangsdaten für die Produktion\nGITHUB_TOKEN=" + encodedReviewToken + "\n",
		"# deploy key — rotate monthly\nGITHUB_TOKEN=" + encodedReviewToken + "\n",
	} {
		in := "APP_ENV_B64=" + b64(plain)
		if out, counts := New().Redact(in); total(counts) == 0 {
			t.Errorf("base64 of UTF-8 text with a token shown: %q", out)
		}
	}
}

// TestEncodedReviewWrappedTrailingSpaces: a wrapped block whose lines end in a
// space (editors, YAML emitters, copy and paste) is not joined; a secret
// across a line break is shown.
func TestEncodedReviewWrappedTrailingSpaces(t *testing.T) {
	t.Parallel()
	plain := encodedReviewBlock(t, 96) + "# end of file\n"
	enc := base64.StdEncoding.EncodeToString([]byte(plain))
	in := "config: |\n  " + wrap(enc, 64, " \n  ") + "\n"
	if out, counts := New().Redact(in); total(counts) == 0 {
		t.Errorf("wrapped secret with trailing spaces shown:\n%s", out)
	}
}

// TestEncodedReviewKnownEncodedRunGlued: the encoded run is learned with its
// padding only. Known.Redact's strict classes end a run before '=' and its
// loose ones take in a glued prefix, so the same padded blob glued to a word
// (where the rules cannot decode it: it is read misaligned) is shown
// although it is a known secret of the tenant.
func TestEncodedReviewKnownEncodedRunGlued(t *testing.T) {
	t.Parallel()
	enc := base64.StdEncoding.EncodeToString([]byte("GITHUB_TOKEN=" + encodedReviewToken + "\n\n"))
	if !strings.HasSuffix(enc, "=") || strings.ContainsAny(enc, "+/") {
		t.Fatalf("want padding and no + or /: %q", enc)
	}
	red := New()
	k := NewKnown(red.Find("blob: " + enc))
	for _, in := range []string{"cache-key-" + enc, "name: cfg_" + enc + "\n"} {
		out, _ := Chain{red, k}.Redact(in)
		if strings.Contains(out, strings.TrimRight(enc, "=")) {
			t.Errorf("known encoded value shown: %q", out)
		}
	}
}
