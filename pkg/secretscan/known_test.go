package secretscan

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestKnownSecretsAreRedactedAnywhere(t *testing.T) {
	t.Parallel()
	r := New()
	const pw = "wR62KUyUeZjRbz1QtCoM"
	found := r.Find(`db_password = "` + pw + `"`)
	if len(found) != 1 || found[0].Length != len(pw) {
		t.Fatalf("Find = %+v, want one fingerprint of the password", found)
	}
	for _, f := range found {
		if strings.Contains(string(f.Fingerprint[:]), pw) {
			t.Fatal("a fingerprint contains the secret")
		}
	}
	k := NewKnown(found)
	for _, in := range []string{
		"leak/" + pw + "/config.txt",
		"Remove " + pw + " and rotate it.",
		"password=" + pw + "&user=x",
		`{"p":"` + pw + `"}`,
		pw,
		"a.b." + pw + ".c",
		"(" + pw + ")",
	} {
		out, counts := Chain{r, k}.Redact(in)
		if strings.Contains(out, pw) {
			t.Errorf("%q: secret survived as %q", in, out)
		}
		if counts[found[0].RuleID] == 0 {
			t.Errorf("%q: no redaction counted: %v", in, counts)
		}
	}
	// A different value of the same length is left alone, and so is text
	// that merely contains the value glued to other characters of its class.
	if out, _ := k.Redact("xR62KUyUeZjRbz1QtCoM"); out != "xR62KUyUeZjRbz1QtCoM" {
		t.Errorf("an unknown value was redacted: %q", out)
	}
	var nilKnown *Known
	if out, c := nilKnown.Redact(pw); out != pw || c != nil {
		t.Error("a nil set changed the text")
	}
	if NewKnown(nil) != nil {
		t.Error("an empty set is not nil")
	}
	// Short values are never remembered (they would redact words).
	if got := r.Find("password = \"abc\""); len(got) != 0 {
		t.Errorf("short secret remembered: %+v", got)
	}
}

// TestKnownInPaths: a known base64 value (which may hold, start or end
// with '/') glued into a path by slashes is still found.
func TestKnownInPaths(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"Q2xhc3NpZmllZDpzZWNyZXQ", "ab/cdEFGhijKLmn+op", "/abcDEFghiJKL012", "abcDEFghiJKL012/"} {
		h := sha256.Sum256([]byte(v))
		k := NewKnown([]Found{{RuleID: "private-key", Fingerprint: h, Length: len(v)}})
		for _, s := range []string{"leak/" + v + "/config.txt", "secrets/" + v, v + "/x", "a/b/" + v} {
			out, _ := k.Redact(s)
			if strings.Contains(out, v) || !strings.Contains(out, "[REDACTED:private-key]") {
				t.Errorf("Redact(%q) = %q", s, out)
			}
		}
	}
}

// TestKnownValueOfKeyedSecret: a rule that reports the key with the value
// (kubernetes-secret-yaml's match is "password: <value>") still teaches the
// bare value, so the value is redacted where it appears without its key —
// in a path, a glob, a sentence. Base64 values holding '+' or '/' are the
// ones no keyword rule catches on their own.
func TestKnownValueOfKeyedSecret(t *testing.T) {
	t.Parallel()
	r := New()
	for _, v := range []string{"+UzoFf3b8oIJSGz0fq9bFvybJ8SpfFPq", "LPcSV/sTePk9a5OSjsNyqgxZSGm/eAdY", "/Xe8455hGHGLKtrcy6bMrk2/owzJWB6F"} {
		for _, doc := range []string{
			"apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ntype: Opaque\ndata:\n  password: " + v + "\n",
			"kind: Secret\ndata:\n  token: \"" + v + "\"\n",
		} {
			out, found := r.RedactAndFind(doc)
			if strings.Contains(out, v[:8]) {
				t.Fatalf("manifest not redacted: %q", out)
			}
			k := NewKnown(found)
			for _, s := range []string{"**/" + v, "leak/" + v + "/config.txt", "Remove " + v + " now", v} {
				if got, _ := (Chain{r, k}).Redact(s); strings.Contains(got, v[8:16]) {
					t.Errorf("%q (learned from %q): %q", s, doc, got)
				}
			}
		}
	}
	if got := valuePart("no-separator"); got != "" {
		t.Errorf("valuePart without a separator = %q", got)
	}
}

