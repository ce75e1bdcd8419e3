package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/codelotse/codelotse/pkg/postgres"
)

func envOf(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

// TestLoadDefaults: with nothing set, every setting has its documented
// default (README, "Configuration").
func TestLoadDefaults(t *testing.T) {
	got, err := Load(envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		DatabaseURL: DefaultDatabaseURL,
		Roles:       postgres.Roles{Owner: "codelotse_owner", App: "codelotse_app", Auth: "codelotse_auth", Search: "codelotse_search"},
		PublicURL:   "http://127.0.0.1:8080",
		// Development (PUBLIC_URL on loopback): loopback only.
		ListenAddr:           "127.0.0.1:8080",
		LogLevel:             slog.LevelInfo,
		RatePerToken:         120,
		RatePerIP:            600,
		LoginRatePerIP:       30,
		WebhookRatePerIP:     600,
		AuthorizeRatePerIP:   60,
		GitHub:               GitHub{SyncInterval: time.Hour, MembershipRefresh: time.Hour},
		OAuth:                OAuth{Enabled: true, DynamicRegistration: true},
		WorkerConcurrency:    4,
		SecretRescanInterval: 30 * time.Second,
		MCPMaxConcurrent:     256,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("defaults\n got %+v\nwant %+v", got, want)
	}
	if err := got.CheckAPI(); err != nil {
		t.Errorf("the defaults do not start the API: %v", err)
	}
	if err := got.CheckWorker(); err != nil {
		t.Errorf("the defaults do not start the worker: %v", err)
	}
}

// TestLoadValues: each setting is read into its field.
func TestLoadValues(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		ok   func(Config) bool
		want string
	}{
		{map[string]string{"DATABASE_URL": "postgres://a@db/x", "APP_DATABASE_URL": "postgres://b@db/x", "APP_DATABASE_PASSWORD": "pw"},
			func(c Config) bool {
				return c.DatabaseURL == "postgres://a@db/x" && c.AppDatabaseURL == "postgres://b@db/x" && c.AppPassword == "pw"
			}, "database URLs"},
		{map[string]string{"DB_ROLE_PREFIX": "clt2"}, func(c Config) bool { return c.Roles.App == "clt2_app" && c.Roles.Search == "clt2_search" }, "role prefix"},
		{map[string]string{"PUBLIC_URL": "https://clt.example.com/"}, func(c Config) bool {
			return c.PublicURL == "https://clt.example.com" && c.ListenAddr == ":8080"
		}, "PUBLIC_URL without its slash; :8080 off loopback"},
		{map[string]string{"PUBLIC_URL": "http://localhost:9000"}, func(c Config) bool { return c.ListenAddr == "localhost:9000" }, "loopback listen address"},
		{map[string]string{"LISTEN_ADDR": ":9999"}, func(c Config) bool { return c.ListenAddr == ":9999" }, "LISTEN_ADDR"},
		{map[string]string{"MCP_ALLOWED_ORIGINS": " https://a.example , ,https://b.example"}, func(c Config) bool {
			return reflect.DeepEqual(c.AllowedOrigins, []string{"https://a.example", "https://b.example"})
		}, "origins"},
		{map[string]string{"MCP_RATE_PER_TOKEN": "0", "MCP_RATE_PER_IP": " 7 ", "LOGIN_RATE_PER_IP": "5", "WEBHOOK_RATE_PER_IP": "0", "OAUTH_AUTHORIZE_RATE_PER_IP": "9"}, func(c Config) bool {
			return c.RatePerToken == 0 && c.RatePerIP == 7 && c.LoginRatePerIP == 5 && c.WebhookRatePerIP == 0 && c.AuthorizeRatePerIP == 9
		}, "rates (0: no limit)"},
		{map[string]string{"REDIS_URL": "redis://r:6379/0"}, func(c Config) bool { return c.RedisURL == "redis://r:6379/0" }, "REDIS_URL"},
		{map[string]string{"TRUSTED_PROXIES": "10.0.0.1, 10.1.0.0/16,::1"}, func(c Config) bool {
			return len(c.TrustedProxies) == 3 && c.TrustedProxies[0].String() == "10.0.0.1/32" && c.TrustedProxies[2].String() == "::1/128"
		}, "proxies: a bare address is one host"},
		{map[string]string{"OIDC_ALLOW_PRIVATE_CIDRS": "127.0.0.0/8, ::1", "OIDC_ALLOW_HTTP": "true"}, func(c Config) bool {
			return len(c.OIDCAllowPrivate) == 2 && c.OIDCAllowHTTP
		}, "OIDC development settings"},
		{map[string]string{"CURSOR_KEY": strings.Repeat("k", 32)}, func(c Config) bool { return string(c.CursorKey) == strings.Repeat("k", 32) }, "CURSOR_KEY"},
		{map[string]string{"LOG_LEVEL": "debug"}, func(c Config) bool { return c.LogLevel == slog.LevelDebug }, "LOG_LEVEL"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel:4318"}, func(c Config) bool { return c.OTLPEndpoint == "http://otel:4318" }, "OTLP"},
		{map[string]string{"GITHUB_APP_ID": "12345", "GITHUB_APP_PRIVATE_KEY_FILE": "/k.pem", "GITHUB_CLIENT_ID": "Iv1", "GITHUB_CLIENT_SECRET": "s",
			"GITHUB_WEBHOOK_SECRET": "w", "GITHUB_API_URL": "https://ghe/api/v3/", "GITHUB_WEB_URL": "https://ghe/"}, func(c Config) bool {
			return c.GitHub == GitHub{AppID: 12345, PrivateKeyFile: "/k.pem", ClientID: "Iv1", ClientSecret: "s", WebhookSecret: "w",
				APIURL: "https://ghe/api/v3/", WebURL: "https://ghe/", SyncInterval: time.Hour, MembershipRefresh: time.Hour}
		}, "GitHub App"},
		{map[string]string{"GITHUB_SYNC_INTERVAL": "0", "GITHUB_MEMBERSHIP_REFRESH_INTERVAL": "0"}, func(c Config) bool {
			return c.GitHub.SyncInterval == 0 && c.GitHub.MembershipRefresh == 0
		}, "periodic jobs off"},
		{map[string]string{"GITHUB_SYNC_INTERVAL": "1m", "GITHUB_MEMBERSHIP_REFRESH_INTERVAL": "2s"}, func(c Config) bool {
			return c.GitHub.SyncInterval == time.Minute && c.GitHub.MembershipRefresh == 2*time.Second
		}, "shortest intervals"},
		{map[string]string{"GITHUB_MEMBERSHIP_REFRESH_INTERVAL": "23h59m"}, func(c Config) bool { return c.GitHub.MembershipRefresh == 23*time.Hour+59*time.Minute }, "longest refresh"},
		{map[string]string{"OAUTH_ENABLED": "off", "OAUTH_DYNAMIC_REGISTRATION": "No"}, func(c Config) bool {
			return !c.OAuth.Enabled && !c.OAuth.DynamicRegistration
		}, "OAuth off"},
		{map[string]string{"OAUTH_CIMD_ALLOW_CIDRS": "127.0.0.1", "OAUTH_CIMD_CA_FILE": "/ca.pem"}, func(c Config) bool {
			return len(c.OAuth.CIMDAllow) == 1 && c.OAuth.CIMDCAFile == "/ca.pem"
		}, "CIMD development settings"},
		{map[string]string{"WORKER_CONCURRENCY": "100"}, func(c Config) bool { return c.WorkerConcurrency == 100 }, "WORKER_CONCURRENCY"},
		{map[string]string{"SECRET_RESCAN_INTERVAL": "1s"}, func(c Config) bool { return c.SecretRescanInterval == time.Second }, "shortest rescan interval"},
		{map[string]string{"SECRET_RESCAN_INTERVAL": "1h"}, func(c Config) bool { return c.SecretRescanInterval == time.Hour }, "longest rescan interval"},
		{map[string]string{"MCP_MAX_CONCURRENT": "8"}, func(c Config) bool { return c.MCPMaxConcurrent == 8 }, "MCP_MAX_CONCURRENT"},
	} {
		c, err := Load(envOf(tc.env))
		if err != nil {
			t.Errorf("%s: %v", tc.want, err)
			continue
		}
		if !tc.ok(c) {
			t.Errorf("%s: read %+v from %v", tc.want, c, tc.env)
		}
	}
}

// TestLoadRefusesBadValues: every value that cannot be used stops every
// program with a message that names the setting.
func TestLoadRefusesBadValues(t *testing.T) {
	for _, tc := range []struct{ setting, value string }{
		{"DB_ROLE_PREFIX", "Bad-Prefix"},
		{"PUBLIC_URL", "ftp://clt.example.com"},
		{"PUBLIC_URL", "clt.example.com"},
		{"PUBLIC_URL", "https://"},
		{"MCP_RATE_PER_TOKEN", "-1"},
		{"MCP_RATE_PER_TOKEN", "lots"},
		{"MCP_RATE_PER_IP", "1.5"},
		{"LOGIN_RATE_PER_IP", "-1"},
		{"WEBHOOK_RATE_PER_IP", "x"},
		{"OAUTH_AUTHORIZE_RATE_PER_IP", "-3"},
		{"TRUSTED_PROXIES", "10.0.0.1,proxy.internal"},
		{"TRUSTED_PROXIES", "10.0.0.0/33"},
		{"OIDC_ALLOW_PRIVATE_CIDRS", "10.0.0.0/33"},
		{"OIDC_ALLOW_HTTP", "maybe"},
		{"CURSOR_KEY", "short"},
		{"LOG_LEVEL", "loud"},
		{"GITHUB_APP_ID", "my-app"},
		{"GITHUB_APP_ID", "0"},
		{"GITHUB_APP_ID", "-3"},
		{"GITHUB_SYNC_INTERVAL", "30s"},
		{"GITHUB_SYNC_INTERVAL", "-1h"},
		{"GITHUB_SYNC_INTERVAL", "hourly"},
		{"GITHUB_MEMBERSHIP_REFRESH_INTERVAL", "500ms"},
		{"GITHUB_MEMBERSHIP_REFRESH_INTERVAL", "24h"},
		{"GITHUB_MEMBERSHIP_REFRESH_INTERVAL", "-1h"},
		{"GITHUB_MEMBERSHIP_REFRESH_INTERVAL", "hourly"},
		{"OAUTH_ENABLED", "maybe"},
		{"OAUTH_DYNAMIC_REGISTRATION", "2"},
		{"OAUTH_CIMD_ALLOW_CIDRS", "localhost"},
		{"WORKER_CONCURRENCY", "0"},
		{"SECRET_RESCAN_INTERVAL", "0"},
		{"SECRET_RESCAN_INTERVAL", "500ms"},
		{"SECRET_RESCAN_INTERVAL", "2h"},
		{"SECRET_RESCAN_INTERVAL", "soon"},
		{"WORKER_CONCURRENCY", "101"},
		{"WORKER_CONCURRENCY", "four"},
		{"MCP_MAX_CONCURRENT", "0"},
		{"MCP_MAX_CONCURRENT", "10001"},
		{"MCP_MAX_CONCURRENT", "many"},
	} {
		_, err := Load(envOf(map[string]string{tc.setting: tc.value}))
		if err == nil || !strings.Contains(err.Error(), tc.setting) {
			t.Errorf("%s=%q: %v, want an error naming %s", tc.setting, tc.value, err, tc.setting)
		}
	}
}

// TestProgramChecks: combinations a program cannot start with are refused
// by that program (the API and the worker share one environment, but only
// the API signs users in and receives webhooks, only the worker calls
// GitHub as the App), with a message naming the settings.
func TestProgramChecks(t *testing.T) {
	app := map[string]string{"GITHUB_APP_ID": "7"}
	with := func(kv map[string]string, more ...string) map[string]string {
		out := map[string]string{}
		for k, v := range kv {
			out[k] = v
		}
		for i := 0; i < len(more); i += 2 {
			out[more[i]] = more[i+1]
		}
		return out
	}
	for _, tc := range []struct {
		name           string
		env            map[string]string
		api, worker    bool
		apiErr, wokErr string
	}{
		{"sign-in id without secret", map[string]string{"GITHUB_CLIENT_ID": "Iv1"}, false, true, "GITHUB_CLIENT_SECRET", ""},
		{"sign-in secret without id", map[string]string{"GITHUB_CLIENT_SECRET": "s"}, false, true, "GITHUB_CLIENT_ID", ""},
		{"sign-in pair", map[string]string{"GITHUB_CLIENT_ID": "Iv1", "GITHUB_CLIENT_SECRET": "s"}, true, true, "", ""},
		{"App without webhook secret or key", app, false, false, "GITHUB_WEBHOOK_SECRET", "GITHUB_APP_PRIVATE_KEY_FILE"},
		{"App with webhook secret only", with(app, "GITHUB_WEBHOOK_SECRET", "w"), true, false, "", "GITHUB_APP_PRIVATE_KEY_FILE"},
		{"App with key only", with(app, "GITHUB_APP_PRIVATE_KEY_FILE", "/k.pem"), false, true, "GITHUB_WEBHOOK_SECRET", ""},
		{"App complete", with(app, "GITHUB_WEBHOOK_SECRET", "w", "GITHUB_APP_PRIVATE_KEY_FILE", "/k.pem"), true, true, "", ""},
		{"http off loopback", map[string]string{"PUBLIC_URL": "http://clt.example.com"}, false, true, "PUBLIC_URL", ""},
	} {
		c, err := Load(envOf(tc.env))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for _, p := range []struct {
			prog  string
			err   error
			ok    bool
			names string
		}{{"api", c.CheckAPI(), tc.api, tc.apiErr}, {"worker", c.CheckWorker(), tc.worker, tc.wokErr}} {
			if (p.err == nil) != p.ok || (p.err != nil && !strings.Contains(p.err.Error(), p.names)) {
				t.Errorf("%s, %s: %v; want ok=%v (naming %s)", tc.name, p.prog, p.err, p.ok, p.names)
			}
		}
	}
}

// TestSettingFiles: the files settings name are read with errors that
// name the setting.
func TestSettingFiles(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.pem")
	notPEM := filepath.Join(dir, "not.pem")
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caFile, testCertificate(t), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (GitHub{PrivateKeyFile: missing}).PrivateKey(); err == nil || !strings.Contains(err.Error(), "GITHUB_APP_PRIVATE_KEY_FILE") {
		t.Errorf("missing key: %v", err)
	}
	if pem, err := (GitHub{PrivateKeyFile: notPEM}).PrivateKey(); err != nil || string(pem) != "not a certificate" {
		t.Errorf("key file: %q, %v", pem, err)
	}
	if pool, err := (OAuth{}).CIMDRootCAs(); pool != nil || err != nil {
		t.Errorf("unset CA file: %v, %v; want the system roots (nil)", pool, err)
	}
	for _, f := range []string{missing, notPEM} {
		if _, err := (OAuth{CIMDCAFile: f}).CIMDRootCAs(); err == nil || !strings.Contains(err.Error(), "OAUTH_CIMD_CA_FILE") {
			t.Errorf("CA file %s: %v", filepath.Base(f), err)
		}
	}
	if pool, err := (OAuth{CIMDCAFile: caFile}).CIMDRootCAs(); err != nil || pool == nil {
		t.Errorf("CA file: %v, %v", pool, err)
	}
}

// testCertificate is a self-signed certificate in PEM.
func testCertificate(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TestRuntimePoolConfig: a bad connection string is refused naming the
// setting it came from.
func TestRuntimePoolConfig(t *testing.T) {
	for _, tc := range []struct {
		env     map[string]string
		setting string
	}{
		{map[string]string{"APP_DATABASE_URL": "postgres://%zz"}, "APP_DATABASE_URL"},
		{map[string]string{"DATABASE_URL": "postgres://%zz"}, "DATABASE_URL"},
	} {
		c, err := Load(envOf(tc.env))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.RuntimePoolConfig(); err == nil || !strings.Contains(err.Error(), tc.setting) {
			t.Errorf("%v: %v, want an error naming %s", tc.env, err, tc.setting)
		}
	}
	c, err := Load(envOf(map[string]string{"DB_ROLE_PREFIX": "clt2", "APP_DATABASE_PASSWORD": "pw"}))
	if err != nil {
		t.Fatal(err)
	}
	pc, err := c.RuntimePoolConfig()
	if err != nil || pc.ConnConfig.User != "clt2_app" || pc.ConnConfig.Password != "pw" {
		t.Errorf("derived runtime connection: %v; want user clt2_app with the password", err)
	}
}

// TestCheckServePublicURL: the API refuses http PUBLIC_URLs off loopback
// and accepts https anywhere and http on loopback.
func TestCheckServePublicURL(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"https://codelotse.example.com", true},
		{"https://10.0.0.5:8443", true},
		{"http://127.0.0.1:8080", true},
		{"http://localhost:8080", true},
		{"http://[::1]:8080", true},
		{"http://codelotse.example.com", false},
		{"http://10.0.0.5:8080", false},
		{"http://0.0.0.0:8080", false},
	} {
		err := Config{PublicURL: tc.url}.CheckServePublicURL()
		if (err == nil) != tc.ok {
			t.Errorf("%s: err = %v, want ok=%v", tc.url, err, tc.ok)
		}
		if err != nil && (!strings.Contains(err.Error(), "https") || !strings.Contains(err.Error(), tc.url)) {
			t.Errorf("%s: the message does not say what to do: %v", tc.url, err)
		}
	}
}
