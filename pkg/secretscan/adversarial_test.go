package secretscan

import (
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
)

// adversarialInputs are 32 KiB strings built to make a keyword-and-window
// scan slow: anchors everywhere, matches that could run to the end of the
// string, many candidate matches.
func adversarialInputs() map[string]string {
	r := rand.New(rand.NewPCG(3, 4))
	b64 := func(n int) string {
		const a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
		b := make([]byte, n)
		for i := range b {
			b[i] = a[r.IntN(64)]
		}
		return string(b)
	}
	const n = 32 * 1024
	rep := func(s string) string { return strings.Repeat(s, n/len(s)) }
	return map[string]string{
		"base64-blob":      b64(n),
		"begin-keys":       rep("-----BEGIN RSA PRIVATE KEY-----\n"),
		"begin-keys-1line": rep("-----BEGIN RSA PRIVATE KEY----- "),
		"key-assign":       rep("api_key = aaaaaaaaaaaaaaaaaaaa1\n"),
		"key-assign-1line": rep("api_key=aaaaaaaaaaaaaaaaaaaaaaaa1&"),
		"ey":               rep("ey"),
		"eyJ-dots":         rep("eyJhbGciOiJIUzI1NiIsInR5cCI6.eyJ"),
		"minified":         rep(`{key:"v",token:a.b,secret:c[0],password:"",auth:!0},`),
		"kind-secret":      rep("kind: Secret\ndata:\n  a: b\n"),
		"curl":             rep("curl -H x "),
		"s-dot":            rep("s.abcdefghijklmnopqrstuvwxyz "),
		"newlines":         rep("\n"),
		"spaces-key":       rep("key" + strings.Repeat(" ", 61)),
		"data-colon":       rep("data: " + b64(20) + " "),
	}
}

// BenchmarkRedactAdversarial runs Redact and gitleaks' detector on each
// adversarial input (compare mine/ with naive/).
func BenchmarkRedactAdversarial(b *testing.B) {
	r := New()
	d := naiveDetector(b)
	ins := adversarialInputs()
	names := make([]string, 0, len(ins))
	for name := range ins {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		s := ins[name]
		b.Run("mine/"+name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				r.Redact(s)
			}
		})
		b.Run("naive/"+name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				d.DetectString(s)
			}
		})
	}
}
