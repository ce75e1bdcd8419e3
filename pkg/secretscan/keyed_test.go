package secretscan

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestSecretsUnderTheirKeys: a secret quoted after a subscript, a quoted key
// or as a call's second argument, or holding punctuation (Django's
// django-insecure- keys, WordPress's salts, Laravel's base64: keys), reached
// agents: gitleaks' generic rule wants a bare key and a value of letters,
// digits and . = - _. Code and text after such keys are kept.
func TestSecretsUnderTheirKeys(t *testing.T) {
	t.Parallel()
	r := New()
	checkOnlyValueRedacted(t, r, []credentialCase{
		// Django, Flask and the environment from Python.
		{`SECRET_KEY = 'django-insecure-7x!k2#f9q@z$w8&v^m3n(p)r=t+u_y-b0c4d6e1g5h'`, `django-insecure-7x!k2#f9q@z$w8&v^m3n(p)r=t+u_y-b0c4d6e1g5h`},
		{`app.config['SECRET_KEY'] = 'Zq8Lr2Vm9Tx4Kc7Wn1Yb6Hs3'`, "Zq8Lr2Vm9Tx4Kc7Wn1Yb6Hs3"},
		{`app.config["JWT_SECRET_KEY"]="Zq8Lr2Vm9Tx4Kc7Wn1Yb6Hs3"`, "Zq8Lr2Vm9Tx4Kc7Wn1Yb6Hs3"},
		{`os.environ["DB_PASSWORD"] = "Hk3#Vt8Nc5&Yq1"`, "Hk3#Vt8Nc5&Yq1"},
		{`os.environ.setdefault("DJANGO_SECRET_KEY", "k2#f9q@z$w8&v^m3n(p)r=t+u")`, "k2#f9q@z$w8&v^m3n(p)r=t+u"},
		// WordPress's wp-config.php salts (a space is one of their characters).
		{`define( 'AUTH_KEY',         'n+S0$]|+?N:Y8-x3LV>dF+e-Ua+~%6$?@VUOq![-u&aJ8ngFJ@1b?c<C>X;e2*g]' );`, `n+S0$]|+?N:Y8-x3LV>dF+e-Ua+~%6$?@VUOq![-u&aJ8ngFJ@1b?c<C>X;e2*g]`},
		{`define('NONCE_SALT', 'Q/ 9v<.K}yO|x4+n#Ew2@Lr8^Tb6&Gm0');`, "Q/ 9v<.K}yO|x4+n#Ew2@Lr8^Tb6&Gm0"},
		{`putenv("API_TOKEN", "Zq8Lr2Vm9Tx4!Kc7Wn1Yb6Hs3");`, "Zq8Lr2Vm9Tx4!Kc7Wn1Yb6Hs3"},
		// PHP, Ruby, JavaScript, Go and YAML with punctuation in the value.
		{`'password' => 'p@ss!W0rd#2024',`, "p@ss!W0rd#2024"},
		{`:secret_key_base => "5f2a9c8e!7d6b4a3f1e0d9c8b",`, "5f2a9c8e!7d6b4a3f1e0d9c8b"},
		{"const config = { apiKey: `Zq8Lr2Vm9Tx4+Kc7Wn1Yb6Hs3/` };", "Zq8Lr2Vm9Tx4+Kc7Wn1Yb6Hs3/"},
		{`	ClientSecret: "Hk3Vt8Nc5Yq1!x",`, "Hk3Vt8Nc5Yq1!x"},
		{"const (\n\tAppSecret                 = \"Hk3Vt8Nc5Yq1!x\"\n)", "Hk3Vt8Nc5Yq1!x"},
		{`  passphrase: "Zq8Lr2&Vm9Tx4"`, "Zq8Lr2&Vm9Tx4"},
		// Env files and YAML, unquoted.
		{"APP_KEY=base64:Xk9Lm2Pq7Rt4Vz8NXk9Lm2Pq7Rt4Vz8NXk9Lm2Pq7Rs=", "base64:Xk9Lm2Pq7Rt4Vz8NXk9Lm2Pq7Rt4Vz8NXk9Lm2Pq7Rs="},
		{"DEBUG=false\nSECRET_KEY=django-insecure-k2#f9q@z$w8&v^m3n\nALLOWED_HOSTS=*", "django-insecure-k2#f9q@z$w8&v^m3n"},
		{"export JWT_SECRET=Hk3Vt8Nc5Yq1!x@Zq8", "Hk3Vt8Nc5Yq1!x@Zq8"},
		{"  session_secret: Hk3Vt8Nc5Yq1!x@Zq8 ", "Hk3Vt8Nc5Yq1!x@Zq8"},
		{"KEYSTORE_PASSPHRASE=Xk9Lm2Pq7Rt4Vz8N", "Xk9Lm2Pq7Rt4Vz8N"},
		// Found by an independent review: keys whose alphabet holds % ( ) { -
		// (a format allowlist, a template allowlist, an option allowlist and
		// the unquoted value's end used to keep or cut them).
		{`SECRET_KEY = 'django-insecure-8t2+p=-#7n&_%5#q!=%+sf5ej7gtzvn_9@fk4i5pf__k0(huwy'`, "django-insecure-8t2+p=-#7n&_%5#q!=%+sf5ej7gtzvn_9@fk4i5pf__k0(huwy"},
		{"DJANGO_SECRET_KEY=!d_z(gw=i#bh(_j5rs!7br360r3)grup&082ffzi+pufoik30o", "!d_z(gw=i#bh(_j5rs!7br360r3)grup&082ffzi+pufoik30o"},
		{"DJANGO_SECRET_KEY=q1-e%7t@_nt2va2&i4o7$4j1@yz$(i&)4@4oxh40+11h*$ursc", "q1-e%7t@_nt2va2&i4o7$4j1@yz$(i&)4@4oxh40+11h*$ursc"},
		{"define( 'AUTH_SALT', 'N#zU?@w`l?u/f2K,%Ts`Z>K=[<S$b?J4_s$|rJ3brBhuGVPEHL;[:9wYuJEIf6AM' );", "N#zU?@w`l?u/f2K,%Ts`Z>K=[<S$b?J4_s$|rJ3brBhuGVPEHL;[:9wYuJEIf6AM"},
		{"define( 'AUTH_SALT', '{#Oilseu1y;H2>@gp:uZ;:2uRV*87{9t/~`iIm4#snbGC+ka-|1z&mlj5v-T9|Fg' );", "{#Oilseu1y;H2>@gp:uZ;:2uRV*87{9t/~`iIm4#snbGC+ka-|1z&mlj5v-T9|Fg"},
		{"define( 'LOGGED_IN_SALT', '-MccTu2}7UggVKsbS^0%AZ!x4+n#Ew2@Lr8^Tb6&Gm0' );", "-MccTu2}7UggVKsbS^0%AZ!x4+n#Ew2@Lr8^Tb6&Gm0"},
		// Deep YAML, list items, commands and flags before the assignment.
		{"          password: Zq8L!r2Vm9Tx4Kc7", "Zq8L!r2Vm9Tx4Kc7"},
		{"            - DB_PASSWORD=Hk3#Vt8Nc5&Yq1", "Hk3#Vt8Nc5&Yq1"},
		{"ENV JWT_SECRET=Zq8L!r2Vm9Tx4Kc7", "Zq8L!r2Vm9Tx4Kc7"},
		{"docker run -e DB_PASSWORD=Hk3#Vt8Nc5&Yq1 postgres", "Hk3#Vt8Nc5&Yq1"},
		{"kubectl create secret generic db --from-literal=password=Hk3#Vt8Nc5Yq1", "Hk3#Vt8Nc5Yq1"},
		{"spring.datasource.password=Hk3#Vt8Nc5&Yq1", "Hk3#Vt8Nc5&Yq1"},
		{"jwt.secret=Zq8L!r2Vm9Tx4Kc7,other", "Zq8L!r2Vm9Tx4Kc7"},
		// Type annotations, literal prefixes, fallbacks.
		{`    SECRET_KEY: str = "Zq8L!r2Vm9Tx4Kc7"`, "Zq8L!r2Vm9Tx4Kc7"},
		{`let token: &str = "Zq8L!r2Vm9Tx4Kc7";`, "Zq8L!r2Vm9Tx4Kc7"},
		{`SECRET_KEY = b'_5#y2L"F4Q8z]/x!'`, `_5#y2L"F4Q8z]/x!`},
		{`password = @"Zq8L!r2Vm9Tx4Kc7";`, "Zq8L!r2Vm9Tx4Kc7"},
		{`SECRET_KEY = env("SECRET_KEY", default="django-insecure-7x!k2#f9q@z$w8&v^m3n")`, "django-insecure-7x!k2#f9q@z$w8&v^m3n"},
		{`const JWT_SECRET = process.env.JWT_SECRET || 'Zq8L!r2Vm9Tx4Kc7';`, "Zq8L!r2Vm9Tx4Kc7"},
		{`MYSQL_ROOT_PASSWORD: "p@ssw0rd!"`, "p@ssw0rd!"},
		// In a URL's query the value ends at & or #; elsewhere & is part of it.
		{"GET /cb?state=1&client_secret=Zq8!Lr2Vm9Tx4&page=2 returned 200", "Zq8!Lr2Vm9Tx4"},
	})
	if out, _ := r.Redact("GET /cb?client_secret=Zq8!Lr2Vm9Tx4&page=2 returned 200"); out != "GET /cb?client_secret=[REDACTED:secret-query-parameter]&page=2 returned 200" {
		t.Errorf("query: %q", out)
	}
	// Two on a line: the first value's end (the space) is its match's, as
	// in gitleaks, so a second key needs another separator before it.
	if out, _ := r.Redact("docker run -e API_TOKEN=Zq8L!r2Vm9Tx4Kc7 -e DB_PASSWORD=Hk3#Vt8Nc5Yq1 app"); out != "docker run -e API_TOKEN=[REDACTED:secret-assignment-unquoted] -e DB_PASSWORD=[REDACTED:secret-assignment-unquoted] app" {
		t.Errorf("two on a line: %q", out)
	}
	if out, _ := r.Redact("SECRET_KEY=k2#f9q@z$w8&v^m3n\n"); out != "SECRET_KEY=[REDACTED:secret-assignment-unquoted]\n" {
		t.Errorf("env file: %q", out)
	}
	checkUnchanged(t, r, []string{
		// Text: i18n messages, prose in Markdown.
		`"password_too_common": "This password is too common, pick another one.",`,
		`"tokenExpired": "Your session token has expired. Please sign in again."`,
		`tokenError(w, status, "incorrect_client_credentials", "The client_id and/or client_secret passed are incorrect.")`,
		"The first tenant and token: `kubectl run -it --rm cltctl --command -- cltctl tenant create`",
		"`--password-stdin`, `--password-file`, `--no-password`",
		// Code after the key: regular expressions, SQL, calls, names, paths, URLs.
		`PASSWORD_PATTERN = "^(?=.*[A-Z])(?=.*\\d)[A-Za-z\\d@$!%*#?&]{8,}$"`,
		`"tokenPattern": "[A-Za-z0-9_-]{20,}"`,
		"const secretsLock = `hashtextextended('secret_fingerprints ' || $1, 0)`",
		"cred.CredentialBlob = (LPVOID)password;",
		"salt = bcrypt.gensalt(rounds=12)",
		"token=req.query.token;",
		"  secret: process.env.SESSION_SECRET",
		`PASSWORD_HASHERS = "django.contrib.auth.hashers.PBKDF2PasswordHasher"`,
		`TOKEN_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/token"`,
		`secret_ref: "projects/my-proj/secrets/db-password/versions/latest"`,
		`token_url: "https://oauth2.googleapis.com/token"`,
		`SECRET_KEY = "{{ django_secret_key }}"`,
		`SECRET_KEY = "%(secret)s-%(env)s"`,
		`'password' => env('DB_PASSWORD', ''),`,
		`password: "%s:%s@%s"`,
		`"token: " + token + " (rotate)"`,
		`"export GITHUB_TOKEN=" + token[:10] + "\u00ad"`,
		`{"secret", "token", "password", "api-key-header"}`,
		`form("/t/acme/mcp/tokens", "name=ok&expires_days=30")`,
		`fail(ErrIDToken, "the token response has no id_token (is the openid scope granted?)")`,
		`ftp_passwd="anonymous@example.org"`,
		`credentials: "same-origin",`,
		`token_type: 'bearer_token'`,
		`CACHE_KEY = "user:%d:profile:v2"`,
		`sort_key: "created_at:desc"`,
		// Found by redacting the Go tree, the module cache, Python, Perl
		// and npm: names, escapes, kwargs, keys about a secret.
		`outToken: "client-valid-token-1",`,
		`InsecureKeyExchangeDH1SHA1   = "diffie-hellman-group1-sha1"`,
		`const privateKeyAuthMagic = "openssh-key-v1\x00"`,
		"output = token.close = `)$))${extglobStar}`;",
		`    private_key: "_RSAPrivateKey",`,
		"                request_token=request.resource_owner_key):",
		"                default_token_type=self.bearer)",
		`        Token.Comment: "italic #A3AAB2",`,
		`'Unknown TAP token: "' . $unk->raw . '"' );`,
		`'ispsalterpahlavi' => 'Scx/Phlp',`,
		`"salt":                                 "\U0001f9c2",`,
		`const _token_name = "EOFnameliteralopop=opop=:=<-*([{)]},;:....breakcasechan"`,
		`withCredentials([usernamePassword(credentialsId: '29f63271-dc2f-4734-8221-5b31b5169bac')])`,
		`SECRET_ARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:db-AbCdEf"`,
		// Found by the independent review.
		`'password' => 'required|string|min:8|confirmed',`,
		`'token' => 'sometimes|uuid|exists:api_tokens',`,
		`'current_password' => 'required|current_password:api',`,
		`"password": "Contraseña:",`,
		`"token": "Jeton d’accès",`,
		"credentials: gcp:projects/my-proj/secrets/db",
		"api_key_source: header:X-Api-Key",
		"CREDENTIALS=file:./creds.json",
		"SECRETS_BACKEND=aws:secretsmanager",
		"DB_PASSWORD=vault:secret/data/db#password",
		`"logMessage": "token: expired"`,
		// Found by redacting the module cache after the unquoted rule
		// read "key = value" and brackets: code.
		"\td.tokens = d.tokens[:0]",
		"\t\tCredential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)},",
		"\tTlsCertificateSdsSecretConfigs: []*v3tlspb.SdsSecretConfig{",
		"const UNEXPECTED_TOKEN = /^Unexpected token '?(.)'?(,)? /i",
		`print(f"password={password}")`,
		// The same walk over a larger module cache.
		"\t\t\t\tClientSecret: *idpClientSecret,",
		`TokenTypeIDToken = "urn:ietf:params:oauth:token-type:id_token"`,
		"Token: `urn:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6`,",
		`"token_scopes": "gist,repo:read",`,
		`whenTokenLookup: "header:X-CSRF-Token,form:csrf",`,
		"tokenResponseBody := `{\"access_token\":\"Sample.Access.Token\",\"token_type\":\"Bearer\"}`",
		`"token_expiry": "2015-01-09T00:51:51Z",`,
		`repeatedStringForTokenRequests := "[]TokenRequest{"`,
		"#SALT=`date '+%Y%M%d%h%m%s'`",
		"`password:`, a key after `api_key =`) and from then on",
		`want := ` + "`" + `github.Import{VCSURL:"", VCSPassword:"", UseLFS:"", Status:""}` + "`",
	})
	// A form body that starts with a secret's key loses its later fields
	// too (stopping at & would show the rest of a Django key).
	if out, _ := r.Redact(`"client_secret=S3cr!tXyZ9&grant_type=client_credentials"`); out != `"client_secret=[REDACTED:secret-assignment-unquoted]"` {
		t.Errorf("form body: %q", out)
	}
}

