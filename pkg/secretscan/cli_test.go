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
	checkOnlyValueRedacted(t, r, []credentialCase{
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
		// Found by review: a quoted password runs to its closing quote,
		// whatever shell characters it holds.
		{"mysql -uroot -p'Zk3Q9abc&XyZ12;Lm' app", "Zk3Q9abc&XyZ12;Lm"},
		{"mysql -uroot -p'Zk3Q9&abcXyZ12' app", "Zk3Q9&abcXyZ12"},
		{"sshpass -p 'Zk3Q9abc|XyZ12' ssh deploy@host", "Zk3Q9abc|XyZ12"},
		{"docker login -u bot --password 'Zk3Q9abc;XyZ12' ghcr.io", "Zk3Q9abc;XyZ12"},
		{`mysql -p"Zk3Q9abc(XyZ)12" app`, "Zk3Q9abc(XyZ)12"},
		{"mysql -p'correct horse battery staple' app", "correct horse battery staple"},
		{"echo 'Zk3Q9&abcXyZ12' | docker login -u bot --password-stdin", "Zk3Q9&abcXyZ12"},
		{"smbclient //srv/share -U 'admin%Zk3Q9abc&XyZ12'", "Zk3Q9abc&XyZ12"},
		// Continuation lines, exec-form arrays, code spans, a line start.
		{"mysql -h db \\\n  -u root \\\n  -pZk3Q9abcXyZ12 app", "Zk3Q9abcXyZ12"},
		{"docker login \\\n  -u bot \\\n  -p Zk3Q9abcXyZ12Lm ghcr.io", "Zk3Q9abcXyZ12Lm"},
		{"curl \\\n  -u admin:Zk3/Q9+abcXyZ12 https://api.example.com", "Zk3/Q9+abcXyZ12"},
		{`test: ["CMD", "mysqladmin", "ping", "-h", "localhost", "-uroot", "-pZk3Q9abcXyZ12"]`, "Zk3Q9abcXyZ12"},
		{"Run mysql with `-pZk3Q9abcXyZ12` once.", "Zk3Q9abcXyZ12"},
		{"Use `--password Zk3Q9abcXyZ12` here.", "Zk3Q9abcXyZ12"},
		{"docker login ghcr.io \\\n--username bot \\\n--password Zk3Q9abcXyZ12Lm", "Zk3Q9abcXyZ12Lm"},
		// Other shapes.
		{"smbclient //srv/share --user admin%Zk3Q9abcXyZ12", "Zk3Q9abcXyZ12"},
		{"openssl pkcs12 -in a.p12 -passin 'pass:Zk3Q9abcXyZ12'", "Zk3Q9abcXyZ12"},
		{"printf '%s' 'Zk3Q9abcXyZ12' | docker login ghcr.io -u bot --password-stdin", "Zk3Q9abcXyZ12"},
		{"ldapsearch -x -D cn=admin,dc=acme -wZk3Q9abcXyZ12 -b dc=acme", "Zk3Q9abcXyZ12"},
		{"keytool -importkeystore -srckeystore a.jks -srcstorepass Zk3Q9abcXyZ12 -destkeystore b.p12", "Zk3Q9abcXyZ12"},
		{"jarsigner -keystore release.jks -storepass Hk3Vt8Nc5Yq1 app.apk release", "Hk3Vt8Nc5Yq1"},
		{"auth=(username, 'Zk3Q9abcXyZ12')", "Zk3Q9abcXyZ12"},
		{`req.SetBasicAuth(user, "Zk3Q9abcXyZ12")`, "Zk3Q9abcXyZ12"},
		{`String c = Credentials.basic("svc", "Hk3Vt8Nc5Yq1");`, "Hk3Vt8Nc5Yq1"},
		{`.defaultHeaders(h -> h.setBasicAuth("svc", "Hk3Vt8Nc5Yq1"))`, "Hk3Vt8Nc5Yq1"},
		{`builder.basicAuthentication("svc", "Hk3Vt8Nc5Yq1")`, "Hk3Vt8Nc5Yq1"},
		{`new NetworkCredential("svc", "Hk3Vt8Nc5Yq1")`, "Hk3Vt8Nc5Yq1"},
	})
	// Redacting again changes nothing: another rule's placeholder is
	// neither a user nor a password (curl -u [REDACTED:…], and
	// redis://:[REDACTED:github-pat]@… once the user could be empty).
	for _, in := range []string{
		"REDIS_URL=redis://:ghp_Zk3Q9abcXyZ12Lm4Np7Qr2St5Uv8Wx0Yz3Ab@cache:6379/0",
		"git clone https://x-access-token:ghp_Zk3Q9abcXyZ12Lm4Np7Qr2St5Uv8Wx0Yz3Ab@github.com/acme/api.git",
		"git clone https://ghp_Zk3Q9abcXyZ12Lm4Np7Qr2St5Uv8Wx0Yz3Ab@github.com/acme/api.git",
		"curl --cacert ca.crt -u elastic:Hk3Vt8Nc5Yq1 https://localhost:9200",
	} {
		once, _ := r.Redact(in)
		if twice, _ := r.Redact(once); twice != once || strings.Contains(once, "[REDACTED:[REDACTED") {
			t.Errorf("%q: %q, then %q", in, once, twice)
		}
	}
	// Another rule's placeholder is not a user (curl -u [REDACTED:…]).
	if out, _ := r.Redact("curl --cacert ca.crt -u elastic:Hk3Vt8Nc5Yq1 https://localhost:9200"); strings.Count(out, "[REDACTED:") != 1 {
		t.Errorf("curl -u: %q", out)
	}
	checkUnchanged(t, r, []string{
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
		// Found by review: another program on the line, flags without a
		// value, port mappings, lists of schemes, template variables.
		"gcc -I/usr/include/mysql -pthread -O2 -c db.c",
		"gcc -I/usr/include/mariadb -pedantic -c db.c",
		"docker run -d --name mongo -p 27017:27017 mongo:7",
		"docker run --name mysql -e MYSQL_ALLOW_EMPTY_PASSWORD=yes -p3306:3306 mysql:8",
		"docker login ghcr.io -u bot --password-stdin && docker run -p 8080:8080 app",
		"ldapsearch -x -b dc=acme uid=jdoe | grep -w memberOf",
		"ansible-playbook --ask-vault-pass playbooks/site.yml",
		"ansible-playbook --ask-become-pass deploy/web.yml",
		"psql --no-password postgres://app@db/app",
		`pg_dump --no-password "host=db dbname=app"`,
		"open http://[::1]:5173/@vite/client",
		"auth = ['password', 'publickey']",
		`auth = ("basic", "bearer")`,
		`cmd = f"mysql -u{user} -p{password} {db}"`,
		"system(\"mysql -u#{user} -p#{db_password} app\")",
		"keytool -list -keystore a.jks -storepass:env KEYSTORE_PASSWORD",
	})
}

