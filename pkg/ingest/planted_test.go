package ingest

import (
	"crypto/rand"
	"encoding/base64"
	"math/big"
	"strings"
	"testing"

	"github.com/codelotse/codelotse/pkg/secretscan"
)

// Planted and its helpers are exported for the external test package.
type Planted = planted

// PlantedCases is plantedCases.
func PlantedCases(t testing.TB) []Planted { return plantedCases(t) }

// Leaks is leaks.
func Leaks(secret, text string) string { return leaks(secret, text) }

// planted is a secret placed in a document: the value an agent must never
// see (after sanitising) and the text it is placed in.
type planted struct {
	Name, Secret, Doc string
}

const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

func randFrom(t testing.TB, set string, n int) string {
	b := make([]byte, n)
	for i := range b {
		k, err := rand.Int(rand.Reader, big.NewInt(int64(len(set))))
		if err != nil {
			t.Fatal(err)
		}
		b[i] = set[k.Int64()]
	}
	return string(b)
}

func randB64(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// plantedCases are fresh random secrets in the shapes the issue names: a
// Kubernetes Secret manifest (a rule that needs the surrounding lines), a
// JWT and a ghp_ token across search_code's 500-byte clip point, and
// tokens and a private key with invisible characters inside.
func plantedCases(t testing.TB) []planted {
	ghp := "ghp_" + randFrom(t, alnum, 36)
	ghp2 := "ghp_" + randFrom(t, alnum, 36)
	clt := "clt_" + randFrom(t, alnum+"_-", 43)
	aws := "AKIA" + randFrom(t, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)
	k8s := randB64(t, 24)
	jwt := "eyJ" + randFrom(t, alnum, 30) + ".eyJ" + randFrom(t, alnum, 40) + "." + randFrom(t, alnum+"_-", 43)
	var body []string
	for i := 0; i < 6; i++ {
		body = append(body, randB64(t, 48))
	}
	key := strings.Join(body, "\n")
	return []planted{
		{"k8s-secret", k8s, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db-credentials\ntype: Opaque\ndata:\n  password: " + k8s + "\n"},
		{"ghp-clip", ghp, strings.Repeat("a", 470) + " GITHUB_TOKEN=" + ghp + " trailing text"},
		{"jwt-clip", jwt, strings.Repeat("b ", 236) + "Authorization: Bearer " + jwt + " rest"},
		{"ghp-shy", ghp2, "export GITHUB_TOKEN=" + ghp2[:10] + "\u00ad" + ghp2[10:]},
		{"clt-cgj", clt, "token: " + clt[:12] + "\u034f" + clt[12:]},
		{"aws-fvs", aws, "aws_access_key_id = " + aws[:8] + "\u180b" + aws[8:]},
		{"pem-khmer", key, "-----BEGIN RSA PRI\u17b4VATE KEY-----\n" + key + "\n-----END RSA PRIVATE KEY-----\n"},
		{"pem-braille", key, "-----BEGIN\u2800PRIVATE KEY-----\n" + key + "\n-----END PRIVATE KEY-----\n"},
	}
}

// grams are the pieces of a secret that must not appear: the secret, each
// of its lines, and every 8-character substring of them.
func grams(secret string) []string {
	var out []string
	for _, line := range strings.Split(secret, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "-----") {
			continue
		}
		for i := 0; i+8 <= len(line); i++ {
			out = append(out, line[i:i+8])
		}
	}
	return out
}

// leaks returns the first piece of secret found in text.
func leaks(secret, text string) string {
	for _, g := range grams(secret) {
		if strings.Contains(text, g) {
			return g
		}
	}
	return ""
}

func TestDocumentRedactsPlanted(t *testing.T) {
	in := New(secretscan.New())
	for _, p := range plantedCases(t) {
		var l Learned
		out := in.Document(p.Doc, &l)
		if g := leaks(p.Secret, out); g != "" {
			t.Errorf("%s: %q of the secret survives ingestion: %q", p.Name, g, out)
		}
		if strings.Count(out, "\n") != strings.Count(p.Doc, "\n") {
			t.Errorf("%s: line count changed", p.Name)
		}
		if len(l.fps) == 0 {
			t.Errorf("%s: nothing learned", p.Name)
		}
	}
}
