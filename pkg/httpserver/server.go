// Package httpserver is the HTTP edge of the API and the only importer of
// Echo. routes.go lists every route grouped by its guard; each guard decides
// who a request is for (a bearer token, a cookie session, nobody) and
// nothing downstream ever mixes the two kinds of principal.
package httpserver

import (
	"context"
	"errors"
	"html/template"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/codelotse/codelotse/pkg/authn"
	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/githubapp"
	"github.com/codelotse/codelotse/pkg/ingest"
	"github.com/codelotse/codelotse/pkg/mcpserver"
	"github.com/codelotse/codelotse/pkg/oauth"
	"github.com/codelotse/codelotse/pkg/oidc"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/ratelimit"
	"github.com/codelotse/codelotse/pkg/secretscan"
	"github.com/codelotse/codelotse/pkg/telemetry"
	"github.com/codelotse/codelotse/web"
)

// Config is everything the HTTP edge needs.
type Config struct {
	// PublicURL is the service's own origin and base URL, e.g.
	// https://codelotse.example.com (no trailing slash).
	PublicURL string
	// AllowedOrigins are further origins allowed to call bearer routes
	// (scheme://host[:port]).
	AllowedOrigins []string
	DB             *postgres.DB
	Bearer         *authn.Bearer
	MCP            *mcpserver.Deps
	Logger         *slog.Logger
	// Ingest prepares what the GitHub sign-in stores (repository names and
	// URLs); nil builds one with its own scanner.
	Ingest *ingest.Ingester
	// Limiter and Limits rate-limit the bearer routes (bucket mcp); a nil
	// Limiter disables limits.
	Limiter ratelimit.Limiter
	Limits  Limits
	// GitHub and OIDC sign the users in (nil: that sign-in is not configured).
	GitHub *githubapp.Client
	OIDC   *oidc.Client
	// WebhookSecret verifies GitHub webhook deliveries; Jobs enqueues the
	// work they cause. Webhooks answer 404 unless both are set.
	WebhookSecret []byte
	Jobs          Enqueuer
	// Sessions manages browser sessions for the cookie routes.
	Sessions *authn.Sessions
	// DevSignIn allows the single-use development sign-in links that
	// `cltctl demo` prints; only for a loopback http PUBLIC_URL.
	DevSignIn bool
	// Telemetry records metrics and spans; nil records nothing.
	Telemetry *telemetry.Telemetry
	// OAuth configures the authorization server for MCP clients.
	OAuth OAuthConfig
	// TrustedProxies are the CIDRs of reverse proxies whose
	// X-Forwarded-For is believed for the client address; empty: the
	// connection's address is the client's.
	TrustedProxies []*net.IPNet
	// MaxConcurrentMCP is how many /mcp requests are served at once; one
	// more is shed at once with 503 and Retry-After instead of queueing
	// behind the others (0: DefaultMaxConcurrentMCP).
	MaxConcurrentMCP int
}

// DefaultMaxConcurrentMCP bounds the /mcp requests in progress when the
// operator sets nothing: well above what a few cores and the database pool
// serve without queueing (docs/decisions.md, "load shedding"), so it only
// acts past saturation.
const DefaultMaxConcurrentMCP = 256

// Limits are the rate limits of the mcp bucket, and of the unauthenticated
// routes that write (sign-in starts, webhooks) per address.
type Limits struct {
	PerIP    ratelimit.Rule
	PerToken ratelimit.Rule
	// Login bounds GET /t/{slug}/login per address: each unauthenticated
	// call stores a sign-in state.
	Login ratelimit.Rule
	// Webhook bounds POST /webhooks/github per address, checked before the
	// body is read.
	Webhook ratelimit.Rule
	// Authorize bounds /t/{slug}/oauth/authorize (GET and POST) per
	// address: a request may fetch a client's metadata document and store
	// it.
	Authorize ratelimit.Rule
}

// DefaultLimits are ARCHITECTURE §6.4's: 600 a minute per IP, 120 a minute
// per token; 30 sign-in starts, 600 webhook deliveries and 60 authorization
// requests a minute per address.
var DefaultLimits = Limits{
	PerIP:     ratelimit.Rule{Limit: 600, Period: time.Minute},
	PerToken:  ratelimit.Rule{Limit: 120, Period: time.Minute},
	Login:     ratelimit.Rule{Limit: 30, Period: time.Minute},
	Webhook:   ratelimit.Rule{Limit: 600, Period: time.Minute},
	Authorize: ratelimit.Rule{Limit: 60, Period: time.Minute},
}

