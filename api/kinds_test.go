package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api"
	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
	"github.com/chronos-sched/chronos/scheduler"
)

// kindBody is a valid upsert body of a once or every schedule: the
// workflow fields of schedule() and the given timing fields.
func kindBody(id string, kv ...any) map[string]any {
	body := schedule(id)
	delete(body, "cron_expr")
	delete(body, "timezone")
	for i := 0; i < len(kv); i += 2 {
		body[kv[i].(string)] = kv[i+1]
	}
	return body
}

// tick lets a scheduler work the schedule's shard once at the clock's now.
func (b *testBundle) tick(t *testing.T, id string) {
	t.Helper()
	s, err := scheduler.New(b.store, nil, nil, nil)
	require.NoError(t, err)
	require.NoError(t, s.TickShard(context.Background(), queue.ShardOf(id, b.store.Config().Shards)))
}

// TestUpsertKindErrors: the once and every fields refused through HTTP,
// each once error with the engine's exact text after the field at
// fault; nothing is written.
func TestUpsertKindErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	before := b.keys(t)
	for _, tc := range []struct {
		name string
		body map[string]any
		want string
	}{
		// The engine's four once errors (schedule-engine.md).
		{"OnceBoth", kindBody("bad", "kind", "once", "delay_seconds", 600, "fire_at", "2026-01-02T00:00:00Z"),
			"fire_at: once alarm takes either delay_seconds or fire_at, not both"},
		{"OnceNeither", kindBody("bad", "kind", "once"),
			"fire_at: once alarm requires delay_seconds or fire_at"},
		{"OnceFireAtFormat", kindBody("bad", "kind", "once", "fire_at", "tomorrow at 3"),
			`fire_at: invalid fire_at "tomorrow at 3" (want RFC3339)`},
		{"OnceFireAtPast", kindBody("bad", "kind", "once", "fire_at", "2025-12-31T23:00:00Z"),
			"fire_at: fire_at 2025-12-31T23:00:00Z is not in the future"},
		{"OnceFireAtNow", kindBody("bad", "kind", "once", "fire_at", "2026-01-01T00:00:00Z"),
			"fire_at: fire_at 2026-01-01T00:00:00Z is not in the future"},
		// The engine's delay bounds.
		{"OnceDelayZero", kindBody("bad", "kind", "once", "delay_seconds", 0), "delay_seconds: delay_seconds must be > 0"},
		{"OnceDelayNegative", kindBody("bad", "kind", "once", "delay_seconds", -5), "delay_seconds: delay_seconds must be > 0"},
		{"OnceDelayHuge", kindBody("bad", "kind", "once", "delay_seconds", int64(1)<<50),
			"delay_seconds: delay_seconds 1125899906842624 is too large (fire time after year 9999)"},
		{"OnceFireAtAfter9999", kindBody("bad", "kind", "once", "fire_at", "9999-12-31T23:59:59-05:00"),
			"fire_at: fire_at 9999-12-31T23:59:59-05:00 is after year 9999 in UTC"},
		{"OnceDelayType", kindBody("bad", "kind", "once", "delay_seconds", 1.5), "delay_seconds: must be an integer"},
		{"OnceFireAtType", kindBody("bad", "kind", "once", "fire_at", 1767225600), "fire_at: must be a string"},
		{"EveryMissing", kindBody("bad", "kind", "every"), "every_seconds: is required for kind every"},
		{"EveryZero", kindBody("bad", "kind", "every", "every_seconds", 0), "every_seconds: must be between 1 and 3153600000 (100 years)"},
		{"EveryTooLong", kindBody("bad", "kind", "every", "every_seconds", model.MaxEverySeconds+1),
			"every_seconds: must be between 1 and 3153600000 (100 years)"},
		{"EveryType", kindBody("bad", "kind", "every", "every_seconds", "60"), "every_seconds: must be an integer"},
		{"KindUnknown", kindBody("bad", "kind", "weekly", "every_seconds", 60), `kind: unknown kind "weekly" (want cron, once or every)`},
		{"KindType", kindBody("bad", "kind", 1, "cron_expr", "* * * * *"), "kind: must be a string"},
		// Fields of another kind.
		{"OnceCron", kindBody("bad", "kind", "once", "delay_seconds", 60, "cron_expr", "* * * * *"),
			"cron_expr: is only for kind cron, not once"},
		{"OnceDialect", kindBody("bad", "kind", "once", "delay_seconds", 60, "dialect", "posix"),
			"dialect: is only for kind cron, not once"},
		{"OnceTimezone", kindBody("bad", "kind", "once", "delay_seconds", 60, "timezone", "UTC"),
			"timezone: is only for kind cron, not once: its fire times are instants, the same in every zone"},
		{"OnceWindow", kindBody("bad", "kind", "once", "delay_seconds", 60, "end_at", "2026-02-01T00:00:00Z"),
			"end_at: is only for kind cron or every, not once: a once schedule fires at its one time, fire_at"},
		{"OnceEvery", kindBody("bad", "kind", "once", "delay_seconds", 60, "every_seconds", 60),
			"every_seconds: is only for kind every, not once"},
		{"EveryFireAt", kindBody("bad", "kind", "every", "every_seconds", 60, "fire_at", "2026-01-02T00:00:00Z"),
			"fire_at: is only for kind once, not every"},
		{"EveryTimezone", kindBody("bad", "kind", "every", "every_seconds", 60, "timezone", "Europe/Berlin"),
			"timezone: is only for kind cron, not every: its fire times are instants, the same in every zone"},
		{"CronDelay", kindBody("bad", "kind", "cron", "cron_expr", "* * * * *", "delay_seconds", 60),
			"delay_seconds: is only for kind once, not cron"},
		{"DefaultKindEvery", kindBody("bad", "cron_expr", "* * * * *", "every_seconds", 60),
			"every_seconds: is only for kind every, not cron"},
		{"DefaultKindOnceFields", kindBody("bad", "delay_seconds", 600),
			"delay_seconds: is only for kind once, not cron; cron_expr: is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := requireError(t, b.do(t, http.MethodPost, "/schedules/upsert", tc.body), http.StatusBadRequest,
				api.CodeInvalidArgument, tc.want)
			require.Equal(t, tc.want, got.Message)
			require.ElementsMatch(t, before, b.keys(t), "a rejected upsert wrote to Redis")
		})
	}

	// One answer names every field at fault.
	body := kindBody("bad", "kind", "once", "delay_seconds", 0, "cron_expr", "* * * * *", "jitter_ms", -1, "colour", "red")
	got := requireError(t, b.do(t, http.MethodPost, "/schedules/upsert", body), http.StatusBadRequest, api.CodeInvalidArgument, "")
	var fields []string
	for _, d := range got.Details {
		fields = append(fields, d.Field)
	}
	require.Equal(t, []string{"colour", "cron_expr", "delay_seconds", "jitter_ms"}, fields, got.Message)
	require.ElementsMatch(t, before, b.keys(t))
}

