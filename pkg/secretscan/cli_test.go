package secretscan

import (
	"strings"
	"testing"
)

// TestPasswordsOnCommandLines: a password given to a command on its command
// line (mysql -p, sshpass -p, docker login -p, redis-cli -a, mongo -p,
// ldapsearch -w, sqlcmd -P, openssl pass:, smbclient -U user%pass, curl -u
// with characters gitleaks' curl rule leaves out), to a --password option
// with a space, echoed into --password-stdin, or given as a literal to an
// HTTP client's basic authentication reached agents: gitleaks has no rule
// for them. Only the value goes; the command stays. Variables, placeholders,
// a prompt (-p alone), port mappings and words after --password are kept.
func TestPasswordsOnCommandLines(t *testing.T) {
	t.Parallel()
	r := New()
	for _, tc := range []struct{ in, secret string }{
		{"mysql -uroot -pZk3Q9abcXyZ12 app", "Zk3Q9abcXyZ12"},
		{"mysql -h db -u root -p'Zk3/Q9+abcXyZ12' app", "Zk3/Q9+abcXyZ12"},
		{"mysqldump -u root -p\"Hk3Vt8Nc5Yq1\" --all-databases", "Hk3Vt8Nc5Yq1"},
		{"mariadb -u app -pHk3Vt8Nc5Yq1 -h db", "Hk3Vt8Nc5Yq1"},
		{"sshpass -p 'Zk3/Q9+abcXyZ12' ssh deploy@host", "Zk3/Q9+abcXyZ12"},
		{"sshpass -pSummer2024 ssh deploy@host", "Summer2024"},
		{"docker login -u bot -p Zk3Q9abcXyZ12Lm registry.example.com", "Zk3Q9abcXyZ12Lm"},
		{"podman login quay.io -u bot -p Hk3Vt8Nc5Yq1", "Hk3Vt8Nc5Yq1"},
		{"helm registry login ghcr.io -u bot -p Hk3Vt8Nc5Yq1", "Hk3Vt8Nc5Yq1"},
		{"redis-cli -h cache -a Zk3Q9abcXyZ12Lm ping", "Zk3Q9abcXyZ12Lm"},
		{"mongo -u admin -p Zk3Q9abcXyZ12 --authenticationDatabase admin", "Zk3Q9abcXyZ12"},
		{"mongodump --uri x -u admin -p 'Hk3Vt8Nc5Yq1'", "Hk3Vt8Nc5Yq1"},
		{"ldapsearch -x -D cn=admin,dc=acme -w Zk3Q9abcXyZ12 -b dc=acme", "Zk3Q9abcXyZ12"},
		{"sqlcmd -S db -U sa -P Zk3Q9abcXyZ12", "Zk3Q9abcXyZ12"},
		{"openssl pkcs12 -export -passout pass:Zk3Q9abcXyZ12 -out a.p12", "Zk3Q9abcXyZ12"},
		{"openssl rsa -in key.pem -passin pass:Hk3Vt8Nc5Yq1", "Hk3Vt8Nc5Yq1"},
		{"smbclient //srv/share -U admin%Zk3Q9abcXyZ12", "Zk3Q9abcXyZ12"},
		{"curl -u admin:Zk3/Q9+abcXyZ12 https://api.example.com", "Zk3/Q9+abcXyZ12"},
		{"curl -s --user ci:Wq7/Lm2+Zx9= https://api.example.com", "Wq7/Lm2+Zx9="},
		{"mysqldump -u root --password Zk3Q9abcXyZ12 app", "Zk3Q9abcXyZ12"},
		{"docker login --username bot --password Zk3Q9abcXyZ12Lm ghcr.io", "Zk3Q9abcXyZ12Lm"},
		{"helm repo add acme https://charts.acme.io --username bot --password 'Zk3/Q9+abc'", "Zk3/Q9+abc"},
		{"wget --http-password Zk3Q9abcXyZ12 https://x.example.com", "Zk3Q9abcXyZ12"},
		{"echo 'Zk3Q9abcXyZ12' | docker login -u bot --password-stdin", "Zk3Q9abcXyZ12"},
		{"echo -n Hk3Vt8Nc5Yq1 | helm registry login ghcr.io -u bot --password-stdin", "Hk3Vt8Nc5Yq1"},
		{"requests.get(url, auth=('admin', 'Zk3/Q9+abcXyZ12'))", "Zk3/Q9+abcXyZ12"},
		{"auth = HTTPBasicAuth('admin', 'Zk3Q9abcXyZ12')", "Zk3Q9abcXyZ12"},
		{`aiohttp.ClientSession(auth=aiohttp.BasicAuth("bot", "Hk3Vt8Nc5Yq1"))`, "Hk3Vt8Nc5Yq1"},
		{`new UsernamePasswordCredentials("svc", "Hk3Vt8Nc5Yq1")`, "Hk3Vt8Nc5Yq1"},
		{`return new PasswordAuthentication("svc", "Hk3Vt8Nc5Yq1".toCharArray());`, "Hk3Vt8Nc5Yq1"},
		{`req.SetBasicAuth("svc", "Hk3Vt8Nc5Yq1")`, "Hk3Vt8Nc5Yq1"},
	} {
		out, _ := r.Redact(tc.in)
		if strings.Contains(out, tc.secret) {
			t.Errorf("%q kept its secret: %q", tc.in, out)
		}
		if before := tc.in[:strings.Index(tc.in, tc.secret)]; !strings.HasPrefix(out, before) {
			t.Errorf("%q lost its context: %q", tc.in, out)
		}
	}
	// Another rule's placeholder is not a user (curl -u [REDACTED:…]).
	if out, _ := r.Redact("curl --cacert ca.crt -u elastic:Hk3Vt8Nc5Yq1 https://localhost:9200"); strings.Count(out, "[REDACTED:") != 1 {
		t.Errorf("curl -u: %q", out)
	}
	for _, in := range []string{
		"mysql -h db -u root -p app",
		`mysql -u root -p"$MYSQL_ROOT_PASSWORD" app`,
		"mysql -u root -p<password> app",
		"mysql -u root -P 3306 -h db app",
		"mongosh -u admin -p --authenticationDatabase admin",
		"mongod --port 27017 -p 27017",
		"docker login -u bot -p $TOKEN registry.example.com",
		"docker login -u bot -p ${{ secrets.REGISTRY_TOKEN }} ghcr.io",
		"docker run --name login -p 8080:80 nginx",
		"docker login --password-stdin",
		`echo "$CR_PAT" | docker login ghcr.io -u bot --password-stdin`,
		"sshpass -p password ssh x",
		"sshpass -f ~/.pw ssh x",
		"ssh -p 2222 deploy@host",
		"redis-cli -a $REDIS_PASSWORD ping",
		"ldapsearch -x -W -D cn=admin,dc=acme",
		"openssl pkcs12 -export -passout env:P12_PASSWORD -out a.p12",
		"Use --password something to set it",
		"pass --password your-db-password here",
		"run it with --password-file /run/secrets/db",
		"--password ******** (hidden)",
		"req.SetBasicAuth(user, pass)",
		"auth=('user', 'password')",
		`auth=("admin", os.environ["PW"])`,
		"client.withBasicAuth('u', 'your password')",
		`r.SetBasicAuth("myid", "mysecret")`,
		`req.SetBasicAuth("Aladdin", "open sesame")`,
		"openssl pkcs12 -in key.p12 -passin pass:notasecret -out key.pem -nodes",
		"openssl pkcs12 -export -inkey k.pem -in c.pem -passout pass:sample",
	} {
		if out, _ := r.Redact(in); out != in {
			t.Errorf("%q became %q", in, out)
		}
	}
}