// TestKeyedRulesTeachNoWords: the values such rules also match next to a
// Secret — settings, host names, a word cut off inside a longer one — are
// not learned, so later text of the tenant keeps them.
func TestKeyedRulesTeachNoWords(t *testing.T) {
	t.Parallel()
	r := New()
	for _, tc := range []struct{ doc, word, later string }{
		{"kind: ConfigMap\ndata:\n  DATABASE_HOST: postgresql.default.svc\n---\nkind: Secret\n", "postgresql", "connect to postgresql on port 5432"},
		{"kind: Secret\ndata:\n  environment: production\n", "production", "deploy to production today"},
		{"kind: Secret\ndata:\n  region: Eu-West-1Central\n", "Eu-West-1Central", "the bucket is in Eu-West-1Central"},
	} {
		_, found := r.RedactAndFind(tc.doc)
		k := NewKnown(found)
		if got, _ := k.Redact(tc.later); got != tc.later {
			t.Errorf("after %q, %q became %q", tc.doc, tc.later, got)
		}
	}
	for _, v := range []string{"production", "postgresql", "ALLCAPSVALUE1", "alllower123+", "PostgresqlDefaultHostName", "KubernetesServiceAccount"} {
		if generated(v) {
			t.Errorf("%q counts as generated", v)
		}
	}
	if !generated("+UzoFf3b8oIJSGz0fq9bFvybJ8SpfFPq") {
		t.Error("a random base64 value does not count as generated")
	}
}

// TestKnownRedactMatchesReference: the table-driven Known.Redact redacts
// exactly what the byte-by-byte reference does (known_reference_test.go),
// over texts made of known values, near misses and every kind of
// separator, including paths of more slashes than slashCuts considers.
func TestKnownRedactMatchesReference(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 11))
	const b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="
	word := func(n int, set string) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = set[rng.IntN(len(set))]
		}
		return string(b)
	}
	var values []string
	var found []Found
	for i, n := range []int{8, 8, 12, 20, 20, 24, 32, 40, 64, 100} {
		v := word(n, b64)
		switch i % 4 {
		case 1:
			v = "/" + v[1:]
		case 2:
			v = v[:len(v)-1] + "/"
		}
		values = append(values, v)
		found = append(found, Found{RuleID: fmt.Sprintf("rule-%d", i%3), Fingerprint: sha256.Sum256([]byte(v)), Length: len(v)})
	}
	k := NewKnown(found)
	seps := []string{" ", "\n", "\t", "/", "//", ".", "_", "-", "=", "+", "~", "\"", "'", "`", ",", ";", "<", ">", "(", ")", ":", "&", "?", "#", "é", "\x00", "\xff"}
	piece := func() string {
		v := values[rng.IntN(len(values))]
		switch rng.IntN(8) {
		case 0: // a near miss: one byte changed
			b := []byte(v)
			b[rng.IntN(len(b))] ^= 1
			return string(b)
		case 1: // glued to letters of its class
			return "x" + v + "y"
		case 2: // a piece of it
			return v[:len(v)/2]
		case 3: // a word
			return word(1+rng.IntN(12), b64[:62])
		case 4: // a long path
			var p []string
			for n := rng.IntN(24); n >= 0; n-- {
				if rng.IntN(3) == 0 {
					p = append(p, values[rng.IntN(len(values))])
				} else {
					p = append(p, word(1+rng.IntN(6), b64[:62]))
				}
			}
			return strings.Join(p, "/")
		}
		return v
	}
	for n := 0; n < 20000; n++ {
		var b strings.Builder
		for m := rng.IntN(12); m >= 0; m-- {
			b.WriteString(piece())
			b.WriteString(seps[rng.IntN(len(seps))])
		}
		s := b.String()
		got, gotCounts := k.Redact(s)
		want, wantCounts := referenceRedact(k, s)
		if got != want || !maps.Equal(gotCounts, wantCounts) {
			t.Fatalf("Redact(%q)\n= %q %v\nreference %q %v", s, got, gotCounts, want, wantCounts)
		}
	}
}