// TestOnceByDelay: a once schedule's delay_seconds counts from the
// store's clock when the schedule is created; repeating the body keeps
// that time, a new delay counts from now. After its run is planned and
// its time has come, it is completed and shows the run; the same body
// again never fires it twice, a new fire_at fires it again.
func TestOnceByDelay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ok[map[string]any](t, b, http.StatusOK, http.MethodPut, "/workflows/wf-1/versions/3", map[string]any{"nodes": []any{}})
	body := kindBody("o1", "kind", "once", "delay_seconds", 600)
	res := upsert(t, b, body)
	at := t0.Add(10 * time.Minute)
	require.Equal(t, api.UpsertResponse{ScheduleID: "o1", NextRunAt: &at, Created: true, Changed: true, State: api.StateActive}, res)
	d := ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/o1", nil)
	require.Equal(t, model.KindOnce, d.Kind)
	require.Equal(t, &at, d.FireAt)
	require.Equal(t, int64(600), d.DelaySeconds)
	require.Equal(t, "UTC", d.Timezone)
	require.Equal(t, model.CatchupLatest, d.CatchupPolicy, "a once schedule that names no catch-up fires late rather than never")
	require.Equal(t, []time.Time{at}, d.Preview)
	require.Equal(t, api.StateActive, d.State)

	// The same body later: nothing moves.
	b.clock.Advance(3 * time.Minute)
	res = upsert(t, b, body)
	require.False(t, res.Changed)
	require.Equal(t, &at, res.NextRunAt)

	// Another delay counts from now.
	body["delay_seconds"] = 900
	res = upsert(t, b, body)
	require.True(t, res.Changed)
	at = t0.Add(18 * time.Minute)
	require.Equal(t, &at, res.NextRunAt)
	res = upsert(t, b, body)
	require.False(t, res.Changed, "the new delay is kept as the first was")

	key := b.commitRun(t, "o1")
	require.Equal(t, model.IdempotencyKey("o1", at), key)
	d = ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/o1", nil)
	require.Equal(t, api.StateCompleted, d.State)
	require.Nil(t, d.NextRunAt)
	require.Empty(t, d.Preview)
	require.Equal(t, key, d.LastRun.IdempotencyKey)
	require.Equal(t, model.RunEnqueued, d.LastRun.Status)
	ok[model.Run](t, b, http.StatusOK, http.MethodPost, "/runs/"+key+"/status", map[string]any{"status": "SUCCESS"})
	d = ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/o1", nil)
	require.Equal(t, model.RunSuccess, d.LastRun.Status)
	list := ok[api.ScheduleList](t, b, http.StatusOK, http.MethodGet, "/schedules", nil)
	require.Len(t, list.Schedules, 1)
	require.Equal(t, api.StateCompleted, list.Schedules[0].State)
	require.Nil(t, list.Schedules[0].NextRunAt)

	// The same body after the run: unchanged, still completed, and no
	// tick plans it again.
	b.clock.Advance(time.Hour)
	res = upsert(t, b, body)
	require.False(t, res.Changed)
	require.Equal(t, api.StateCompleted, res.State)
	require.Nil(t, res.NextRunAt)
	b.tick(t, "o1")
	queuetest.RequireRuns(t, b.store, "o1", model.RunSuccess, "2026-01-01T00:18:00Z")

	// Another body that keeps the time (a new workflow version) does not
	// bring it back either.
	body["version"] = 4
	res = upsert(t, b, body)
	require.True(t, res.Changed)
	require.Equal(t, api.StateCompleted, res.State)

	// A new fire_at fires it again, at that time.
	delete(body, "delay_seconds")
	body["fire_at"] = "2026-01-01T02:00:00Z"
	res = upsert(t, b, body)
	require.True(t, res.Changed)
	require.Equal(t, api.StateActive, res.State)
	again := time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC)
	require.Equal(t, &again, res.NextRunAt)
	d = ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/o1", nil)
	require.Zero(t, d.DelaySeconds, "a schedule given fire_at keeps no delay")
	b.commitRun(t, "o1")
	queuetest.RequireRuns(t, b.store, "o1", "", "2026-01-01T00:18:00Z", "2026-01-01T02:00:00Z")
}