// MaxBodyBytes is the largest request body a bearer route accepts.
const MaxBodyBytes = 1 << 20

// Server is the configured HTTP handler.
type Server struct {
	cfg       Config
	echo      *echo.Echo
	origins   map[string]bool
	mcp       *mcpserver.Endpoint
	templates *template.Template
	tel       *telemetry.Telemetry
	// webhookSlots bounds the webhook bodies read at once.
	webhookSlots chan struct{}
	// mcpSlots bounds the /mcp requests in progress (load shedding).
	mcpSlots chan struct{}
	// registered holds "METHOD path" of every route (allowedMethods).
	registered map[string]bool
}

// New builds the server and its routes.
func New(cfg Config) (*Server, error) {
	cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	if cfg.Ingest == nil {
		cfg.Ingest = ingest.New(secretscan.New())
	}
	own, err := origin(cfg.PublicURL)
	if err != nil {
		return nil, codelotse.Errorf(codelotse.Invalid, "PUBLIC_URL %q must be an absolute http(s) URL", cfg.PublicURL)
	}
	origins := map[string]bool{own: true}
	for _, o := range loopbackAliases(cfg.PublicURL) {
		origins[o] = true
	}
	for _, o := range cfg.AllowedOrigins {
		if o = strings.TrimSpace(o); o == "" {
			continue
		}
		n, err := origin(o)
		if err != nil {
			return nil, codelotse.Errorf(codelotse.Invalid, "allowed origin %q must be scheme://host[:port]", o)
		}
		origins[n] = true
	}
	tpl, err := template.ParseFS(web.Templates, "templates/layout.html")
	if err != nil {
		return nil, err
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.IPExtractor = echo.ExtractIPDirect()
	if len(cfg.TrustedProxies) > 0 {
		var opts []echo.TrustOption
		for _, n := range cfg.TrustedProxies {
			opts = append(opts, echo.TrustIPRange(n))
		}
		opts = append(opts, echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false))
		e.IPExtractor = echo.ExtractIPFromXFFHeader(opts...)
	}
	if cfg.MaxConcurrentMCP <= 0 {
		cfg.MaxConcurrentMCP = DefaultMaxConcurrentMCP
	}
	s := &Server{cfg: cfg, echo: e, origins: origins, templates: tpl, tel: cfg.Telemetry,
		webhookSlots: make(chan struct{}, webhookSlots), mcpSlots: make(chan struct{}, cfg.MaxConcurrentMCP)}
	if s.tel == nil {
		s.tel = telemetry.Disabled()
	}
	s.mcp = mcpserver.NewEndpoint(cfg.MCP, s.tel)
	e.HTTPErrorHandler = s.errorHandler
	e.Use(s.recoverer, s.accessLog, s.plainInput)
	s.routes()
	s.registered = map[string]bool{}
	for _, r := range s.echo.Routes() {
		s.registered[r.Method+" "+r.Path] = true
	}
	return s, nil
}

// ServeHTTP implements http.Handler.
//
// HEAD is served as GET with the body dropped: a server that answers GET
// must answer HEAD (RFC 9110 §9.1), uptime checks and link checkers send
// it, and the router knows only the GET routes (HEAD /healthz was a 405).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodHead {
		get := r.Clone(r.Context())
		get.Method = http.MethodGet
		s.echo.ServeHTTP(headWriter{w}, get)
		return
	}
	s.echo.ServeHTTP(w, r)
}

// headWriter drops a body written in answer to HEAD (net/http does too;
// this keeps the answer right behind any other writer).
type headWriter struct{ http.ResponseWriter }

func (h headWriter) Write(b []byte) (int, error) { return len(b), nil }

// origin normalises a URL to scheme://host[:port] in lower case.
func origin(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", errors.New("not an origin")
	}
	host := strings.ToLower(u.Host)
	// Default ports are not part of the serialised origin.
	if u.Scheme == "http" {
		host = strings.TrimSuffix(host, ":80")
	} else {
		host = strings.TrimSuffix(host, ":443")
	}
	return strings.ToLower(u.Scheme) + "://" + host, nil
}

