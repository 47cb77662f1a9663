package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

func previewPath(q map[string]string) string {
	v := url.Values{}
	for k, s := range q {
		v.Set(k, s)
	}
	return "/v1/preview?" + v.Encode()
}

func TestPreview(t *testing.T) {
	t.Parallel()
	b := setup(t)

	for _, tc := range []struct {
		name string
		q    map[string]string
		want []string
	}{
		{
			name: "NewYork",
			q:    map[string]string{"cron_expr": "0 9 * * *", "timezone": "America/New_York", "after": "2026-01-01T00:00:00Z", "count": "3"},
			want: []string{"2026-01-01T14:00:00Z", "2026-01-02T14:00:00Z", "2026-01-03T14:00:00Z"},
		},
		{
			// 02:30 does not exist in New York on 2026-03-08 (02:00 EST jumps to 03:00 EDT).
			name: "SpringForwardSkips",
			q:    map[string]string{"cron_expr": "30 2 * * *", "timezone": "America/New_York", "after": "2026-03-07T00:00:00Z", "count": "3"},
			want: []string{"2026-03-07T07:30:00Z", "2026-03-09T06:30:00Z", "2026-03-10T06:30:00Z"},
		},
		{
			// 01:30 happens twice in New York on 2026-11-01, so it fires twice.
			name: "FallBackRepeats",
			q:    map[string]string{"cron_expr": "30 1 * * *", "timezone": "America/New_York", "after": "2026-10-31T12:00:00Z", "count": "3"},
			want: []string{"2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z", "2026-11-02T06:30:00Z"},
		},
		{
			name: "DefaultsUTCCountFiveAfterNow",
			q:    map[string]string{"cron_expr": "0 0 * * *"},
			want: []string{"2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z", "2026-01-04T00:00:00Z", "2026-01-05T00:00:00Z", "2026-01-06T00:00:00Z"},
		},
		{
			name: "EveryIsAnchoredAtAfter",
			q:    map[string]string{"cron_expr": "@every 90m", "after": "2026-05-05T10:00:30Z", "count": "2"},
			want: []string{"2026-05-05T11:30:30Z", "2026-05-05T13:00:30Z"},
		},
		{
			name: "SecondsField",
			q:    map[string]string{"cron_expr": "*/20 * * * * *", "after": "2026-01-01T00:00:00.5Z", "count": "3"},
			want: []string{"2026-01-01T00:00:20Z", "2026-01-01T00:00:40Z", "2026-01-01T00:01:00Z"},
		},
		{
			name: "Posix",
			q:    map[string]string{"cron_expr": "0 12 1 1 *", "dialect": "posix", "timezone": "Europe/Berlin", "after": "2026-01-01T00:00:00Z", "count": "2"},
			want: []string{"2026-01-01T11:00:00Z", "2027-01-01T11:00:00Z"},
		},
		{
			name: "AfterWithOffset",
			q:    map[string]string{"cron_expr": "0 * * * *", "after": "2026-01-01T10:30:00+02:00", "count": "1"},
			want: []string{"2026-01-01T09:00:00Z"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ok[api.PreviewResponse](t, b, http.StatusOK, http.MethodGet, previewPath(tc.q), nil)
			require.Equal(t, tc.want, got.FireTimes)
		})
	}

	t.Run("CountBounds", func(t *testing.T) {
		got := ok[api.PreviewResponse](t, b, http.StatusOK, http.MethodGet,
			previewPath(map[string]string{"cron_expr": "* * * * *", "count": "100"}), nil)
		require.Len(t, got.FireTimes, 100)
		got = ok[api.PreviewResponse](t, b, http.StatusOK, http.MethodGet,
			previewPath(map[string]string{"cron_expr": "* * * * *", "count": "1"}), nil)
		require.Equal(t, []string{"2026-01-01T00:01:00Z"}, got.FireTimes)
	})
}

func TestPreviewErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)

	for _, tc := range []struct {
		name string
		q    map[string]string
		want string
	}{
		{"MissingExpr", map[string]string{}, "cron_expr: is required"},
		{"BadExpr", map[string]string{"cron_expr": "61 * * * *"}, `cron_expr: invalid cron expression "61 * * * *": minute field`},
		{"WrongFieldCount", map[string]string{"cron_expr": "* * *"}, `cron_expr: invalid cron expression "* * *": expected 5 or 6 fields, got 3`},
		{"Unsatisfiable", map[string]string{"cron_expr": "0 0 30 2 *"}, `cron_expr: cron "0 0 30 2 *" yields no future time`},
		{"EveryTooShort", map[string]string{"cron_expr": "@every 500ms"}, `cron_expr: invalid cron expression "@every 500ms": @every interval 500ms is shorter than 1s`},
		{"UnknownZone", map[string]string{"cron_expr": "0 9 * * *", "timezone": "Mars/Base"}, `timezone: unknown time zone "Mars/Base"`},
		{"LocalZone", map[string]string{"cron_expr": "0 9 * * *", "timezone": "Local"}, `timezone: unknown time zone "Local"`},
		{"UnknownDialect", map[string]string{"cron_expr": "0 9 * * *", "dialect": "quartz"}, `dialect: unknown dialect "quartz" (want standard or posix)`},
		{"PosixStep", map[string]string{"cron_expr": "*/5 * * * *", "dialect": "posix"}, `cron_expr: Invalid cron expression "*/5 * * * *": minute field`},
		{"PosixMacro", map[string]string{"cron_expr": "@daily", "dialect": "posix"}, `cron_expr: Invalid cron expression "@daily": macros`},
		{"PosixNames", map[string]string{"cron_expr": "0 9 * * mon", "dialect": "posix"}, `cron_expr: Invalid cron expression "0 9 * * mon": day-of-week field`},
		{"PosixSixFields", map[string]string{"cron_expr": "0 0 9 * * *", "dialect": "posix"}, `cron_expr: Invalid cron expression "0 0 9 * * *": expected 5 fields, got 6`},
		{"BadAfter", map[string]string{"cron_expr": "0 9 * * *", "after": "tomorrow"}, `after: invalid RFC 3339 time "tomorrow"`},
		{"CountZero", map[string]string{"cron_expr": "0 9 * * *", "count": "0"}, `count: must be an integer between 1 and 100, got "0"`},
		{"CountTooMany", map[string]string{"cron_expr": "0 9 * * *", "count": "101"}, `count: must be an integer between 1 and 100`},
		{"CountNotNumber", map[string]string{"cron_expr": "0 9 * * *", "count": "five"}, `count: must be an integer between 1 and 100`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requireError(t, b.do(t, http.MethodGet, previewPath(tc.q), nil), http.StatusBadRequest, api.CodeInvalidArgument, tc.want)
		})
	}
}

// FuzzPreview checks that no query makes the preview endpoint fail
// with anything but a 400 naming a field.
func FuzzPreview(f *testing.F) {
	rdb := queuetest.StartRedis(f).Client(f)
	store, err := queue.NewStore(f.Context(), rdb, queue.NewSimClock(t0), nil)
	require.NoError(f, err)
	e, err := api.New(store, openUnlessAuth(nil), nil, nil)
	require.NoError(f, err)

	f.Add("0 9 * * *", "America/New_York", "2026-01-01T00:00:00Z", "5", "")
	f.Add("30 2 * * *", "America/New_York", "", "", "standard")
	f.Add("@every 1h", "", "9999-12-31T23:59:59Z", "100", "")
	f.Add("*/5 * * * *", "Europe/Berlin", "0001-01-01T00:00:00Z", "3", "posix")
	f.Add("0 0 29 2 *", "Australia/Lord_Howe", "", "-1", "posix")
	f.Add("0 0 L * *", "../../etc/passwd", "x", "9999999999999999999", "")
	f.Add("@every 2562047h", "UTC", "2026-01-01T00:00:00+14:00", "2", "")
	f.Add("1-5/2,7 */3 1,15 jan-mar mon-fri", "Pacific/Apia", "2011-12-29T00:00:00Z", "100", "")
	f.Fuzz(func(t *testing.T, expr, tz, after, count, dialect string) {
		q := url.Values{"cron_expr": {expr}, "timezone": {tz}, "after": {after}, "count": {count}, "dialect": {dialect}}
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/preview?"+q.Encode(), nil))
		switch rec.Code {
		case http.StatusOK:
			var got api.PreviewResponse
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got))
			require.NotNil(t, got.FireTimes)
			require.Len(t, got.Times, len(got.FireTimes))
			for i, ft := range got.Times {
				require.Equal(t, got.FireTimes[i], ft.At)
			}
			require.NotNil(t, got.Skipped)
			require.NotEmpty(t, got.Explain)
		case http.StatusBadRequest:
			var got api.ErrorBody
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got))
			require.Equal(t, api.CodeInvalidArgument, got.Error.Code)
			require.Regexp(t, `^(cron_expr|timezone|after|count|dialect): `, got.Error.Message)
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body.String())
		}
	})
}

