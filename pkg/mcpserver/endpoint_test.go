package mcpserver

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/secretscan"
	"github.com/codelotse/codelotse/pkg/shape"
)

// bareEndpoint is the endpoint without a database: enough for protocol
// errors and methods that read no data.
func bareEndpoint(t *testing.T) *Endpoint {
	t.Helper()
	return NewEndpoint(&Deps{Shaper: shape.New(secretscan.New()), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), SchemaCache: NewSchemaCache()}, nil)
}

var testCaller = Caller{Principal: codelotse.Principal{TenantID: "t", UserID: "u", TokenID: "k", Kind: "token"}, Grants: codelotse.Grants{Source: "github"}}

// post sends body to e as the test caller with the usual MCP headers,
// changed by h ("" deletes one).
func post(e http.Handler, body string, h map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	for k, v := range h {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req.WithContext(WithCaller(req.Context(), testCaller)))
	return rec
}

type rpcAnswer struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// TestProtocolErrorsAreJSONRPC: every message the endpoint cannot serve is
// answered by the endpoint itself with a JSON-RPC error (never the SDK's
// plain text), the status of the old edge, and the request's id where it
// had one.
func TestProtocolErrorsAreJSONRPC(t *testing.T) {
	e := bareEndpoint(t)
	for _, tc := range []struct {
		name    string
		body    string
		headers map[string]string
		status  int
		code    int
		id      string
		text    string
	}{
		{"not JSON", `{"jsonrpc":"2.0","id":8,`, nil, 400, -32700, "null", "Parse error"},
		{"empty body", ``, nil, 400, -32700, "null", "Parse error"},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, nil, 400, -32600, "null", "batches are not supported"},
		{"invalid batch", `[{"jsonrpc":"2.0",`, nil, 400, -32700, "null", "Parse error"},
		{"a string", `"just a string"`, nil, 400, -32600, "null", "message object"},
		{"no jsonrpc", `{"id":9,"method":"ping"}`, nil, 400, -32600, "9", `"jsonrpc" must be "2.0"`},
		{"jsonrpc 1.0", `{"jsonrpc":"1.0","method":"ping"}`, nil, 400, -32600, "null", `"jsonrpc" must be "2.0"`},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"ping"}`, nil, 400, -32600, "null", "id must be"},
		{"fractional id", `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, nil, 400, -32600, "null", "id must be"},
		// The SDK carries numeric ids as float64: beyond 2^53 the answer's
		// id would differ from the request's (2^63-1 came back as -2^63).
		{"integer id beyond 2^53", `{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`, nil, 400, -32600, "null", "id must be"},
		{"integer id beyond int64", `{"jsonrpc":"2.0","id":99999999999999999999,"method":"ping"}`, nil, 400, -32600, "null", "id must be"},
		{"negative id beyond 2^53", `{"jsonrpc":"2.0","id":-9007199254740993,"method":"ping"}`, nil, 400, -32600, "null", "id must be"},
		// Every answer repeats the id: a long one made the answer too
		// large to send (a 500, or a 400 with no body).
		{"string id over MaxIDBytes", `{"jsonrpc":"2.0","id":"` + strings.Repeat("x", MaxIDBytes) + `","method":"nope"}`, nil, 400, -32600, "null", "id must be"},
		{"a long id without jsonrpc", `{"id":"` + strings.Repeat("x", 70_000) + `","method":"ping"}`, nil, 400, -32600, "null", "id must be"},
		{"an object id with jsonrpc 1.0", `{"jsonrpc":"1.0","id":{"a":1},"method":"ping"}`, nil, 400, -32600, "null", "id must be"},
		{"a method name of 300 KB", `{"jsonrpc":"2.0","id":2,"method":"` + strings.Repeat("m", 300_000) + `"}`, nil, 400, -32601, "2", "Method not found: mmm"},
		{"a protocol version of 60 KB", `{"jsonrpc":"2.0","id":2,"method":"ping"}`, map[string]string{"Mcp-Protocol-Version": "2" + strings.Repeat("0", 60_000)}, 400, -32600, "2", "unsupported protocol version"},
		{"unknown method", `{"jsonrpc":"2.0","id":7,"method":"no/such/method"}`, nil, 400, -32601, "7", "Method not found: no/such/method"},
		{"unknown method, 2026-07-28", `{"jsonrpc":"2.0","id":7,"method":"no/such/method"}`, map[string]string{"Mcp-Protocol-Version": "2026-07-28"}, 404, -32601, "7", "Method not found"},
		{"unknown notification", `{"jsonrpc":"2.0","method":"notifications/nope"}`, nil, 400, -32601, "null", "Method not found"},
		{"call without id", `{"jsonrpc":"2.0","method":"ping"}`, nil, 400, -32600, "null", "needs an id"},
		{"notification with id", `{"jsonrpc":"2.0","id":3,"method":"notifications/initialized"}`, nil, 400, -32600, "3", "takes no id"},
		{"tools/call without params", `{"jsonrpc":"2.0","id":4,"method":"tools/call"}`, nil, 400, -32600, "4", `needs "params"`},
		{"not a message", `{"jsonrpc":"2.0"}`, nil, 400, -32600, "null", "expected a request"},
		{"wrong content type", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, map[string]string{"Content-Type": "text/plain"}, 400, -32600, "null", "Content-Type"},
		{"no content type", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, map[string]string{"Content-Type": ""}, 400, -32600, "null", "Content-Type"},
		{"accept without stream", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, map[string]string{"Accept": "application/json"}, 400, -32600, "1", "Accept"},
		{"accept html", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, map[string]string{"Accept": "text/html"}, 400, -32600, "1", "Accept"},
		{"unknown protocol version", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, map[string]string{"Mcp-Protocol-Version": "2024-01-01"}, 400, -32600, "1", "unsupported protocol version"},
		{"Last-Event-ID on a POST", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, map[string]string{"Last-Event-ID": "x"}, 400, -32600, "1", "Last-Event-ID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := post(e, tc.body, tc.headers)
			if rec.Code != tc.status || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
				t.Fatalf("status %d %q, want %d JSON: %s", rec.Code, rec.Header().Get("Content-Type"), tc.status, rec.Body)
			}
			var a rpcAnswer
			if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil || a.Error == nil {
				t.Fatalf("not a JSON-RPC error: %s", rec.Body)
			}
			if a.Error.Code != tc.code || !strings.Contains(a.Error.Message, tc.text) || string(a.ID) != tc.id {
				t.Errorf("id %.40s error %d %.100q, want id %s, %d containing %q", a.ID, a.Error.Code, a.Error.Message, tc.id, tc.code, tc.text)
			}
			if rec.Body.Len() > 2<<10 {
				t.Errorf("the error answer is %d bytes: it repeats the request", rec.Body.Len())
			}
		})
	}
}

