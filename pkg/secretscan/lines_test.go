package secretscan

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
)

// TestRedactLinesPrivateKey: a private key shown one line per string (a
// file window) is redacted on every line, and the lines around it stay.
func TestRedactLinesPrivateKey(t *testing.T) {
	t.Parallel()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	block := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	lines := append([]string{"# deploy key", "key: |"}, strings.Split(strings.TrimSuffix(block, "\n"), "\n")...)
	lines = append(lines, "done: true")
	r := New()
	// Line by line, the per-string pass alone misses the body.
	leaked := 0
	for _, l := range lines[3 : len(lines)-2] {
		if out, _ := r.Redact(l); out == l {
			leaked++
		}
	}
	if leaked == 0 {
		t.Log("note: the per-line pass already redacts key lines")
	}
	out, counts := r.RedactLines(lines)
	if counts["private-key"] != 1 {
		t.Fatalf("counts = %v, want one private-key", counts)
	}
	body := strings.Split(strings.TrimSuffix(block, "\n"), "\n")
	for _, l := range body[1 : len(body)-1] {
		for _, o := range out {
			if strings.Contains(o, l) {
				t.Fatalf("a key line survived: %q", l)
			}
		}
	}
	if out[0] != "# deploy key" || out[1] != "key: |" || out[len(out)-1] != "done: true" {
		t.Errorf("surrounding lines changed: %q", out)
	}
	if len(out) != len(lines) {
		t.Errorf("line count changed: %d → %d", len(lines), len(out))
	}
	// Windows without multi-line secrets come back unchanged.
	plain := []string{"a := 1", "b := 2"}
	if got, c := r.RedactLines(plain); c != nil || &got[0] != &plain[0] {
		t.Error("a window without secrets was copied or counted")
	}
}