// TestOnceByFireAt: fire_at is rounded up to the second; after the run,
// the same fire_at (now past), in any offset, is the stored time and is
// accepted unchanged rather than refused as past.
func TestOnceByFireAt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := kindBody("o2", "kind", "once", "fire_at", "2026-01-01T10:00:00.25Z", "overlap_policy", "allow")
	res := upsert(t, b, body)
	at := time.Date(2026, 1, 1, 10, 0, 1, 0, time.UTC)
	require.Equal(t, &at, res.NextRunAt)
	d := ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/o2", nil)
	require.Equal(t, &at, d.FireAt)
	require.Zero(t, d.DelaySeconds)

	b.commitRun(t, "o2")
	b.clock.Advance(time.Second)
	require.Equal(t, api.StateCompleted, ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/o2", nil).State)
	for _, fireAt := range []string{"2026-01-01T10:00:00.25Z", "2026-01-01T12:00:00.5+02:00"} {
		body["fire_at"] = fireAt
		res = upsert(t, b, body)
		require.False(t, res.Changed, fireAt)
		require.Equal(t, api.StateCompleted, res.State)
	}
	b.clock.Advance(time.Hour)
	b.tick(t, "o2")
	queuetest.RequireRuns(t, b.store, "o2", model.RunEnqueued, "2026-01-01T10:00:01Z")

	// Another past time is refused, as on creation.
	body["fire_at"] = "2026-01-01T10:30:00Z"
	requireError(t, b.do(t, http.MethodPost, "/schedules/upsert", body), http.StatusBadRequest, api.CodeInvalidArgument,
		"fire_at: fire_at 2026-01-01T10:30:00Z is not in the future")
}

