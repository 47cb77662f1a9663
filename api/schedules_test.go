package api_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api"
	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/scheduler"
)

func upsert(t *testing.T, b *testBundle, body any) api.UpsertResponse {
	t.Helper()
	return ok[api.UpsertResponse](t, b, http.StatusOK, http.MethodPost, "/schedules/upsert", body)
}

func TestUpsertAndGet(t *testing.T) {
	t.Parallel()
	b := setup(t)

	ok[map[string]any](t, b, http.StatusOK, http.MethodPut, "/workflows/wf-1/versions/3", map[string]any{"nodes": []any{}})
	res := upsert(t, b, schedule("s1"))
	first := time.Date(2026, 1, 1, 14, 0, 0, 0, time.UTC)
	require.Equal(t, api.UpsertResponse{ScheduleID: "s1", NextRunAt: &first, Created: true, Changed: true, State: api.StateActive}, res)

	got := ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/s1", nil)
	require.Equal(t, "s1", got.ID)
	require.Equal(t, model.KindCron, got.Kind)
	require.Equal(t, model.TargetWorkflow, got.Target)
	require.Equal(t, "wf-1", got.WorkflowID)
	require.Equal(t, model.Version("3"), got.Version)
	require.Equal(t, "u-1", got.UserID)
	require.Equal(t, "0 9 * * *", got.CronExpr)
	require.Equal(t, model.DialectStandard, got.Dialect)
	require.Equal(t, "America/New_York", got.Timezone)
	require.Zero(t, got.JitterMs)
	require.Equal(t, model.OverlapSkip, got.OverlapPolicy, "the cron specification's default")
	require.Equal(t, model.CatchupNone, got.CatchupPolicy, "the cron specification's default")
	require.Equal(t, t0, got.CreatedAt)
	require.Equal(t, t0, got.UpdatedAt)
	require.False(t, got.Paused)
	require.Equal(t, &first, got.NextRunAt)
	require.Equal(t, api.StateActive, got.State)
	require.Len(t, got.Preview, 5)
	for i, p := range got.Preview {
		require.Equal(t, first.AddDate(0, 0, i), p)
	}
	require.Empty(t, got.RecentRuns)
	require.NotNil(t, got.RecentRuns)

	// The raw body uses the contract's names.
	raw := b.do(t, http.MethodGet, "/schedules/s1", nil).Body.String()
	for _, k := range []string{`"schedule_id":"s1"`, `"next_run_at":"2026-01-01T14:00:00Z"`, `"state":"active"`,
		`"preview":["2026-01-01T14:00:00Z",`, `"recent_runs":[]`, `"cron_expr":"0 9 * * *"`, `"version":"3"`} {
		require.Contains(t, raw, k)
	}

	requireError(t, b.do(t, http.MethodGet, "/schedules/nope", nil), http.StatusNotFound, api.CodeNotFound, "schedule nope: not found")
	requireError(t, b.do(t, http.MethodGet, "/schedules/s1?runs=101", nil), http.StatusBadRequest, api.CodeInvalidArgument, "runs: must be an integer between 0 and 100")
	requireError(t, b.do(t, http.MethodGet, "/schedules/s1?runs=x", nil), http.StatusBadRequest, api.CodeInvalidArgument, "runs:")
}

// TestPathIDsAreDecodedOnce: an id is decoded exactly once whether or not
// the request path needs a raw form. "x%41" (sent as x%2541) must not be
// mistaken for "xA", and "a/b" (sent as a%2Fb) must reach its schedule.
func TestPathIDsAreDecodedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, id := range []string{"xA", "x%41", "a/b", "a%2Fb", "100%"} {
		upsert(t, b, schedule(id))
	}
	for _, id := range []string{"xA", "x%41", "a/b", "a%2Fb", "100%"} {
		got := ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/"+url.PathEscape(id), nil)
		require.Equal(t, id, got.ID)
	}
	require.Equal(t, http.StatusNoContent, b.do(t, http.MethodDelete, "/schedules/"+url.PathEscape("x%41"), nil).Code)
	requireError(t, b.do(t, http.MethodGet, "/schedules/x%2541", nil), http.StatusNotFound, api.CodeNotFound, "schedule x%41: not found")
	require.Equal(t, "xA", ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/xA", nil).ID)
}