// TestSDKErrorsFitForClients: what the SDK answers before any handler runs
// is rewritten when it is not fit for a client: params that do not decode
// get -32602 naming the parameter (initialize's came with code 0 and Go
// type names), and an error repeating a long name, URI or the raw params
// is shortened, or replaced when it would not fit in an answer at all (a
// 500 before). Nothing is lost: the id is the request's.
func TestSDKErrorsFitForClients(t *testing.T) {
	e := bareEndpoint(t)
	long := strings.Repeat("a", 300_000)
	medium := strings.Repeat("a", 20_000)
	for _, tc := range []struct {
		name, body string
		code       int
		text       string
	}{
		{"initialize with a mistyped protocolVersion", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":5,"capabilities":{},"clientInfo":{"name":"p","version":"1"}}}`,
			-32602, `Invalid params for initialize: "protocolVersion" has the wrong type.`},
		{"initialize with capabilities as an array", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":[],"clientInfo":{"name":"p","version":"1"}}}`,
			-32602, `Invalid params for initialize: "capabilities" has the wrong type.`},
		{"tools/list with a numeric cursor", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":5}}`,
			-32602, `Invalid params for tools/list: "cursor" has the wrong type.`},
		{"tools/call with a numeric name and 300 KB more", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5,"pad":"` + long + `"}}`,
			-32602, "Invalid params for tools/call"},
		{"an unknown tool of 300 KB", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + long + `"}}`,
			-32602, "too long to repeat"},
		{"an unknown tool of 20 KB", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + medium + `"}}`,
			-32602, "unknown tool"},
		{"an unknown prompt of 300 KB", `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"` + long + `"}}`,
			-32602, "too long to repeat"},
		{"a resource URI of 300 KB", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"` + long + `"}}`,
			-32602, "too long to repeat"},
		{"a resource URI of 20 KB", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"` + medium + `"}}`,
			-32602, "Resource not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := post(e, tc.body, map[string]string{"Mcp-Protocol-Version": ""})
			var a rpcAnswer
			if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &a) != nil || a.Error == nil {
				t.Fatalf("status %d body %.300s", rec.Code, rec.Body)
			}
			if a.Error.Code != tc.code || !strings.Contains(a.Error.Message, tc.text) || string(a.ID) != "1" {
				t.Errorf("id %s error %d %.200q, want id 1, %d containing %q", a.ID, a.Error.Code, a.Error.Message, tc.code, tc.text)
			}
			if strings.Contains(a.Error.Message, "mcp.") || strings.Contains(a.Error.Message, "Go struct") {
				t.Errorf("the message names Go types: %q", a.Error.Message)
			}
			if rec.Body.Len() > 2<<10 {
				t.Errorf("the error answer is %d bytes: it repeats the request", rec.Body.Len())
			}
		})
	}
}