// TestKnownClassesNested: every class admits every byte a stricter one
// does (Known.Redact finds the runs of all classes in one pass on that).
func TestKnownClassesNested(t *testing.T) {
	t.Parallel()
	for i := 1; i < len(classes); i++ {
		for c := 0; c < 256; c++ {
			if classes[i-1](byte(c)) && !classes[i](byte(c)) {
				t.Errorf("class %d admits %q but class %d does not", i-1, byte(c), i)
			}
		}
	}
}

// TestKubernetesSecretIsAFixedPoint: a Secret manifest's data keys are
// matched one per "kind: Secret" within the rule's reach, so one pass left
// keys that a second pass (the answers') redacted. Stored text holding a
// value that answers hide is a search oracle for it. Redaction now
// repeats until a pass finds nothing: redacting the result again changes
// nothing, and every data value is learned.
func TestKubernetesSecretIsAFixedPoint(t *testing.T) {
	t.Parallel()
	r := New()
	values := []string{
		"cG9zdGdyZXM6Ly9hZG1pbjpTM2NyM3RQYXNzdzByZFpxQGRiOjU0MzIvYXBw",
		"U3RyaXBlS2V5UXo5OFh2Tm1McDI3",
		"c210cFBhc3NXb3JkOTg3NlF6",
		"c2lnbmluZ1NlZWRYdjk4Nw==",
		"cG9zdGdyZXM6Ly9rdWJlOkt1YmVTM2NyZXQ0MkBkYjo1NDMyL2FwcA==",
	}
	doc := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: app\ntype: Opaque\ndata:\n  username: YWRtaW4=\n  password: UzNjcjN0UGFzc3cwcmRacQ==\n" +
		"  database-url: " + values[0] + "\n  stripe-key: " + values[1] + "\n  smtp-pass: " + values[2] + "\n  signing-seed: " + values[3] + "\n  session: " + values[4] + "\n"
	for _, redact := range []func(string) (string, map[string]int){r.RedactDocument, r.Redact} {
		once, _ := redact(doc)
		if twice, _ := redact(once); twice != once {
			t.Errorf("redacting again changed the text:\n%s\n---\n%s", once, twice)
		}
		for _, v := range values {
			if strings.Contains(once, v[:20]) {
				t.Errorf("value %s… kept:\n%s", v[:20], once)
			}
		}
	}
	_, found := r.RedactAndFind(doc)
	k := NewKnown(found)
	// Bare, as in a runbook or a last-applied-configuration annotation.
	later := `{"DATABASE_URL":"` + values[4] + `","SEED":"` + values[3] + `"}` + "\nexport DB=" + values[0] + "\n"
	got, _ := (Chain{r, k}).Redact(later)
	for _, v := range []string{values[0], values[3], values[4]} {
		if strings.Contains(got, strings.TrimRight(v, "=")[:20]) {
			t.Errorf("learned value %s… not redacted bare: %s", v[:20], got)
		}
	}
}