// TestStrictInput: a field chronos does not know is a 400 naming it, with
// the field meant where one is close, and one answer names every field at
// fault; nothing is written.
func TestStrictInput(t *testing.T) {
	t.Parallel()
	b := setup(t)

	body := schedule("s1")
	body["tz"] = "America/New_York"
	got := ok[api.ErrorBody](t, b, http.StatusBadRequest, http.MethodPost, "/schedules/upsert", body).Error
	require.Equal(t, api.CodeInvalidArgument, got.Code)
	require.Equal(t, `unknown field "tz" (did you mean "timezone"?)`, got.Message)

	body = schedule("s1")
	body["color"] = "red"
	body["jitter_ms"] = -5
	body["cron_expr"] = "61 * * * *"
	body["overlap_policy"] = "never"
	got = ok[api.ErrorBody](t, b, http.StatusBadRequest, http.MethodPost, "/schedules/upsert", body).Error
	var fields []string
	for _, d := range got.Details {
		fields = append(fields, d.Field)
	}
	require.Equal(t, []string{"color", "jitter_ms", "overlap_policy", "cron_expr"}, fields, got.Message)
	require.Contains(t, got.Message, `unknown field "color"; jitter_ms: must be between 0 and`)
	ok[api.ErrorBody](t, b, http.StatusNotFound, http.MethodGet, "/schedules/s1", nil)

	for _, tc := range []struct {
		path string
		body map[string]any
		want string
	}{
		{"/schedules/pause", map[string]any{"schedule_id": "s1", "pause": true},
			`unknown field "pause" (did you mean "paused"?); paused: is required`},
		{"/run-launcher/start", map[string]any{"workflow_id": "wf", "version": 1, "user_id": "u",
			"scheduled_for": "2026-01-01T00:00:00Z", "idempotency": "k"},
			`unknown field "idempotency" (did you mean "idempotency_key"?)`},
		{"/runs/k1/status", map[string]any{"status": "SUCCESS", "runid": "r"},
			`unknown field "runid" (did you mean "run_id"?)`},
	} {
		got := ok[api.ErrorBody](t, b, http.StatusBadRequest, http.MethodPost, tc.path, tc.body).Error
		require.Equal(t, tc.want, got.Message, tc.path)
	}
}

// TestUpsertPausedAndWarnings: an upsert without "paused" keeps the stored
// state (an operator's pause survives the next deploy), one with it sets
// it; a workflow version not registered yet is accepted with a warning.
func TestUpsertPausedAndWarnings(t *testing.T) {
	t.Parallel()
	b := setup(t)

	res := upsert(t, b, schedule("s1"))
	require.Equal(t, []string{"workflow wf-1 version 3 is not registered: its runs will fail until it is (PUT /workflows/wf-1/versions/3)"}, res.Warnings)
	ok[map[string]any](t, b, http.StatusOK, http.MethodPut, "/workflows/wf-1/versions/3", map[string]any{"nodes": []any{}})
	require.Empty(t, upsert(t, b, schedule("s1")).Warnings, "registered now")

	ok[detail](t, b, http.StatusOK, http.MethodPost, "/schedules/pause", map[string]any{"schedule_id": "s1", "paused": true})
	body := schedule("s1")
	body["cron_expr"] = "0 10 * * *"
	res = upsert(t, b, body)
	require.Equal(t, api.StatePaused, res.State, "an upsert without paused keeps the pause")
	require.True(t, res.Changed)
	require.Nil(t, res.NextRunAt)

	body["paused"] = false
	res = upsert(t, b, body)
	require.Equal(t, api.StateActive, res.State)
	require.Equal(t, time.Date(2026, 1, 1, 15, 0, 0, 0, time.UTC), *res.NextRunAt, "10:00 New York")

	body["paused"] = true
	res = upsert(t, b, body)
	require.Equal(t, api.StatePaused, res.State)
	require.True(t, res.Changed)
	res = upsert(t, b, body)
	require.Equal(t, api.StatePaused, res.State)
	require.False(t, res.Changed, "the same body twice changes nothing")

	body = schedule("s2")
	body["paused"] = true
	res = upsert(t, b, body)
	require.True(t, res.Created)
	require.Equal(t, api.StatePaused, res.State, "created paused")
	require.Equal(t, api.StatePaused, ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/s2", nil).State)
}

func TestUpsertOptionalFields(t *testing.T) {
	t.Parallel()
	b := setup(t)

	body := schedule("s1")
	body["dialect"] = "posix"
	body["cron_expr"] = "15 6 * * 1-5"
	body["timezone"] = "Europe/Berlin"
	body["start_at"] = "2026-02-01T00:00:00+01:00"
	body["end_at"] = "2026-03-01T00:00:00Z"
	body["jitter_ms"] = 2500
	body["overlap_policy"] = "skip"
	body["catchup_policy"] = "latest"
	body["version"] = "v2.1"
	res := upsert(t, b, body)
	require.Equal(t, time.Date(2026, 2, 2, 5, 15, 0, 0, time.UTC), *res.NextRunAt) // Monday 06:15 CET

	got := ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/s1", nil)
	require.Equal(t, model.DialectPosix, got.Dialect)
	require.Equal(t, time.Date(2026, 1, 31, 23, 0, 0, 0, time.UTC), *got.StartAt)
	require.Equal(t, time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), *got.EndAt)
	require.EqualValues(t, 2500, got.JitterMs)
	require.Equal(t, model.OverlapSkip, got.OverlapPolicy)
	require.Equal(t, model.CatchupLatest, got.CatchupPolicy)
	require.Equal(t, model.Version("v2.1"), got.Version)

	// null means absent; an omitted timezone is UTC.
	body = schedule("s2")
	body["timezone"], body["jitter_ms"], body["start_at"] = nil, nil, nil
	res = upsert(t, b, body)
	require.Equal(t, time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC), *res.NextRunAt)
	got = ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/s2", nil)
	require.Equal(t, "UTC", got.Timezone)
}

