package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/telemetry"
)

// Caller is whom one request acts for: the principal and grants that the
// HTTP edge authenticated. The endpoint serves nobody else.
type Caller struct {
	Principal codelotse.Principal
	Grants    codelotse.Grants
	// Confirm, when set, is called once the answer is known and before
	// any of it is written: the caller was authenticated provisionally
	// (authn.AuthenticateAhead) and the answer may leave only if Confirm
	// returns nil. ErrCallerChanged discards the answer (Serve writes
	// nothing and returns it); any other error answers 503.
	Confirm func(context.Context) error
}

// ErrCallerChanged is Confirm's answer when the token's facts read during
// the request no longer give the provisional principal and grants.
var ErrCallerChanged = errors.New("mcpserver: the caller's token or grants changed during the request")

type callerKey struct{}

// WithCaller returns ctx carrying the authenticated caller of the request.
// The key is this package's, so only code that imports mcpserver on
// purpose can set it, and the endpoint refuses a request without one.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// MaxMessageBytes bounds the one JSON-RPC message a request carries. The
// HTTP edge refuses larger bodies before authentication; the endpoint
// keeps the bound too, so that it never reads without one.
const MaxMessageBytes = 1 << 20

// MaxAnswerBytes bounds the answer held in memory for one request. A
// tool's text is capped at 32 KiB; JSON-escaping it inside the JSON-RPC
// envelope can grow it up to six times (\u003c for every '<'), plus the
// envelope and metadata, so 256 KiB is never reached by a correct answer.
const MaxAnswerBytes = 256 << 10

// Endpoint is the MCP endpoint: one JSON-RPC message per POST, for the
// caller in the request's context. It reads the message once, answers
// every protocol error itself as a JSON-RPC error, builds a server with
// only what the message needs, lets the SDK's stateless Streamable HTTP
// transport run it, and writes the answer only once it is known to be
// within MaxAnswerBytes.
type Endpoint struct {
	deps *Deps
	tel  *telemetry.Telemetry
	// transport is the SDK's stateless Streamable HTTP transport; it
	// serves the server that Serve puts in the request's context (tests
	// replace it to watch what reaches the SDK).
	transport http.Handler
}

// serverKey holds the request's server in the context of the request the
// SDK's transport serves: its only way to be given a server is a function
// of the request, which it calls more than once per POST.
type serverKey struct{}

// NewEndpoint returns the endpoint; tel records one operation per request.
func NewEndpoint(d *Deps, tel *telemetry.Telemetry) *Endpoint {
	if tel == nil {
		tel = telemetry.Disabled()
	}
	e := &Endpoint{deps: d, tel: tel}
	var logger *slog.Logger
	if d != nil {
		logger = quiet(d.Logger)
	}
	e.transport = mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		s, _ := r.Context().Value(serverKey{}).(*mcp.Server)
		return s // never nil: Serve sets it on every request it passes on
	}, &mcp.StreamableHTTPOptions{
		Stateless:    true,
		JSONResponse: true,
		Logger:       logger,
		// The HTTP edge checks Origin (against PUBLIC_URL and the
		// allow-list) before the endpoint runs; the SDK's loopback Host
		// check would refuse every request behind a local reverse proxy.
		DisableLocalhostProtection: true,
	})
	return e
}

