package queue

import (
	"encoding/json"
	"strconv"
	"time"
)

// encodeTaskPayload is json.Marshal(p), byte for byte, without
// reflection for the payloads a burst writes: plain strings and times
// within RFC 3339's years. A cold burst marshals one payload per run,
// and reflection was 8% of the scheduler's CPU (docs/perf/cold-burst.md).
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

// decodeTaskPayload is json.Unmarshal(b, p) for the payloads
// encodeTaskPayload writes without reflection: its fields in its order,
// plain strings (plainJSONString) and a positive max_attempts of at most
// 9 digits. It answers false, with p untouched, for anything else, which
// json.Unmarshal then decodes as it always has. Its strings share one
// copy of b (one allocation where json.Unmarshal made one a field), and
// its times are read by time.Time.UnmarshalJSON, as json.Unmarshal reads
// them. A launcher decodes one payload per run, and reflection was 7%
// of its CPU under load (docs/perf/launchers.md);
// TestDecodeTaskPayloadMatchesJSON and FuzzDecodeTaskPayload hold the
// two to the same result.
func decodeTaskPayload(b []byte, p *TaskPayload) bool {
	d := payloadDecoder{b: b, s: string(b)}
	var q TaskPayload
	ok := d.lit(`{"idempotency_key":`) && d.str(&q.IdempotencyKey) &&
		(!d.has(`,"schedule_id":`) || d.lit(`,"schedule_id":`) && d.str(&q.ScheduleID)) &&
		d.lit(`,"run_at":`) && d.time(&q.RunAt) &&
		d.lit(`,"fire_at":`) && d.time(&q.FireAt) &&
		d.lit(`,"workflow_id":`) && d.str(&q.WorkflowID) &&
		d.lit(`,"version":`) && d.str(&q.Version) &&
		d.lit(`,"user_id":`) && d.str(&q.UserID) &&
		d.lit(`,"source":`) && d.str((*string)(&q.Source)) &&
		(!d.has(`,"shard_of":`) || d.lit(`,"shard_of":`) && d.str(&q.ShardOf)) &&
		(!d.has(`,"target":`) || d.lit(`,"target":`) && d.str((*string)(&q.Target))) &&
		(!d.has(`,"max_attempts":`) || d.lit(`,"max_attempts":`) && d.posInt(&q.MaxAttempts)) &&
		d.lit(`}`) && d.i == len(d.s)
	if ok {
		*p = q
	}
	return ok
}

// payloadDecoder reads s from i on (decodeTaskPayload).
type payloadDecoder struct {
	b []byte
	s string // b
	i int
}

func (d *payloadDecoder) has(lit string) bool {
	return len(d.s)-d.i >= len(lit) && d.s[d.i:d.i+len(lit)] == lit
}

func (d *payloadDecoder) lit(lit string) bool {
	if !d.has(lit) {
		return false
	}
	d.i += len(lit)
	return true
}

// str reads a quoted plain string (no escapes, printable ASCII).
func (d *payloadDecoder) str(v *string) bool {
	if !d.lit(`"`) {
		return false
	}
	for j := d.i; j < len(d.s); j++ {
		switch c := d.s[j]; {
		case c == '"':
			*v = d.s[d.i:j]
			d.i = j + 1
			return true
		case c < 0x20 || c > 0x7e, c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return false
}

// time reads a quoted time as json.Unmarshal reads it.
func (d *payloadDecoder) time(v *time.Time) bool {
	start := d.i
	var s string
	if !d.str(&s) {
		return false
	}
	return v.UnmarshalJSON(d.b[start:d.i]) == nil
}

// posInt reads 1 to 9 digits, the first not 0.
func (d *payloadDecoder) posInt(v *int) bool {
	n, j := 0, d.i
	for ; j < len(d.s) && j-d.i < 10 && d.s[j] >= '0' && d.s[j] <= '9'; j++ {
		n = n*10 + int(d.s[j]-'0')
	}
	if j == d.i || j-d.i > 9 || d.s[d.i] == '0' {
		return false
	}
	*v, d.i = n, j
	return true
}
