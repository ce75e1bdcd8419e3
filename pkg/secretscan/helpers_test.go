package secretscan

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// corpusEntry is one planted secret of testdata/secrets.json: the secret
// and a line in which gitleaks detects it.
type corpusEntry struct {
	Name   string `json:"name"`
	Secret string `json:"secret"`
	Line   string `json:"line"`
}

func loadCorpus(tb testing.TB) []corpusEntry {
	tb.Helper()
	b, err := os.ReadFile("../../testdata/secrets.json")
	if err != nil {
		tb.Fatal(err)
	}
	var es []corpusEntry
	if err := json.Unmarshal(b, &es); err != nil {
		tb.Fatal(err)
	}
	if len(es) == 0 {
		tb.Fatal("empty corpus")
	}
	return es
}

// contextDependent lists the corpus entries whose secret is only a secret
// because of the text around it: a random password is found by its key name
// (db_password = "..."), never alone. Tests plant their whole line where
// others plant just the secret.
var contextDependent = map[string]bool{"generic-password": true}

// fragments returns the parts of a secret that must not survive redaction:
// the secret and, for multi-line ones (private keys), each line of 16 or
// more bytes, which also covers the secret after JSON escaping.
func fragments(secret string) []string {
	out := []string{secret}
	if strings.Contains(secret, "\n") {
		for _, l := range strings.Split(secret, "\n") {
			if len(l) >= 16 {
				out = append(out, l)
			}
		}
	}
	return out
}

func jsonString(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func total(counts map[string]int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

// credentialCase is an input holding one secret value.
type credentialCase struct{ in, secret string }

// checkOnlyValueRedacted: each input loses its secret and keeps everything
// before it (the command, the header, the scheme, the key or the netrc
// keywords stay).
func checkOnlyValueRedacted(t *testing.T, r *Redactor, cases []credentialCase) {
	t.Helper()
	for _, tc := range cases {
		out, _ := r.Redact(tc.in)
		if strings.Contains(out, tc.secret) {
			t.Errorf("%q kept its secret: %q", tc.in, out)
		}
		if before := tc.in[:strings.Index(tc.in, tc.secret)]; !strings.HasPrefix(out, before) {
			t.Errorf("%q lost its context: %q", tc.in, out)
		}
	}
}

// checkUnchanged: each input comes back as it went in.
func checkUnchanged(t *testing.T, r *Redactor, ins []string) {
	t.Helper()
	for _, in := range ins {
		if out, _ := r.Redact(in); out != in {
			t.Errorf("%q became %q", in, out)
		}
	}
}
