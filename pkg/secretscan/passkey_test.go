package secretscan

import "testing"

// TestPasswordsUnderShortKeys: a password assigned to a key ending in pass,
// pwd or psk, or set by a Dockerfile ENV without '=', reached agents:
// gitleaks' generic rule knows only password and passwd. Booleans, None,
// paths, calls, variables, templates and test results are kept.
func TestPasswordsUnderShortKeys(t *testing.T) {
	t.Parallel()
	r := New()
	checkOnlyValueRedacted(t, r, []credentialCase{
		{"ansible_become_pass: Zk3Q9abcXyZ12", "Zk3Q9abcXyZ12"},
		{"ansible_ssh_pass=Zk3Q9abcXyZ12", "Zk3Q9abcXyZ12"},
		{"DB_PASS=Zk3Q9abcXyZ12", "Zk3Q9abcXyZ12"},
		{"export SMTP_PASS='Zk3Q9abc&XyZ12'", "Zk3Q9abc&XyZ12"},
		{"$env:DB_PASS = 'Zk3Q9abcXyZ12'", "Zk3Q9abcXyZ12"},
		{`{"user": "bot", "pass": "Zk3Q9abcXyZ12"}`, "Zk3Q9abcXyZ12"},
		{`ConnectionString="Driver={PostgreSQL};Server=db;Uid=app;Pwd=Zk3Q9abcXyZ12;"`, "Zk3Q9abcXyZ12"},
		{"pwd: Zk3Q9abcXyZ12", "Zk3Q9abcXyZ12"},
		{`  psk="Zk3Q9abcXyZ12"`, "Zk3Q9abcXyZ12"},
		{"redis.pass := \"Hk3Vt8Nc5Yq1\"", "Hk3Vt8Nc5Yq1"},
		{"ENV MYSQL_ROOT_PASSWORD Zk3Q9abcXyZ12", "Zk3Q9abcXyZ12"},
		{"ENV DB_PASS Hk3Vt8Nc5Yq1", "Hk3Vt8Nc5Yq1"},
	})
	checkUnchanged(t, r, []string{
		"pass: true",
		"pass = None",
		"    else:\n        pass\n",
		"if err != nil { pass = false }",
		"pwd = os.getcwd()",
		"PWD=/home/runner/work/api",
		"ENV PWD /app",
		`ansible_become_pass: "{{ vault_become_pass }}"`,
		"ansible_become_pass: !vault |",
		"DB_PASS=${DB_PASS:-}",
		"DB_PASS: ${{ secrets.DB_PASS }}",
		`{"pass": "<password>"}`,
		"bypass: 1234567",
		"compass: north-east",
		"test_pass_rate: 0.95",
		"psk := tls13.ExpandLabel(h, secret, \"resumption\", nonce)",
		"a.pass = utf16.Encode([]rune(*password))",
		"ICMPV6_FILTER_PASS        = C.ICMPV6_FILTER_PASS",
		"DB_PASS = DEFAULT_DB_PASS_V2",
		"'test:pass': 'TestPass2Reporter',",
		"--- PASS: TestRedactEveryRule2 (0.00s)",
		`{"Action":"output","Test":"TestAscii","Output":"--- PASS: TestAscii_v2\n"}`,
		"=== RUN   TestX\n--- PASS: TestX/sub_case_1 (0.01s)\nPASS\n",
	})
}