// TestXMLConfigSecrets: .NET's appSettings, Spring's bean properties and
// Java's XML properties hold secrets in a value whose key names one.
func TestXMLConfigSecrets(t *testing.T) {
	t.Parallel()
	r := New()
	checkOnlyValueRedacted(t, r, []credentialCase{
		{`<add key="ApiKey" value="Xk9Lm2Pq7Rt4Vz8NXk9Lm2Pq" />`, "Xk9Lm2Pq7Rt4Vz8NXk9Lm2Pq"},
		{`    <add key="Smtp:Password" value="Hk3#Vt8Nc5&amp;Yq1"/>`, "Hk3#Vt8Nc5&amp;Yq1"},
		{`<property name="password" value="Zq8Lr2!Vm9Tx4"/>`, "Zq8Lr2!Vm9Tx4"},
		{`<entry key="db.password">Zq8Lr2!Vm9Tx4</entry>`, "Zq8Lr2!Vm9Tx4"},
		{`<param name="client_secret" value="Zq8Lr2Vm9Tx4Kc7Wn1Yb6Hs3"/>`, "Zq8Lr2Vm9Tx4Kc7Wn1Yb6Hs3"},
		{`<add key='ApiKey' value='Zq8Lr2Vm9Tx4Kc7Wn1'/>`, "Zq8Lr2Vm9Tx4Kc7Wn1"},
		{`<property name="password"><value>Zq8Lr2!Vm9Tx4</value></property>`, "Zq8Lr2!Vm9Tx4"},
	})
	checkUnchanged(t, r, []string{
		`<add key="ClientValidationEnabled" value="true" />`,
		`<property name="password" value="${db.password}"/>`,
		`<property name="passwordEncoder" ref="bcryptEncoder"/>`,
		`<property name="passwordEncoder" value="org.springframework.security.crypto.bcrypt.BCryptPasswordEncoder"/>`,
		`<add key="TokenLifetime" value="00:30:00" />`,
		`<entry key="token.header">Authorization</entry>`,
		`<add key="PasswordResetTemplate" value="Templates\Email\PasswordReset.cshtml" />`,
		`<param name="tokenFormat" value="yyyy-MM-dd'T'HH:mm:ss"/>`,
		`<entry key="password.policy">min=8;upper=1</entry>`,
	})
}