func TestUpsertGeneratesID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := schedule("")
	delete(body, "schedule_id")
	a := upsert(t, b, body)
	c := upsert(t, b, body)
	require.Regexp(t, regexp.MustCompile(`^sch_[0-9a-f]{32}$`), a.ScheduleID)
	require.NotEqual(t, a.ScheduleID, c.ScheduleID)
	require.True(t, a.Created)
	ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/"+a.ScheduleID, nil)
}

func TestUpsertIsIdempotent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	upsert(t, b, schedule("s1"))
	before := ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/s1", nil)

	b.clock.Advance(time.Hour)
	res := upsert(t, b, schedule("s1"))
	require.False(t, res.Created)
	require.False(t, res.Changed)
	require.Equal(t, before.NextRunAt, res.NextRunAt)
	after := ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/s1", nil)
	require.Equal(t, before.ScheduleRecord, after.ScheduleRecord)
	require.Equal(t, t0, after.UpdatedAt)

	// A real change is written, at the clock's now.
	body := schedule("s1")
	body["user_id"] = "u-2"
	res = upsert(t, b, body)
	require.False(t, res.Created)
	require.True(t, res.Changed)
	after = ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/s1", nil)
	require.Equal(t, "u-2", after.UserID)
	require.Equal(t, t0.Add(time.Hour), after.UpdatedAt)
	require.Equal(t, t0, after.CreatedAt)
}

func TestUpsertKeepsRunHistory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	upsert(t, b, schedule("s1"))
	key := b.commitRun(t, "s1")
	require.Equal(t, model.IdempotencyKey("s1", time.Date(2026, 1, 1, 14, 0, 0, 0, time.UTC)), key)

	body := schedule("s1")
	body["cron_expr"] = "0 10 * * *"
	res := upsert(t, b, body)
	require.True(t, res.Changed)

	got := ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/s1", nil)
	require.Equal(t, "0 10 * * *", got.CronExpr)
	require.Len(t, got.RecentRuns, 1)
	require.Equal(t, key, got.RecentRuns[0].IdempotencyKey)
	require.Equal(t, model.RunEnqueued, got.RecentRuns[0].Status)

	runs := ok[api.RunList](t, b, http.StatusOK, http.MethodGet, "/schedules/s1/runs", nil)
	require.Len(t, runs.Runs, 1)
	run := ok[model.Run](t, b, http.StatusOK, http.MethodGet, "/runs/"+key, nil)
	require.Equal(t, "s1", run.ScheduleID)
	require.Equal(t, model.SourceSchedule, run.Source)
}

func TestUpsertValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	before := b.keys(t)

	with := func(k string, v any) map[string]any {
		body := schedule("bad")
		if v == nil {
			delete(body, k)
		} else {
			body[k] = v
		}
		return body
	}
	both := func(kv ...any) map[string]any {
		body := schedule("bad")
		for i := 0; i < len(kv); i += 2 {
			body[kv[i].(string)] = kv[i+1]
		}
		return body
	}
	for _, tc := range []struct {
		name string
		body any
		want string
	}{
		{"Empty", "", "body: is empty, want a JSON object"},
		{"NotJSON", `{"schedule_id": "bad",`, "body: invalid JSON"},
		{"TrailingGarbage", `{"schedule_id": "bad"} x`, "body: invalid JSON"},
		{"Array", `[{"schedule_id": "bad"}]`, "body: must be a JSON object"},
		{"String", `"hello"`, "body: must be a JSON object"},
		{"IDType", with("schedule_id", 7), "schedule_id: must be a string"},
		{"IDSpace", with("schedule_id", "has space"), "schedule_id: must not contain whitespace"},
		{"IDLong", with("schedule_id", strings.Repeat("x", 201)), "schedule_id: longer than 200 bytes"},
		{"IDEmpty", with("schedule_id", ""), "schedule_id: is empty: omit it to have one generated"},
		{"WorkflowMissing", with("workflow_id", nil), "workflow_id: is required"},
		{"WorkflowBrace", with("workflow_id", "a}:b"), "workflow_id: must not contain '}'"},
		{"IDUnicodeSpace", with("schedule_id", "a\u00a0b"), "schedule_id: must not contain whitespace or control characters"},
		{"IDUnicodeControl", with("schedule_id", "a\u0085b"), "schedule_id: must not contain whitespace or control characters"},
		{"IDLineSeparator", with("schedule_id", "a\u2028b"), "schedule_id: must not contain whitespace or control characters"},
		{"EndAtZeroTime", with("end_at", "0001-01-01T00:00:00Z"), "end_at: 0001-01-01T00:00:00Z is not a usable time"},
		{"WorkflowType", with("workflow_id", []string{"a"}), "workflow_id: must be a string"},
		{"VersionMissing", with("version", nil), "version: is required"},
		{"VersionType", with("version", true), "version: must be a string or a number"},
		{"UserMissing", with("user_id", nil), "user_id: is required"},
		{"UserType", with("user_id", 1), "user_id: must be a string"},
		{"CronMissing", with("cron_expr", nil), "cron_expr: is required"},
		{"CronBlank", with("cron_expr", "  "), "cron_expr: is required"},
		{"CronInvalid", with("cron_expr", "61 * * * *"), `cron_expr: invalid cron expression "61 * * * *": minute field`},
		{"CronType", with("cron_expr", 5), "cron_expr: must be a string"},
		{"Timezone", with("timezone", "Mars/Base"), `timezone: unknown time zone "Mars/Base"`},
		{"TimezoneType", with("timezone", 2), "timezone: must be a string"},
		{"Dialect", with("dialect", "quartz"), `dialect: unknown dialect "quartz"`},
		{"PosixStep", with("dialect", "posix"), ""}, // placeholder replaced below
		{"StartAtFormat", with("start_at", "yesterday"), `start_at: invalid RFC 3339 time "yesterday"`},
		{"StartAtType", with("start_at", 1767225600), "start_at: must be an RFC 3339 time string"},
		{"EndAtPastYear9999", with("end_at", "9999-12-31T23:59:59-05:00"), `end_at: "9999-12-31T23:59:59-05:00" is outside years 1 to 9999 in UTC`},
		{"StartAtBeforeYear1", with("start_at", "0000-12-31T23:00:00Z"), `start_at: "0000-12-31T23:00:00Z" is outside years 1 to 9999 in UTC`},
		{"CronTooLong", with("cron_expr", "0 9 * * *"+strings.Repeat(" ", model.MaxCronLen)), "cron_expr: cron expression longer than 1024 bytes"},
		{"EndAtBeforeStart", both("start_at", "2026-02-01T00:00:00Z", "end_at", "2026-01-01T00:00:00Z"), "end_at: is before start_at"},
		{"JitterNegative", with("jitter_ms", -1), "jitter_ms: must be between 0 and 86400000"},
		{"JitterTooBig", with("jitter_ms", model.MaxJitterMs+1), "jitter_ms: must be between 0 and 86400000"},
		{"JitterFraction", with("jitter_ms", 1.5), "jitter_ms: must be an integer"},
		{"JitterString", with("jitter_ms", "5"), "jitter_ms: must be an integer"},
		{"Overlap", with("overlap_policy", "never"), `overlap_policy: unknown overlap_policy "never"`},
		{"Catchup", with("catchup_policy", "all"), `catchup_policy: unknown catchup_policy "all"`},
		{"CatchupType", with("catchup_policy", false), "catchup_policy: must be a string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "PosixStep" {
				tc.body = both("dialect", "posix", "cron_expr", "*/5 * * * *")
				tc.want = `cron_expr: Invalid cron expression "*/5 * * * *": minute field`
			}
			requireError(t, b.do(t, http.MethodPost, "/schedules/upsert", tc.body), http.StatusBadRequest, api.CodeInvalidArgument, tc.want)
			require.ElementsMatch(t, before, b.keys(t), "a rejected upsert wrote to Redis")
			requireError(t, b.do(t, http.MethodGet, "/schedules/bad", nil), http.StatusNotFound, api.CodeNotFound, "")
		})
	}

	// A rejected update leaves the stored schedule as it was.
	upsert(t, b, schedule("s1"))
	stored := ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/s1", nil)
	body := schedule("s1")
	body["cron_expr"] = "0 10 * * *"
	body["timezone"] = "Mars/Base"
	requireError(t, b.do(t, http.MethodPost, "/schedules/upsert", body), http.StatusBadRequest, api.CodeInvalidArgument, "timezone:")
	require.Equal(t, stored.ScheduleRecord, ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/s1", nil).ScheduleRecord)
}

func TestUpsertCompleted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := schedule("s1")
	body["end_at"] = "2025-06-01T00:00:00Z"
	res := upsert(t, b, body)
	require.Nil(t, res.NextRunAt)
	require.Equal(t, api.StateCompleted, res.State)
	got := ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/s1", nil)
	require.Equal(t, api.StateCompleted, got.State)
	require.Nil(t, got.NextRunAt)
	require.Empty(t, got.Preview)
	require.Contains(t, b.do(t, http.MethodGet, "/schedules/s1", nil).Body.String(), `"preview":[]`)
}