// message is what the endpoint reads of a JSON-RPC message, in the one
// decode of the request body it makes.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  *struct {
		Name            looseString `json:"name"`
		ProtocolVersion looseString `json:"protocolVersion"`
		Meta            looseMeta   `json:"_meta"`
	} `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// looseString is a string parameter the endpoint only peeks at (for
// registration and metrics): a value of another type reads as "" and is
// left for the SDK to refuse with its id, as a params error.
type looseString string

func (l *looseString) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*l = looseString(s)
	}
	return nil
}

// looseMeta is params._meta as far as the endpoint peeks at it.
type looseMeta struct {
	ProtocolVersion looseString
}

func (l *looseMeta) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) == nil {
		_ = l.ProtocolVersion.UnmarshalJSON(m["io.modelcontextprotocol/protocolVersion"])
	}
	return nil
}

func (m *message) method() string { return m.Method }

func (m *message) toolName() string {
	if m.Params == nil || m.method() != "tools/call" {
		return ""
	}
	return string(m.Params.Name)
}

// protocolVersion is the request's protocol version for metrics: the
// header, the 2026-07-28 per-request _meta, or initialize's parameter.
func (m *message) protocolVersion(h http.Header) string {
	if v := h.Get("Mcp-Protocol-Version"); v != "" {
		return v
	}
	if m.Params == nil {
		return ""
	}
	if v := m.Params.Meta.ProtocolVersion; v != "" {
		return string(v)
	}
	return string(m.Params.ProtocolVersion)
}

// methodFlags says how a method may be sent: as a call (with an id) or a
// notification (without one), and whether params may be missing.
type methodFlags struct{ notification, paramsOptional bool }

// methods are the MCP methods a client may send to this server, as the
// SDK's server dispatches them. A message naming another method is
// answered "method not found" here, before the SDK sees it.
var methods = map[string]methodFlags{
	"initialize":                       {},
	"ping":                             {paramsOptional: true},
	"server/discover":                  {paramsOptional: true},
	"tools/list":                       {paramsOptional: true},
	"tools/call":                       {},
	"resources/list":                   {paramsOptional: true},
	"resources/templates/list":         {paramsOptional: true},
	"resources/read":                   {},
	"prompts/list":                     {paramsOptional: true},
	"prompts/get":                      {},
	"completion/complete":              {},
	"logging/setLevel":                 {},
	"subscriptions/listen":             {},
	"resources/subscribe":              {},
	"resources/unsubscribe":            {},
	"notifications/cancelled":          {notification: true, paramsOptional: true},
	"notifications/initialized":        {notification: true, paramsOptional: true},
	"notifications/roots/list_changed": {notification: true, paramsOptional: true},
	"notifications/progress":           {notification: true},
}

// protocolError is a JSON-RPC error the endpoint answers itself.
type protocolError struct {
	status, code int
	message      string
}

// readMessage checks that body is one JSON-RPC 2.0 message the server can take,
// in the order the SDK would refuse it, and reads what the endpoint needs.
func readMessage(body []byte, h http.Header) (*message, *protocolError) {
	m := &message{}
	trimmed := bytes.TrimSpace(body)
	err := json.Unmarshal(trimmed, m)
	var se *json.SyntaxError
	switch {
	case len(trimmed) == 0 || errors.As(err, &se):
		return m, &protocolError{http.StatusBadRequest, jsonrpc.CodeParseError, "Parse error: the body is not valid JSON."}
	case trimmed[0] == '[':
		// Batches are refused whatever the protocol version (docs/decisions.md,
		// "Issue 9"): one HTTP request is one rate-limited call with one
		// capped answer. 2025-06-18 removed batching; no MCP client we know
		// of sends them on 2025-03-26.
		if !json.Valid(trimmed) {
			return m, &protocolError{http.StatusBadRequest, jsonrpc.CodeParseError, "Parse error: the body is not valid JSON."}
		}
		return m, &protocolError{http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "Invalid request: batches are not supported; send one JSON-RPC message per HTTP request."}
	case err != nil:
		*m = message{}
		return m, &protocolError{http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "Invalid request: expected a JSON-RPC 2.0 message object."}
	case len(m.ID) > 0 && !validID(m.ID):
		// Before any other check: every error answer repeats the id.
		m.ID = nil
		return m, &protocolError{http.StatusBadRequest, jsonrpc.CodeInvalidRequest,
			fmt.Sprintf("Invalid request: id must be a string of at most %d bytes as sent (quotes included) or an integer from -%d to %d.", MaxIDBytes, maxSafeID, maxSafeID)}
	case m.JSONRPC != "2.0":
		return m, &protocolError{http.StatusBadRequest, jsonrpc.CodeInvalidRequest, `Invalid request: "jsonrpc" must be "2.0".`}
	}
	if v := h.Get("Mcp-Protocol-Version"); v != "" && !slices.Contains(ProtocolVersions, v) && v < "2026-07-28" {
		// A later version than any served is the SDK's to negotiate.
		return m, &protocolError{http.StatusBadRequest, jsonrpc.CodeInvalidRequest,
			fmt.Sprintf("Invalid request: unsupported protocol version %q in Mcp-Protocol-Version (supported: %s).", codelotse.Clip(v, maxEcho), strings.Join(ProtocolVersions, ", "))}
	}
	if !acceptsJSONAndStream(h.Values("Accept")) {
		return m, &protocolError{http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "Invalid request: Accept must list both application/json and text/event-stream."}
	}
	if len(h.Values("Last-Event-Id")) > 0 {
		return m, &protocolError{http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "Invalid request: a POST cannot carry Last-Event-ID; this endpoint has no streams to resume."}
	}
	if m.Method == "" {
		// A response to a request of ours: this server sends none, but the
		// transport accepts one that is well formed. (An empty method names
		// nothing, like a missing one.)
		if len(m.ID) == 0 || string(m.ID) == "null" || (m.Result == nil && m.Error == nil) {
			return m, &protocolError{http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "Invalid request: expected a request with a method, a notification, or a response with an id."}
		}
		return m, nil
	}
	call := len(m.ID) > 0 && string(m.ID) != "null"
	flags, ok := methods[m.Method]
	switch {
	case !ok:
		status := http.StatusBadRequest
		if call && h.Get("Mcp-Protocol-Version") >= "2026-07-28" {
			status = http.StatusNotFound // as the 2026-07-28 transport answers it
		}
		return m, &protocolError{status, jsonrpc.CodeMethodNotFound, "Method not found: " + codelotse.Clip(m.Method, maxEcho)}
	case flags.notification && call:
		return m, &protocolError{http.StatusBadRequest, jsonrpc.CodeInvalidRequest, fmt.Sprintf("Invalid request: %s is a notification and takes no id.", m.Method)}
	case !flags.notification && !call:
		return m, &protocolError{http.StatusBadRequest, jsonrpc.CodeInvalidRequest, fmt.Sprintf("Invalid request: %s needs an id.", m.Method)}
	case !flags.paramsOptional && m.Params == nil:
		return m, &protocolError{http.StatusBadRequest, jsonrpc.CodeInvalidRequest, fmt.Sprintf(`Invalid request: %s needs "params".`, m.Method)}
	}
	return m, nil
}

// MaxIDBytes bounds a request id as sent (a string's quotes and escapes
// included). Every answer repeats the id, and the SDK writes it out again
// with each invalid byte as a three-byte U+FFFD, so an unbounded id could
// push the answer past its bound. Clients send small integers or UUIDs.
const MaxIDBytes = 1024

// maxSafeID is the largest integer id answered as sent: the SDK carries
// numeric ids as float64, which changes larger integers (9007199254740993
// came back as 9007199254740992, 2^63-1 as -2^63), and a client cannot
// match such an answer to its request.
const maxSafeID = 1<<53 - 1

// validID: a JSON-RPC id is a string, a number or null; this endpoint
// takes strings of at most MaxIDBytes and integers within ±maxSafeID.
func validID(id json.RawMessage) bool {
	if len(id) > MaxIDBytes {
		return false
	}
	switch id[0] {
	case '"', 'n':
		return true
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		n, err := strconv.ParseInt(string(id), 10, 64)
		return err == nil && n >= -maxSafeID && n <= maxSafeID
	}
	return false
}

// acceptsJSONAndStream is the Streamable HTTP transport's rule: a POST
// accepts both application/json and text/event-stream (wildcards count).
func acceptsJSONAndStream(values []string) bool {
	var jsonOK, streamOK bool
	for _, v := range values {
		for v != "" {
			var token string
			token, v, _ = strings.Cut(v, ",")
			base, _, _ := strings.Cut(strings.TrimSpace(token), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK && streamOK
}

// ServeHTTP serves one POST of the MCP endpoint for the caller set by
// WithCaller, reading the body within MaxMessageBytes.
func (e *Endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, ok := r.Context().Value(callerKey{}).(Caller)
	if !ok {
		// A wiring mistake, never the client's: no request is served for
		// nobody.
		e.deps.Logger.Error("MCP request without an authenticated caller; refused")
		writeError(w, http.StatusInternalServerError, nil, jsonrpc.CodeInternalError, "Internal error. The failure was logged; try again later.")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxMessageBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, nil, jsonrpc.CodeInvalidRequest, "Request body too large: the limit is 1 MiB.")
			return
		}
		writeError(w, http.StatusBadRequest, nil, jsonrpc.CodeParseError, "Could not read the request body.")
		return
	}
	if err := e.Serve(w, r, c, body); err != nil {
		// Only a Confirm can fail a request this way, and a caller set
		// with WithCaller has no Confirm to retry with.
		e.deps.Logger.Error("MCP caller changed during the request; refused")
		writeError(w, http.StatusUnauthorized, nil, -32001, "Unauthorized")
	}
}

// Serve serves one POST of the MCP endpoint for caller c, whose body the
// HTTP edge has already read (within its own bound) and passes as body;
// r.Body is not read again. It returns ErrCallerChanged, having written
// nothing, when c.Confirm says the caller changed; the edge then
// authenticates again and serves the request anew.
func (e *Endpoint) Serve(w http.ResponseWriter, r *http.Request, c Caller, body []byte) error {
	if c.Confirm == nil {
		e.serve(w, r, c, body, false)
		return nil
	}
	// Everything, protocol errors included, waits for the confirmation:
	// a request of a token revoked a moment ago is answered 401 by the
	// edge, never with what its provisional caller could see. The answer
	// is held where the transport wrote it; the small error answers of
	// the endpoint itself are written to a buffer of their own.
	errs := &answer{header: http.Header{}, limit: 64 << 10}
	held := e.serve(errs, r, c, body, true)
	if held == nil {
		held = errs
	}
	if err := c.Confirm(r.Context()); err != nil {
		if errors.Is(err, ErrCallerChanged) {
			return err
		}
		e.deps.Logger.Error("confirming the caller failed", "err", err)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, nil, CodeUnavailable, UnavailableMessage)
		return nil
	}
	held.writeTo(w)
	return nil
}

// serve serves the message. With hold, the transport's answer is not
// written but returned (nil when the endpoint answered an error to w
// itself), for Serve to release once the caller is confirmed.
func (e *Endpoint) serve(w http.ResponseWriter, r *http.Request, c Caller, body []byte, hold bool) *answer {
	if len(body) > MaxMessageBytes {
		writeError(w, http.StatusRequestEntityTooLarge, nil, jsonrpc.CodeInvalidRequest, "Request body too large: the limit is 1 MiB.")
		return nil
	}
	// A wrong Content-Type: the SDK would answer 415 in plain text; a
	// client's mistake gets a JSON-RPC 400 like every other protocol error
	// (docs/decisions.md, "Issue 9").
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeError(w, http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest, "Invalid request: Content-Type must be application/json.")
		return nil
	}
	m, perr := readMessage(body, r.Header)
	method := m.method()
	start := time.Now()
	ctx, endSpan := e.tel.StartMCP(r.Context(), method, m.toolName())
	op := telemetry.MCPOperation{Method: known(method, methodNames)}
	defer func() {
		// Client-supplied names are bounded to known values so that metric
		// series cannot be multiplied by a client. Notifications and
		// messages that name no method are not operations.
		if method != "" && !strings.HasPrefix(method, "notifications/") {
			op.ProtocolVersion = known(m.protocolVersion(r.Header), ProtocolVersions)
			if method == "tools/call" {
				op.Tool = known(m.toolName(), toolNames)
			}
			e.tel.RecordMCP(ctx, op, time.Since(start))
		}
		endSpan(op)
	}()
	if perr != nil {
		if method != "" {
			op.ErrorType = strconv.Itoa(perr.status)
		}
		writeError(w, perr.status, m.ID, perr.code, perr.message)
		return nil
	}

	// One allocation holds the answer and what the handlers saw of it.
	x := &struct {
		answer
		outcome
	}{answer: answer{header: http.Header{}, limit: MaxAnswerBytes}}
	ans, out := &x.answer, &x.outcome
	srv := newServer(e.deps, c, out, needed(method, m.toolName()))
	// Only the headers the transport reads reach the SDK: never
	// Authorization, Cookie or anything else the client sent.
	inner := r.Clone(context.WithValue(ctx, serverKey{}, srv))
	inner.Header = sdkHeaders(r.Header)
	inner.Body = io.NopCloser(bytes.NewReader(body))
	inner.ContentLength = int64(len(body))
	e.transport.ServeHTTP(ans, inner)

	switch {
	case ans.overflow && ans.isError():
		// The SDK refused the message with an error that repeats what the
		// client sent (an unknown tool's or prompt's name, a resource's
		// URI, params that do not decode, each as long as the body allows):
		// the client's mistake, answered without the repetition.
		op.ErrorType = strconv.Itoa(jsonrpc.CodeInvalidParams)
		writeError(w, http.StatusOK, m.ID, jsonrpc.CodeInvalidParams,
			fmt.Sprintf("Invalid params for %s: a parameter is too long to repeat in this error; check the names and values sent.", method))
		return nil
	case ans.overflow:
		// Cannot happen while every tool result is capped at 32 KiB; if it
		// does, the request fails cleanly instead of buffering without end.
		e.deps.Logger.Error("MCP answer exceeded its bound; refused", "method", op.Method, "limit", MaxAnswerBytes)
		op.ErrorType = strconv.Itoa(jsonrpc.CodeInternalError)
		writeError(w, http.StatusInternalServerError, m.ID, jsonrpc.CodeInternalError, "Internal error: the answer was too large. The failure was logged.")
		return nil
	case ans.status >= 400 && !strings.HasPrefix(ans.header.Get("Content-Type"), "application/json"):
		// The transport refused the message in plain text for a reason the
		// checks above do not know (a newer SDK's rule): still the
		// client's mistake, and still a JSON-RPC error. Its text is logged,
		// never interpreted.
		e.deps.Logger.Warn("the MCP transport refused a message", "method", op.Method, "status", ans.status, "reason", strings.TrimSpace(ans.body.String()))
		op.ErrorType = strconv.Itoa(ans.status)
		writeError(w, http.StatusBadRequest, m.ID, jsonrpc.CodeInvalidRequest, "Invalid request: the message was refused by the MCP transport.")
		return nil
	case ans.status >= 400:
		op.ErrorType = strconv.Itoa(ans.status)
	case out.code == CodeUnavailable:
		// A tool found the database unreachable after authentication: 503
		// with Retry-After, exactly like an outage during authentication.
		op.ErrorType = strconv.Itoa(CodeUnavailable)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, m.ID, CodeUnavailable, UnavailableMessage)
		return nil
	case out.seen:
		op.ErrorType = out.errorType()
		if out.code != 0 {
			// An error of the SDK's own dispatch (an unknown tool, prompt
			// or resource) repeats the name the client sent.
			tidySDKError(ans, method)
		}
	case ans.body.Len() > 0:
		// The SDK answered before any method handler ran (parameters that
		// do not decode, or its per-request protocol checks): the one kind
		// of answer this server did not see being made, read back for its
		// error code and made fit for the client. A success always passes
		// a handler.
		op.ErrorType = tidySDKError(ans, method)
	}
	if hold {
		return ans
	}
	ans.writeTo(w)
	return nil
}

// needed are the tools a message needs registered: every tool for
// tools/list, the called one for tools/call (none when no tool has that
// name, so the SDK answers "unknown tool"), and none for anything else.
// Registering a tool makes the SDK re-marshal its schema.
func needed(method, name string) []tool {
	switch method {
	case "tools/list":
		return tools()
	case "tools/call":
		all := tools()
		for i, t := range all {
			if t.name == name {
				return all[i : i+1]
			}
		}
	}
	return nil
}

// outcome is what the server's handlers saw of the one message: the
// endpoint reads the answer's kind from it instead of decoding the answer.
type outcome struct {
	seen      bool // a method handler ran
	code      int  // its JSON-RPC error code, 0 for none
	toolError bool // a tools/call result with isError
}

func (o *outcome) errorType() string {
	switch {
	case o.code != 0:
		return strconv.Itoa(o.code)
	case o.toolError:
		return "tool_error"
	}
	return ""
}

// observe records the outcome of every method the server handles.
func (o *outcome) observe(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		o.seen = true
		var je *jsonrpc.Error
		switch {
		case errors.As(err, &je):
			o.code = int(je.Code)
		case err != nil:
			o.code = jsonrpc.CodeInternalError
		}
		if tr, ok := res.(*mcp.CallToolResult); ok && tr != nil && tr.IsError {
			o.toolError = true
		}
		return res, err
	}
}

// maxEcho bounds what an error message repeats of a client's message.
const maxEcho = 200

// goField finds the parameter that did not decode in the SDK's message
// ("… into Go struct field mcp.initializeParamsV2.capabilities of type
// mcp.clientCapabilitiesV2"): the last name of the path, a JSON member.
var goField = regexp.MustCompile(`Go struct field [A-Za-z0-9_.]*\.([A-Za-z0-9_]+) of type`)

// tidySDKError rewrites an error the SDK answered before any handler ran
// into one fit for a client, in place, and returns its code ("" when the
// answer is no error). The SDK's messages for params that do not decode
// name Go types and repeat the raw params, and for some methods
// (initialize) come with code 0, which JSON-RPC does not define: those
// become -32602 naming the parameter. Other messages and their data are
// kept, shortened where they repeat a long name or URI.
func tidySDKError(a *answer, method string) string {
	var r struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *struct {
			Code    int             `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data,omitempty"`
		} `json:"error"`
	}
	if json.Unmarshal(a.body.Bytes(), &r) != nil || r.Error == nil {
		return ""
	}
	e := r.Error
	if e.Code == 0 || strings.Contains(e.Message, "unmarshal") {
		sdk := e.Message
		e.Code = jsonrpc.CodeInvalidParams
		e.Message = fmt.Sprintf("Invalid params for %s.", method)
		if f := goField.FindStringSubmatch(sdk); f != nil {
			e.Message = fmt.Sprintf("Invalid params for %s: %q has the wrong type.", method, f[1])
		}
		e.Data = nil
	}
	e.Message = codelotse.Clip(e.Message, 2*maxEcho)
	if len(e.Data) > 2*maxEcho {
		e.Data = nil
	}
	body, err := json.Marshal(r)
	if err != nil {
		return strconv.Itoa(e.Code)
	}
	a.body.Reset()
	a.body.Write(body)
	a.body.WriteByte('\n')
	a.header.Del("Content-Length")
	return strconv.Itoa(e.Code)
}

