//go:build e2e

package e2e

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

func randFrom(t *testing.T, set string, n int) string {
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

// distinct returns n different characters of set in random order.
func distinct(t *testing.T, set string, n int) string {
	b := []byte(set)
	for i := len(b) - 1; i > 0; i-- { // Fisher–Yates with crypto/rand
		k, err := rand.Int(rand.Reader, big.NewInt(int64(i+1)))
		if err != nil {
			t.Fatal(err)
		}
		j := k.Int64()
		b[i], b[j] = b[j], b[i]
	}
	return string(b[:n])
}

func randB64(t *testing.T, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// plantedSecrets are fresh random secrets in the shapes issue 9 names, on
// top of the shared corpus: a Kubernetes Secret manifest (a rule that needs
// the surrounding lines), a JWT and a ghp_ token across search_code's
// 500-byte clip point, and tokens and private keys with invisible
// characters inside (Secret is what an agent would read once the invisible
// character is gone).
func plantedSecrets(t *testing.T) []secret {
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
	var body2 []string
	for i := 0; i < 6; i++ {
		body2 = append(body2, randB64(t, 48))
	}
	key2 := strings.Join(body2, "\n")
	// Generic passwords whose assignment is HTML-escaped, URL-encoded or
	// JSON in JSON, and a Mailgun key without its keyword (upper-case hex:
	// a generated-looking value, as the keyword-less variant requires).
	// Letters and digits alternate in the passwords, so that gitleaks'
	// generic rule never takes one for a word (its all-letters allowlist,
	// its stopwords), and all 20 characters differ, so that its entropy
	// threshold (3.5) always passes (log2 20 = 4.3).
	pw := func() string {
		letters, digits := distinct(t, alnum[:52], 10), distinct(t, alnum[52:], 10)
		var b strings.Builder
		for i := range 10 {
			b.WriteByte(letters[i])
			b.WriteByte(digits[i])
		}
		return b.String()
	}
	pwHTML, pwURL, pwJSON := pw(), pw(), pw()
	mailgun := "key-" + randFrom(t, "0123456789ABCDEF", 32)
	return []secret{
		{"pw-html", pwHTML, "<pre>db_password = &quot;" + pwHTML + "&quot;</pre>"},
		{"pw-urlenc", pwURL, "GET /search?q=db_password+%3D+%22" + pwURL + "%22&page=2"},
		{"pw-json2", pwJSON, `"{\"body\":\"db_password = \\\"` + pwJSON + `\\\"\"}"`},
		{"mailgun-bare", mailgun, "Revoke the Mailgun key (" + mailgun + ") today."},
		{"k8s-secret", k8s, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db-credentials\ntype: Opaque\ndata:\n  password: " + k8s},
		{"ghp-clip", ghp, strings.Repeat("a", 470) + " GITHUB_TOKEN=" + ghp + " trailing text"},
		{"jwt-clip", jwt, strings.Repeat("b ", 236) + "Authorization: Bearer " + jwt + " rest"},
		{"ghp-shy", ghp2, "export GITHUB_TOKEN=" + ghp2[:10] + "\u00ad" + ghp2[10:]},
		{"clt-cgj", clt, "token: " + clt[:12] + "\u034f" + clt[12:]},
		{"aws-fvs", aws, "aws_access_key_id = " + aws[:8] + "\u180b" + aws[8:]},
		{"pem-khmer", key, "-----BEGIN RSA PRI\u17b4VATE KEY-----\n" + key + "\n-----END RSA PRIVATE KEY-----"},
		{"pem-braille", key2, "-----BEGIN\u2800PRIVATE KEY-----\n" + key2 + "\n-----END PRIVATE KEY-----"},
	}
}

// secretGrams are the pieces of a secret no answer or row may contain:
// every 8-character substring of each of its lines (PEM armour lines
// aside), minus those that also occur in benign, the text around the
// secrets.
func secretGrams(secret, benign string) []string {
	var out []string
	for _, line := range strings.Split(secret, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "-----") {
			continue
		}
		for i := 0; i+8 <= len(line); i++ {
			if g := line[i : i+8]; !strings.Contains(benign, g) {
				out = append(out, g)
			}
		}
	}
	return out
}

// benignText is every planted text with its secret taken out.
func benignText(secrets []secret) string {
	var b strings.Builder
	for _, s := range secrets {
		b.WriteString(strings.ReplaceAll(s.Line, s.Secret, " "))
		b.WriteString("\n" + s.Name + "\n")
	}
	return b.String()
}

// storedTables are the tables the tools read agent-readable text from.
var storedTables = []string{"code_chunks", "code_files", "findings", "reviews", "rules", "repositories", "pull_requests"}

// assertNotStored reads every row of the stored tables as the database
// administrator (row-level security does not hide anything from it) and
// fails on any piece of any planted secret.
func assertNotStored(t *testing.T, s *stack, secrets []secret) {
	t.Helper()
	benign := benignText(secrets)
	for _, table := range storedTables {
		texts := s.db.AdminStrings(t, fmt.Sprintf("SELECT t::text FROM %s t", table))
		all := strings.Join(texts, "\n")
		for _, sec := range secrets {
			for _, g := range secretGrams(sec.Secret, benign) {
				if strings.Contains(all, g) {
					t.Errorf("table %s stores %q of secret %s", table, g, sec.Name)
					break
				}
			}
		}
	}
}

// listOf returns the list of an answer (matches, findings, repositories)
// as JSON, for comparing two answers without their nonce and echoed query.
func listOf(t *testing.T, text, key string) string {
	t.Helper()
	doc := unfence(t, text)
	b, _ := json.Marshal(doc[key])
	return string(b)
}

// assertNoPrefixOracle asks each search with a correct and a wrong next
// character after known prefixes of a secret, and fails if any pair of
// answers can be told apart.
func assertNoPrefixOracle(t *testing.T, cs *mcp.ClientSession, sec secret) {
	t.Helper()
	v := sec.Secret
	flip := func(c byte) string {
		if c == 'A' {
			return "B"
		}
		return "A"
	}
	for _, k := range []int{5, 12, len(v) - 1} {
		right, wrong := v[:k+1], v[:k]+flip(v[k])
		type probe struct {
			tool, key string
			args      func(p string) map[string]any
		}
		probes := []probe{
			{"search_code", "matches", func(p string) map[string]any {
				return map[string]any{"query": regexpQuote(p), "regex": true, "case_sensitive": true, "limit": 100}
			}},
			{"search_code", "matches", func(p string) map[string]any {
				return map[string]any{"query": "PATHPLANT", "path": "leak/" + p, "limit": 100}
			}},
			{"search_findings", "findings", func(p string) map[string]any { return map[string]any{"query": p, "limit": 100} }},
			{"search_findings", "findings", func(p string) map[string]any { return map[string]any{"path": "leak/" + p, "limit": 100} }},
			{"search_findings", "findings", func(p string) map[string]any { return map[string]any{"rule": p, "limit": 100} }},
			{"list_repositories", "repositories", func(p string) map[string]any { return map[string]any{"query": p} }},
		}
		if k == len(v)-1 {
			// The whole secret against a wrong last character, also for
			// the exact-match rule filter.
			probes = append(probes, probe{"search_findings", "findings", func(p string) map[string]any { return map[string]any{"rule": "leak-" + p, "limit": 100} }})
		}
		for _, p := range probes {
			a, errA := call(t, cs, p.tool, p.args(right))
			b, errB := call(t, cs, p.tool, p.args(wrong))
			if errA != errB {
				t.Errorf("%s %v: error for the right prefix %v, for the wrong one %v", p.tool, p.args("…"), errA, errB)
				continue
			}
			if errA {
				continue
			}
			if la, lb := listOf(t, a, p.key), listOf(t, b, p.key); la != lb {
				t.Errorf("%s %v tells a correct prefix (%d chars) of %s from a wrong one:\n%s\nvs\n%s", p.tool, p.args("…"), k+1, sec.Name, la, lb)
			}
		}
	}
}

// regexpQuote escapes RE2 metacharacters.
func regexpQuote(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`\.+*?()|[]{}^$`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// TestRedactCommandFixesRawRows plants rows as an earlier version would
// have stored them (raw secrets, inserted directly as the administrator),
// runs `cltctl redact`, and reads the tables back.
func TestRedactCommandFixesRawRows(t *testing.T) {
	t.Parallel()
	secrets := append(loadSecrets(t), plantedSecrets(t)...)
	s := newStack(t)
	s.cltctl("tenant", "create", "--slug", "acme", "--name", "Acme", "--mcp-enabled")
	s.cltctl("repo", "add", "--tenant", "acme", "--full-name", "acme/api")
	var doc strings.Builder
	for k := 0; k < 38; k++ {
		fmt.Fprintf(&doc, "line %d\n", k)
	}
	for _, sec := range secrets {
		doc.WriteString(sec.Line + "\n")
	}
	content := strings.TrimSuffix(doc.String(), "\n")
	lines := strings.Split(content, "\n")
	s.exec(`INSERT INTO code_files (tenant_id, repository_id, commit_sha, path, size, line_count)
		SELECT tenant_id, id, 'c0ffee', 'all.txt', $1, $2 FROM repositories`, len(content), len(lines))
	for start := 0; start < len(lines); start += 40 {
		end := min(start+50, len(lines))
		s.exec(`INSERT INTO code_chunks (tenant_id, repository_id, file_id, start_line, end_line, content)
			SELECT tenant_id, repository_id, id, $1, $2, $3 FROM code_files`, start+1, end, strings.Join(lines[start:end], "\n"))
		if end == len(lines) {
			break
		}
	}
	s.exec(`INSERT INTO reviews (tenant_id, repository_id, external_id, summary) SELECT tenant_id, id, 'r1', $1 FROM repositories`, content)
	for i, sec := range secrets {
		s.exec(`INSERT INTO findings (tenant_id, repository_id, review_id, severity, path, title, body, fingerprint)
			SELECT tenant_id, repository_id, id, 'high', 'x.txt', $1, $2, $3 FROM reviews`, "t "+sec.Name, "Body:\n"+sec.Line, fmt.Sprintf("fp%d", i))
		s.exec(`INSERT INTO rules (tenant_id, key, title, severity, instructions) SELECT id, $1, 'Planted', 'low', $2 FROM tenants`,
			fmt.Sprintf("planted-%d", i), "Never:\n"+sec.Line)
	}
	out := s.cltctl("redact")
	if !strings.Contains(out, "findings") || !strings.Contains(out, "redacted") {
		t.Errorf("cltctl redact printed no counts:\n%s", out)
	}
	assertNotStored(t, s, secrets)
	again := s.cltctl("redact", "--tenant", "acme")
	if !strings.Contains(again, "redacted 0 rows") {
		t.Errorf("a second run rewrote rows:\n%s", again)
	}
}
