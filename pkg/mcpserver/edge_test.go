package mcpserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/postgres/pgtest"
	"github.com/codelotse/codelotse/pkg/secretscan"
	"github.com/codelotse/codelotse/pkg/shape"
)

// edgeFixture is a tenant with three repositories acme/r0..r2, a pull
// request #1 on acme/r0 with five open findings, and an admin principal
// (every repository) for token "tok-a".
type edgeFixture struct {
	deps   *Deps
	tenant string
	user   string
	repo0  int64
}

func newEdgeFixture(t *testing.T, findings int) *edgeFixture {
	t.Helper()
	env := pgtest.New(t)
	ctx := context.Background()
	tn, err := env.Admin.CreateTenant(ctx, postgres.NewTenant{Slug: "acme", Name: "Acme", MCPEnabled: true}, "test")
	if err != nil {
		t.Fatal(err)
	}
	fx := &edgeFixture{tenant: tn.ID}
	err = env.Admin.InTenant(ctx, tn.ID, func(tx *postgres.Tx) error {
		u, err := tx.UpsertLocalUser(ctx, "dev@acme.test", "", codelotse.RoleAdmin, time.Now())
		if err != nil {
			return err
		}
		fx.user = u.ID
		for i := range 3 {
			r, err := tx.AddRepository(ctx, postgres.NewRepository{FullName: fmt.Sprintf("acme/r%d", i)})
			if err != nil {
				return err
			}
			if i == 0 {
				fx.repo0 = r.ID
			}
		}
		imp := codelotse.ReviewImport{Repository: "acme/r0", Source: "review-json",
			PullRequest: &codelotse.PullRequest{Number: 1, Title: "Change"},
			Review:      codelotse.Review{ExternalID: "rv1", CommitSHA: "abc", Status: "commented", Summary: "s"}}
		for i := range findings {
			imp.Findings = append(imp.Findings, codelotse.Finding{RuleKey: "go.err", Severity: codelotse.SeverityHigh, Status: codelotse.StatusOpen,
				Path: "main.go", Title: fmt.Sprintf("Finding %d", i), Body: "b", Fingerprint: fmt.Sprintf("fp%d", i)})
		}
		_, err = tx.ImportReview(ctx, imp, postgres.Actor{Label: "test"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	fx.deps = &Deps{DB: env.App, Shaper: shape.New(secretscan.New()), Logger: logger, SchemaCache: NewSchemaCache(),
		CursorKey: []byte("test-cursor-key-of-at-least-32-bytes!")}
	return fx
}

// session is the fixture's principal for token id tok.
func (fx *edgeFixture) session(tok string) *session {
	return &session{deps: fx.deps,
		principal: codelotse.Principal{TenantID: fx.tenant, UserID: fx.user, TokenID: tok, Kind: "token"},
		grants:    codelotse.Grants{Admin: true, Source: "oidc"}}
}

func mustRaw(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// TestCursorsArePositionsBoundToThePrincipal: cursors of every paging tool
// carry ids only; they continue for the same token and arguments, and a
// cursor of another token, of other arguments, edited or made up is an
// in-band invalid-argument error.
func TestCursorsArePositionsBoundToThePrincipal(t *testing.T) {
	fx := newEdgeFixture(t, 5)
	ctx := context.Background()
	a, b := fx.session("tok-a"), fx.session("tok-b")

	cases := []struct {
		tool  string
		run   func(context.Context, *session, json.RawMessage) (shape.Doc, error)
		args  map[string]any
		other map[string]any // other arguments for the same tool
	}{
		{"list_repositories", listRepositories.run, map[string]any{"query": "acme/", "limit": 1}, map[string]any{"query": "acme/r", "limit": 1}},
		{"search_findings", searchFindings.run, map[string]any{"query": "Finding", "limit": 2}, map[string]any{"query": "Findin", "limit": 2}},
	}
	for _, tc := range cases {
		t.Run(tc.tool, func(t *testing.T) {
			doc, err := tc.run(ctx, a, mustRaw(tc.args))
			if err != nil {
				t.Fatal(err)
			}
			cur, _ := doc.NextCursor.(string)
			if cur == "" {
				t.Fatal("no next_cursor on a first page")
			}
			payload, _, _ := strings.Cut(cur, ".")
			raw, err := base64.RawURLEncoding.DecodeString(payload)
			if err != nil {
				t.Fatalf("cursor payload: %v", err)
			}
			var fields map[string]any
			if err := json.Unmarshal(raw, &fields); err != nil {
				t.Fatalf("cursor payload %q: %v", raw, err)
			}
			for k, v := range fields {
				if _, isNum := v.(float64); !isNum {
					t.Errorf("cursor field %s=%v is not a position", k, v)
				}
			}
			if strings.Contains(string(raw), "acme") || strings.Contains(string(raw), "Finding") {
				t.Errorf("cursor carries content: %s", raw)
			}

			// Same token, same arguments: the next page, not the first again.
			next := map[string]any{"cursor": cur}
			for k, v := range tc.args {
				next[k] = v
			}
			doc2, err := tc.run(ctx, a, mustRaw(next))
			if err != nil {
				t.Fatalf("own cursor refused: %v", err)
			}
			first, _ := json.Marshal(doc.Items[0])
			second, _ := json.Marshal(doc2.Items[0])
			if string(first) == string(second) {
				t.Errorf("the cursor did not advance: %s", first)
			}

			bad := map[string]json.RawMessage{
				"another token":   mustRaw(next),
				"other arguments": nil,
				"garbage":         nil,
				"edited position": nil,
				"no mac":          nil,
			}
			other := map[string]any{"cursor": cur}
			for k, v := range tc.other {
				other[k] = v
			}
			bad["other arguments"] = mustRaw(other)
			edited, _ := json.Marshal(map[string]any{"i": fields["i"].(float64) + 1})
			with := func(c string) json.RawMessage {
				m := map[string]any{"cursor": c}
				for k, v := range tc.args {
					m[k] = v
				}
				return mustRaw(m)
			}
			bad["garbage"] = with("not a cursor at all")
			bad["edited position"] = with(base64.RawURLEncoding.EncodeToString(edited) + cur[strings.Index(cur, "."):])
			bad["no mac"] = with(payload)
			for name, args := range bad {
				s := a
				if name == "another token" {
					s = b
				}
				_, err := tc.run(ctx, s, args)
				if codelotse.ErrorCode(err) != codelotse.Invalid || !strings.Contains(codelotse.ErrorMessage(err), "Invalid cursor") {
					t.Errorf("%s: err %v, want an invalid-cursor error", name, err)
				}
			}
		})
	}
}

// TestCursorKeyMatters: a cursor made under one server key does not verify
// under another, so the key (CURSOR_KEY or the stored key) is what binds.
func TestCursorKeyMatters(t *testing.T) {
	s1 := &session{deps: &Deps{CursorKey: []byte("key-one-key-one-key-one-key-one!")}, principal: codelotse.Principal{TenantID: "t", TokenID: "x"}}
	s2 := &session{deps: &Deps{CursorKey: []byte("key-two-key-two-key-two-key-two!")}, principal: codelotse.Principal{TenantID: "t", TokenID: "x"}}
	c := s1.encodeCursor("search_code", "h", searchCodePos{Chunk: 7, Line: 3})
	var pos searchCodePos
	if err := s1.decodeCursor("search_code", "h", c, &pos); err != nil || pos.Chunk != 7 || pos.Line != 3 {
		t.Fatalf("own cursor: %v %+v", err, pos)
	}
	if err := s2.decodeCursor("search_code", "h", c, &pos); err == nil {
		t.Error("a cursor verified under another key")
	}
	if err := s1.decodeCursor("search_findings", "h", c, &pos); err == nil {
		t.Error("a search_code cursor verified for search_findings")
	}
}

// callTool runs a tool through the same handler the SDK calls, so that a
// failure to shape shows up as the agent would see it.
func callTool(t *testing.T, s *session, name string, args any) (string, bool) {
	t.Helper()
	for _, tl := range tools() {
		if tl.name != name {
			continue
		}
		res, err := s.wrap(tl)(context.Background(), &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: name, Arguments: mustRaw(args)}})
		if err != nil {
			t.Fatalf("%s: protocol error %v", name, err)
		}
		return res.Content[0].(*mcp.TextContent).Text, res.IsError
	}
	t.Fatalf("no tool %s", name)
	return "", false
}

// TestFixPromptWithHundredsOfRules: hundreds of matching rules with long
// instructions still give a prompt within the cap, with the rules section
// capped and marked, never an internal error.
func TestFixPromptWithHundredsOfRules(t *testing.T) {
	fx := newEdgeFixture(t, 5)
	ctx := context.Background()
	env := fx.deps.DB
	err := env.InTenant(ctx, fx.tenant, func(tx *postgres.Tx) error {
		for i := range 300 {
			_, err := tx.UpsertRule(ctx, &fx.repo0, codelotse.Rule{Key: fmt.Sprintf("r%03d", i), Title: fmt.Sprintf("Rule %d", i),
				Severity: codelotse.SeverityHigh, PathGlobs: []string{"*.go"}, Instructions: strings.Repeat("Check every error path carefully. ", 20)})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	text, isErr := callTool(t, fx.session("tok-a"), "get_fix_prompt", map[string]any{"repository": "acme/r0", "number": 1})
	if isErr {
		t.Fatalf("get_fix_prompt failed: %s", text)
	}
	if len(text) > shape.MaxBytes {
		t.Errorf("answer of %d bytes exceeds the cap", len(text))
	}
	for _, want := range []string{`"rules_truncated":true`, `"rules_omitted":`, "call get_rules", `"findings":[{`} {
		if !strings.Contains(text, want) {
			t.Errorf("answer lacks %s", want)
		}
	}
}

// TestUserMistakesStayUserErrors: for every tool and every argument of its
// schema, a NUL character in a string and an integer beyond int4 are
// in-band invalid-argument errors that name the problem, never an
// internal error.
func TestUserMistakesStayUserErrors(t *testing.T) {
	fx := newEdgeFixture(t, 2)
	s := fx.session("tok-a")
	valid := map[string]any{"repository": "acme/r0", "number": 1, "path": "main.go", "query": "Finding"}
	for _, tl := range tools() {
		var schema struct {
			Properties map[string]struct {
				Type  any `json:"type"`
				Items *struct {
					Type string `json:"type"`
				} `json:"items"`
			} `json:"properties"`
			Required []string `json:"required"`
		}
		if err := json.Unmarshal(tl.schema, &schema); err != nil {
			t.Fatal(err)
		}
		base := map[string]any{}
		for _, r := range schema.Required {
			base[r] = valid[r]
		}
		for name, p := range schema.Properties {
			types := fmt.Sprint(p.Type)
			var bad []any
			var want []string
			if strings.Contains(types, "string") {
				bad, want = append(bad, "acme\x00/r0"), append(want, "NUL")
			}
			if strings.Contains(types, "integer") && !idArgs[name] {
				bad, want = append(bad, int64(1)<<31), append(want, "out of range")
				bad, want = append(bad, json.Number("99999999999999999999999")), append(want, "")
			}
			if p.Items != nil && p.Items.Type == "integer" {
				bad, want = append(bad, []any{json.Number("99999999999999999999999")}), append(want, "")
			}
			for i, v := range bad {
				args := map[string]any{}
				for k, x := range base {
					args[k] = x
				}
				args[name] = v
				text, isErr := callTool(t, s, tl.name, args)
				if !isErr || strings.Contains(text, "Internal error") || !strings.Contains(text, want[i]) {
					t.Errorf("%s %s=%v: isError=%v %q (want %q)", tl.name, name, v, isErr, text, want[i])
				}
			}
		}
	}
}