func TestPause(t *testing.T) {
	t.Parallel()
	b := setup(t)
	upsert(t, b, schedule("s1"))

	got := ok[api.ScheduleView](t, b, http.StatusOK, http.MethodPost, "/schedules/pause", map[string]any{"schedule_id": "s1", "paused": true})
	require.Equal(t, api.StatePaused, got.State)
	require.True(t, got.Paused)
	require.Nil(t, got.NextRunAt)
	d := ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/s1", nil)
	require.Equal(t, api.StatePaused, d.State)
	require.Empty(t, d.Preview)

	// Pausing twice is fine; an update keeps the pause.
	ok[api.ScheduleView](t, b, http.StatusOK, http.MethodPost, "/schedules/pause", map[string]any{"schedule_id": "s1", "paused": true})
	body := schedule("s1")
	body["cron_expr"] = "0 10 * * *"
	res := upsert(t, b, body)
	require.Equal(t, api.StatePaused, res.State)
	require.Nil(t, res.NextRunAt)

	// Resuming continues after now: the paused days are not caught up.
	b.clock.Set(time.Date(2026, 1, 5, 16, 0, 0, 0, time.UTC))
	got = ok[api.ScheduleView](t, b, http.StatusOK, http.MethodPost, "/schedules/pause", map[string]any{"schedule_id": "s1", "paused": false})
	require.Equal(t, api.StateActive, got.State)
	require.False(t, got.Paused)
	require.Equal(t, time.Date(2026, 1, 6, 15, 0, 0, 0, time.UTC), *got.NextRunAt)
	d = ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/s1", nil)
	require.Equal(t, time.Date(2026, 1, 6, 15, 0, 0, 0, time.UTC), d.Preview[0])

	requireError(t, b.do(t, http.MethodPost, "/schedules/pause", map[string]any{"schedule_id": "nope", "paused": true}),
		http.StatusNotFound, api.CodeNotFound, "schedule nope: not found")
	before := b.keys(t)
	for _, tc := range []struct {
		body any
		want string
	}{
		{map[string]any{"schedule_id": "s1"}, "paused: is required"},
		{map[string]any{"schedule_id": "s1", "paused": nil}, "paused: is required"},
		{map[string]any{"schedule_id": "s1", "paused": "yes"}, "paused: must be a boolean"},
		{map[string]any{"schedule_id": "s1", "paused": 1}, "paused: must be a boolean"},
		{map[string]any{"paused": true}, "schedule_id: is required"},
		{`[]`, "body: must be a JSON object"},
	} {
		requireError(t, b.do(t, http.MethodPost, "/schedules/pause", tc.body), http.StatusBadRequest, api.CodeInvalidArgument, tc.want)
	}
	require.ElementsMatch(t, before, b.keys(t))
	require.Equal(t, api.StateActive, ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/s1", nil).State)
}

func TestDelete(t *testing.T) {
	t.Parallel()
	b := setup(t)
	upsert(t, b, schedule("s1"))
	key := b.commitRun(t, "s1")

	rec := b.do(t, http.MethodDelete, "/schedules/s1", nil)
	require.Equal(t, http.StatusNoContent, rec.Code)
	require.Empty(t, rec.Body.String())

	requireError(t, b.do(t, http.MethodGet, "/schedules/s1", nil), http.StatusNotFound, api.CodeNotFound, "schedule s1: not found")
	requireError(t, b.do(t, http.MethodGet, "/schedules/s1/runs", nil), http.StatusNotFound, api.CodeNotFound, "")
	requireError(t, b.do(t, http.MethodDelete, "/schedules/s1", nil), http.StatusNotFound, api.CodeNotFound, "schedule s1: not found")
	// Its runs stay readable.
	ok[model.Run](t, b, http.StatusOK, http.MethodGet, "/runs/"+key, nil)
	require.Empty(t, ok[api.ScheduleList](t, b, http.StatusOK, http.MethodGet, "/schedules", nil).Schedules)

	// Created again under the same id (a pipeline that deletes and
	// re-registers), it starts a history of its own, which does not
	// expire with the deleted one's.
	upsert(t, b, schedule("s1"))
	newKey := b.commitRun(t, "s1")
	runs := ok[api.RunList](t, b, http.StatusOK, http.MethodGet, "/schedules/s1/runs", nil).Runs
	require.Len(t, runs, 1)
	require.Equal(t, newKey, runs[0].IdempotencyKey)
	ctx := context.Background()
	for _, k := range b.keys(t) {
		if strings.Contains(k, "runs:s1") || strings.HasSuffix(k, newKey) {
			ttl, err := b.rdb.TTL(ctx, k).Result()
			require.NoError(t, err)
			require.Equal(t, time.Duration(-1), ttl, "%s expires", k)
		}
	}
	ok[model.Run](t, b, http.StatusOK, http.MethodGet, "/runs/"+key, nil)
}

func TestListSchedules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 137
	want := map[string]bool{}
	for i := range n {
		id := fmt.Sprintf("s%03d", i)
		want[id] = true
		upsert(t, b, schedule(id))
	}
	ok[api.ScheduleView](t, b, http.StatusOK, http.MethodPost, "/schedules/pause", map[string]any{"schedule_id": "s007", "paused": true})

	seen := map[string]int{}
	cursor, pages := "", 0
	for {
		page := ok[api.ScheduleList](t, b, http.StatusOK, http.MethodGet, "/schedules?limit=7&cursor="+cursor, nil)
		pages++
		require.LessOrEqual(t, len(page.Schedules), 7)
		for _, s := range page.Schedules {
			seen[s.ID]++
			wantState := api.StateActive
			if s.ID == "s007" {
				wantState = api.StatePaused
			}
			require.Equal(t, wantState, s.State, s.ID)
			require.Equal(t, "wf-1", s.WorkflowID)
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
		require.Less(t, pages, 1000, "pagination does not end")
	}
	require.Len(t, seen, n)
	for id, c := range seen {
		require.True(t, want[id], id)
		require.Equal(t, 1, c, "schedule %s listed %d times", id, c)
	}
	require.Greater(t, pages, 1)

	all := ok[api.ScheduleList](t, b, http.StatusOK, http.MethodGet, "/schedules?limit=500", nil)
	require.Len(t, all.Schedules, n)
	require.Empty(t, all.NextCursor)
	require.Contains(t, b.do(t, http.MethodGet, "/schedules?limit=1", nil).Body.String(), `"next_cursor":"`)

	for _, q := range []string{"limit=0", "limit=501", "limit=x"} {
		requireError(t, b.do(t, http.MethodGet, "/schedules?"+q, nil), http.StatusBadRequest, api.CodeInvalidArgument, "limit: must be an integer between 1 and 500")
	}
	for _, c := range []string{"garbage", "99:0:", "-1:0:", "1:x:", "1", "1:0", "1:0:!!", "1:0:YQ=="} {
		requireError(t, b.do(t, http.MethodGet, "/schedules?cursor="+c, nil), http.StatusBadRequest, api.CodeInvalidArgument, "cursor: invalid cursor")
	}
}

// A page boundary must not move when the scheduler changes scores between
// pages: every schedule present for the whole walk is listed once.
func TestListSchedulesWhileSchedulesFire(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{queue: &queue.Config{Shards: 1}})
	for id, expr := range map[string]string{"a": "1 0 * * *", "b": "2 0 * * *", "c": "3 0 * * *"} {
		body := schedule(id)
		body["cron_expr"], body["timezone"] = expr, "UTC"
		upsert(t, b, body)
	}
	seen := map[string]int{}
	page := ok[api.ScheduleList](t, b, http.StatusOK, http.MethodGet, "/schedules?limit=1", nil)
	require.Equal(t, "a", page.Schedules[0].ID)
	seen["a"]++
	b.commitRun(t, "a") // a fires: its score moves past b's and c's
	for page.NextCursor != "" {
		page = ok[api.ScheduleList](t, b, http.StatusOK, http.MethodGet, "/schedules?limit=1&cursor="+url.QueryEscape(page.NextCursor), nil)
		for _, s := range page.Schedules {
			seen[s.ID]++
		}
	}
	require.Equal(t, map[string]int{"a": 1, "b": 1, "c": 1}, seen)
}

