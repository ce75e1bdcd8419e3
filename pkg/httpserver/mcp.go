package httpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/codelotse/codelotse/pkg/authn"
	"github.com/codelotse/codelotse/pkg/mcpserver"
	"github.com/codelotse/codelotse/pkg/ratelimit"
	"github.com/codelotse/codelotse/pkg/telemetry"
)

// unauthorizedBody is the exact JSON-RPC body of every 401 (ARCHITECTURE §4).
const unauthorizedBody = `{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Unauthorized"}}`

// refreshDescription is the error_description when a web sign-in would
// restore access (stale or missing GitHub membership cache).
const refreshDescription = "sign in to CodeLotse to refresh access"

// failureDescriptions are the error_description of each refusal, written so
// that the person behind the agent knows what to do next. They may tell the
// token's state (revoked, expired, ...) because only someone who holds a
// token can present one that exists: a guessed token is "unknown" like any
// other. They never name a tenant, a user or a repository. RFC 6750 allows
// only printable ASCII without '"' and '\' here. (docs/decisions.md, issue 14.)
var failureDescriptions = map[string]string{
	"missing":                     "send the header Authorization: Bearer clt_... with a token from the MCP access page",
	"malformed":                   "the Authorization header must be Bearer followed by one space and the whole clt_ token",
	"unknown":                     "token not recognised: copy the whole token again, or create a new one on the MCP access page",
	"revoked":                     "this token was revoked: create a new one on the MCP access page",
	"expired":                     "this token has expired: create a new one on the MCP access page",
	"user_deleted":                "the account of this token no longer belongs to the organisation",
	"mcp_disabled":                "MCP access is switched off for this organisation: ask a tenant admin to switch it on",
	"idp_disabled":                "the identity provider of this token is disabled: ask a tenant admin, or create a token after signing in again",
	"no_grants_no_mapping":        "your identity-provider groups grant no access here: ask a tenant admin to map one of them",
	"no_grants_provider_disabled": "the identity provider of this token is disabled: ask a tenant admin, or create a token after signing in again",
}

// failureDescription is the error_description of a refusal ("" when none).
func failureDescription(f *authn.Failure) string {
	if f.Refresh {
		return refreshDescription
	}
	return failureDescriptions[f.Reason]
}