// TestPasswordFilesAndWebhooks: a PostgreSQL password file's line, a
// password echoed into chpasswd, a Discord webhook.
func TestPasswordFilesAndWebhooks(t *testing.T) {
	t.Parallel()
	r := New()
	checkOnlyValueRedacted(t, r, []credentialCase{
		{"db.example.com:5432:appdb:appuser:Xk9Lm2Pq7Rt4Vz8N", "Xk9Lm2Pq7Rt4Vz8N"},
		{"localhost:*:*:postgres:Hk3#Vt8N\\:c5Yq1\n", `Hk3#Vt8N\:c5Yq1`},
		{`RUN echo "db:6432:app:app:Zq8Lr2Vm9Tx4" > ~/.pgpass`, "Zq8Lr2Vm9Tx4"},
		{`RUN echo 'deploy:Zq8Lr2!Vm9Tx4' | chpasswd && apt-get clean`, "Zq8Lr2!Vm9Tx4"},
		{"echo root:Hk3Vt8Nc5Yq1 | sudo chpasswd", "Hk3Vt8Nc5Yq1"},
		{`echo "deploy:Zq8Lr2Vm9Tx4" | /usr/sbin/chpasswd`, "Zq8Lr2Vm9Tx4"},
		{`echo "${USER}:Zq8Lr2Vm9Tx4" | sudo -S chpasswd`, "Zq8Lr2Vm9Tx4"},
		{"https://discord.com/api/webhooks/123456789012345678/Xk9Lm2Pq7Rt4Vz8NXk9Lm2Pq7Rt4Vz8NXk9Lm2Pq7Rt4Vz8NXk9Lm2Pq7Rt4Vz8NXk9L", "Xk9Lm2Pq7Rt4Vz8NXk9Lm2Pq7Rt4Vz8NXk9Lm2Pq7Rt4Vz8NXk9Lm2Pq7Rt4Vz8NXk9L"},
	})
	checkUnchanged(t, r, []string{
		"root:x:0:0:root:/root:/bin/bash",
		`perm = "user:*:accounts:read:balance-sheet"`,
		"LOG 10.0.0.1:5432:postgres:replication:streaming",
		"localhost:5432:*:postgres:${PGPASSWORD}",
		"db:5432:app:app:*",
		"2001:db8:5432:1:abcdef",
		`echo "$USER:$PASSWORD" | chpasswd`,
		"https://discord.com/api/webhooks/{webhook_id}/{webhook_token}",
	})
}

