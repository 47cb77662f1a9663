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
)

// TestPreviewDSTPolicy: /v1/preview's dst_policy moves the fire times and
// their notes around New York's 2026 clock changes.
func TestPreviewDSTPolicy(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ny := "America/New_York"
	for _, tc := range []struct {
		name, expr, after, policy string
		times                     []api.PreviewTime
		skipped                   []api.PreviewSkipped
	}{
		{
			name: "SkipIsTheDefault", expr: "30 2 * * *", after: "2026-03-07T12:00:00Z",
			times: []api.PreviewTime{
				{At: "2026-03-09T06:30:00Z", Local: "2026-03-09T02:30:00-04:00"},
				{At: "2026-03-10T06:30:00Z", Local: "2026-03-10T02:30:00-04:00"},
			},
			skipped: []api.PreviewSkipped{{Local: "2026-03-08T02:30:00", Reason: "dst_gap"}},
		},
		{
			name: "ShiftFiresAtTheGapsEnd", expr: "30 2 * * *", after: "2026-03-07T12:00:00Z", policy: "shift",
			times: []api.PreviewTime{
				{At: "2026-03-08T07:00:00Z", Local: "2026-03-08T03:00:00-04:00", DST: "shifted"},
				{At: "2026-03-09T06:30:00Z", Local: "2026-03-09T02:30:00-04:00"},
			},
			skipped: []api.PreviewSkipped{},
		},
		{
			name: "BothIsTheDefault", expr: "30 1 * * *", after: "2026-10-31T12:00:00Z", policy: "skip,both",
			times: []api.PreviewTime{
				{At: "2026-11-01T05:30:00Z", Local: "2026-11-01T01:30:00-04:00", DST: "repeated"},
				{At: "2026-11-01T06:30:00Z", Local: "2026-11-01T01:30:00-05:00", DST: "repeated"},
			},
			skipped: []api.PreviewSkipped{},
		},
		{
			name: "FirstLeavesOutTheSecond", expr: "30 1 * * *", after: "2026-10-31T12:00:00Z", policy: "first",
			times: []api.PreviewTime{
				{At: "2026-11-01T05:30:00Z", Local: "2026-11-01T01:30:00-04:00", DST: "repeated"},
				{At: "2026-11-02T06:30:00Z", Local: "2026-11-02T01:30:00-05:00"},
			},
			skipped: []api.PreviewSkipped{{Local: "2026-11-01T01:30:00-05:00", Reason: "dst_overlap"}},
		},
		{
			name: "LastLeavesOutTheFirst", expr: "30 1 * * *", after: "2026-10-31T12:00:00Z", policy: "last,shift",
			times: []api.PreviewTime{
				{At: "2026-11-01T06:30:00Z", Local: "2026-11-01T01:30:00-05:00", DST: "repeated"},
				{At: "2026-11-02T06:30:00Z", Local: "2026-11-02T01:30:00-05:00"},
			},
			skipped: []api.PreviewSkipped{{Local: "2026-11-01T01:30:00-04:00", Reason: "dst_overlap"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := map[string]string{"cron_expr": tc.expr, "timezone": ny, "after": tc.after, "count": "2"}
			if tc.policy != "" {
				q["dst_policy"] = tc.policy
			}
			got := ok[api.PreviewResponse](t, b, http.StatusOK, http.MethodGet, previewPath(q), nil)
			require.Equal(t, tc.times, got.Times)
			require.Equal(t, tc.skipped, got.Skipped)
			for i, ft := range got.Times {
				require.Equal(t, ft.At, got.FireTimes[i])
			}
		})
	}

	for q, msg := range map[string]string{
		"sideways":     `dst_policy: unknown value "sideways" (want skip or shift for spring_forward, both, first or last for fall_back, comma-separated)`,
		"skip,shift":   `dst_policy: "skip,shift" names spring_forward twice`,
		"first,last":   `dst_policy: "first,last" names fall_back twice`,
		"shift,,first": `dst_policy: unknown value ""`,
	} {
		rec := b.do(t, http.MethodGet, previewPath(map[string]string{"cron_expr": "0 2 * * *", "dst_policy": q}), nil)
		requireError(t, rec, http.StatusBadRequest, api.CodeInvalidArgument, msg)
	}
	rec := b.do(t, http.MethodGet, previewPath(map[string]string{"cron_expr": "@every 1h", "dst_policy": "shift"}), nil)
	requireError(t, rec, http.StatusBadRequest, api.CodeInvalidArgument, "dst_policy: only a cron expression evaluated on the wall clock")
	// The default policy, spelt out, is no error on @every.
	ok[api.PreviewResponse](t, b, http.StatusOK, http.MethodGet, previewPath(map[string]string{"cron_expr": "@every 1h", "dst_policy": "skip,both"}), nil)
}

// scheduleDST is GET /schedules/:id's policy and preview notes.
type scheduleDST struct {
	NextRunAt    *time.Time           `json:"next_run_at"`
	DSTPolicy    *model.DSTPolicy     `json:"dst_policy"`
	PreviewTimes []api.PreviewTime    `json:"preview_times"`
	Skipped      []api.PreviewSkipped `json:"preview_skipped"`
}

// TestUpsertDSTPolicy: the policy is part of the timing (a change
// recomputes next), stored, shown in full by GET and the list, and an
// explicit default is the same body as none.
func TestUpsertDSTPolicy(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.clock.Set(time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC))
	body := schedule("dst")
	body["cron_expr"] = "30 2 * * *"
	body["dst_policy"] = map[string]any{"spring_forward": "shift"}

	up := ok[api.UpsertResponse](t, b, http.StatusOK, http.MethodPost, "/schedules/upsert", body)
	require.True(t, up.Created)
	require.Equal(t, time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC), *up.NextRunAt, "02:30 shifts to 03:00 EDT")
	rec, err := b.store.GetSchedule(context.Background(), "dst")
	require.NoError(t, err)
	require.Equal(t, model.DSTPolicy{SpringForward: model.SpringForwardShift}, rec.DSTPolicy)

	d := ok[scheduleDST](t, b, http.StatusOK, http.MethodGet, "/schedules/dst", nil)
	require.Equal(t, &model.DSTPolicy{SpringForward: "shift", FallBack: "both"}, d.DSTPolicy)
	require.Equal(t, api.PreviewTime{At: "2026-03-08T07:00:00Z", Local: "2026-03-08T03:00:00-04:00", DST: "shifted"}, d.PreviewTimes[0])
	require.Empty(t, d.Skipped)

	list := ok[struct {
		Schedules []scheduleDST `json:"schedules"`
	}](t, b, http.StatusOK, http.MethodGet, "/schedules", nil)
	require.Len(t, list.Schedules, 1)
	require.Equal(t, &model.DSTPolicy{SpringForward: "shift", FallBack: "both"}, list.Schedules[0].DSTPolicy)

	// The same body again changes nothing; the policy spelt out in full,
	// or in the compact string, is the same body.
	body["dst_policy"] = "shift"
	up = ok[api.UpsertResponse](t, b, http.StatusOK, http.MethodPost, "/schedules/upsert", body)
	require.False(t, up.Changed)
	body["dst_policy"] = map[string]any{"spring_forward": "shift", "fall_back": "both"}
	up = ok[api.UpsertResponse](t, b, http.StatusOK, http.MethodPost, "/schedules/upsert", body)
	require.False(t, up.Changed)

	// Back to the default: the timing changed, so next is recomputed.
	delete(body, "dst_policy")
	up = ok[api.UpsertResponse](t, b, http.StatusOK, http.MethodPost, "/schedules/upsert", body)
	require.True(t, up.Changed)
	require.Equal(t, time.Date(2026, 3, 9, 6, 30, 0, 0, time.UTC), *up.NextRunAt, "02:30 is skipped on 8 March")
	d = ok[scheduleDST](t, b, http.StatusOK, http.MethodGet, "/schedules/dst", nil)
	require.Equal(t, &model.DSTPolicy{SpringForward: "skip", FallBack: "both"}, d.DSTPolicy)
	require.Equal(t, []api.PreviewSkipped{{Local: "2026-03-08T02:30:00", Reason: "dst_gap"}}, d.Skipped)
	rec, err = b.store.GetSchedule(context.Background(), "dst")
	require.NoError(t, err)
	require.Equal(t, model.DSTPolicy{}, rec.DSTPolicy)

	// The default spelt out is no change either.
	body["dst_policy"] = map[string]any{"spring_forward": "skip", "fall_back": "both"}
	up = ok[api.UpsertResponse](t, b, http.StatusOK, http.MethodPost, "/schedules/upsert", body)
	require.False(t, up.Changed)
	body["dst_policy"] = nil
	up = ok[api.UpsertResponse](t, b, http.StatusOK, http.MethodPost, "/schedules/upsert", body)
	require.False(t, up.Changed)

	// An every schedule shows no policy.
	every := schedule("ev")
	delete(every, "cron_expr")
	delete(every, "timezone")
	every["kind"], every["every_seconds"] = "every", 60
	ok[api.UpsertResponse](t, b, http.StatusOK, http.MethodPost, "/schedules/upsert", every)
	d = ok[scheduleDST](t, b, http.StatusOK, http.MethodGet, "/schedules/ev", nil)
	require.Nil(t, d.DSTPolicy)
}