// TestPasswordsToKeyAndSecretCommands: a passphrase given to ssh-keygen -N,
// a password to htpasswd -b, a plain-text string to PowerShell's
// ConvertTo-SecureString, a secret's value to gh secret set --body. A
// prompt, an empty passphrase and variables are kept.
func TestPasswordsToKeyAndSecretCommands(t *testing.T) {
	t.Parallel()
	r := New()
	checkOnlyValueRedacted(t, r, []credentialCase{
		{"ssh-keygen -t ed25519 -N 'Zk3/Q9+abcXyZ12' -f deploy_key", "Zk3/Q9+abcXyZ12"},
		{"ssh-keygen -p -P Hk3Vt8Nc5Yq1 -N Zk3Q9abcXyZ12 -f id_rsa", "Hk3Vt8Nc5Yq1"},
		{"htpasswd -b .htpasswd admin Zk3Q9abcXyZ12", "Zk3Q9abcXyZ12"},
		{"htpasswd -bcB /etc/nginx/.htpasswd admin 'Zk3&Q9abcXyZ12'", "Zk3&Q9abcXyZ12"},
		{"htpasswd -nb admin Hk3Vt8Nc5Yq1 > auth", "Hk3Vt8Nc5Yq1"},
		{"htpasswd -bBC 10 .htpasswd admin Hk3Vt8Nc5Yq1", "Hk3Vt8Nc5Yq1"},
		{"htpasswd -b -B -C 12 .htpasswd deployer Hk3Vt8Nc5Yq1", "Hk3Vt8Nc5Yq1"},
		{`ssh-keygen -t rsa -N"Hk3Vt8Nc5Yq1" -f k`, "Hk3Vt8Nc5Yq1"},
		{`convertto-securestring "Hk3Vt8Nc5Yq1xZq" -asplaintext -force`, "Hk3Vt8Nc5Yq1xZq"},
		{`$pw = ConvertTo-SecureString "Zk3Q9abc!XyZ12" -AsPlainText -Force`, "Zk3Q9abc!XyZ12"},
		{`ConvertTo-SecureString -String 'Hk3Vt8Nc5Yq1' -AsPlainText -Force`, "Hk3Vt8Nc5Yq1"},
		{`gh secret set DEPLOY_TOKEN --body "Zk3Q9abcXyZ12Lm"`, "Zk3Q9abcXyZ12Lm"},
		{"gh secret set API_KEY -b Hk3Vt8Nc5Yq1 --repo acme/api", "Hk3Vt8Nc5Yq1"},
	})
	checkUnchanged(t, r, []string{
		`ssh-keygen -t ed25519 -N "" -f deploy_key`,
		`ssh-keygen -N "$KEY_PASSPHRASE" -f key`,
		"htpasswd -B -C 10 .htpasswd admin",
		"htpasswd -b .htpasswd deployer",
		`htpasswd -nb admin "$ADMIN_PASSWORD"`,
		"ConvertTo-SecureString $plain -AsPlainText -Force",
		`gh secret set DEPLOY_TOKEN --body "$TOKEN"`,
		"gh secret set DEPLOY_TOKEN < token.txt",
	})
}
