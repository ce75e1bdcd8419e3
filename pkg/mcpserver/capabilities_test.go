package mcpserver

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestCapabilitiesMatchMethods: in every protocol era, the capabilities
// declared (initialize, or server/discover for 2026-07-28) are exactly
// what the server answers: prompts and resources as empty lists, and
// "method not found" for logging and completions, which are not declared.
func TestCapabilitiesMatchMethods(t *testing.T) {
	srv := testServer(t)
	ctx := context.Background()
	for _, version := range ProtocolVersions {
		t.Run(version, func(t *testing.T) {
			client := mcp.NewClient(&mcp.Implementation{Name: "caps", Version: "1"}, nil)
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
				Endpoint: srv.URL, HTTPClient: http.DefaultClient, DisableStandaloneSSE: true, MaxRetries: -1,
			}, &mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if got := cs.InitializeResult().ProtocolVersion; got != version {
				t.Fatalf("negotiated %s", got)
			}
			caps := cs.InitializeResult().Capabilities
			if !reflect.DeepEqual(caps, Capabilities()) {
				t.Errorf("declared capabilities %+v, want %+v", caps, Capabilities())
			}
			//lint:ignore SA1019 asserting that the deprecated logging capability is not declared
			if caps.Logging != nil || caps.Completions != nil || caps.Tools.ListChanged || caps.Prompts.ListChanged || caps.Resources.ListChanged || caps.Resources.Subscribe {
				t.Errorf("capabilities declare more than tools and empty prompts/resources: %+v", caps)
			}

			prompts, err := cs.ListPrompts(ctx, nil)
			if err != nil || len(prompts.Prompts) != 0 {
				t.Errorf("prompts/list = %+v, %v; want an empty list", prompts, err)
			}
			resources, err := cs.ListResources(ctx, nil)
			if err != nil || len(resources.Resources) != 0 {
				t.Errorf("resources/list = %+v, %v; want an empty list", resources, err)
			}
			templates, err := cs.ListResourceTemplates(ctx, nil)
			if err != nil || len(templates.ResourceTemplates) != 0 {
				t.Errorf("resources/templates/list = %+v, %v; want an empty list", templates, err)
			}
			_, err = cs.Complete(ctx, &mcp.CompleteParams{
				Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "x"},
				Argument: mcp.CompleteParamsArgument{Name: "a", Value: "b"},
			})
			wantMethodNotFound(t, "completion/complete", err)
			if version != "2026-07-28" { // removed from the 2026-07-28 revision
				//lint:ignore SA1019 asserting that the deprecated logging method is refused
				wantMethodNotFound(t, "logging/setLevel", cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}))
				wantMethodNotFound(t, "resources/subscribe", cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "file:///x"}))
			}
		})
	}
}

func wantMethodNotFound(t *testing.T, method string, err error) {
	t.Helper()
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != jsonrpc.CodeMethodNotFound {
		t.Errorf("%s: err = %v, want a JSON-RPC method-not-found error", method, err)
	}
}
