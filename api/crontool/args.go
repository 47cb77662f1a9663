package crontool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Actions of the cron tool.
const (
	ActionAdd    = "add"
	ActionList   = "list"
	ActionRemove = "remove"
)

// Args are the cron tool's arguments as a model sends them. A zero value
// means the argument is absent: models often fill every parameter of a
// schema, sending 0 or "" for the ones they do not mean, so 0 and "" count
// as absent, as they do in nanobot.
type Args struct {
	Action       string
	Name         string
	Message      string
	EverySeconds int64
	CronExpr     string
	TZ           string
	At           string
	// Deliver is nil when absent (true for add).
	Deliver *bool
	Channel string
	To      string
	JobID   string
}

// ParseArgs reads the tool's arguments from a JSON object. A value of the
// wrong type is an error a model can act on (its Text starts with
// "Error:"); unknown keys are ignored, as nanobot ignores them.
func ParseArgs(raw []byte) (Args, *Error) {
	var a Args
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return a, errorf("Error: action is required (add, list or remove)")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return a, errorf("Error: the arguments must be a JSON object")
	}
	strs := []struct {
		key string
		dst *string
	}{
		{"action", &a.Action}, {"name", &a.Name}, {"message", &a.Message}, {"cron_expr", &a.CronExpr},
		{"tz", &a.TZ}, {"at", &a.At}, {"channel", &a.Channel}, {"to", &a.To}, {"job_id", &a.JobID},
	}
	for _, f := range strs {
		v, ok := m[f.key]
		if !ok || isNull(v) {
			continue
		}
		if err := json.Unmarshal(v, f.dst); err != nil {
			return a, errorf("Error: %s must be a string, got %s", f.key, short(v))
		}
	}
	if v, ok := m["every_seconds"]; ok && !isNull(v) {
		n, err := wholeNumber(v)
		if err != nil {
			return a, errorf("Error: every_seconds must be a whole number of seconds, got %s", short(v))
		}
		a.EverySeconds = n
	}
	if v, ok := m["deliver"]; ok && !isNull(v) {
		var b bool
		if err := json.Unmarshal(v, &b); err != nil {
			return a, errorf("Error: deliver must be true or false, got %s", short(v))
		}
		a.Deliver = &b
	}
	a.Action = strings.TrimSpace(a.Action)
	a.JobID = strings.TrimSpace(a.JobID)
	a.CronExpr = strings.TrimSpace(a.CronExpr)
	a.TZ = strings.TrimSpace(a.TZ)
	a.At = strings.TrimSpace(a.At)
	return a, nil
}

func isNull(v json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(v), []byte("null")) }

// wholeNumber reads a JSON number without a fractional part (3600 or
// 3600.0), the way Python's int() would take a model's float.
func wholeNumber(v json.RawMessage) (int64, error) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || v[0] == '"' {
		return 0, fmt.Errorf("not a number: %s", v) // json.Number would take a quoted one
	}
	var n json.Number
	if err := json.Unmarshal(v, &n); err != nil {
		return 0, err
	}
	if i, err := strconv.ParseInt(n.String(), 10, 64); err == nil {
		return i, nil
	}
	f, err := n.Float64()
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, fmt.Errorf("not a whole number: %s", n)
	}
	return int64(f), nil
}

// short quotes a JSON value for an error text, cut to 60 bytes.
func short(v json.RawMessage) string {
	s := string(bytes.TrimSpace(v))
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}