// TestMethodsTheSDKServes: the messages the checks let through are served.
func TestMethodsTheSDKServes(t *testing.T) {
	e := bareEndpoint(t)
	for _, tc := range []struct {
		name, body string
		headers    map[string]string
		status     int
		want       string
	}{
		{"ping", `{"jsonrpc":"2.0","id":"p","method":"ping"}`, nil, 200, `"result":{}`},
		{"the largest integer id", `{"jsonrpc":"2.0","id":9007199254740991,"method":"ping"}`, nil, 200, `"id":9007199254740991,`},
		{"the smallest integer id", `{"jsonrpc":"2.0","id":-9007199254740991,"method":"ping"}`, nil, 200, `"id":-9007199254740991,`},
		{"a string id of MaxIDBytes", `{"jsonrpc":"2.0","id":"` + strings.Repeat("x", MaxIDBytes-2) + `","method":"ping"}`, nil, 200, `"result":{}`},
		{"initialize", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, map[string]string{"Mcp-Protocol-Version": ""}, 200, `"protocolVersion":"2025-06-18"`},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil, 202, ``},
		{"tools/list", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, nil, 200, `"name":"search_code"`},
		{"unknown tool", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"nope","arguments":{}}}`, nil, 200, `"error"`},
		{"logging/setLevel", `{"jsonrpc":"2.0","id":4,"method":"logging/setLevel","params":{"level":"info"}}`, nil, 200, `-32601`},
		{"wildcard accept", `{"jsonrpc":"2.0","id":5,"method":"ping"}`, map[string]string{"Accept": "*/*"}, 200, `"result"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := post(e, tc.body, tc.headers)
			if rec.Code != tc.status || !strings.Contains(rec.Body.String(), tc.want) {
				t.Errorf("status %d body %s, want %d containing %s", rec.Code, rec.Body, tc.status, tc.want)
			}
		})
	}
}

// TestNoCallerNoAnswer: a request that reaches the endpoint without an
// authenticated caller (a wiring mistake) runs nothing.
func TestNoCallerNoAnswer(t *testing.T) {
	e := bareEndpoint(t)
	ran := false
	e.transport = http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true })
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	if ran || rec.Code != http.StatusInternalServerError || strings.Contains(rec.Body.String(), "result") {
		t.Errorf("ran=%v status %d %s", ran, rec.Code, rec.Body)
	}
}