// TestSecretsStartingLikePaths: a generated value may start with / . or ~
// (WordPress's salts do); only a whole path is kept.
func TestSecretsStartingLikePaths(t *testing.T) {
	t.Parallel()
	r := New()
	checkOnlyValueRedacted(t, r, []credentialCase{
		{`define('SECURE_AUTH_SALT', '/Q9v<.K}yO|x4+n#Ew2@Lr8^Tb6&Gm0');`, "/Q9v<.K}yO|x4+n#Ew2@Lr8^Tb6&Gm0"},
		{`define('LOGGED_IN_KEY', '.k#9v<K}yO|x4+n#Ew2@Lr8^Tb6&Gm0');`, ".k#9v<K}yO|x4+n#Ew2@Lr8^Tb6&Gm0"},
		{`SECRET_KEY = "~Zq8!Lr2Vm9Tx4Kc7Wn1"`, "~Zq8!Lr2Vm9Tx4Kc7Wn1"},
	})
	checkUnchanged(t, r, []string{
		`TOKEN_PATH = "~/.config/gh/hosts.yml"`,
		`SECRET_FILE = "../secrets/dev.env"`,
		`password_file: ".htpasswd"`,
	})
}

// TestGeneratedFrameworkKeys: keys drawn from Django's and WordPress's own
// alphabets (seeded, so the same every run) are redacted whole where those
// frameworks write them. An independent review found about one Django key
// in seven kept in settings.py and most kept or cut in env files.
func TestGeneratedFrameworkKeys(t *testing.T) {
	t.Parallel()
	r := New()
	rng := rand.New(rand.NewPCG(11, 12))
	gen := func(alphabet string, n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	// django.core.management.utils.get_random_secret_key.
	const django = "abcdefghijklmnopqrstuvwxyz0123456789!@#$%^&*(-_=+)"
	for i := 0; i < 300; i++ {
		key := "django-insecure-" + gen(django, 50)
		for _, in := range []string{
			"SECRET_KEY = '" + key + "'\n",
			"DJANGO_SECRET_KEY=" + key + "\n",
			"  DJANGO_SECRET_KEY: " + key + "\n",
		} {
			if out, _ := r.Redact(in); strings.Contains(out, key[16:26]) || strings.Contains(out, key[len(key)-10:]) {
				t.Errorf("Django key shown: %q -> %q", in, out)
			}
		}
	}
	// wp_generate_password(64, true, true), as wp-config.php's salts. A
	// salt with a space and two runs of four lower-case letters reads as
	// text (the prose allowlist); that share is counted, never a cut.
	const wp = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!@#$%^&*()-_ []{}<>~`+=,.;:/?|"
	kept := 0
	for i := 0; i < 300; i++ {
		salt := gen(wp, 64)
		in := "define( 'AUTH_SALT', '" + salt + "' );"
		out, _ := r.Redact(in)
		switch {
		case out == in:
			kept++
		case strings.Contains(out, salt[:12]) || strings.Contains(out, salt[len(salt)-12:]):
			t.Errorf("salt cut: %q -> %q", in, out)
		}
	}
	if kept > 15 {
		t.Errorf("%d of 300 WordPress salts kept, want at most 15", kept)
	}
	t.Logf("%d of 300 WordPress salts kept", kept)
}

// TestKeyRulesShareTheirKey: the five key rules are one rule split by shape
// (TOML has no variables), so their key expression, keywords, entropy and
// tags are copies; an edit to one copy alone would make the shapes disagree
// on which keys name a secret.
func TestKeyRulesShareTheirKey(t *testing.T) {
	t.Parallel()
	rs, err := rules()
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{"secret-assignment", "secret-subscript", "secret-argument", "secret-assignment-unquoted", "secret-query-parameter"}
	first := rs.cfg.Rules[ids[0]]
	src := first.Regex.String()
	const start, end = `(?i:(?:[\w.-]{0,40}?(?:secret`, `[\w-]{0,24}?)`
	i := strings.Index(src, start)
	j := strings.Index(src[max(i, 0):], end)
	if i < 0 || j < 0 {
		t.Fatalf("%s: no key expression in %q", ids[0], src)
	}
	key := src[i : i+j+len(end)]
	for _, id := range ids[1:] {
		cr, ok := rs.cfg.Rules[id]
		if !ok {
			t.Fatalf("no rule %s", id)
		}
		if !strings.Contains(cr.Regex.String(), key) {
			t.Errorf("%s: its key expression differs from %s's %q", id, ids[0], key)
		}
		if strings.Join(cr.Keywords, ",") != strings.Join(first.Keywords, ",") || cr.Entropy != first.Entropy ||
			strings.Join(cr.Tags, ",") != strings.Join(first.Tags, ",") {
			t.Errorf("%s: keywords, entropy or tags differ from %s's", id, ids[0])
		}
	}
}