// answer holds the transport's answer until it is complete, so that an
// outage can still become a 503 and an oversized answer a clean error.
// Answers are JSON (no SSE); past limit bytes it keeps nothing more and
// the write fails, so a runaway answer cannot exhaust memory.
type answer struct {
	header   http.Header
	status   int
	body     bytes.Buffer
	limit    int
	overflow bool
	// head is the start of an answer that overflowed, enough to tell an
	// error from a result (isError).
	head []byte
}

// errAnswerTooLarge stops the transport's write once the bound is passed.
var errAnswerTooLarge = errors.New("answer exceeds its bound")

func (a *answer) Header() http.Header { return a.header }
func (a *answer) Write(b []byte) (int, error) {
	if a.status == 0 {
		a.status = http.StatusOK
	}
	if a.overflow || a.body.Len()+len(b) > a.limit {
		if !a.overflow {
			a.body.Write(b[:min(len(b), answerHead)])
			a.head = bytes.Clone(a.body.Bytes()[:min(a.body.Len(), answerHead)])
		}
		a.overflow = true
		a.body.Reset()
		return 0, errAnswerTooLarge
	}
	return a.body.Write(b)
}

// answerHead is as much of an overflowing answer as isError reads: the
// envelope's first members, an id of up to MaxIDBytes among them.
const answerHead = MaxIDBytes + 256