// mcpPost is POST /mcp, in the order of checks of ARCHITECTURE §4: body
// size and Origin, (rate limit), token, grants; then a fresh MCP server for
// this request only, behind a request that carries none of the client's
// credentials.
func (s *Server) mcpPost(c echo.Context) error {
	r := c.Request()
	w := c.Response()

	// 1. Body over 1 MiB → 413; a foreign Origin → 403.
	if r.ContentLength > MaxBodyBytes {
		return jsonRPCError(c, http.StatusRequestEntityTooLarge, -32600, "Request body too large: the limit is 1 MiB.")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return jsonRPCError(c, http.StatusRequestEntityTooLarge, -32600, "Request body too large: the limit is 1 MiB.")
		}
		return jsonRPCError(c, http.StatusBadRequest, -32700, "Could not read the request body.")
	}
	if o := r.Header.Get("Origin"); o != "" && !s.originAllowed(o) {
		return jsonRPCError(c, http.StatusForbidden, -32000, "Forbidden: requests from this origin are not allowed.")
	}

	// 2. Per-IP limit, before anything touches the database.
	if d := s.limit(c, "ip:"+c.RealIP(), s.cfg.Limits.PerIP); !d.Allowed {
		s.tel.Limited(r.Context(), "ip")
		return tooManyRequests(c, d)
	}

	// 3, 4. Token, its state, the tenant switch (and the grant inputs).
	res, err := s.authenticate(c)
	if err != nil {
		s.cfg.Logger.Error("authenticating a token failed", "err", err)
		return unavailable(c, nil)
	}
	if res.Failure != nil {
		s.cfg.Logger.Info("bearer request refused", "reason", res.Failure.Reason)
		s.tel.Refused(r.Context(), res.Failure.Reason)
		return s.unauthorized(c, res.Failure)
	}
	// 5. Per-token limit, keyed on tenant and token digest.
	if d := s.limit(c, "token:"+res.Digest, s.cfg.Limits.PerToken); !d.Allowed {
		s.tel.Limited(r.Context(), "token")
		return tooManyRequests(c, d)
	}
	// 6. Grants.
	if res.GrantFailure != nil {
		s.cfg.Logger.Info("bearer request refused", "reason", res.GrantFailure.Reason)
		s.tel.Refused(r.Context(), res.GrantFailure.Reason)
		return s.unauthorized(c, res.GrantFailure)
	}
	p, g := res.Principal, res.Grants

	// A wrong Content-Type: the SDK would answer 415 in plain text; a
	// client's mistake gets a JSON-RPC 400 like every other protocol error
	// (docs/decisions.md, "Issue 9").
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return jsonRPCError(c, http.StatusBadRequest, -32600, "Invalid request: Content-Type must be application/json.")
	}
	// Protocol errors are JSON-RPC errors (ARCHITECTURE §6.1). The SDK
	// answers malformed messages and unknown methods with plain-text 400s,
	// so the message is checked here first and the SDK's answer rewritten.
	msg, perr := peekMessage(body)
	if perr != nil {
		return c.JSON(http.StatusBadRequest, perr)
	}

	// Only Accept, Content-Type, Last-Event-ID and Mcp-* reach the SDK:
	// never Authorization, Cookie or anything else the client sent.
	start := time.Now()
	ctx, endSpan := s.tel.StartMCP(r.Context(), msg.Method, msg.Params.Name)
	var only []string
	if msg.Method == "tools/call" {
		only = []string{msg.Params.Name}
	}
	inner := r.Clone(mcpserver.WithServer(ctx, mcpserver.New(s.cfg.MCP, p, g, only...)))
	inner.Header = sdkHeaders(r.Header)
	inner.Body = io.NopCloser(bytes.NewReader(body))
	inner.ContentLength = int64(len(body))
	rec := &recorder{header: http.Header{}, limit: MaxAnswerBytes}
	s.mcp.ServeHTTP(rec, inner)
	if rec.overflow {
		// Cannot happen while every tool result is capped at 32 KiB; if it
		// does, the request fails cleanly instead of buffering without end.
		s.cfg.Logger.Error("MCP answer exceeded its bound; refused", "method", known(msg.Method, mcpMethods), "limit", MaxAnswerBytes)
		endSpan(telemetry.MCPOperation{Method: known(msg.Method, mcpMethods), ErrorType: "-32603"})
		return c.JSON(http.StatusInternalServerError, map[string]any{
			"jsonrpc": "2.0", "id": msg.ID,
			"error": map[string]any{"code": -32603, "message": "Internal error: the answer was too large. The failure was logged."},
		})
	}
	errType := outcome(rec.status, rec.body.Bytes())
	if msg.Method != "" && !strings.HasPrefix(msg.Method, "notifications/") {
		// Client-supplied names are bounded to known values so that metric
		// series cannot be multiplied by a client.
		op := telemetry.MCPOperation{Method: known(msg.Method, mcpMethods), ProtocolVersion: known(msg.protocolVersion(r.Header), protocolVersions),
			ErrorType: errType}
		if msg.Method == "tools/call" {
			op.Tool = known(msg.Params.Name, mcpserver.ToolNames())
		}
		s.tel.RecordMCP(ctx, op, time.Since(start))
		endSpan(op)
	} else {
		endSpan(telemetry.MCPOperation{Method: msg.Method})
	}
	if errType == strconv.Itoa(mcpserver.CodeUnavailable) {
		// A tool found the database unreachable after authentication.
		return unavailable(c, msg.ID)
	}
	if rec.status == http.StatusBadRequest && !strings.HasPrefix(rec.header.Get("Content-Type"), "application/json") {
		// The SDK refused the message with a plain-text reason.
		code, text := -32600, "Invalid request: "+strings.TrimSpace(rec.body.String())
		if msg.Method != "" && (strings.Contains(text, "not handled") || strings.Contains(text, "unsupported")) {
			code, text = -32601, "Method not found: "+msg.Method
		}
		return c.JSON(http.StatusBadRequest, map[string]any{
			"jsonrpc": "2.0", "id": msg.ID,
			"error": map[string]any{"code": code, "message": text},
		})
	}
	for k, v := range rec.header {
		w.Header()[k] = v
	}
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	w.WriteHeader(rec.status)
	_, err = w.Write(rec.body.Bytes())
	return err
}

