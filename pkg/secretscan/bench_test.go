package secretscan

import (
	"encoding/base64"
	"html"
	"strings"
	"testing"
	"time"

	"github.com/zricethezav/gitleaks/v8/detect"

	"github.com/codelotse/codelotse/pkg/benchstat"
)

// benchText is a realistic 32 KiB review result (shape.MaxBytes) with two
// planted secrets.
func benchText(tb testing.TB) string {
	tb.Helper()
	es := loadCorpus(tb)
	return newReviewGen(7).withSecrets(32*1024, []string{es[1].Line, es[7].Line})
}

// benchPlain is the same kind of text without secrets.
func benchPlain() string { return newReviewGen(8).text(32 * 1024) }

// benchShort is a typical short string of a result: a 200-byte finding
// body that mentions tokens (so the keyword prefilters have work to do).
func benchShort() string {
	return "The access token is logged at debug level together with the request, so anyone " +
		"with log access can replay it until it expires; see pkg/authn/middleware.go:118 and rotate it before the next deploy."
}

// runTimed runs f b.N times, timing each call, and reports the median as
// p50-ns (ns/op is the mean).
func runTimed(b *testing.B, f func()) {
	b.Helper()
	d := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := time.Now()
		f()
		d = append(d, time.Since(t))
	}
	b.StopTimer()
	benchstat.ReportNs(b, d, 0.5, 0.99)
}

func BenchmarkRedact32KiB(b *testing.B) {
	r := New()
	s := benchText(b)
	b.SetBytes(int64(len(s)))
	runTimed(b, func() { r.Redact(s) })
}

func BenchmarkRedact32KiBNoSecrets(b *testing.B) {
	r := New()
	s := benchPlain()
	b.SetBytes(int64(len(s)))
	runTimed(b, func() { r.Redact(s) })
}

// BenchmarkRedact32KiBEscaped is BenchmarkRedact32KiB's text HTML-escaped
// (every quote an entity): the text is searched twice, as it is and
// decoded.
func BenchmarkRedact32KiBEscaped(b *testing.B) {
	r := New()
	s := html.EscapeString(benchText(b))
	b.SetBytes(int64(len(s)))
	runTimed(b, func() { r.Redact(s) })
}

// BenchmarkRedact32KiBEncoded is BenchmarkRedact32KiB's text with every
// line base64-encoded, the worst case of encoded.go: every run decodes to
// printable text, so the rules read the text and its decoded copy.
func BenchmarkRedact32KiBEncoded(b *testing.B) {
	r := New()
	lines := strings.Split(benchText(b), "\n")
	for i, l := range lines {
		lines[i] = base64.StdEncoding.EncodeToString([]byte(l))
	}
	s := strings.Join(lines, "\n")
	b.SetBytes(int64(len(s)))
	runTimed(b, func() { r.Redact(s) })
}

func BenchmarkRedactShort(b *testing.B) {
	r := New()
	s := benchShort()
	b.SetBytes(int64(len(s)))
	runTimed(b, func() { r.Redact(s) })
}

// BenchmarkRedactNaive32KiB is gitleaks' own detector on the same text as
// BenchmarkRedact32KiB (finding only, no replacing), for the ratio.
func BenchmarkRedactNaive32KiB(b *testing.B) {
	d := naiveDetector(b)
	s := benchText(b)
	b.SetBytes(int64(len(s)))
	runTimed(b, func() { d.DetectString(s) })
}

// naiveDetector is gitleaks' detector with the same configuration.
func naiveDetector(tb testing.TB) *detect.Detector {
	tb.Helper()
	rs, err := rules()
	if err != nil {
		tb.Fatal(err)
	}
	return detect.NewDetector(rs.cfg)
}

// benchKnown is a tenant's known secrets as ingestion learns them: the
// fingerprints of the planted corpus's secrets.
func benchKnown(tb testing.TB) *Known {
	tb.Helper()
	r := New()
	var found []Found
	for _, e := range loadCorpus(tb) {
		found = append(found, r.Find(e.Line)...)
	}
	if len(found) == 0 {
		tb.Fatal("the corpus taught no secret")
	}
	return NewKnown(found)
}

// BenchmarkKnownRedact32KiB is the known-secrets pass over a 32 KiB
// result, as the output layer runs it on every answer and the rescan on
// every stored text; BenchmarkKnownRedactReference32KiB is the same with
// the byte-by-byte reference it replaced (docs/benchmarks.md).
func BenchmarkKnownRedact32KiB(b *testing.B) {
	k, s := benchKnown(b), benchText(b)
	b.SetBytes(int64(len(s)))
	runTimed(b, func() { k.Redact(s) })
}

func BenchmarkKnownRedactReference32KiB(b *testing.B) {
	k, s := benchKnown(b), benchText(b)
	b.SetBytes(int64(len(s)))
	runTimed(b, func() { referenceRedact(k, s) })
}