// A client may change the page size between pages: no schedule is
// skipped (here a due set large enough to be scanned in batches).
func TestListSchedulesWithChangingLimits(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{queue: &queue.Config{Shards: 1}})
	const n = 400 // more than Redis's listpack limit: ZSCAN returns batches
	for i := range n {
		upsert(t, b, schedule(fmt.Sprintf("s%03d", i)))
	}
	seen := map[string]int{}
	for cursor := ""; ; {
		limit := 1
		if !strings.HasSuffix(cursor, ":") && cursor != "" {
			limit = 500 // the last page ended inside a ZSCAN batch
		}
		l := ok[api.ScheduleList](t, b, http.StatusOK, http.MethodGet,
			fmt.Sprintf("/schedules?limit=%d&cursor=%s", limit, url.QueryEscape(cursor)), nil)
		for _, s := range l.Schedules {
			seen[s.ID]++
		}
		if cursor = l.NextCursor; cursor == "" {
			break
		}
	}
	require.Len(t, seen, n)
	for id, c := range seen {
		require.Equal(t, 1, c, id)
	}
}

func TestListSchedulesEmpty(t *testing.T) {
	t.Parallel()
	b := setup(t)
	raw := b.do(t, http.MethodGet, "/schedules", nil).Body.String()
	require.JSONEq(t, `{"schedules": [], "next_cursor": ""}`, raw)
}

func TestListRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	upsert(t, b, schedule("s1"))
	var keys []string
	for range 3 {
		keys = append(keys, b.commitRun(t, "s1"))
	}

	runs := ok[api.RunList](t, b, http.StatusOK, http.MethodGet, "/schedules/s1/runs", nil)
	require.Len(t, runs.Runs, 3)
	require.Equal(t, keys[2], runs.Runs[0].IdempotencyKey, "newest first")
	require.Equal(t, time.Date(2026, 1, 3, 14, 0, 0, 0, time.UTC), runs.Runs[0].RunAt)

	runs = ok[api.RunList](t, b, http.StatusOK, http.MethodGet, "/schedules/s1/runs?limit=2", nil)
	require.Equal(t, []string{keys[2], keys[1]}, []string{runs.Runs[0].IdempotencyKey, runs.Runs[1].IdempotencyKey})

	d := ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/s1?runs=1", nil)
	require.Len(t, d.RecentRuns, 1)
	d = ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/s1?runs=0", nil)
	require.Empty(t, d.RecentRuns)
	require.Equal(t, time.Date(2026, 1, 4, 14, 0, 0, 0, time.UTC), *d.NextRunAt)

	upsert(t, b, schedule("s2"))
	require.Contains(t, b.do(t, http.MethodGet, "/schedules/s2/runs", nil).Body.String(), `"runs":[]`)

	for _, q := range []string{"limit=0", "limit=1001", "limit=-3"} {
		requireError(t, b.do(t, http.MethodGet, "/schedules/s1/runs?"+q, nil), http.StatusBadRequest, api.CodeInvalidArgument, "limit: must be an integer between 1 and 1000")
	}
	requireError(t, b.do(t, http.MethodGet, "/schedules/nope/runs", nil), http.StatusNotFound, api.CodeNotFound, "schedule nope: not found")
}