// TestCredentialsInURLsAndAuthorization: a password in a URL's user
// information, HTTP Basic, Bearer and Token credentials and netrc passwords
// were kept unless the same value had been learned elsewhere; only the
// credential is replaced. Variables, placeholders and documentation words
// in their place are not secrets.
func TestCredentialsInURLsAndAuthorization(t *testing.T) {
	t.Parallel()
	r := New()
	checkOnlyValueRedacted(t, r, []credentialCase{
		{`db := "postgres://admin:S3cr3tPassw0rdZq@db.internal:5432/app"`, "S3cr3tPassw0rdZq"},
		{"Use https://deploy:Rul3Passw0rdXyz@git.example.com/acme/api.git", "Rul3Passw0rdXyz"},
		{"DATABASE_URL=postgres://app:Zq8@Lp3Kw9@db.internal/app", "Zq8@Lp3Kw9"},
		// A password holding a slash (base64 passwords do), an empty user.
		{"DATABASE_URL=postgres://app:Zk3/Q9+abcXyZ12==@db:5432/app", "Zk3/Q9+abcXyZ12=="},
		{"url: mongodb://admin:s3cr3t/P4ss@mongo.internal:27017/db", "s3cr3t/P4ss"},
		{"git+https://ci:Wq7/Lm2+Zx9/Tk4=@github.com/acme/api.git", "Wq7/Lm2+Zx9/Tk4="},
		{"REDIS_URL=redis://:Hk3Vt8Nc5Yq1@cache:6379/0", "Hk3Vt8Nc5Yq1"},
		{"redis://:Zk3/Q9+abcXyZ12@cache:6379/0", "Zk3/Q9+abcXyZ12"},
		// A path holding an @ after the host is not the password's.
		{"https://deploy:Rul3Passw0rdXyz@registry.npmjs.org/@acme/api", "Rul3Passw0rdXyz"},
		{"req.Header.Set(\"Authorization\", \"Basic YWRtaW46UzNjcjN0UGFzc3c=\")", "YWRtaW46UzNjcjN0UGFzc3c="},
		{"authorization: Basic YWRtaW46c2VjcmV0cGFzcw==", "YWRtaW46c2VjcmV0cGFzcw=="},
		// Opaque bearer and token credentials, and netrc passwords.
		{`curl -H "Authorization: Bearer 8f3a9c2e71b04d6a95e1c7f0b2d4a6e8" https://api.example.com`, "8f3a9c2e71b04d6a95e1c7f0b2d4a6e8"},
		{"headers = {'Authorization': 'Token 9b1f4e7a2c8d0e3f5a6b'}", "9b1f4e7a2c8d0e3f5a6b"},
		{"machine api.example.com login deploy password Qm7Xr2Lp9Wz4", "Qm7Xr2Lp9Wz4"},
		{"machine git.example.com\n  login jane\n  password Hk3Vt8Nc5Yq1\n", "Hk3Vt8Nc5Yq1"},
		// Wherever the credential ends: before a backtick, a full stop, a
		// brace or a bracket, and in escaped JSON.
		{"Send `Authorization: Basic dXNlcjpwYXNzd29yZA==` with the request.", "dXNlcjpwYXNzd29yZA=="},
		{"The header was Authorization: Basic dXNlcjpwYXNzd29yZA==.", "dXNlcjpwYXNzd29yZA=="},
		{"{Authorization: Basic dXNlcjpwYXNzd29yZA==}", "dXNlcjpwYXNzd29yZA=="},
		{"headers=[Authorization: Basic dXNlcjpwYXNzd29yZA==]", "dXNlcjpwYXNzd29yZA=="},
		{"Use `Authorization: Bearer 8f3a9c2d1e7b4a6f0c5d` here", "8f3a9c2d1e7b4a6f0c5d"},
		{`body := "{\"Authorization\": \"Bearer 8f3a9c2d1e7b4a6f0c5d\"}"`, "8f3a9c2d1e7b4a6f0c5d"},
		// A token without a digit, or with a placeholder word inside it.
		{"Authorization: Bearer kHqTzWbVyNcRxJmPfLsDgAeUoIwQtZvB", "kHqTzWbVyNcRxJmPfLsDgAeUoIwQtZvB"},
		{"Authorization: Bearer 8kHqTzWbVyourNcRxJmPfLs", "8kHqTzWbVyourNcRxJmPfLs"},
		// netrc with the password before the login.
		{"machine api.example.com password Xk9vQ2mZ7pLw4Rt8 login bob", "Xk9vQ2mZ7pLw4Rt8"},
	})
	checkUnchanged(t, r, []string{
		"postgres://postgres:${DB_PASSWORD}@127.0.0.1:5432/app",
		"redis://:{{ .Values.password }}@redis:6379",
		"https://user:password@example.com/",
		// A port, then a path holding an @.
		"http://localhost:3000/node_modules/@vite/client",
		"https://example.com:8443/users/@octocat/profile",
		"see https://medium.com/@someone/post-123 and http://host:80/a/b/@c",
		"cvs://:pserver:anoncvs@sources.redhat.com:/cvs/src",
		"// SHOULD be `https://REDACTED:REDACTED@www.example.com/`.",
		"make run: using DATABASE_URL=postgres://postgres:***@127.0.0.1:5432/db",
		"postgres://postgres@127.0.0.1:5432/codelotse",
		`curl -H "Authorization: Bearer $GITHUB_TOKEN" https://api.github.com`,
		`-H "Authorization: Bearer YOUR_ACCESS_TOKEN"`,
		`-H "Authorization: Bearer <token>"`,
		"machine api.example.com login deploy password ${NETRC_PASSWORD}",
		"# A password in a netrc file (machine HOST login USER password PASSWORD,",
		"The machine account password expires after 30 days.",
		"Reset the machine admin password regularly",
		"\tmachine  string\n\tlogin    string\n\tpassword string\n",
		`fetch(url, {headers: {Authorization: "Bearer " + process.env.GITHUB_TOKEN}})`,
		"Authorization: Bearer process.env.GITHUB_TOKEN",
		"Authorization: Bearer token.accessToken",
		"Authorization: Bearer your-api-token-here",
		"Authorization: Bearer ya29.REPLACE_WITH_TOKEN",
		"Authorization: Token example_token_value",
		"Authorization: Bearer session.accessToken2",
		"Authorization: Bearer token.access_token_v2",
		"Authorization: Bearer req.headers.authorization1",
		// Documentation of Basic: values that are not base64 of user:password.
		"Authorization: Basic username:password",
		"Authorization: Basic Base64Encoded(clientId:clientSecret)",
		"Authorization: Basic credentials_base64",
		"Authorization: Basic credentials",
	})
}