// TestOnlyWhatTheMessageNeedsIsRegistered: tools/call registers the called
// tool alone, tools/list all of them, other methods none.
func TestOnlyWhatTheMessageNeedsIsRegistered(t *testing.T) {
	names := func(ts []tool) string {
		var out []string
		for _, t := range ts {
			out = append(out, t.name)
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct{ method, tool, want string }{
		{"tools/call", "get_rules", "get_rules"},
		{"tools/call", "nope", ""},
		{"tools/list", "", strings.Join(ToolNames(), ",")},
		{"initialize", "", ""},
		{"ping", "get_rules", ""},
	} {
		if got := names(needed(tc.method, tc.tool)); got != tc.want {
			t.Errorf("%s %s: %q, want %q", tc.method, tc.tool, got, tc.want)
		}
	}
}

// TestOnlyProtocolHeadersReachTheSDK: Authorization, Cookie and every other
// client header are stripped before the MCP SDK sees the request.
func TestOnlyProtocolHeadersReachTheSDK(t *testing.T) {
	e := bareEndpoint(t)
	real := e.transport
	var seen http.Header
	e.transport = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Clone()
		real.ServeHTTP(w, r)
	})
	rec := post(e, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, map[string]string{
		"Authorization": "Bearer clt_secret", "Cookie": "__Host-session=abc", "X-Forwarded-For": "10.0.0.1",
		"Proxy-Authorization": "Basic x", "Mcp-Session-Id": "s",
	})
	if rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	for k, v := range seen {
		switch k {
		case "Accept", "Content-Type", "Last-Event-Id", "Mcp-Protocol-Version", "Mcp-Session-Id":
		default:
			t.Errorf("header %s reached the SDK", k)
		}
		if strings.Contains(strings.Join(v, " "), "clt_secret") {
			t.Errorf("the token reached the SDK in %s", k)
		}
	}
	if seen.Get("Mcp-Protocol-Version") != "2025-06-18" || seen.Get("Accept") == "" {
		t.Errorf("protocol headers were not passed: %v", seen)
	}
}

// TestAnswerIsBoundedInMemory: an SDK answer larger than MaxAnswerBytes is
// neither buffered whole nor sent: the request fails with a JSON-RPC error.
func TestAnswerIsBoundedInMemory(t *testing.T) {
	e := bareEndpoint(t)
	var wrote int
	var lastErr error
	e.transport = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		chunk := []byte(strings.Repeat("x", 64<<10))
		for range 64 { // 4 MiB in all
			n, err := w.Write(chunk)
			wrote += n
			if err != nil {
				lastErr = err
				return
			}
		}
	})
	rec := post(e, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, nil)
	if lastErr == nil || wrote > MaxAnswerBytes {
		t.Errorf("the answer buffer accepted %d bytes (bound %d), err %v", wrote, MaxAnswerBytes, lastErr)
	}
	var a rpcAnswer
	if rec.Code != http.StatusInternalServerError || json.Unmarshal(rec.Body.Bytes(), &a) != nil || a.Error == nil || a.Error.Code != -32603 || string(a.ID) != "1" {
		t.Errorf("status %d body %.200s", rec.Code, rec.Body)
	}
	if rec.Body.Len() > 1024 {
		t.Errorf("the oversized answer was sent (%d bytes)", rec.Body.Len())
	}
}

// TestPlainTextRefusalsBecomeJSONRPC: should the transport refuse a
// message in plain text for a reason the endpoint's checks do not know (a
// newer SDK), the client still gets a JSON-RPC error, not the SDK's text.
func TestPlainTextRefusalsBecomeJSONRPC(t *testing.T) {
	e := bareEndpoint(t)
	e.transport = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "some new rule", http.StatusBadRequest)
	})
	rec := post(e, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, nil)
	var a rpcAnswer
	if rec.Code != 400 || json.Unmarshal(rec.Body.Bytes(), &a) != nil || a.Error == nil || a.Error.Code != -32600 || strings.Contains(rec.Body.String(), "some new rule") {
		t.Errorf("status %d body %s", rec.Code, rec.Body)
	}
}

// TestReadMessageToleratesOddParams: parameters the endpoint only peeks at
// (name, protocolVersion, _meta) of an unexpected type do not make the
// message invalid; it reaches the SDK with its id, which answers a params
// error as it always did.
func TestReadMessageToleratesOddParams(t *testing.T) {
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":5}}}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"_meta":"x"}}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":42}}`,
		`{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":["2025-06-18"]}}`,
	} {
		h := http.Header{"Accept": {"application/json, text/event-stream"}, "Mcp-Protocol-Version": {"2025-06-18"}}
		m, perr := readMessage([]byte(body), h)
		if perr != nil {
			t.Errorf("%s: protocol error %+v", body, perr)
			continue
		}
		if string(m.ID) != "7" {
			t.Errorf("%s: id %s, want 7", body, m.ID)
		}
	}
}