// start_at and end_at are stored in milliseconds: a finer start_at must
// not make the stored schedule skip a run the upsert answer promised.
func TestSubMillisecondWindowKeepsItsPromise(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.clock.Set(t0.Add(-time.Hour))
	body := schedule("subms")
	body["cron_expr"] = "0 0 * * *"
	body["timezone"] = "UTC"
	body["start_at"] = "2025-12-31T23:59:59.9995Z"
	body["end_at"] = "2026-01-03T00:00:00.0005Z"
	res := upsert(t, b, body)
	require.Equal(t, t0, *res.NextRunAt)
	d := ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/subms", nil)
	require.Equal(t, t0, *d.NextRunAt)
	require.Equal(t, t0, *d.StartAt, "start_at is rounded up to the millisecond")
	require.Equal(t, t0.Add(48*time.Hour), *d.EndAt, "end_at is rounded down to the millisecond")
	require.Equal(t, model.IdempotencyKey("subms", t0), b.commitRun(t, "subms"))
}

// A schedule whose last run is planned ahead (lookahead) but has not
// fired is still active, showing that run as next.
func TestScheduleIsNotCompletedBeforeItsLastRunFires(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{queue: &queue.Config{Lookahead: time.Minute}})
	body := schedule("last")
	body["cron_expr"] = "30 0 * * *"
	body["timezone"] = "UTC"
	body["end_at"] = "2026-01-01T00:31:00Z"
	body["overlap_policy"] = "allow" // only allow plans runs ahead
	upsert(t, b, body)
	b.clock.Set(t0.Add(29*time.Minute + 40*time.Second)) // the run at 00:30 is planned now
	s, err := scheduler.New(b.store, nil, nil, nil)
	require.NoError(t, err)
	require.NoError(t, s.TickShard(context.Background(), queue.ShardOf("last", b.store.Config().Shards)))
	_, err = b.store.GetScheduleRun(context.Background(), "last", model.IdempotencyKey("last", t0.Add(30*time.Minute)))
	require.NoError(t, err, "the 00:30 run is planned")

	d := ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/last", nil)
	require.Equal(t, api.StateActive, d.State)
	require.Equal(t, t0.Add(30*time.Minute), *d.NextRunAt)

	b.clock.Set(t0.Add(30*time.Minute + time.Second))
	d = ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/last", nil)
	require.Equal(t, api.StateCompleted, d.State)
	require.Nil(t, d.NextRunAt)
}

// A manual run scheduled far ahead (more than ~292 years, where
// time.Duration saturates) must still be started and readable.
func TestManualRunCenturiesAhead(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := ok[api.ManualStartResponse](t, b, http.StatusOK, http.MethodPost, "/run-launcher/start",
		manual("scheduled_for", "2400-01-01T00:00:00Z"))
	require.True(t, res.Started)
	got := ok[model.Run](t, b, http.StatusOK, http.MethodGet, "/runs/"+res.Run.IdempotencyKey, nil)
	require.Equal(t, model.RunEnqueued, got.Status)
}

// Times that would change meaning once stored to the millisecond are a
// 400 naming the field: a start_at just before the end of year 9999
// rounds up past what RFC 3339 can express (every listing holding it
// would fail); an end_at in year 1 truncates to the zero time, which
// Window reads as "no end" (the schedule would fire for ever).
func TestTimesThatCannotBeStoredAreRejected(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for field, at := range map[string]string{"start_at": "9999-12-31T23:59:59.9999Z", "end_at": "0001-01-01T00:00:00.0005Z"} {
		body := schedule("edge")
		body[field] = at
		rec := b.do(t, http.MethodPost, "/schedules/upsert", body)
		require.Equal(t, http.StatusBadRequest, rec.Code, "body: %s", rec.Body.String())
		require.Contains(t, rec.Body.String(), `"`+field+`: `)
	}
	require.Empty(t, ok[api.ScheduleList](t, b, http.StatusOK, http.MethodGet, "/schedules", nil).Schedules)
}

// end_at equal to start_at is allowed ("must not be before start_at"),
// also when both carry sub-millisecond digits.
func TestEqualSubMillisecondWindowIsAllowed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := schedule("eq")
	body["start_at"] = "2026-01-02T00:00:00.0005Z"
	body["end_at"] = "2026-01-02T00:00:00.0005Z"
	rec := b.do(t, http.MethodPost, "/schedules/upsert", body)
	require.Equal(t, http.StatusOK, rec.Code, "body: %s", rec.Body.String())
}

// walkSchedules lists every schedule limit at a time, calling between
// after the first page, and returns how often each id was listed.
func walkSchedules(t *testing.T, b *testBundle, limit int, between func()) map[string]int {
	t.Helper()
	seen := map[string]int{}
	path := fmt.Sprintf("/schedules?limit=%d", limit)
	page := ok[api.ScheduleList](t, b, http.StatusOK, http.MethodGet, path, nil)
	for first := true; ; first = false {
		for _, s := range page.Schedules {
			seen[s.ID]++
		}
		if first {
			between()
		}
		if page.NextCursor == "" {
			return seen
		}
		page = ok[api.ScheduleList](t, b, http.StatusOK, http.MethodGet, path+"&cursor="+url.QueryEscape(page.NextCursor), nil)
	}
}

