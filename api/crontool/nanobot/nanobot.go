// Package nanobot reads and writes nanobot's cron store, jobs.json,
// byte-compatible with nanobot's Python writer, so a nanobot install reads
// what chronos exports and chronos reads what nanobot wrote.
//
// The format (../../../docs/cron-tool.md has the table):
//
//   - A JSON object {"version": 1, "jobs": [...]}; each job has, in this
//     order, id, name, enabled, schedule {kind, atMs, everyMs, expr, tz},
//     payload {kind, message, deliver, channel, to}, state {nextRunAtMs,
//     lastRunAtMs, lastStatus, lastError}, createdAtMs, updatedAtMs and
//     deleteAfterRun.
//   - Times and intervals are Unix milliseconds; unset values are null.
//   - Encode writes as Python's json.dumps(data, indent=2,
//     ensure_ascii=False): 2-space indentation, ", " never, ": " between a
//     key and its value, non-ASCII text as UTF-8, and no newline at the end.
//   - Decode takes what nanobot's loader takes: every key but id, name and
//     schedule.kind may be absent and gets nanobot's default (enabled
//     true, payload.kind "agent_turn", deliver false, times 0). A job that
//     cannot be read is reported in File.Invalid and the others are kept.
package nanobot

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// Version is the only jobs.json version there is.
const Version = 1

// File is a jobs.json.
type File struct {
	Version int
	Jobs    []Job
	// Invalid are the jobs Decode could not read, by position.
	Invalid []InvalidJob
}

// InvalidJob is a job of the file that could not be read.
type InvalidJob struct {
	// Index is the job's position in the file's jobs, from 0.
	Index int
	// ID is the job's id when it could be read.
	ID  string
	Err error
}

// Job is one job of jobs.json.
type Job struct {
	ID             string
	Name           string
	Enabled        bool
	Schedule       Schedule
	Payload        Payload
	State          State
	CreatedAtMs    int64
	UpdatedAtMs    int64
	DeleteAfterRun bool
}

// Schedule says when a job runs: Kind "at" (AtMs), "every" (EveryMs) or
// "cron" (Expr in TZ). Unset values are nil.
type Schedule struct {
	Kind    string
	AtMs    *int64
	EveryMs *int64
	Expr    *string
	TZ      *string
}

// Payload says what a run does.
type Payload struct {
	Kind    string
	Message string
	Deliver bool
	Channel *string
	To      *string
}

// State is a job's runs.
type State struct {
	NextRunAtMs *int64
	LastRunAtMs *int64
	LastStatus  *string
	LastError   *string
}

// Decode reads a jobs.json. The error is for a file that is not one (not
// a JSON object, jobs not an array, another version); a job that cannot
// be read is in File.Invalid.
func Decode(b []byte) (*File, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, fmt.Errorf("jobs.json: not a JSON object: %w", err)
	}
	if top == nil {
		return nil, errors.New("jobs.json: not a JSON object")
	}
	f := &File{Version: Version}
	if v, ok := top["version"]; ok && !isNull(v) {
		n, err := intOf(v)
		if err != nil || n != Version {
			return nil, fmt.Errorf("jobs.json: version %s, want %d", short(v), Version)
		}
	}
	var raws []json.RawMessage
	if v, ok := top["jobs"]; ok && !isNull(v) {
		if err := json.Unmarshal(v, &raws); err != nil {
			return nil, fmt.Errorf("jobs.json: jobs is not an array: %s", short(v))
		}
	}
	for i, r := range raws {
		j, err := decodeJob(r)
		if err != nil {
			f.Invalid = append(f.Invalid, InvalidJob{Index: i, ID: j.ID, Err: err})
			continue
		}
		f.Jobs = append(f.Jobs, j)
	}
	return f, nil
}

// obj is a JSON object read one key at a time, keeping the first error.
type obj struct {
	m   map[string]json.RawMessage
	err error
}

func newObj(what string, b json.RawMessage) *obj {
	o := &obj{}
	if err := json.Unmarshal(b, &o.m); err != nil || o.m == nil {
		o.err = fmt.Errorf("%s is not an object: %s", what, short(b))
	}
	return o
}

func (o *obj) fail(key, want string, v json.RawMessage) {
	if o.err == nil {
		o.err = fmt.Errorf("%s: want %s, got %s", key, want, short(v))
	}
}