// rpcMessage is what peekMessage reads of a JSON-RPC message.
type rpcMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  struct {
		Name            string         `json:"name"`
		ProtocolVersion string         `json:"protocolVersion"`
		Meta            map[string]any `json:"_meta"`
	} `json:"params"`
}

// protocolVersion is the request's protocol version: the header, the
// 2026-07-28 per-request _meta, or initialize's parameter.
func (m rpcMessage) protocolVersion(h http.Header) string {
	if v := h.Get("Mcp-Protocol-Version"); v != "" {
		return v
	}
	if v, ok := m.Params.Meta["io.modelcontextprotocol/protocolVersion"].(string); ok {
		return v
	}
	return m.Params.ProtocolVersion
}

// outcome reads the error type of an SDK answer for metrics: "" for
// success, "tool_error" for isError results, else the JSON-RPC error code.
func outcome(status int, body []byte) string {
	if status >= 400 {
		return strconv.Itoa(status)
	}
	// Fast path for the common success: tool text is a JSON string, so its
	// quotes are escaped and cannot form these two tokens; only a real
	// top-level error or isError result contains them. This avoids decoding
	// every answer (up to 32 KiB) on the hot path.
	if !bytes.Contains(body, []byte(`"error"`)) && !bytes.Contains(body, []byte(`"isError":true`)) {
		return ""
	}
	var r struct {
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
		Result *struct {
			IsError bool `json:"isError"`
		} `json:"result"`
	}
	if json.Unmarshal(body, &r) != nil {
		return ""
	}
	switch {
	case r.Error != nil:
		return strconv.Itoa(r.Error.Code)
	case r.Result != nil && r.Result.IsError:
		return "tool_error"
	}
	return ""
}

// peekMessage checks that body is one JSON-RPC 2.0 message and returns a
// JSON-RPC error body when it is not (batches included).
func peekMessage(body []byte) (rpcMessage, map[string]any) {
	var m rpcMessage
	trimmed := bytes.TrimSpace(body)
	fail := func(code int, msg string) map[string]any {
		return map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": code, "message": msg}}
	}
	// One decode both validates the JSON and reads the message (this runs
	// on every /mcp request).
	err := json.Unmarshal(trimmed, &m)
	var se *json.SyntaxError
	switch {
	case len(trimmed) == 0 || errors.As(err, &se):
		return m, fail(-32700, "Parse error: the body is not valid JSON.")
	case trimmed[0] == '[':
		// Batches are refused whatever the protocol version (docs/decisions.md,
		// "Issue 9"): one HTTP request is one rate-limited call with one
		// capped answer. 2025-06-18 removed batching; no MCP client we know
		// of sends them on 2025-03-26.
		if !json.Valid(trimmed) {
			return m, fail(-32700, "Parse error: the body is not valid JSON.")
		}
		return m, fail(-32600, "Invalid request: batches are not supported; send one JSON-RPC message per HTTP request.")
	case err != nil:
		return m, fail(-32600, "Invalid request: expected a JSON-RPC 2.0 message object.")
	case m.JSONRPC != "2.0":
		return m, fail(-32600, `Invalid request: "jsonrpc" must be "2.0".`)
	}
	return m, nil
}

// MaxAnswerBytes bounds the SDK's answer held in memory for one request.
// A tool's text is capped at 32 KiB; JSON-escaping it inside the JSON-RPC
// envelope can grow it up to six times (\u003c for every '<'), plus the
// envelope and metadata, so 256 KiB is never reached by a correct answer.
const MaxAnswerBytes = 256 << 10

// recorder buffers the SDK's answer so that it can be checked before it is
// sent. Answers are JSON (no SSE); past limit bytes it keeps nothing more
// and the write fails, so a runaway answer cannot exhaust memory.
type recorder struct {
	header   http.Header
	status   int
	body     bytes.Buffer
	limit    int
	overflow bool
}

// errAnswerTooLarge stops the SDK's write once the bound is passed.
var errAnswerTooLarge = errors.New("answer exceeds its bound")

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if r.overflow || r.body.Len()+len(b) > r.limit {
		r.overflow = true
		r.body.Reset()
		return 0, errAnswerTooLarge
	}
	return r.body.Write(b)
}
func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