// Schedules created during a walk "may or may not" be listed, but those
// present for the whole walk must be listed exactly once. Here the shard's
// due set grows past Redis's listpack limit between two pages.
func TestListSchedulesWhileAShardGrows(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{queue: &queue.Config{Shards: 1}})
	const n = 100 // listpack: ZSCAN returns the whole set at once
	for i := range n {
		upsert(t, b, schedule(fmt.Sprintf("s%03d", i)))
	}
	seen := walkSchedules(t, b, 10, func() {
		for i := range 1000 { // the set becomes a hash table
			upsert(t, b, schedule(fmt.Sprintf("new%03d", i)))
		}
	})
	for i := range n {
		id := fmt.Sprintf("s%03d", i)
		require.Equal(t, 1, seen[id], "schedule %s, present for the whole walk, listed %d times", id, seen[id])
	}
}

// As above, with the shard's hash table shrinking between two pages (most
// of its schedules deleted): Redis merges buckets, so a ZSCAN batch read
// again from the same cursor holds members it did not hold before. Every
// schedule present for the whole walk is listed; as with Redis SCAN, a
// shrinking table may list one twice.
func TestListSchedulesWhileAShardShrinks(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{queue: &queue.Config{Shards: 1}})
	const n, keepEvery = 4000, 20
	for i := range n {
		upsert(t, b, schedule(fmt.Sprintf("s%04d", i)))
	}
	seen := walkSchedules(t, b, 7, func() {
		for i := range n {
			if i%keepEvery != 0 {
				require.NoError(t, b.store.DeleteSchedule(context.Background(), fmt.Sprintf("s%04d", i)))
			}
		}
	})
	for i := 0; i < n; i += keepEvery {
		id := fmt.Sprintf("s%04d", i)
		require.Contains(t, []int{1, 2}, seen[id], "schedule %s, present for the whole walk, listed %d times", id, seen[id])
	}
}

// A cursor's left-over ids are checked as the server writes them (sorted,
// of the cursor's shard, bounded): a crafted one cannot list a schedule
// many times on one page.
func TestACraftedCursorIsRejected(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{queue: &queue.Config{Shards: 1}})
	upsert(t, b, schedule("a"))
	upsert(t, b, schedule("b"))
	for _, ids := range []string{strings.Repeat("a ", 500), "b a", strings.Repeat("x", 1025) /* one id, too long */} {
		cur := "0:e:" + base64.RawURLEncoding.EncodeToString([]byte(ids))
		requireError(t, b.do(t, http.MethodGet, "/schedules?limit=500&cursor="+url.QueryEscape(cur), nil),
			http.StatusBadRequest, api.CodeInvalidArgument, "cursor:")
	}
	cur := "0:e:" + base64.RawURLEncoding.EncodeToString([]byte("a b"))
	page := ok[api.ScheduleList](t, b, http.StatusOK, http.MethodGet, "/schedules?limit=500&cursor="+url.QueryEscape(cur), nil)
	require.Len(t, page.Schedules, 2)
}

// TestGetScheduleExplain: GET /schedules/:id says the schedule's timing in
// words, also while it is paused.
func TestGetScheduleExplain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	upsert(t, b, schedule("s1"))
	want := `"explain":"At 09:00, in America/New_York"`
	require.Contains(t, b.do(t, http.MethodGet, "/schedules/s1", nil).Body.String(), want)
	require.Equal(t, http.StatusOK, b.do(t, http.MethodPost, "/schedules/pause", map[string]any{"schedule_id": "s1", "paused": true}).Code)
	require.Contains(t, b.do(t, http.MethodGet, "/schedules/s1", nil).Body.String(), want)
}

// TestGetScheduleDSTNotes: GET /schedules/:id shows its preview with local
// times and the spring-forward time that does not fire, as /v1/preview.
func TestGetScheduleDSTNotes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := schedule("s1")
	s["cron_expr"] = "30 2 * * *"
	s["start_at"] = "2026-03-07T00:00:00Z"
	upsert(t, b, s)
	var got struct {
		Preview        []time.Time          `json:"preview"`
		PreviewTimes   []api.PreviewTime    `json:"preview_times"`
		PreviewSkipped []api.PreviewSkipped `json:"preview_skipped"`
	}
	require.NoError(t, json.Unmarshal(b.do(t, http.MethodGet, "/schedules/s1", nil).Body.Bytes(), &got))
	require.Len(t, got.Preview, 5)
	require.Len(t, got.PreviewTimes, 5)
	require.Equal(t, api.PreviewTime{At: "2026-03-07T07:30:00Z", Local: "2026-03-07T02:30:00-05:00"}, got.PreviewTimes[0])
	require.Equal(t, api.PreviewTime{At: "2026-03-09T06:30:00Z", Local: "2026-03-09T02:30:00-04:00"}, got.PreviewTimes[1])
	require.Equal(t, time.Date(2026, 3, 9, 6, 30, 0, 0, time.UTC), got.Preview[1])
	require.Equal(t, []api.PreviewSkipped{{Local: "2026-03-08T02:30:00", Reason: "dst_gap"}}, got.PreviewSkipped)
}