// TestUpsertDSTPolicyErrors: a bad policy is a 400 naming the member at
// fault, and nothing is stored.
func TestUpsertDSTPolicyErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		name   string
		edit   func(map[string]any)
		msg    string
		fields []string
	}{
		{"NotAnObject", func(m map[string]any) { m["dst_policy"] = 1 },
			`dst_policy: must be an object such as {"spring_forward": "shift", "fall_back": "first"}, or the same as a string: "shift,first"`, nil},
		{"BadCompact", func(m map[string]any) { m["dst_policy"] = "shift,later" },
			`dst_policy: unknown value "later" (want skip or shift for spring_forward, both, first or last for fall_back, comma-separated)`, nil},
		{"Array", func(m map[string]any) { m["dst_policy"] = []string{"shift"} }, `dst_policy: must be an object`, nil},
		{"BadSpringForward", func(m map[string]any) { m["dst_policy"] = map[string]any{"spring_forward": "later"} },
			`dst_policy.spring_forward: unknown spring_forward "later" (want skip or shift)`, nil},
		{"BadFallBack", func(m map[string]any) { m["dst_policy"] = map[string]any{"fall_back": "twice"} },
			`dst_policy.fall_back: unknown fall_back "twice" (want both, first or last)`, nil},
		{"MemberNotAString", func(m map[string]any) { m["dst_policy"] = map[string]any{"fall_back": 1} },
			`dst_policy.fall_back: must be a string`, nil},
		{"UnknownMember", func(m map[string]any) { m["dst_policy"] = map[string]any{"fallback": "first"} },
			`unknown field "dst_policy.fallback" (did you mean "dst_policy.fall_back"?)`, nil},
		{"Both", func(m map[string]any) {
			m["dst_policy"] = map[string]any{"spring_forward": "sometimes", "fall_back": "never"}
		}, `dst_policy.spring_forward: unknown spring_forward "sometimes" (want skip or shift); dst_policy.fall_back: unknown fall_back "never"`,
			[]string{"dst_policy.spring_forward", "dst_policy.fall_back"}},
		{"EveryKind", func(m map[string]any) {
			delete(m, "cron_expr")
			delete(m, "timezone")
			m["kind"], m["every_seconds"] = "every", 60
			m["dst_policy"] = map[string]any{"fall_back": "first"}
		}, `dst_policy: only a cron expression evaluated on the wall clock takes one`, nil},
		{"AtEvery", func(m map[string]any) {
			m["cron_expr"] = "@every 1h"
			m["dst_policy"] = map[string]any{"spring_forward": "shift"}
		}, `dst_policy: only a cron expression evaluated on the wall clock takes one`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := schedule("bad-" + tc.name)
			tc.edit(body)
			e := requireError(t, b.do(t, http.MethodPost, "/schedules/upsert", body), http.StatusBadRequest, api.CodeInvalidArgument, tc.msg)
			for i, f := range tc.fields {
				require.Equal(t, f, e.Details[i].Field)
			}
			requireError(t, b.do(t, http.MethodGet, "/schedules/bad-"+tc.name, nil), http.StatusNotFound, api.CodeNotFound, "")
		})
	}
	// The explicit default passes on an every schedule: it changes nothing.
	every := schedule("ev")
	delete(every, "cron_expr")
	delete(every, "timezone")
	every["kind"], every["every_seconds"] = "every", 60
	every["dst_policy"] = map[string]any{"spring_forward": "skip"}
	ok[api.UpsertResponse](t, b, http.StatusOK, http.MethodPost, "/schedules/upsert", every)
}