// sdkHeaders keeps only the headers the MCP SDK needs.
func sdkHeaders(h http.Header) http.Header {
	out := http.Header{}
	for k, v := range h {
		ck := http.CanonicalHeaderKey(k)
		if ck == "Accept" || ck == "Content-Type" || ck == "Last-Event-Id" || strings.HasPrefix(ck, "Mcp-") {
			out[ck] = v
		}
	}
	return out
}

func (s *Server) originAllowed(o string) bool {
	n, err := origin(o)
	return err == nil && s.origins[n]
}

// unauthorized writes the 401 of ARCHITECTURE §4.
func (s *Server) unauthorized(c echo.Context, f *authn.Failure) error {
	v := `Bearer realm="codelotse", error="invalid_token"`
	if d := failureDescription(f); d != "" {
		v += fmt.Sprintf(`, error_description=%q`, d)
	}
	// Only an endpoint with an authorization server names its metadata
	// (ARCHITECTURE §4: complete discovery or none).
	if md := s.resourceMetadataOf(c); md != "" {
		v += fmt.Sprintf(`, resource_metadata=%q`, md)
	}
	c.Response().Header().Set("WWW-Authenticate", v)
	return c.Blob(http.StatusUnauthorized, "application/json", []byte(unauthorizedBody))
}

// unavailable answers a request that failed because the database cannot be
// reached: 503 with Retry-After and a JSON-RPC error, whether the outage
// struck authentication or a tool, so a client sees one answer for one
// cause (never a 500 or an "Internal error").
func unavailable(c echo.Context, id json.RawMessage) error {
	c.Response().Header().Set("Retry-After", "1")
	var rid any
	if len(id) > 0 {
		rid = id
	}
	return c.JSON(http.StatusServiceUnavailable, map[string]any{
		"jsonrpc": "2.0", "id": rid,
		"error": map[string]any{"code": mcpserver.CodeUnavailable, "message": mcpserver.UnavailableMessage},
	})
}

// jsonRPCError answers with a JSON-RPC error body and an HTTP status.
func jsonRPCError(c echo.Context, status, code int, msg string) error {
	return c.JSON(status, map[string]any{
		"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": code, "message": msg},
	})
}

// limit applies a rate-limit rule. A limiter failure fails open and is
// logged: an unavailable Redis must not take the endpoint down or turn into
// a 500.
func (s *Server) limit(c echo.Context, key string, rule ratelimit.Rule) ratelimit.Decision {
	return s.limitBucket(c, "mcp:"+key, rule)
}

// limitBucket applies rule to a key that names its bucket.
func (s *Server) limitBucket(c echo.Context, key string, rule ratelimit.Rule) ratelimit.Decision {
	if s.cfg.Limiter == nil || rule.Limit <= 0 {
		return ratelimit.Decision{Allowed: true}
	}
	d, err := s.cfg.Limiter.Allow(c.Request().Context(), key, rule)
	if err != nil {
		s.cfg.Logger.Warn("rate limiter failed; allowing the request", "err", err)
		return ratelimit.Decision{Allowed: true}
	}
	return d
}

// tooManyRequests writes a 429 with Retry-After (whole seconds, rounded up)
// and a JSON-RPC error that says when to retry.
func tooManyRequests(c echo.Context, d ratelimit.Decision) error {
	secs := int(math.Ceil(d.RetryAfter.Seconds()))
	if secs < 1 {
		secs = 1
	}
	c.Response().Header().Set("Retry-After", strconv.Itoa(secs))
	return jsonRPCError(c, http.StatusTooManyRequests, -32000,
		fmt.Sprintf("Rate limit exceeded: too many requests; retry after %d second%s.", secs, plural(secs)))
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// mcpMethods are the MCP methods a client may send to this server.
var mcpMethods = []string{"initialize", "ping", "server/discover", "tools/list", "tools/call", "resources/list",
	"resources/templates/list", "resources/read", "prompts/list", "prompts/get", "completion/complete", "logging/setLevel",
	"subscriptions/listen", "resources/subscribe", "resources/unsubscribe"}

var protocolVersions = mcpserver.ProtocolVersions

// known returns v when it is in list, else "_OTHER".
func known(v string, list []string) string {
	if v == "" {
		return ""
	}
	for _, x := range list {
		if x == v {
			return v
		}
	}
	return "_OTHER"
}
