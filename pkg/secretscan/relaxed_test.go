package secretscan

import (
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRedactTokensByShortPrefix: Vault's "s." tokens are found where the
// token ends, not only before gitleaks' quote, space or ';', and Go
// selectors of the same shape are left alone.
func TestRedactTokensByShortPrefix(t *testing.T) {
	t.Parallel()
	r := New()
	const tok = "s.Npo7uJ0cc0zZjvVmZWukw0E0"
	for _, in := range []string{
		"Revoke the credential (" + tok + "). It is live.",
		"config/" + tok + "/x.txt",
		"<token>" + tok + "</token>",
		"the token is " + tok + ".",
		"VAULT_TOKEN=" + tok,
	} {
		if out, _ := r.Redact(in); strings.Contains(out, tok) {
			t.Errorf("survives: %q", out)
		}
	}
	for _, in := range []string{
		"if !s.ReadUint16LengthPrefixed(&extensions) {",
		"// readUint16LengthPrefixed acts like [s.ReadUint16LengthPrefixed], but",
		"x := s.ReadUint16LengthPrefixed.Field",
		"(s.abcdefghijklmnopqrstuvwx)", // no digit: gitleaks' own allowlist
		"prefixs.Npo7uJ0cc0zZjvVmZWukw0E0suffix",
	} {
		if out, counts := r.Redact(in); total(counts) != 0 {
			t.Errorf("redacted %v: %q", counts, out)
		}
	}
}

// TestRedactSecretGroupTokens: a keyword rule's secret that starts with its
// own prefix (dnkey-, NRAK-, key-, ATATT3 in atlassian's second branch) is
// found without the keyword; identifiers with such a prefix are not.
func TestRedactSecretGroupTokens(t *testing.T) {
	t.Parallel()
	r := New()
	for name, tok := range map[string]string{
		"defined-networking-api-token": "dnkey-" + strings.Repeat("1I-Dm9cN=aw57", 2) + "-" + strings.Repeat("W_1bUT9M=qqZc", 4),
		"new-relic-user-api-key":       "NRAK-8CNPRXYAVN7ZKVCAPTB8QLPNX12",
		"mailgun-private-api-token":    "key-3f9c2d1e8b7a6059deadbeefa9b8c7d0", // hex letters in a row are no word
		"mailgun-pub-key":              "pubkey-3f9c2d1e8b7a60594c3d2e1f0a9b8c7d",
		"plaid-api-token":              "access-production-3f9c2d1e-8b7a-4059-94c3-d2e1f0a9b8c7",
		"atlassian-api-token":          "ATATT3xFfGF0" + strings.Repeat("Ab3-Cd9_Ef=Gh1", 13) + "Zz",
	} {
		for _, in := range []string{
			"config/" + tok + "/x.txt",
			"Revoke the credential (" + tok + "). It is live.",
			"<password>" + tok + "</password>",
			"GET /v1/items?token=" + tok + "&page=2",
		} {
			out, counts := r.Redact(in)
			if strings.Contains(out, tok) || counts[name] == 0 {
				t.Errorf("%s: %v %q", name, counts, out)
			}
		}
	}
	for _, in := range []string{
		"live_stream_configuration_manager_factory_xy(ctx)", // gocardless' live_ + 40, no digit
		"live_stream_configuration_manager_factory_x1(ctx)", // a digit, but words after the prefix
		"key-value-store-implementation-for-tests-only",
		"NRAK-DOCUMENTATIONPLACEHOLDERVALUE",
	} {
		if out, counts := r.Redact(in); total(counts) != 0 {
			t.Errorf("redacted %v: %q", counts, out)
		}
	}
}

// TestRedactEscapedContext: a secret whose context is HTML- or
// \u-escaped (quotes as &quot;, < as \u003c) is found, and the text around
// it, entities included, survives.
func TestRedactEscapedContext(t *testing.T) {
	t.Parallel()
	r := New()
	const pw = "wR62KUyUeZjRbz1QtCoM"
	for _, c := range []struct{ in, keep string }{
		{`<pre>db_password = &quot;` + pw + `&quot;</pre>`, `<pre>db_password = &quot;`},
		{`<div data-config="{&quot;db_password&quot;:&quot;` + pw + `&quot;}">`, `&quot;}">`},
		{`<pre>db_password = &#34;` + pw + `&#34;</pre>`, `&#34;</pre>`},
		{`<pre>db_password = &#x27;` + pw + `&#x27;</pre>`, `&#x27;</pre>`},
		{`{"body":"\u003cpassword\u003e` + pw + `\u003c/password\u003e"}`, `\u003c/password\u003e"}`},
		// JSON inside JSON: the quotes are \\\".
		{`"{\"body\":\"db_password = \\\"` + pw + `\\\"\"}"`, `{\"body\":\"db_password = `},
		// URL-encoded, in a query (+ for spaces) and in a path.
		{`GET /search?q=db_password+%3D+%22` + pw + `%22&page=2`, `%22&page=2`},
		{`https://x.example/db_password%20=%20%22` + pw + `%22`, `https://x.example/db_password%20=%20%22`},
		// No-break spaces and typographic quotes.
		{"db_password\u00a0=\u00a0\"" + pw + "\"", "db_password\u00a0=\u00a0\""},
		{"Found db_password = \u201c" + pw + "\u201d in the diff", "\u201d in the diff"},
		// A + inside a URL-encoded value is the value's own (a base64
		// secret), not a space: the whole value goes.
		{`https://x.example/api_key:%20%22Zk3Lp9Qw2Xv7+Bn4Mt8Rc6Hy1Df5%22`, `%22[REDACTED:generic-api-key]%22`},
		{`https://x.example/api_key:%20%22Zk3Lp9Qw2Xv7+b2Fn4Mt8Rc6Hy1Df5%22`, `%22[REDACTED:generic-api-key]%22`},
		{`https://x.example/api_key:%20%22Zk3Lp9Qw2Xv7+%2FBn4Mt8Rc6Hy1Df5%22`, `%22[REDACTED:generic-api-key]%22`},
		// JSON in JSON whose inner quotes are \u0022 (.NET, PHP's
		// JSON_HEX_QUOT).
		{`{"msg":"{\\u0022db_password\\u0022: \\u0022` + pw + `\\u0022}"}`, `{"msg":"{\\u0022db_password\\u0022: \\u0022`},
		{`{"msg":"db_password=\\u0022` + pw + `\\u0022"}`, `\\u0022"}`},
	} {
		out, counts := r.Redact(c.in)
		if strings.Contains(out, pw) || total(counts) == 0 || !strings.Contains(out, c.keep) {
			t.Errorf("%v %q", counts, out)
		}
	}
}

// TestRedactTokenSplitByInvisibleCharacters: a zero-width space, joiner,
// word joiner or soft hyphen inside a token does not hide it; the redaction
// covers the invisible characters too.
func TestRedactTokenSplitByInvisibleCharacters(t *testing.T) {
	t.Parallel()
	r := New()
	const pat = "ghp_oMsCzDLuR6lljHyUPS6fhG6fFFAuHimfY1oa"
	for _, inv := range []string{"\u200b", "\u200d", "\u2060", "\u00ad", "\ufeff"} {
		split := pat[:12] + inv + pat[12:]
		in := "token: " + split + " (rotate)"
		out, counts := r.Redact(in)
		if strings.Contains(out, pat[:12]) || strings.Contains(out, pat[12:]) || counts["github-pat"] == 0 ||
			!strings.HasPrefix(out, "token: ") || !strings.HasSuffix(out, " (rotate)") {
			t.Errorf("%q: %v %q", inv, counts, out)
		}
	}
}

func TestDecodeEscapes(t *testing.T) {
	t.Parallel()
	in := `a&quot;b&#34;c&#x3C;d\u0022e&bogus;f&#999;g\u00e9h&amp;`
	d, off, ok := decodeEscapes(in)
	if !ok || d != `a"b"c<d"e&bogus;f&#999;g\u00e9h&` {
		t.Fatalf("decoded %q %v", d, ok)
	}
	if len(off) != len(d)+1 || off[len(d)] != int32(len(in)) {
		t.Fatalf("offsets %v", off)
	}
	for i := range d {
		// Every decoded byte comes from the same byte or an escape of it.
		if o := off[i]; in[o] != d[i] && in[o] != '&' && in[o] != '\\' {
			t.Errorf("byte %d %q maps to %d %q", i, d[i], o, in[o])
		}
	}
	if _, _, ok := decodeEscapes("no escapes & here \\n, 50% + 1, \\\"quoted\\\""); ok {
		t.Error("decoded text without escapes")
	}
	// + is a space only next to a URL escape (elsewhere it may be a base64
	// secret's own); invisible characters are dropped, Unicode spaces and
	// quotes become ASCII, also as references and escapes.
	in = "a+%3D+b\u00a0\u201cd\u200be\u201d+c&nbsp;&#160;\\u00a0&#8203;f"
	d, off, ok = decodeEscapes(in)
	if !ok || d != `a = b "de"+c   f` || len(off) != len(d)+1 {
		t.Errorf("decoded %q %v", d, off)
	}
	// A run of backslashes not before a quote is passed whole (counting it
	// again from each of its backslashes was quadratic).
	if _, n := escapeAt(strings.Repeat(`\`, 100)+"x", 0, false); n != -99 {
		t.Errorf("a run of 100 backslashes: n = %d, want -99", n)
	}
	// A backslash and a u too close to the end for \uXXXX decode nothing.
	for _, s := range []string{`\u`, `\u00`, `a\u002`} {
		if d, _, ok := decodeEscapes(s); ok {
			t.Errorf("%q decoded as %q", s, d)
		}
	}
	// Linear: long runs of what decodeEscapes looks at (non-ASCII text
	// with nothing to decode, backslashes) are read once. Counted, not
	// timed: searching again from every candidate read 64 KiB of kana
	// about 20,000 times over.
	for _, unit := range []string{"これは日本語の文章です。\n", "\\", "\u2502", "\ufffd", "\u00a0x", "&amp;", "%3D+"} {
		s := strings.Repeat(unit, 64*1024/len(unit))
		pct := hasURLEscape(s)
		c := newCandidates(s, pct)
		for i := c.next(0); i < len(s); i = c.next(i + 1) {
			if _, n := escapeAt(s, i, pct); n < 0 {
				i -= n
			}
		}
		if c.scanned > (len(candidateBytes)+1)*len(s) {
			t.Errorf("%q: %d bytes searched in %d bytes", unit, c.scanned, len(s))
		}
	}
}

// TestRelaxedVariantsQuietOnGoSource: the variants that find tokens without
// gitleaks' guards (short prefixes, secret groups without their keyword)
// redact nothing in Go's crypto and net sources, where selectors like
// s.ReadUint16LengthPrefixed have Vault's shape.
func TestRelaxedVariantsQuietOnGoSource(t *testing.T) {
	t.Parallel()
	root := filepath.Join(build.Default.GOROOT, "src")
	if _, err := os.Stat(root); err != nil {
		t.Skipf("no Go sources under %s", root)
	}
	rs, err := rules()
	if err != nil {
		t.Fatal(err)
	}
	watched := map[string]bool{}
	for _, ru := range rs.rules {
		for _, v := range ru.variants {
			if v.generated {
				watched[ru.id] = true
			}
		}
	}
	if !watched["vault-service-token"] || !watched["defined-networking-api-token"] {
		t.Fatalf("rules with generated-only variants: %v", watched)
	}
	r := New()
	files := 0
	for _, dir := range []string{"crypto", "net"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			files++
			s := string(b)
			for len(s) > 0 {
				n := min(len(s), 32*1024)
				out, counts := r.Redact(s[:n])
				for id := range counts {
					if watched[id] {
						i := strings.Index(out, "[REDACTED:"+id)
						t.Errorf("%s: %s in %q", p, id, out[max(0, i-80):min(len(out), i+80)])
					}
				}
				s = s[n:]
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if files < 100 {
		t.Fatalf("only %d files", files)
	}
}