// TestOnceMissedFiresLate: a once schedule whose time passed while no
// scheduler ran fires when one comes back (catch-up latest, its default);
// under catch-up none it is dropped (its record SKIPPED, catchup_dropped)
// and completes without a run.
func TestOnceMissedFiresLate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	upsert(t, b, kindBody("late", "kind", "once", "delay_seconds", 60))
	none := kindBody("none", "kind", "once", "delay_seconds", 60, "catchup_policy", "none")
	upsert(t, b, none)
	b.clock.Advance(time.Hour)
	b.tick(t, "late")
	b.tick(t, "none")
	queuetest.RequireRuns(t, b.store, "late", model.RunEnqueued, "2026-01-01T00:01:00Z")
	dropped := queuetest.RequireRuns(t, b.store, "none", model.RunSkipped, "2026-01-01T00:01:00Z")
	require.Equal(t, model.ReasonCatchupDropped, dropped[0].Reason)
	for _, id := range []string{"late", "none"} {
		require.Equal(t, api.StateCompleted, ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/"+id, nil).State, id)
	}
}

// TestEvery: an every schedule fires at its anchor (its creation, to the
// second) plus k intervals; repeating the body keeps the anchor, as does
// a pause and resume; a new interval anchors anew.
func TestEvery(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.clock.Set(t0.Add(1500 * time.Millisecond))
	body := kindBody("e1", "kind", "every", "every_seconds", 600, "overlap_policy", "allow")
	res := upsert(t, b, body)
	anchor := t0.Add(time.Second)
	first := anchor.Add(10 * time.Minute)
	require.Equal(t, &first, res.NextRunAt)
	d := ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/e1", nil)
	require.Equal(t, model.KindEvery, d.Kind)
	require.Equal(t, int64(600), d.EverySeconds)
	require.Equal(t, anchor, d.Anchor)
	require.Equal(t, "UTC", d.Timezone)
	require.Equal(t, model.CatchupNone, d.CatchupPolicy, "every keeps the configured default")
	require.Len(t, d.Preview, 5)
	for i, p := range d.Preview {
		require.Equal(t, anchor.Add(time.Duration(i+1)*10*time.Minute), p)
	}

	for k := 1; k <= 3; k++ {
		require.Equal(t, model.IdempotencyKey("e1", anchor.Add(time.Duration(k)*10*time.Minute)), b.commitRun(t, "e1"))
		b.clock.Advance(7 * time.Second)
		res = upsert(t, b, body)
		require.False(t, res.Changed, "the same body keeps the anchor")
	}
	queuetest.RequireRuns(t, b.store, "e1", model.RunEnqueued,
		"2026-01-01T00:10:01Z", "2026-01-01T00:20:01Z", "2026-01-01T00:30:01Z")

	// Paused past two fire times and resumed: back on the same grid.
	ok[api.ScheduleView](t, b, http.StatusOK, http.MethodPost, "/schedules/pause", map[string]any{"schedule_id": "e1", "paused": true})
	b.clock.Set(anchor.Add(55 * time.Minute))
	v := ok[api.ScheduleView](t, b, http.StatusOK, http.MethodPost, "/schedules/pause", map[string]any{"schedule_id": "e1", "paused": false})
	next := anchor.Add(time.Hour)
	require.Equal(t, &next, v.NextRunAt)

	// A new interval anchors at now.
	b.clock.Set(t0.Add(time.Hour + 3*time.Second))
	body["every_seconds"] = 60
	res = upsert(t, b, body)
	require.True(t, res.Changed)
	next = t0.Add(time.Hour + 63*time.Second)
	require.Equal(t, &next, res.NextRunAt)
}