// TestKnownAfterEscapes: a known value right after an escape sequence (a
// JSON or string-literal \n or \t or \u0022, an octal or \U escape, a
// URL's %3D) shared its run
// with the escape's letters and was shown bare.
func TestKnownAfterEscapes(t *testing.T) {
	t.Parallel()
	const v = "Vb7Nq3Xz9Lk2Wm5Rt"
	_, found := New().RedactAndFind("password: " + v + "\n")
	k := NewKnown(found)
	if k == nil {
		t.Fatal("nothing learned")
	}
	for _, in := range []string{
		`"values": "first\n` + v + `\nthird"`,
		`"tab": "\t` + v + `"`,
		`"quoted": "\u0022` + v + `\u0022"`,
		`"hex": "\x41` + v + `"`,
		`"octal": "\101` + v + `"`,
		`"wide": "\U0001F600` + v + `"`,
		"https://sso.acme.test/cb?next=%2Flogin%3Fpw%3D" + v + "%26a%3D1",
	} {
		if out, _ := k.Redact(in); strings.Contains(out, v) {
			t.Errorf("%s: %s", in, out)
		}
	}
	// Letters that are no escape stay part of the run: no false match.
	if out, _ := k.Redact("prefix" + v); strings.Contains(out, "REDACTED") {
		t.Errorf("a longer word was redacted: %s", out)
	}
}

// TestNewRulesTeachNoWords: the URL and Basic rules redact a weak password
// or a word where they find it but learn only values that look generated:
// "postgres" learned from postgres://postgres:postgres@db hid the word from
// every search of the tenant.
func TestNewRulesTeachNoWords(t *testing.T) {
	t.Parallel()
	r := New()
	for _, tc := range []struct{ doc, later string }{
		{"DATABASE_URL: postgres://postgres:postgres@db:5432/app", "connect with postgres to the db"},
		{"authorization: basic\n  username: admin\n", "func Login(username string)"},
		{"// Authorization: Basic credentials are checked", "credentials and authentication"},
	} {
		_, found := r.RedactAndFind(tc.doc)
		if got, _ := (Chain{r, NewKnown(found)}).Redact(tc.later); got != tc.later {
			t.Errorf("after %q, %q became %q", tc.doc, tc.later, got)
		}
	}
	// A generated password is learned.
	_, found := r.RedactAndFind("postgres://app:Zx9Qw7Lm3Kp4Tz@db/app")
	if got, _ := (Chain{r, NewKnown(found)}).Redact("the password is Zx9Qw7Lm3Kp4Tz"); strings.Contains(got, "Zx9Qw7Lm3Kp4Tz") {
		t.Errorf("a generated URL password was not learned: %q", got)
	}
	if got, _ := r.Redact("https://api.example.com:443?email=jane@example.com"); strings.Contains(got, "REDACTED") {
		t.Errorf("a port and a query read as a password: %q", got)
	}
}

