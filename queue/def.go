package queue

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strconv"
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
var defFields = []string{sfOwner, sfKind, sfTarget, sfWorkflow, sfVersion, sfUser, sfCron, sfDialect, sfZone,
	sfEvery, sfFireAt, sfDelay, sfStartAt, sfEndAt, sfJitter, sfOverlap, sfCatchup, sfPauseAfter, sfDST, sfAnchor, sfCreated, sfUpdated,
	afLabel, afConversation, afWakeMessage, afPayload, afIdempotency, afMaxFailures}

func msString(t time.Time) string { return strconv.FormatInt(ms(t), 10) }

// encodeDef returns the definition's non-empty fields as field, value pairs
// in defFields order (not Paused or NextRunAt).
func encodeDef(r *model.ScheduleRecord) []string {
	out := make([]string, 0, 2*len(defFields)) // grown from empty, it was five allocations an upsert
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
	add(sfOwner, r.Owner)
	add(sfKind, string(r.Kind))
	add(sfTarget, string(r.Target))
	add(sfWorkflow, r.WorkflowID)
	add(sfVersion, string(r.Version))
	add(sfUser, r.UserID)
	add(sfCron, r.CronExpr)
	add(sfDialect, string(r.Dialect))
	add(sfZone, r.Timezone)
	add(sfEvery, num(r.EverySeconds))
	add(sfFireAt, opt(r.FireAt))
	add(sfDelay, num(r.DelaySeconds))
	add(sfStartAt, opt(r.StartAt))
	add(sfEndAt, opt(r.EndAt))
	add(sfJitter, num(r.JitterMs))
	add(sfOverlap, string(r.OverlapPolicy))
	add(sfCatchup, string(r.CatchupPolicy))
	add(sfPauseAfter, num(int64(r.PauseAfterFailures)))
	add(sfDST, r.DSTPolicy.String())
	add(sfAnchor, msString(r.Anchor))
	add(sfCreated, msString(r.CreatedAt))
	add(sfUpdated, msString(r.UpdatedAt))
	if a := r.Alarm; a != nil {
		add(afLabel, a.Label)
		add(afConversation, a.ConversationID)
		add(afWakeMessage, a.WakeMessage)
		add(afPayload, string(a.Payload))
		add(afIdempotency, a.IdempotencyKey)
		add(afMaxFailures, num(int64(a.MaxFailures)))
	}
	return out
}

// appendDefString appends a canonical string of a stored definition to
// b: equal strings, equal definitions. defCache keeps compiled schedules
// by it.
func appendDefString(b []byte, h map[string]string) []byte {
	for _, f := range defFields {
		b = append(b, h[f]...)
		b = append(b, 0)
	}
	return b
}

// decodeDef builds the record of schedule id from its hash fields.
func decodeDef(id string, h map[string]string) (*model.ScheduleRecord, error) {
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
		ID: id, Owner: h[sfOwner], Kind: model.Kind(h[sfKind]), Target: model.Target(h[sfTarget]),
		WorkflowID: h[sfWorkflow], Version: model.Version(h[sfVersion]), UserID: h[sfUser], CronExpr: h[sfCron],
		Dialect: model.Dialect(h[sfDialect]), Timezone: h[sfZone], EverySeconds: num(sfEvery),
		FireAt: opt(sfFireAt), DelaySeconds: num(sfDelay), StartAt: opt(sfStartAt), EndAt: opt(sfEndAt),
		JitterMs: num(sfJitter), OverlapPolicy: model.OverlapPolicy(h[sfOverlap]), CatchupPolicy: model.CatchupPolicy(h[sfCatchup]),
		Anchor: fromMS(num(sfAnchor)), CreatedAt: fromMS(num(sfCreated)), UpdatedAt: fromMS(num(sfUpdated)),
		PauseAfterFailures: int(num(sfPauseAfter)),
	}
	if h[sfDST] != "" {
		p, err := model.ParseDSTPolicy("dst_policy", h[sfDST])
		if err != nil {
			return nil, fmt.Errorf("decode stored schedule %s: %w", id, err)
		}
		r.DSTPolicy = p
	}
	if r.Target == model.TargetWake {
		a := &model.Alarm{
			Label: h[afLabel], ConversationID: h[afConversation], WakeMessage: h[afWakeMessage],
			IdempotencyKey: h[afIdempotency], MaxFailures: int(num(afMaxFailures)),
			Status: model.AlarmStatus(cmp.Or(h[afStatus], alarmActive)), FailureCount: int(num(afFailures)),
			LastError: h[afLastErr], LastFiredAt: opt(afLastFired),
		}
		if h[afPayload] != "" {
			a.Payload = json.RawMessage(h[afPayload])
		}
		r.Alarm = a
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