// isError says whether an answer that overflowed was a JSON-RPC error:
// its members before "error" or "result" are "jsonrpc" and "id", so the
// first member that is neither decides.
func (a *answer) isError() bool {
	d := json.NewDecoder(bytes.NewReader(a.head))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	for {
		t, err := d.Token()
		if err != nil {
			return false
		}
		switch t {
		case "error":
			return true
		case "jsonrpc", "id":
			var skip json.RawMessage
			if d.Decode(&skip) != nil {
				return false
			}
		default:
			return false
		}
	}
}
func (a *answer) WriteHeader(code int) {
	if a.status == 0 {
		a.status = code
	}
}

// writeTo writes the held answer to w (200 when no status was set).
func (a *answer) writeTo(w http.ResponseWriter) {
	for k, v := range a.header {
		w.Header()[k] = v
	}
	if a.status == 0 {
		a.status = http.StatusOK
	}
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body.Bytes())
}

// sdkHeaders keeps only the headers the MCP transport reads.
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

// writeError writes a JSON-RPC error answer with an HTTP status.
func writeError(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string) {
	var rid any
	if len(id) > 0 {
		rid = id
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"jsonrpc": "2.0", "id": rid,
		"error": map[string]any{"code": code, "message": msg},
	})
}

// methodNames are the known methods, for bounding metric labels.
var methodNames = func() []string {
	var out []string
	for m := range methods {
		out = append(out, m)
	}
	slices.Sort(out)
	return out
}()

// known returns v when it is in list, else "_OTHER".
func known(v string, list []string) string {
	if v == "" {
		return ""
	}
	if slices.Contains(list, v) {
		return v
	}
	return "_OTHER"
}