// loopbackHosts are the names of this machine that browsers and MCP
// clients use interchangeably for a local service.
var loopbackHosts = []string{"localhost", "127.0.0.1", "[::1]"}

// loopbackAliases returns, for a loopback PUBLIC_URL (localhost, 127.0.0.1
// or [::1]), the same origin under the other two loopback names with the
// same scheme and port: a local client that says localhost while
// PUBLIC_URL says 127.0.0.1 is on the same machine talking to the same
// service, not a DNS-rebinding page (whose Origin names its own host). Any
// other PUBLIC_URL has no aliases.
func loopbackAliases(publicURL string) []string {
	u, err := url.Parse(publicURL)
	if err != nil || !slices.Contains(loopbackHosts, hostLiteral(u)) {
		return nil
	}
	var out []string
	for _, h := range loopbackHosts {
		a := *u
		a.Host = h
		if p := u.Port(); p != "" {
			a.Host += ":" + p
		}
		if o, err := origin(a.String()); err == nil {
			out = append(out, o)
		}
	}
	return out
}

// hostLiteral is u's host without the port, IPv6 addresses in brackets,
// in lower case.
func hostLiteral(u *url.URL) string {
	h := strings.ToLower(u.Hostname())
	if strings.Contains(h, ":") {
		return "[" + h + "]"
	}
	return h
}

// recoverer turns a panic in a handler into a logged stack and a 500
// without details.
func (s *Server) recoverer(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				s.cfg.Logger.Error("handler panicked", "path", c.Path(), "panic", r)
				err = echo.NewHTTPError(http.StatusInternalServerError)
			}
		}()
		return next(c)
	}
}

// maxFormBytes bounds a page form's body; the largest form (identity
// provider settings) is well under 8 KiB.
const maxFormBytes = 64 << 10

// plainInput refuses, with a 400 page, a request whose path, query or page
// form holds a NUL byte or invalid UTF-8: no route means them, PostgreSQL
// refuses them in text, and they must never turn into a 500. Bearer and
// webhook bodies are JSON and are not read here (the webhook's body is read
// only after its rate limit).
//
// Every form body is read here, whatever the case of its media type
// (media types are case-insensitive, and Go's form parsing reads
// "Application/X-WWW-Form-Urlencoded" too). No page or OAuth endpoint takes
// multipart/form-data, which Go's form parsing would also read, so it is
// refused. The OAuth endpoints that clients call (token, revoke, register)
// get RFC 6749's JSON error instead of a page.
func (s *Server) plainInput(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		refuse := func(page, oauthMsg string) error {
			if r.Method == http.MethodPost && oauthClientEndpoint(r.URL.Path) {
				c.Response().Header().Set("Cache-Control", "no-store")
				return tokenError(c, oauth.Errorf(oauth.ErrInvalidRequest, oauthMsg))
			}
			return s.page(c, http.StatusBadRequest, "Bad request", page)
		}
		const badChars = "The request contains characters that no page accepts (a NUL byte or invalid UTF-8). Go back to the page and try again."
		bad := !plainText(r.URL.Path)
		for _, vs := range r.URL.Query() {
			for _, v := range vs {
				bad = bad || !plainText(v)
			}
		}
		if bad {
			return refuse(badChars, "a parameter holds a NUL byte or invalid UTF-8")
		}
		if r.Method != http.MethodPost || r.URL.Path == "/mcp" || strings.HasSuffix(r.URL.Path, "/mcp") || r.URL.Path == "/webhooks/github" {
			return next(c)
		}
		mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		switch mt {
		case "multipart/form-data":
			want := "send parameters as application/x-www-form-urlencoded"
			if strings.HasSuffix(r.URL.Path, "/oauth/register") {
				want = "send the client metadata as application/json"
			}
			return refuse("Forms are sent as application/x-www-form-urlencoded. Go back to the page and try again.", want)
		case "application/x-www-form-urlencoded":
			r.Body = http.MaxBytesReader(c.Response(), r.Body, maxFormBytes)
			if err := r.ParseForm(); err != nil {
				return refuse("The form could not be read. Go back to the page and try again.", "the form could not be read (malformed, or over 64 KiB)")
			}
			for k, vs := range r.PostForm {
				bad = bad || !plainText(k)
				for _, v := range vs {
					bad = bad || !plainText(v)
				}
			}
			if bad {
				return refuse(badChars, "a parameter holds a NUL byte or invalid UTF-8")
			}
		}
		return next(c)
	}
}