// TestAlarmDSTPolicy: a cron alarm takes dst_policy, fires by it and shows
// it; a bad one is refused and creates nothing.
func TestAlarmDSTPolicy(t *testing.T) {
	t.Parallel()
	b := setupAlarms(t, api.Config{}, nil)
	b.clock.Set(time.Date(2026, 10, 31, 12, 0, 0, 0, time.UTC))
	v := b.alarmOK(t, didA, http.StatusCreated, http.MethodPost, "/v1/alarms",
		`{"kind":"cron","cron_expr":"30 1 * * *","timezone":"America/New_York","wake_message":"hi","dst_policy":{"fall_back":"last"}}`)
	require.Equal(t, &model.DSTPolicy{SpringForward: "skip", FallBack: "last"}, v.DSTPolicy)
	require.Equal(t, time.Date(2026, 11, 1, 6, 30, 0, 0, time.UTC), *v.NextFireAt, "01:30 EST, the second one")
	got := b.alarmOK(t, didA, http.StatusOK, http.MethodGet, "/v1/alarms/"+v.ID, "")
	require.Equal(t, v.DSTPolicy, got.DSTPolicy)

	once := b.alarmOK(t, didA, http.StatusCreated, http.MethodPost, "/v1/alarms", `{"kind":"once","delay_seconds":60,"wake_message":"hi"}`)
	require.Nil(t, once.DSTPolicy)

	rec := b.as(t, didA, http.MethodPost, "/v1/alarms",
		`{"kind":"cron","cron_expr":"30 1 * * *","wake_message":"hi","dst_policy":{"fall_back":"middle"}}`)
	requireError(t, rec, http.StatusBadRequest, api.CodeInvalidArgument, `dst_policy.fall_back: unknown fall_back "middle" (want both, first or last)`)
	rec = b.as(t, didA, http.MethodPost, "/v1/alarms", `{"kind":"once","delay_seconds":60,"wake_message":"hi","dst_policy":{"fall_back":"first"}}`)
	requireError(t, rec, http.StatusBadRequest, api.CodeInvalidArgument, `dst_policy: only a cron expression`)
	list := b.as(t, didA, http.MethodGet, "/v1/alarms", "")
	require.Equal(t, http.StatusOK, list.Code)
	var l struct {
		Alarms []api.AlarmView `json:"alarms"`
	}
	require.NoError(t, json.Unmarshal(list.Body.Bytes(), &l))
	require.Len(t, l.Alarms, 2, "the refused alarms were not created")
}