// str reads a required string.
func (o *obj) str(key string, dst *string) {
	v, ok := o.m[key]
	if !ok || isNull(v) {
		if o.err == nil {
			o.err = fmt.Errorf("%s: is required", key)
		}
		return
	}
	if err := json.Unmarshal(v, dst); err != nil {
		o.fail(key, "a string", v)
	}
}

// optStr reads a string that may be null or absent (nil then).
func (o *obj) optStr(key string) *string {
	v, ok := o.m[key]
	if !ok || isNull(v) {
		return nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		o.fail(key, "a string or null", v)
		return nil
	}
	return &s
}

// strOr reads a string, def when absent or null.
func (o *obj) strOr(key, def string) string {
	if s := o.optStr(key); s != nil {
		return *s
	}
	return def
}

func (o *obj) optInt(key string) *int64 {
	v, ok := o.m[key]
	if !ok || isNull(v) {
		return nil
	}
	n, err := intOf(v)
	if err != nil {
		o.fail(key, "a whole number or null", v)
		return nil
	}
	return &n
}

func (o *obj) intOr(key string, def int64) int64 {
	if n := o.optInt(key); n != nil {
		return *n
	}
	return def
}

func (o *obj) boolOr(key string, def bool) bool {
	v, ok := o.m[key]
	if !ok || isNull(v) {
		return def
	}
	var b bool
	if err := json.Unmarshal(v, &b); err != nil {
		o.fail(key, "true or false", v)
	}
	return b
}

// sub reads a nested object; an absent or null one reads as empty, as
// nanobot's j.get("state", {}).
func (o *obj) sub(key string, required bool) *obj {
	v, ok := o.m[key]
	if !ok || isNull(v) {
		if required && o.err == nil {
			o.err = fmt.Errorf("%s: is required", key)
		}
		return &obj{m: map[string]json.RawMessage{}}
	}
	s := newObj(key, v)
	if s.err != nil && o.err == nil {
		o.err = s.err
	}
	return s
}

func decodeJob(b json.RawMessage) (Job, error) {
	var j Job
	o := newObj("job", b)
	if o.err != nil {
		return j, o.err
	}
	o.str("id", &j.ID)
	o.str("name", &j.Name)
	j.Enabled = o.boolOr("enabled", true)
	s := o.sub("schedule", true)
	s.str("kind", &j.Schedule.Kind)
	j.Schedule.AtMs = s.optInt("atMs")
	j.Schedule.EveryMs = s.optInt("everyMs")
	j.Schedule.Expr = s.optStr("expr")
	j.Schedule.TZ = s.optStr("tz")
	p := o.sub("payload", true)
	j.Payload.Kind = p.strOr("kind", "agent_turn")
	j.Payload.Message = p.strOr("message", "")
	j.Payload.Deliver = p.boolOr("deliver", false)
	j.Payload.Channel = p.optStr("channel")
	j.Payload.To = p.optStr("to")
	st := o.sub("state", false)
	j.State.NextRunAtMs = st.optInt("nextRunAtMs")
	j.State.LastRunAtMs = st.optInt("lastRunAtMs")
	j.State.LastStatus = st.optStr("lastStatus")
	j.State.LastError = st.optStr("lastError")
	j.CreatedAtMs = o.intOr("createdAtMs", 0)
	j.UpdatedAtMs = o.intOr("updatedAtMs", 0)
	j.DeleteAfterRun = o.boolOr("deleteAfterRun", false)
	for _, e := range []error{o.err, scoped("schedule", s.err), scoped("payload", p.err), scoped("state", st.err)} {
		if e != nil {
			return j, e
		}
	}
	switch j.Schedule.Kind {
	case "at", "every", "cron":
	default:
		return j, fmt.Errorf("schedule.kind: want at, every or cron, got %q", j.Schedule.Kind)
	}
	return j, nil
}

func scoped(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s.%w", what, err)
}

func isNull(v json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(v), []byte("null")) }

// intOf reads a whole JSON number (1700000000000, or 1700000000000.0 as
// Python may write a float) that fits in an int64.
func intOf(v json.RawMessage) (int64, error) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || v[0] == '"' {
		return 0, errors.New("not a number")
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

func short(v json.RawMessage) string {
	s := string(bytes.TrimSpace(v))
	if len(s) > 60 {
		// Cut on a character boundary, so the message stays UTF-8.
		cut := 57
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}