// oauthClientEndpoint reports whether path is one of the OAuth endpoints
// that clients (not browsers) call, whose errors are JSON (RFC 6749 §5.2,
// RFC 7009 §2.2.1, RFC 7591 §3.2.2).
func oauthClientEndpoint(path string) bool {
	return strings.HasPrefix(path, "/t/") &&
		(strings.HasSuffix(path, "/oauth/token") || strings.HasSuffix(path, "/oauth/revoke") || strings.HasSuffix(path, "/oauth/register"))
}

// plainText reports whether v is valid UTF-8 without NUL bytes.
func plainText(v string) bool { return utf8.ValidString(v) && !strings.ContainsRune(v, 0) }

type requestIDKey struct{}

// accessLog writes one structured line per request: method, route, status,
// duration and request id. It never logs headers, query strings or bodies,
// so neither tokens nor cookies can reach a log line.
func (s *Server) accessLog(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		id := newRequestID()
		route := c.Path()
		if route == "" {
			route = "(unmatched)"
		}
		c.Response().Header().Set("X-Request-Id", id)
		ctx, endSpan := s.tel.StartHTTP(context.WithValue(c.Request().Context(), requestIDKey{}, id), c.Request().Method, route)
		c.SetRequest(c.Request().WithContext(ctx))
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		// The label is bounded to the methods HTTP defines for us, so a
		// client cannot multiply metric series.
		method := c.Request().Method
		if !slices.Contains([]string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}, method) {
			method = "_OTHER"
		}
		endSpan(c.Response().Status)
		s.tel.RecordHTTP(ctx, method, route, c.Response().Status, time.Since(start))
		s.cfg.Logger.Info("request",
			"request_id", id,
			"method", c.Request().Method,
			"route", route,
			"status", c.Response().Status,
			"duration_ms", float64(time.Since(start).Microseconds())/1000,
		)
		return nil
	}
}

// errorHandler answers errors that reached Echo: HTTP errors keep their
// status with a short JSON body; anything else is a logged 500.
func (s *Server) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	var he *echo.HTTPError
	status := http.StatusInternalServerError
	if errors.As(err, &he) {
		status = he.Code
	} else {
		switch codelotse.ErrorCode(err) {
		case codelotse.Invalid:
			status = http.StatusBadRequest
		case codelotse.NotFound:
			status = http.StatusNotFound
		case codelotse.Forbidden:
			status = http.StatusForbidden
		case codelotse.Conflict:
			status = http.StatusConflict
		case codelotse.Unavailable:
			status = http.StatusServiceUnavailable
		}
	}
	if status == http.StatusNotFound {
		// Only when routing found nothing for this method: a handler's own
		// "not found" (a missing token, a mapping) stays a 404.
		if allow := s.allowedMethods(c.Request().URL.Path); allow != "" && !slices.Contains(strings.Split(allow, ", "), c.Request().Method) {
			// The path exists for other methods: 405 with Allow (RFC 9110
			// §15.5.6), which the router gives only outside the tenant
			// group, whose catch-all answers every method "not found".
			c.Response().Header().Set("Allow", allow)
			status = http.StatusMethodNotAllowed
		}
	}
	if status >= 500 {
		s.cfg.Logger.Error("request failed", "path", c.Path(), "err", err)
	}
	_ = c.JSON(status, map[string]string{"error": http.StatusText(status)})
}

// allowedMethods lists the methods with a route for path ("" for none): the
// router's match for each method counts only where it is a registered route
// of that method, not a group's catch-all.
func (s *Server) allowedMethods(path string) string {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		c := s.echo.NewContext(nil, nil)
		s.echo.Router().Find(m, path, c)
		if s.registered[m+" "+c.Path()] {
			allow = append(allow, m)
		}
	}
	if slices.Contains(allow, http.MethodGet) {
		allow = append(allow, http.MethodHead)
	}
	return strings.Join(allow, ", ")
}
