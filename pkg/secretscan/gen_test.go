package secretscan

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// reviewGen generates realistic code-review tool output: finding titles and
// prose bodies (which talk about tokens, keys, passwords and auth a lot, as
// security findings do), code lines in several languages, file paths with
// line numbers, JSON-ish fragments, commit SHAs, UUIDs and URLs. It is
// deterministic for a seed.
type reviewGen struct {
	r *rand.Rand
}

func newReviewGen(seed uint64) *reviewGen {
	return &reviewGen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

func (g *reviewGen) pick(xs []string) string { return xs[g.r.IntN(len(xs))] }

func (g *reviewGen) hex(n int) string {
	const digits = "0123456789abcdef"
	b := make([]byte, n)
	for i := range b {
		b[i] = digits[g.r.IntN(16)]
	}
	return string(b)
}

func (g *reviewGen) uuid() string {
	h := g.hex(32)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

var (
	genDirs = []string{"apps/api", "apps/worker", "pkg/authn", "pkg/tokens", "pkg/postgres", "internal/billing",
		"services/gateway", "src/components", "lib/session", "cmd/server", "web/src/hooks", "deploy/k8s", "scripts"}
	genFiles = []string{"handler.go", "middleware.go", "token.go", "session_store.go", "client.py", "settings.py",
		"auth.ts", "useApiKey.ts", "values.yaml", "Dockerfile", "config.toml", "main.tf", "routes.rb", "README.md",
		"query.sql", "server_test.go", "login.tsx", "oauth.go", "secrets.go", "rate_limit.go"}
	genTitles = []string{
		"Hard-coded credential in test fixture",
		"Access token written to application log",
		"Missing authorization check on admin endpoint",
		"SQL query built with string concatenation",
		"API key compared with non-constant-time equality",
		"Session cookie lacks Secure and HttpOnly flags",
		"Error from rows.Close is ignored",
		"Password hashing uses a single SHA-256 round",
		"Unbounded request body read into memory",
		"Refresh token not rotated after use",
		"Secret key loaded from world-readable file",
		"Race on shared map in cache invalidation",
		"Auth middleware skipped for OPTIONS requests",
		"JWT signature algorithm not pinned",
		"Credentials passed on the command line",
		"Missing context cancellation in worker loop",
		"Tenant id taken from request body instead of token",
		"Deprecated crypto/md5 used for cache keys",
	}
	genProse = []string{
		"The handler reads the bearer token from the Authorization header and passes it to the session lookup without checking its length first.",
		"If the API key is missing, the code falls back to an empty string, which the comparison below treats as a valid key for the default tenant.",
		"Consider using subtle.ConstantTimeCompare so that the time taken does not depend on how many leading bytes of the secret match.",
		"This password is only used by the integration tests, but the fixture is shipped in the container image as well.",
		"The access token is logged at debug level together with the request, so anyone with log access can replay it until it expires.",
		"Rotate the refresh token on every use and revoke the whole family when an old one is presented again.",
		"The auth check happens after the body has been parsed, so unauthenticated callers can still make the server allocate large buffers.",
		"We recommend reading the key from the secret manager at startup and keeping it out of the environment of child processes.",
		"The error returned by Close is dropped; for writes this can hide a failed flush and silently lose data.",
		"Passing credentials as flags exposes them in the process list; read them from a file descriptor or the environment instead.",
		"The token cache is keyed by user id only, so a token issued for one tenant can be served to a request for another.",
		"Add a test that sends an expired token and asserts a 401 with the WWW-Authenticate header set.",
		"The secret is compared after lowercasing, which reduces the key space and is not what the issuer intended.",
		"Use a context with a deadline for the outbound call; without it a slow upstream holds the worker forever.",
		"This mirrors the fix in the billing service, where the API client retried non-idempotent requests on timeout.",
		"Note that the password reset link contains the user id and a timestamp but no random component.",
		"The OAuth state parameter is generated with math/rand, which is predictable; use crypto/rand.",
		"Access to the admin routes is granted when the role claim is present at all, regardless of its value.",
		"They keep the signing key in the repository history even though the current config reads it from the environment.",
	}
	genCode = []string{
		`	token, err := auth.ParseBearer(r.Header.Get("Authorization"))`,
		`	if err != nil { return nil, fmt.Errorf("parse token: %w", err) }`,
		`	apiKey := os.Getenv("API_KEY")`,
		`	secret := cfg.Secrets.Lookup(ctx, "signing-key")`,
		`	if !hmac.Equal(mac, expected) { http.Error(w, "forbidden", http.StatusForbidden); return }`,
		`	password := r.FormValue("password")`,
		`	sess, err := store.Get(ctx, sessionID)`,
		`	defer rows.Close()`,
		`	for _, k := range keys { delete(cache, k) }`,
		`	log.Printf("request %s %s took %v", r.Method, r.URL.Path, time.Since(start))`,
		`func (s *Server) authenticate(ctx context.Context, token string) (*Principal, error) {`,
		`	return &Principal{TenantID: claims.Tenant, Scopes: claims.Scopes}, nil`,
		`    api_key = settings.API_KEY`,
		`    token = request.headers.get("Authorization", "").removeprefix("Bearer ")`,
		`    password_hash = bcrypt.hashpw(password.encode(), bcrypt.gensalt())`,
		`    session = requests.Session()`,
		`    if not hmac.compare_digest(signature, expected):`,
		`  const { data: apiKey } = useQuery(["api-key", orgId], fetchApiKey);`,
		`  const token = localStorage.getItem("access_token");`,
		`  headers: { Authorization: ` + "`Bearer ${token}`" + ` },`,
		`export async function refreshToken(client: HttpClient): Promise<TokenPair> {`,
		`  secretKeyRef:`,
		`    name: api-credentials`,
		`    key: password`,
		`  replicas: 3`,
		`  image: ghcr.io/example/api:1.42.0`,
		`resource "aws_db_instance" "main" {`,
		`  password = var.db_password`,
		`SELECT id, tenant_id, created_at FROM findings WHERE repository_id = $1 ORDER BY created_at DESC LIMIT 50;`,
		`	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)`,
		`	if len(key) < 32 { return errors.New("key too short") }`,
		`	h := sha256.Sum256([]byte(token))`,
		`	w.Header().Set("Cache-Control", "no-store")`,
		`	return jwt.ParseWithClaims(raw, &claims, keyFunc, jwt.WithValidMethods([]string{"EdDSA"}))`,
		`# TODO: move the credentials to the vault before the next release`,
		`	mu.Lock(); defer mu.Unlock()`,
		`ENV APP_ENV=production`,
		`RUN --mount=type=secret,id=npmrc cp /run/secrets/npmrc ~/.npmrc && npm ci`,
	}
	genRules = []string{"go-sql-injection", "hardcoded-credential", "log-sensitive-data", "missing-authz",
		"weak-hash", "insecure-cookie", "ignored-error", "unbounded-read", "timing-attack"}
	genSeverity = []string{"critical", "high", "medium", "low", "info"}
)

func (g *reviewGen) path() string {
	return g.pick(genDirs) + "/" + g.pick(genFiles)
}

// piece returns one realistic fragment of a review result, ending in a
// newline.
func (g *reviewGen) piece() string {
	switch g.r.IntN(10) {
	case 0:
		return fmt.Sprintf("## %s\n", g.pick(genTitles))
	case 1, 2, 3:
		n := 1 + g.r.IntN(3)
		var b strings.Builder
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(g.pick(genProse))
		}
		b.WriteByte('\n')
		return b.String()
	case 4, 5, 6:
		n := 2 + g.r.IntN(6)
		var b strings.Builder
		fmt.Fprintf(&b, "%s:%d\n", g.path(), 1+g.r.IntN(900))
		for i := 0; i < n; i++ {
			b.WriteString(g.pick(genCode))
			b.WriteByte('\n')
		}
		return b.String()
	case 7:
		return fmt.Sprintf(`{"id":"%s","rule":"%s","severity":"%s","path":"%s","line":%d,"commit":"%s"}`+"\n",
			g.uuid(), g.pick(genRules), g.pick(genSeverity), g.path(), 1+g.r.IntN(900), g.hex(40))
	case 8:
		return fmt.Sprintf("Introduced in %s by review #%d (https://git.example.com/acme/api/pull/%d/files#diff-%s).\n",
			g.hex(12), 100+g.r.IntN(900), 100+g.r.IntN(900), g.hex(16))
	default:
		return fmt.Sprintf("- %s (%s, %s:%d)\n", g.pick(genTitles), g.pick(genSeverity), g.path(), 1+g.r.IntN(900))
	}
}

// text returns about n bytes (at most n) of review text.
func (g *reviewGen) text(n int) string {
	var b strings.Builder
	for {
		p := g.piece()
		if b.Len()+len(p) > n {
			break
		}
		b.WriteString(p)
	}
	return b.String()
}

// withSecrets returns about n bytes of review text with each of the given
// lines planted at a random piece boundary.
func (g *reviewGen) withSecrets(n int, lines []string) string {
	extra := 0
	for _, l := range lines {
		extra += len(l) + 1
	}
	base := g.text(max(0, n-extra))
	parts := strings.SplitAfter(base, "\n")
	for _, l := range lines {
		i := g.r.IntN(len(parts) + 1)
		parts = append(parts[:i], append([]string{l + "\n"}, parts[i:]...)...)
	}
	return strings.Join(parts, "")
}
