package crontool

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Name is the tool's name, as nanobot names it.
const Name = "cron"

// Definition is the tool in the shape LLM function-calling APIs take (an
// OpenAI function, an Anthropic tool once parameters is renamed
// input_schema): GET /v1/tools/cron/schema answers it.
type Definition struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// param is one argument of the tool and its JSON Schema.
type param struct {
	name   string
	schema map[string]any
}

// params are the tool's arguments in the order the schema lists them:
// nanobot's, then chronos's (deliver, channel, to).
func (t *Tool) params() []param {
	zone := zoneName(t.zone)
	return []param{
		{"action", map[string]any{"type": "string", "enum": []string{ActionAdd, ActionList, ActionRemove},
			"description": "Action to perform"}},
		{"name", map[string]any{"type": "string",
			"description": "Optional short human-readable label for the job (e.g. 'daily-standup'). Defaults to the first 30 characters of message."}},
		{"message", map[string]any{"type": "string",
			"description": "REQUIRED when action='add'. Instruction for the agent to carry out when the job fires (e.g. 'Remind me to call mum'). Not used for list or remove."}},
		{"every_seconds", map[string]any{"type": "integer",
			"description": "Interval in seconds (for recurring tasks). Give one of every_seconds, cron_expr or at."}},
		{"cron_expr", map[string]any{"type": "string",
			"description": "Cron expression like '0 9 * * *': minute hour day-of-month month day-of-week (for scheduled tasks)."}},
		{"tz", map[string]any{"type": "string",
			"description": fmt.Sprintf("IANA timezone of cron_expr or of a local at (e.g. 'America/Vancouver'). Default %s. An unknown zone is an error.", zone)}},
		{"at", map[string]any{"type": "string",
			"description": fmt.Sprintf("ISO datetime for one-time execution (e.g. '2026-02-12T10:30:00', read in tz, default %s; or with an offset, '2026-02-12T10:30:00+01:00'). The job is removed after it runs.", zone)}},
		{"deliver", map[string]any{"type": "boolean",
			"description": "Deliver the agent's answer to the chat when the job fires (default true)."}},
		{"channel", map[string]any{"type": "string",
			"description": "Chat channel to deliver to (e.g. 'telegram')."}},
		{"to", map[string]any{"type": "string",
			"description": "Chat or recipient id to deliver to on that channel."}},
		{"job_id", map[string]any{"type": "string",
			"description": "REQUIRED when action='remove'. Job ID to remove (from action='list')."}},
	}
}

// description is the tool's description for the model.
func (t *Tool) description() string {
	return "Schedule reminders and recurring tasks. Actions: add, list, remove. " +
		"add needs a non-empty message and one of every_seconds, cron_expr or at; remove needs job_id; list needs only action. " +
		fmt.Sprintf("If tz is omitted, cron expressions and ISO times without an offset are read in %s.", zoneName(t.zone))
}

// Definition is the tool as one function, cron, with an action argument,
// as nanobot defines it. Its parameters name only action as required and
// use no oneOf, anyOf or allOf at the top: some providers refuse a
// function whose parameters do; the per-action rules are the tool's
// answers instead.
func (t *Tool) Definition() Definition {
	return Definition{Name: Name, Description: t.description(), Parameters: t.objectSchema([]string{"action"})}
}

// actionParams are the arguments each action takes, in schema order,
// the required one first.
var actionParams = map[string][]string{
	ActionAdd:    {"message", "name", "every_seconds", "cron_expr", "tz", "at", "deliver", "channel", "to"},
	ActionList:   {},
	ActionRemove: {"job_id"},
}

// ActionSchema is the input schema of one action as a tool of its own
// (MCP's cron_add, cron_list and cron_remove), cut from the parameters
// of a Definition (so `chronos mcp` cuts it from the API's): the
// arguments that action takes, with its required one.
func ActionSchema(def Definition, action string) (json.RawMessage, error) {
	names, ok := actionParams[action]
	if !ok {
		return nil, fmt.Errorf("unknown action %q", action)
	}
	var all struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(def.Parameters, &all); err != nil {
		return nil, fmt.Errorf("the cron tool's parameters: %w", err)
	}
	var b bytes.Buffer
	b.WriteString(`{"type":"object","properties":{`)
	for i, n := range names {
		p, ok := all.Properties[n]
		if !ok {
			return nil, fmt.Errorf("the cron tool's parameters have no %s", n)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(n)
		b.Write(k)
		b.WriteByte(':')
		b.Write(p)
	}
	b.WriteString(`}`)
	if len(names) > 0 {
		r, _ := json.Marshal(names[:1])
		b.WriteString(`,"required":`)
		b.Write(r)
	}
	b.WriteString(`}`)
	return b.Bytes(), nil
}

// objectSchema writes the parameters' object schema, properties in
// order.
func (t *Tool) objectSchema(required []string) json.RawMessage {
	var b bytes.Buffer
	b.WriteString(`{"type":"object","properties":{`)
	n := 0
	for _, p := range t.params() {
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		k, _ := json.Marshal(p.name)
		v, _ := json.Marshal(p.schema)
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteString(`}`)
	if len(required) > 0 {
		r, _ := json.Marshal(required)
		b.WriteString(`,"required":`)
		b.Write(r)
	}
	b.WriteString(`}`)
	return b.Bytes()
}
