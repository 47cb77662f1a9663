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

// param is one argument of the tool: its JSON Schema and the actions
// that take it.
type param struct {
	name    string
	schema  map[string]any
	actions []string
}

// params are the tool's arguments in the order the schema lists them:
// nanobot's, then chronos's (deliver, channel, to).
func (t *Tool) params() []param {
	zone := zoneName(t.zone)
	add, remove := []string{ActionAdd}, []string{ActionRemove}
	return []param{
		{"action", map[string]any{"type": "string", "enum": []string{ActionAdd, ActionList, ActionRemove},
			"description": "Action to perform"}, nil},
		{"name", map[string]any{"type": "string",
			"description": "Optional short human-readable label for the job (e.g. 'daily-standup'). Defaults to the first 30 characters of message."}, add},
		{"message", map[string]any{"type": "string",
			"description": "REQUIRED when action='add'. Instruction for the agent to carry out when the job fires (e.g. 'Remind me to call mum'). Not used for list or remove."}, add},
		{"every_seconds", map[string]any{"type": "integer",
			"description": "Interval in seconds (for recurring tasks). Give one of every_seconds, cron_expr or at."}, add},
		{"cron_expr", map[string]any{"type": "string",
			"description": "Cron expression like '0 9 * * *': minute hour day-of-month month day-of-week (for scheduled tasks)."}, add},
		{"tz", map[string]any{"type": "string",
			"description": fmt.Sprintf("IANA timezone of cron_expr or of a local at (e.g. 'America/Vancouver'). Default %s. An unknown zone is an error.", zone)}, add},
		{"at", map[string]any{"type": "string",
			"description": fmt.Sprintf("ISO datetime for one-time execution (e.g. '2026-02-12T10:30:00', read in tz, default %s; or with an offset, '2026-02-12T10:30:00+01:00'). The job is removed after it runs.", zone)}, add},
		{"deliver", map[string]any{"type": "boolean",
			"description": "Deliver the agent's answer to the chat when the job fires (default true)."}, add},
		{"channel", map[string]any{"type": "string",
			"description": "Chat channel to deliver to (e.g. 'telegram')."}, add},
		{"to", map[string]any{"type": "string",
			"description": "Chat or recipient id to deliver to on that channel."}, add},
		{"job_id", map[string]any{"type": "string",
			"description": "REQUIRED when action='remove'. Job ID to remove (from action='list')."}, remove},
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
	return Definition{Name: Name, Description: t.description(), Parameters: t.objectSchema(nil, []string{"action"})}
}

// ActionSchema is the input schema of one action as a tool of its own
// (MCP's cron_add, cron_list and cron_remove): the arguments that action
// takes, with its required one.
func (t *Tool) ActionSchema(action string) json.RawMessage {
	var req []string
	switch action {
	case ActionAdd:
		req = []string{"message"}
	case ActionRemove:
		req = []string{"job_id"}
	}
	return t.objectSchema(&action, req)
}

// objectSchema writes the parameters' object schema, properties in
// order; with action set, only that action's arguments and no action.
func (t *Tool) objectSchema(action *string, required []string) json.RawMessage {
	var b bytes.Buffer
	b.WriteString(`{"type":"object","properties":{`)
	n := 0
	for _, p := range t.params() {
		if action != nil && !takes(p, *action) {
			continue
		}
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

func takes(p param, action string) bool {
	for _, a := range p.actions {
		if a == action {
			return true
		}
	}
	return false
}