// TestSecretManifestEmptyValue: a data key with nothing after its colon on
// its line (an empty value, or a value on the lines below) panicked
// (a review found it in gitleaks' own sources).
func TestSecretManifestEmptyValue(t *testing.T) {
	t.Parallel()
	r := New()
	for _, in := range []string{
		"apiVersion: v1\nkind: Secret\ndata:\n  password:\n",
		"apiVersion: v1\nkind: Secret\ndata:\n  password:",
		"apiVersion: v1\nkind: Secret\nstringData:\n  a:\n  b: Zx9Qw7Lm3Kp4Tz\n",
	} {
		out, counts := r.Redact(in)
		if strings.Contains(out, "Zx9Qw7Lm3Kp4Tz") || counts[Unavailable] != 0 {
			t.Errorf("%q: %q %v", in, out, counts)
		}
		if _, counts := r.RedactDocument(in); counts[Unavailable] != 0 {
			t.Errorf("%q: the document scan failed: %v", in, counts)
		}
	}
}

// TestSecretManifestShapes: every data value of a Secret, whatever the
// manifest's shape, including manifests in which no gitleaks rule opens a
// window (the values were kept then); templates are not secrets.
func TestSecretManifestShapes(t *testing.T) {
	t.Parallel()
	r := New()
	for name, tc := range map[string]struct {
		doc    string
		values []string
	}{
		"comments":          {"kind: Secret # app credentials\ndata: # base64\n  a: QWJjRGVmR2hpMTIzNDU2\n  b: WHl6MTIzNDU2Nzg5MEFi # x\n", []string{"QWJjRGVmR2hpMTIzNDU2", "WHl6MTIzNDU2Nzg5MEFi"}},
		"flow":              {"kind: Secret\ndata: {dburl: Rmwwd1Bhc3N3MHJkWHk5, other: 'T3RoZXJWYWx1ZTk4Nw=='}\n", []string{"Rmwwd1Bhc3N3MHJkWHk5", "T3RoZXJWYWx1ZTk4Nw=="}},
		"quoted keys":       {"kind: Secret\ndata:\n  \"dburl\": \"UXVvdGVkS2V5VmFsdWU5\"\n  'db.url': U2luZ2xlUXVvdGVkOTg3\n", []string{"UXVvdGVkS2V5VmFsdWU5", "U2luZ2xlUXVvdGVkOTg3"}},
		"block scalar":      {"kind: Secret\nstringData:\n  config.ini: |  # ini file\n    pass=Bl0ckScal4rPw7Zx\n  other.txt: |2\n    Bl0ckInd1catorPw9\n", []string{"Bl0ckScal4rPw7Zx", "Bl0ckInd1catorPw9"}},
		"continued":         {"kind: Secret\nstringData:\n  long: first\n    C0ntinuationB8Zyq\n", []string{"C0ntinuationB8Zyq"}},
		"json":              {`{"apiVersion": "v1", "kind": "Secret", "data": {"a": "SnNvblZhbHVlT25lOTg3", "b": "SnNvblZhbHVlVHdvNjU0"}}`, []string{"SnNvblZhbHVlT25lOTg3", "SnNvblZhbHVlVHdvNjU0"}},
		"after a configmap": {"kind: ConfigMap\ndata:\n  mode: fast\n---\nkind: Secret\ndata:\n  k: QWZ0ZXJDb25maWdNYXA5\n", []string{"QWZ0ZXJDb25maWdNYXA5"}},
		// A " #" inside a quoted value is part of the secret, not a comment.
		"hash in a quoted value": {"kind: Secret\nstringData:\n  pw: \"Hx7 #Qz9Lm2Wv8\"\n  block: |\n    line Pq3 #Zt8Kw5Rn1\n", []string{"Qz9Lm2Wv8", "Zt8Kw5Rn1"}},
	} {
		out, _ := r.RedactDocument(tc.doc)
		for _, v := range tc.values {
			if strings.Contains(out, v) {
				t.Errorf("%s: %s kept:\n%s", name, v, out)
			}
		}
		if again, _ := r.RedactDocument(out); again != out {
			t.Errorf("%s: not a fixed point:\n%s\n---\n%s", name, out, again)
		}
	}
	for _, keep := range []string{
		"kind: Secret\ndata:\n  password: {{ .Values.db.password | b64enc }}\n",
		"kind: ConfigMap\ndata:\n  mode: fast\n  region: eu-west-1\n",
	} {
		if out, _ := r.RedactDocument(keep); out != keep {
			t.Errorf("%q became %q", keep, out)
		}
	}
}
