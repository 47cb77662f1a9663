package crontool

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

// TestMCPInMemory drives the MCP tools with the SDK's client over an
// in-memory transport (cmd/chronos drives `chronos mcp` over stdio).
func TestMCPInMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, "UTC")
	srv, err := NewMCPServer(&mcp.Implementation{Name: "chronos", Version: "test"}, b.tool.Definition(),
		func(ctx context.Context, _ *mcp.CallToolRequest, args json.RawMessage) (*Result, error) {
			return b.tool.Call(ctx, ownerA, args)
		})
	require.NoError(t, err)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ss.Close() })
	client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "test"}, nil)
	cs, err := client.Connect(ctx, ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })

	tools, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	require.ElementsMatch(t, []string{"cron_add", "cron_list", "cron_remove"}, names)

	call := func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		require.NoError(t, err)
		return res
	}
	text := func(r *mcp.CallToolResult) string { return r.Content[0].(*mcp.TextContent).Text }

	res := call("cron_add", map[string]any{"message": "Drink water", "every_seconds": 3600})
	require.False(t, res.IsError, text(res))
	m := createdRE.FindStringSubmatch(text(res))
	require.NotNil(t, m, text(res))
	res = call("cron_list", nil)
	require.Equal(t, "Scheduled jobs:\n- Drink water (id: "+m[2]+", every 1h, next run: 2026-02-10T13:00:00Z (UTC))", text(res))
	res = call("cron_remove", map[string]any{"job_id": m[2]})
	require.Equal(t, "Removed job "+m[2], text(res))

	// A mistake is a result the model reads, not a protocol error.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "cron_add", Arguments: map[string]any{"message": "x"}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.Equal(t, "Error: either every_seconds, cron_expr, or at is required", text(res))
}
