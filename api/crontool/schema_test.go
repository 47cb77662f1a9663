package crontool

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/stretchr/testify/require"
)

// resolve compiles a schema with the validator the MCP SDK uses.
func resolve(t *testing.T, raw json.RawMessage) *jsonschema.Resolved {
	t.Helper()
	var s jsonschema.Schema
	require.NoError(t, json.Unmarshal(raw, &s))
	rs, err := s.Resolve(nil)
	require.NoError(t, err)
	return rs
}

func instance(t *testing.T, call string) any {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal([]byte(call), &v))
	return v
}

// Calls a model makes, each valid under the schema and accepted by the
// tool.
var validCalls = []string{
	`{"action":"add","message":"Drink water","every_seconds":7200}`,
	`{"action":"add","name":"Daily standup","message":"Send standup reminder","cron_expr":"0 9 * * *","tz":"Asia/Ho_Chi_Minh","deliver":true,"channel":"telegram","to":"12345"}`,
	`{"action":"add","message":"Call mum","at":"2026-02-12T10:30:00","tz":"Europe/Berlin"}`,
	`{"action":"add","message":"Call dad","at":"2026-02-12T10:30:00+01:00","deliver":false}`,
	`{"action":"add","message":"Weekly","cron_expr":"@weekly","every_seconds":0,"at":"","tz":""}`,
	`{"action":"list"}`,
	`{"action":"remove","job_id":"a1b2c3d4"}`,
}

func TestSchemaTakesRealCalls(t *testing.T) {
	t.Parallel()
	b := setup(t, "UTC")
	def := b.tool.Definition()
	require.Equal(t, "cron", def.Name)
	rs := resolve(t, def.Parameters)
	for _, call := range validCalls {
		require.NoError(t, rs.Validate(instance(t, call)), call)
		res := b.call(t, call)
		if !strings.Contains(call, `"remove"`) {
			require.False(t, res.IsError, "%s: %s", call, res.Text)
		}
	}
	for _, call := range []string{
		`{}`,
		`{"action":"pause"}`,
		`{"action":"add","message":"x","every_seconds":"60"}`,
		`{"action":"add","message":"x","every_seconds":1.5}`,
		`{"action":"add","message":7,"every_seconds":60}`,
		`{"action":"add","message":"x","every_seconds":60,"deliver":"yes"}`,
	} {
		require.Error(t, rs.Validate(instance(t, call)), call)
		require.True(t, b.call(t, call).IsError, call)
	}
}

// Every property of the schema is an argument the tool reads, of the
// type the schema says: a value of another type is the tool's error
// naming it.
func TestSchemaNamesTheToolsArguments(t *testing.T) {
	t.Parallel()
	b := setup(t, "UTC")
	var s struct {
		Properties map[string]struct {
			Type string `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	require.NoError(t, json.Unmarshal(b.tool.Definition().Parameters, &s))
	require.Equal(t, []string{"action"}, s.Required)
	require.Len(t, s.Properties, 11)
	for name, p := range s.Properties {
		wrong := `"x"`
		if p.Type == "string" {
			wrong = `17`
		}
		_, err := ParseArgs([]byte(`{"action":"add","` + name + `":` + wrong + `}`))
		require.NotNil(t, err, name)
		require.True(t, strings.HasPrefix(err.Text, "Error: "+name+" must be"), err.Text)
	}
}

func TestActionSchemas(t *testing.T) {
	t.Parallel()
	b := setup(t, "UTC")
	schema := func(action string) json.RawMessage {
		raw, err := ActionSchema(b.tool.Definition(), action)
		require.NoError(t, err)
		return raw
	}
	add := resolve(t, schema(ActionAdd))
	require.NoError(t, add.Validate(instance(t, `{"message":"Drink water","every_seconds":7200}`)))
	require.Error(t, add.Validate(instance(t, `{"every_seconds":7200}`)), "message is required")
	list := resolve(t, schema(ActionList))
	require.NoError(t, list.Validate(instance(t, `{}`)))
	remove := resolve(t, schema(ActionRemove))
	require.NoError(t, remove.Validate(instance(t, `{"job_id":"a1b2c3d4"}`)))
	require.Error(t, remove.Validate(instance(t, `{}`)))
}
