package queue

import (
	"encoding/json"
	"strconv"
	"time"
)

// encodeTaskPayload is json.Marshal(p), byte for byte, without
// reflection for the payloads a burst writes: plain strings and times
// within RFC 3339's years. A cold burst marshals one payload per run,
// and reflection was 8% of the scheduler's CPU (docs/performance.md).
// Any other payload goes to json.Marshal, which escapes and errors as
// it always has; TestEncodeTaskPayloadMatchesJSON and its fuzz target
// hold the two to the same bytes.
func encodeTaskPayload(p *TaskPayload) ([]byte, error) {
	if !plainPayload(p) {
		return json.Marshal(p)
	}
	b := make([]byte, 0, 192+len(p.IdempotencyKey)+len(p.ScheduleID)+len(p.WorkflowID)+len(p.ShardOf))
	b = append(b, `{"idempotency_key":"`...)
	b = append(b, p.IdempotencyKey...)
	if p.ScheduleID != "" {
		b = append(b, `","schedule_id":"`...)
		b = append(b, p.ScheduleID...)
	}
	b = append(b, `","run_at":"`...)
	b = p.RunAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","fire_at":"`...)
	b = p.FireAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","workflow_id":"`...)
	b = append(b, p.WorkflowID...)
	b = append(b, `","version":"`...)
	b = append(b, p.Version...)
	b = append(b, `","user_id":"`...)
	b = append(b, p.UserID...)
	b = append(b, `","source":"`...)
	b = append(b, p.Source...)
	b = append(b, '"')
	if p.ShardOf != "" {
		b = append(b, `,"shard_of":"`...)
		b = append(b, p.ShardOf...)
		b = append(b, '"')
	}
	if p.Target != "" {
		b = append(b, `,"target":"`...)
		b = append(b, p.Target...)
		b = append(b, '"')
	}
	if p.MaxAttempts != 0 {
		b = append(b, `,"max_attempts":`...)
		b = strconv.AppendInt(b, int64(p.MaxAttempts), 10)
	}
	return append(b, '}'), nil
}

// plainPayload says whether every string of p goes into JSON as it is
// and both times are in the years json.Marshal accepts.
func plainPayload(p *TaskPayload) bool {
	for _, s := range [...]string{p.IdempotencyKey, p.ScheduleID, p.WorkflowID, p.Version, p.UserID, string(p.Source), p.ShardOf, string(p.Target)} {
		if !plainJSONString(s) {
			return false
		}
	}
	return plainJSONTime(p.RunAt) && plainJSONTime(p.FireAt)
}

// plainJSONString says whether json.Marshal writes s between quotes
// unchanged: printable ASCII, none of the characters it escapes.
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// plainJSONTime says whether t.MarshalJSON succeeds: a year within
// [0, 9999] and a zone offset within a day.
func plainJSONTime(t time.Time) bool {
	if y := t.Year(); y < 0 || y > 9999 {
		return false
	}
	_, off := t.Zone()
	return off > -24*60*60 && off < 24*60*60
}
