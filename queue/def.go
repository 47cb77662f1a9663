package queue

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/chronos-sched/chronos/model"
)

// A schedule's definition is stored as short fields of its hash, one per
// record field, each left out when empty: one field per value keeps every
// value small, so Redis keeps the hash in its compact listpack encoding
// (values up to hash-max-listpack-value, 64 bytes by default) — a single
// JSON field would push it to a hashtable at ~40% more memory. Times are
// Unix milliseconds. The id is in the key; paused, next, inflight, held,
// tk (a digest of the timing, which tells an upsert whether to keep the
// next fire time) and ver (bumped on every definition write) are fields of
// the same hash.
var defFields = []string{"o", "k", "t", "w", "v", "u", "c", "d", "z", "e", "f", "s", "x", "j", "op", "cp", "a", "cr", "up"}

func msString(t time.Time) string { return strconv.FormatInt(ms(t), 10) }

// encodeDef returns the definition's non-empty fields as field, value pairs
// in defFields order (not Paused or NextRunAt).
func encodeDef(r *model.ScheduleRecord) []string {
	var out []string
	add := func(f, v string) {
		if v != "" {
			out = append(out, f, v)
		}
	}
	opt := func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return msString(*t)
	}
	num := func(n int64) string {
		if n == 0 {
			return ""
		}
		return strconv.FormatInt(n, 10)
	}
	add("o", r.Owner)
	add("k", string(r.Kind))
	add("t", string(r.Target))
	add("w", r.WorkflowID)
	add("v", string(r.Version))
	add("u", r.UserID)
	add("c", r.CronExpr)
	add("d", string(r.Dialect))
	add("z", r.Timezone)
	add("e", num(r.EverySeconds))
	add("f", opt(r.FireAt))
	add("s", opt(r.StartAt))
	add("x", opt(r.EndAt))
	add("j", num(r.JitterMs))
	add("op", string(r.OverlapPolicy))
	add("cp", string(r.CatchupPolicy))
	add("a", msString(r.Anchor))
	add("cr", msString(r.CreatedAt))
	add("up", msString(r.UpdatedAt))
	return out
}

// defString is a canonical string of a stored definition: equal strings,
// equal definitions. The scheduler caches compiled schedules by it.
func defString(h map[string]string) string {
	var b strings.Builder
	for _, f := range defFields {
		b.WriteString(h[f])
		b.WriteByte(0)
	}
	return b.String()
}

// DecodeDef builds the record of schedule id from its hash fields.
func DecodeDef(id string, h map[string]string) (*model.ScheduleRecord, error) {
	var bad string
	num := func(f string) int64 {
		if h[f] == "" {
			return 0
		}
		n, err := strconv.ParseInt(h[f], 10, 64)
		if err != nil {
			bad = f
		}
		return n
	}
	opt := func(f string) *time.Time {
		if h[f] == "" {
			return nil
		}
		t := fromMS(num(f))
		return &t
	}
	r := &model.ScheduleRecord{
		ID: id, Owner: h["o"], Kind: model.Kind(h["k"]), Target: model.Target(h["t"]),
		WorkflowID: h["w"], Version: model.Version(h["v"]), UserID: h["u"], CronExpr: h["c"],
		Dialect: model.Dialect(h["d"]), Timezone: h["z"], EverySeconds: num("e"),
		FireAt: opt("f"), StartAt: opt("s"), EndAt: opt("x"), JitterMs: num("j"),
		OverlapPolicy: model.OverlapPolicy(h["op"]), CatchupPolicy: model.CatchupPolicy(h["cp"]),
		Anchor: fromMS(num("a")), CreatedAt: fromMS(num("cr")), UpdatedAt: fromMS(num("up")),
	}
	if bad != "" {
		return nil, fmt.Errorf("decode stored schedule %s: field %s is not a number: %q", id, bad, h[bad])
	}
	return r, nil
}

// pairsToMap turns field, value pairs into a map.
func pairsToMap(pairs []string) map[string]string {
	m := make(map[string]string, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		m[pairs[i]] = pairs[i+1]
	}
	return m
}
