package crontool

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Caller runs the cron tool with a model's arguments (action included)
// for the caller of req: in the API, the tool on its store with the
// owner of req's bearer token; in `chronos mcp`, a POST to a chronos
// API's /v1/tools/cron. Its error is a failure of chronos, not of the
// call (those are a Result with IsError).
type Caller func(ctx context.Context, req *mcp.CallToolRequest, args json.RawMessage) (*Result, error)

// The MCP tools: one per action. MCP clients approve tools one by one and
// read each tool's hints (read-only, destructive) to decide what runs
// without asking, and they check each tool's required arguments before
// calling; one tool with an action argument would let neither work.
var mcpTools = []struct {
	action, name, description string
	annotations               *mcp.ToolAnnotations
}{
	{ActionAdd, "cron_add",
		"Schedule a reminder or a recurring task: when it fires, the agent gets message as a new turn. " +
			"Give one of every_seconds (every N seconds), cron_expr (a 5-field cron expression, in tz) or at (once, an ISO datetime). " +
			"Answers the job's id.",
		&mcp.ToolAnnotations{Title: "Schedule a job", DestructiveHint: ptr(false), OpenWorldHint: ptr(false)}},
	{ActionList, "cron_list",
		"List the scheduled jobs that are active: name, id, kind and next run.",
		&mcp.ToolAnnotations{Title: "List scheduled jobs", ReadOnlyHint: true, OpenWorldHint: ptr(false)}},
	{ActionRemove, "cron_remove",
		"Remove a scheduled job by its id (from cron_list).",
		&mcp.ToolAnnotations{Title: "Remove a scheduled job", DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)}},
}

func ptr[T any](v T) *T { return &v }

// NewMCPServer returns an MCP server with the tools cron_add, cron_list
// and cron_remove, described by def (the cron tool's Definition, whose
// parameters each tool's input schema is cut from), each running call
// with its action.
func NewMCPServer(impl *mcp.Implementation, def Definition, call Caller) (*mcp.Server, error) {
	srv := mcp.NewServer(impl, &mcp.ServerOptions{
		Instructions: def.Description,
	})
	for _, tl := range mcpTools {
		schema, err := ActionSchema(def, tl.action)
		if err != nil {
			return nil, err
		}
		action := tl.action
		srv.AddTool(&mcp.Tool{Name: tl.name, Description: tl.description, InputSchema: schema, Annotations: tl.annotations},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				args, err := withAction(req.Params.Arguments, action)
				if err != nil {
					return toolResult(errResult(&Error{Text: "Error: the arguments must be a JSON object"})), nil
				}
				res, err := call(ctx, req, args)
				if err != nil {
					// A failure of chronos still reaches the model as a
					// result it can report, rather than a protocol error.
					return toolResult(errResult(errorf("Error: chronos could not answer: %v", err))), nil
				}
				return toolResult(res), nil
			})
	}
	return srv, nil
}

// withAction adds "action" to the arguments object (empty when absent).
func withAction(raw json.RawMessage, action string) (json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
		if m == nil {
			m = map[string]json.RawMessage{}
		}
	}
	a, _ := json.Marshal(action)
	m["action"] = a
	return json.Marshal(m)
}

// toolResult is the MCP form of a result: its text as content, the rest
// as structured content.
func toolResult(res *Result) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: res.Text}},
		StructuredContent: res,
		IsError:           res.IsError,
	}
}