// TestKindChange: a schedule upserted as another kind drops the old
// kind's fields and fires by the new timing only.
func TestKindChange(t *testing.T) {
	t.Parallel()
	b := setup(t)
	upsert(t, b, schedule("k1"))
	res := upsert(t, b, kindBody("k1", "kind", "once", "delay_seconds", 30))
	require.True(t, res.Changed)
	at := t0.Add(30 * time.Second)
	require.Equal(t, &at, res.NextRunAt)
	d := ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/k1", nil)
	require.Equal(t, model.KindOnce, d.Kind)
	require.Empty(t, d.CronExpr)
	require.Empty(t, d.Dialect)
	raw := b.do(t, http.MethodGet, "/schedules/k1", nil).Body.String()
	require.NotContains(t, raw, "cron_expr")
	require.Contains(t, raw, `"kind":"once"`)
	require.Contains(t, raw, `"delay_seconds":30`)
	require.Contains(t, raw, `"fire_at":"2026-01-01T00:00:30Z"`)

	// An explicit "kind": "cron" is the default's body.
	upsert(t, b, schedule("k2"))
	body := schedule("k2")
	body["kind"] = "cron"
	require.False(t, upsert(t, b, body).Changed)
}

// TestOncePausedPastItsTime: a once schedule paused past its time never
// fires; resuming it leaves it completed.
func TestOncePausedPastItsTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	upsert(t, b, kindBody("p1", "kind", "once", "delay_seconds", 60, "paused", true))
	b.clock.Advance(time.Hour)
	b.tick(t, "p1")
	v := ok[api.ScheduleView](t, b, http.StatusOK, http.MethodPost, "/schedules/pause", map[string]any{"schedule_id": "p1", "paused": false})
	require.Equal(t, api.StateCompleted, v.State)
	require.Nil(t, v.NextRunAt)
	b.tick(t, "p1")
	queuetest.RequireRuns(t, b.store, "p1", "")
}

// TestOpenAPIUpsertFieldsAreTheAcceptedOnes: every field the OpenAPI
// document gives UpsertRequest is one upsert knows, so the document and
// the strict decoder cannot drift apart on the kinds' fields.
func TestOpenAPIUpsertFieldsAreTheAcceptedOnes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var doc struct {
		Components struct {
			Schemas struct {
				UpsertRequest struct {
					Properties map[string]any `json:"properties"`
				} `json:"UpsertRequest"`
			} `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(api.OpenAPI(), &doc))
	props := doc.Components.Schemas.UpsertRequest.Properties
	for _, f := range []string{"kind", "delay_seconds", "fire_at", "every_seconds"} {
		require.Contains(t, props, f)
	}
	for f := range props {
		msg := b.do(t, http.MethodPost, "/schedules/upsert", map[string]any{f: nil}).Body.String()
		require.NotContains(t, msg, `unknown field \"`+f+`\"`, "documented field %s is refused as unknown", f)
	}
	msg := b.do(t, http.MethodPost, "/schedules/upsert", map[string]any{"interval": 5}).Body.String()
	require.Contains(t, msg, `unknown field \"interval\"`)
}