func TestPreviewExplain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for q, want := range map[string]string{
		"0 9 * * 1-5": "At 09:00, Monday through Friday, in America/New_York",
		"@every 90m":  "Every 90 minutes",
	} {
		got := ok[api.PreviewResponse](t, b, http.StatusOK, http.MethodGet,
			previewPath(map[string]string{"cron_expr": q, "timezone": "America/New_York", "count": "1"}), nil)
		require.Equal(t, want, got.Explain)
		require.Len(t, got.FireTimes, 1)
	}
	got := ok[api.PreviewResponse](t, b, http.StatusOK, http.MethodGet,
		previewPath(map[string]string{"cron_expr": "0 9 1 * 1", "dialect": "posix", "count": "1"}), nil)
	require.Equal(t, "At 09:00, on day 1 of the month or on Monday, in UTC", got.Explain)
}

// TestPreviewDST: each fire time comes with its wall clock in the zone,
// "dst":"repeated" on the fall-back night, and the spring-forward local
// times that did not fire are listed; fire_times stays as it was.
func TestPreviewDST(t *testing.T) {
	t.Parallel()
	b := setup(t)

	got := ok[api.PreviewResponse](t, b, http.StatusOK, http.MethodGet, previewPath(map[string]string{
		"cron_expr": "30 1,2 * * *", "timezone": "America/New_York", "after": "2026-03-07T12:00:00Z", "count": "3"}), nil)
	require.Equal(t, []string{"2026-03-08T06:30:00Z", "2026-03-09T05:30:00Z", "2026-03-09T06:30:00Z"}, got.FireTimes)
	require.Equal(t, []api.PreviewTime{
		{At: "2026-03-08T06:30:00Z", Local: "2026-03-08T01:30:00-05:00"},
		{At: "2026-03-09T05:30:00Z", Local: "2026-03-09T01:30:00-04:00"},
		{At: "2026-03-09T06:30:00Z", Local: "2026-03-09T02:30:00-04:00"},
	}, got.Times)
	require.Equal(t, []api.PreviewSkipped{{Local: "2026-03-08T02:30:00", Reason: "dst_gap"}}, got.Skipped)

	raw := b.do(t, http.MethodGet, previewPath(map[string]string{
		"cron_expr": "30 1 * * *", "timezone": "America/New_York", "after": "2026-10-31T12:00:00Z", "count": "3"}), nil).Body.String()
	require.Contains(t, raw, `"fire_times":["2026-11-01T05:30:00Z","2026-11-01T06:30:00Z","2026-11-02T06:30:00Z"]`)
	require.Contains(t, raw, `"times":[{"at":"2026-11-01T05:30:00Z","local":"2026-11-01T01:30:00-04:00","dst":"repeated"},`+
		`{"at":"2026-11-01T06:30:00Z","local":"2026-11-01T01:30:00-05:00","dst":"repeated"},`+
		`{"at":"2026-11-02T06:30:00Z","local":"2026-11-02T01:30:00-05:00"}]`)
	require.Contains(t, raw, `"skipped":[]`)

	// @every fires on a grid of instants: local times, no notes.
	got = ok[api.PreviewResponse](t, b, http.StatusOK, http.MethodGet, previewPath(map[string]string{
		"cron_expr": "@every 1h", "timezone": "America/New_York", "after": "2026-11-01T05:00:00Z", "count": "2"}), nil)
	require.Equal(t, []api.PreviewTime{
		{At: "2026-11-01T06:00:00Z", Local: "2026-11-01T01:00:00-05:00"},
		{At: "2026-11-01T07:00:00Z", Local: "2026-11-01T02:00:00-05:00"},
	}, got.Times)
	require.Empty(t, got.Skipped)
}
