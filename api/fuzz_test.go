package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// fuzzAPI is the API on a fresh redis-server, with the clock at t0.
type fuzzAPI struct {
	e   http.Handler
	rdb *redis.Client
}

func newFuzzAPI(f *testing.F) *fuzzAPI {
	rdb := queuetest.StartRedis(f).Client(f)
	store, err := queue.NewStore(f.Context(), rdb, queue.NewSimClock(t0), nil)
	require.NoError(f, err)
	e, err := api.New(store, openUnlessAuth(nil), nil, nil)
	require.NoError(f, err)
	return &fuzzAPI{e: e, rdb: rdb}
}

func (a *fuzzAPI) serve(method, target, body string) *httptest.ResponseRecorder {
	var req *http.Request
	if body == "" && method == http.MethodGet {
		req = httptest.NewRequest(method, target, nil)
	} else {
		req = httptest.NewRequest(method, target, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	a.e.ServeHTTP(rec, req)
	return rec
}

// snapshot is every key with its DUMP, to tell whether a request wrote.
func (a *fuzzAPI) snapshot(t *testing.T) map[string]string {
	ctx := context.Background()
	keys, err := a.rdb.Keys(ctx, "*").Result()
	require.NoError(t, err)
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		v, err := a.rdb.Dump(ctx, k).Result()
		if err == redis.Nil {
			continue
		}
		require.NoError(t, err)
		out[k] = v
	}
	return out
}

// checkError requires a 400 naming one of fields or an unknown one, or one of the other
// statuses allowed.
func checkError(t *testing.T, rec *httptest.ResponseRecorder, fields string, allowed ...int) {
	t.Helper()
	switch rec.Code {
	case http.StatusBadRequest:
		var got api.ErrorBody
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got), "body: %s", rec.Body.String())
		require.Equal(t, api.CodeInvalidArgument, got.Error.Code)
		require.Regexp(t, regexp.MustCompile(`^((`+fields+`): |unknown field ")`), got.Error.Message)
		return
	case http.StatusRequestEntityTooLarge:
		return
	}
	for _, s := range allowed {
		if rec.Code == s {
			return
		}
	}
	t.Fatalf("status %d: %s", rec.Code, rec.Body.String())
}

// object renders a JSON object from raw member values (possibly invalid
// JSON); a member whose value is "" is left out.
func object(members ...[2]string) string {
	var b strings.Builder
	b.WriteByte('{')
	for _, m := range members {
		if m[1] == "" {
			continue
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(m[0])
		b.Write(name)
		b.WriteByte(':')
		b.WriteString(m[1])
	}
	b.WriteByte('}')
	return b.String()
}

func q(s string) string { b, _ := json.Marshal(s); return string(b) }

const upsertFields = `body|schedule_id|workflow_id|version|user_id|kind|cron_expr|timezone|dialect|delay_seconds|fire_at|every_seconds|start_at|end_at|jitter_ms|overlap_policy|catchup_policy`

// FuzzUpsert: an upsert answers 200 or a 400 naming a field; a 400 writes
// nothing; a 200's schedule reads back (GET /schedules/:id, GET
// /schedules) with its next fire time inside start_at..end_at.
func FuzzUpsert(f *testing.F) {
	a := newFuzzAPI(f)
	// fields: id, workflow, version, user, cron, tz, dialect, start, end, jitter, overlap, catchup (raw JSON each)
	add := func(v ...string) { f.Add(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11]) }
	add(q("s1"), q("wf-1"), "3", q("u-1"), q("0 9 * * *"), q("America/New_York"), "", "", "", "", "", "")
	add(q("s1"), q("wf-1"), q("v2.1"), q("u-1"), q("15 6 * * 1-5"), q("Europe/Berlin"), q("posix"), q("2026-02-01T00:00:00+01:00"), q("2026-03-01T00:00:00Z"), "2500", q("skip"), q("latest"))
	add(q("s2"), q("wf-1"), "3", q("u-1"), q("0 9 * * *"), "null", "", "null", "", "null", "", "")
	add(q("s1"), q("wf-1"), "3", q("u-1"), q("0 9 * * *"), q("America/New_York"), "", "", q("2025-06-01T00:00:00Z"), "", "", "")
	add(q("s1"), q("wf-1"), "3", q("u-1"), q("0 0 * * *"), q("UTC"), "", q("2025-12-31T23:59:59.9995Z"), q("2026-01-03T00:00:00.0005Z"), "", "", "")
	add(q("s1"), q("wf-1"), "3", q("u-1"), q("0 0 * * *"), q("UTC"), "", q("9999-12-31T23:59:59.9999Z"), "", "", "", "")
	add(q("s1"), q("wf-1"), "3", q("u-1"), q("0 0 * * *"), q("UTC"), "", "", q("0001-01-01T00:00:00.0005Z"), "", "", "")
	add(q("s1"), q("wf-1"), "3", q("u-1"), q("0 0 * * *"), q("UTC"), "", q("2026-01-02T00:00:00.0005Z"), q("2026-01-02T00:00:00.0005Z"), "", "", "")
	add(q("s1"), q("wf-1"), "3", q("u-1"), q("30 0 * * *"), q("UTC"), "", "", q("2026-01-01T00:31:00Z"), "", "", "")
	add(q("bad"), q("a}:b"), "true", "1", "5", "2", q("quartz"), "1767225600", q("yesterday"), "1.5", q("never"), "false")
	add(q("x%41"), q("wf"), "7", q("u"), q("@every 2562047h"), q("UTC"), "", q("9999-12-31T23:59:59-05:00"), q("0000-12-31T23:00:00Z"), "-1", q("queue"), q("spread"))
	add(q("a/b"), q("wf"), q("7"), q("u"), q("@every 1s"), q("Pacific/Apia"), q("standard"), q("2011-12-29T00:00:00Z"), q("2011-12-31T00:00:00Z"), "86400000", q("allow"), q("none"))
	add(q("100%"), q("wf"), "1e3", q("u"), q("0 0 29 2 *"), q("Australia/Lord_Howe"), q("posix"), q("9999-12-30T00:00:00Z"), "", "86400001", q("skip"), q("fire_immediately"))
	add(q("s3"), q("wf"), "1", q("u"), q("0 0 L * *"), q("Local"), "", "", "", "", "", "")
	add(q("s4"), q("wf"), "1", q("u"), q("* * * * * *"), q("UTC"), "", q("9999-12-31T23:59:58Z"), q("9999-12-31T23:59:59.999Z"), "0", "", "")

	f.Fuzz(func(t *testing.T, id, wf, ver, user, cron, tz, dialect, start, end, jitter, overlap, catchup string) {
		body := object([2]string{"schedule_id", id}, [2]string{"workflow_id", wf}, [2]string{"version", ver},
			[2]string{"user_id", user}, [2]string{"cron_expr", cron}, [2]string{"timezone", tz}, [2]string{"dialect", dialect},
			[2]string{"start_at", start}, [2]string{"end_at", end}, [2]string{"jitter_ms", jitter},
			[2]string{"overlap_policy", overlap}, [2]string{"catchup_policy", catchup})

		before := a.snapshot(t)
		rec := a.serve(http.MethodPost, "/schedules/upsert", body)
		if rec.Code != http.StatusOK {
			checkError(t, rec, upsertFields)
			require.Equal(t, before, a.snapshot(t), "a rejected upsert wrote to Redis: %s", body)
			return
		}
		var res api.UpsertResponse
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &res), "body: %s", rec.Body.String())
		path := "/schedules/" + url.PathEscape(res.ScheduleID)
		defer a.serve(http.MethodDelete, path, "")

		got := a.serve(http.MethodGet, path, "")
		require.Equal(t, http.StatusOK, got.Code, "upsert %s, then GET: %s", body, got.Body.String())
		var d detail
		require.NoError(t, json.Unmarshal(got.Body.Bytes(), &d), "body: %s", got.Body.String())
		require.Equal(t, res.ScheduleID, d.ID)
		require.Equal(t, res.State, d.State)
		if d.NextRunAt != nil {
			require.True(t, d.NextRunAt.After(t0), "next_run_at %s not after now", d.NextRunAt)
			if d.StartAt != nil {
				require.False(t, d.NextRunAt.Before(*d.StartAt), "next_run_at %s before start_at %s", d.NextRunAt, d.StartAt)
			}
			if d.EndAt != nil {
				require.False(t, d.NextRunAt.After(*d.EndAt), "next_run_at %s after end_at %s", d.NextRunAt, d.EndAt)
			}
			require.NotEmpty(t, d.Preview, "active with next_run_at %s but no preview", d.NextRunAt)
			require.Equal(t, *d.NextRunAt, d.Preview[0], "preview starts elsewhere than next_run_at")
		}
		for _, p := range d.Preview {
			if d.StartAt != nil {
				require.False(t, p.Before(*d.StartAt), "preview %s before start_at %s", p, d.StartAt)
			}
			if d.EndAt != nil {
				require.False(t, p.After(*d.EndAt), "preview %s after end_at %s", p, d.EndAt)
			}
		}
		// An identical upsert changes nothing.
		again := a.serve(http.MethodPost, "/schedules/upsert", strings.Replace(body, `"schedule_id":`+id, `"schedule_id":`+q(res.ScheduleID), 1))
		if id != "" {
			require.Equal(t, http.StatusOK, again.Code, "repeat: %s", again.Body.String())
			var r2 api.UpsertResponse
			require.NoError(t, json.Unmarshal(again.Body.Bytes(), &r2))
			require.False(t, r2.Changed, "repeating upsert %s changed it", body)
			require.Equal(t, res.NextRunAt, r2.NextRunAt)
		}

		found := false
		for cursor, pages := "", 0; ; pages++ {
			require.Less(t, pages, 100)
			l := a.serve(http.MethodGet, "/schedules?limit=500&cursor="+url.QueryEscape(cursor), "")
			require.Equal(t, http.StatusOK, l.Code, "upsert %s, then list: %s", body, l.Body.String())
			var page api.ScheduleList
			require.NoError(t, json.Unmarshal(l.Body.Bytes(), &page))
			for _, s := range page.Schedules {
				found = found || s.ID == res.ScheduleID
			}
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		require.True(t, found, "schedule %q missing from GET /schedules", res.ScheduleID)
	})
}

// FuzzUpsertBody: any raw body.
func FuzzUpsertBody(f *testing.F) {
	a := newFuzzAPI(f)
	for _, s := range []string{
		"", `{"schedule_id": "bad",`, `{"schedule_id": "bad"} x`, `[{"schedule_id": "bad"}]`, `"hello"`,
		`{"schedule_id":"s1","workflow_id":"wf-1","version":3,"user_id":"u-1","cron_expr":"0 9 * * *","timezone":"America/New_York"}`,
		`{"schedule_id":"s1","workflow_id":"wf-1","version":3,"user_id":"u-1","cron_expr":"0 9 * * *","color":"red","nested":{"a":[1]}}`,
		`{"workflow_id":"wf-1","version":3,"user_id":"u-1","cron_expr":"@daily","version":null}`,
		`{"schedule_id":"s1","schedule_id":"s2","workflow_id":"w","version":1e400,"user_id":"u","cron_expr":"* * * * *"}`,
		"{\"schedule_id\":\"a\\u2028b\",\"workflow_id\":\"w\",\"version\":1,\"user_id\":\"u\",\"cron_expr\":\"* * * * *\"}",
		"{\"schedule_id\":\"\xff\",\"workflow_id\":\"w\",\"version\":1,\"user_id\":\"u\",\"cron_expr\":\"* * * * *\"}",
		`{"schedule_id":"o1","workflow_id":"w","version":1,"user_id":"u","kind":"once","delay_seconds":600}`,
		`{"schedule_id":"o2","workflow_id":"w","version":1,"user_id":"u","kind":"once","fire_at":"2026-01-01T00:00:00.5Z"}`,
		`{"schedule_id":"o3","workflow_id":"w","version":1,"user_id":"u","kind":"once","delay_seconds":1,"fire_at":"x","timezone":"UTC"}`,
		`{"schedule_id":"e1","workflow_id":"w","version":1,"user_id":"u","kind":"every","every_seconds":1,"end_at":"2026-01-01T00:00:00Z"}`,
		`{"schedule_id":"e2","workflow_id":"w","version":1,"user_id":"u","kind":"every","every_seconds":3153600000,"start_at":"9999-12-31T00:00:00Z"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		before := a.snapshot(t)
		rec := a.serve(http.MethodPost, "/schedules/upsert", body)
		if rec.Code != http.StatusOK {
			checkError(t, rec, upsertFields)
			require.Equal(t, before, a.snapshot(t), "a rejected upsert wrote to Redis")
			return
		}
		var res api.UpsertResponse
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &res))
		path := "/schedules/" + url.PathEscape(res.ScheduleID)
		defer a.serve(http.MethodDelete, path, "")
		got := a.serve(http.MethodGet, path, "")
		require.Equal(t, http.StatusOK, got.Code, "GET after upsert: %s", got.Body.String())
		l := a.serve(http.MethodGet, "/schedules?limit=500", "")
		require.Equal(t, http.StatusOK, l.Code, "list after upsert: %s", l.Body.String())
	})
}

// FuzzPause: pause/resume of an existing schedule "s1".
func FuzzPause(f *testing.F) {
	a := newFuzzAPI(f)
	base := `{"schedule_id":"s1","workflow_id":"wf-1","version":3,"user_id":"u-1","cron_expr":"0 9 * * *","timezone":"America/New_York","end_at":"2027-01-01T00:00:00Z"}`
	require.Equal(f, http.StatusOK, a.serve(http.MethodPost, "/schedules/upsert", base).Code)
	for _, s := range []string{
		`{"schedule_id": "s1", "paused": true}`, `{"schedule_id": "s1", "paused": false}`,
		`{"schedule_id": "nope", "paused": true}`, `{"schedule_id": "s1"}`, `{"schedule_id": "s1", "paused": null}`,
		`{"schedule_id": "s1", "paused": "yes"}`, `{"schedule_id": "s1", "paused": 1}`, `{"paused": true}`, `[]`, ``,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		before := a.snapshot(t)
		rec := a.serve(http.MethodPost, "/schedules/pause", body)
		switch rec.Code {
		case http.StatusOK:
			var v api.ScheduleView
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &v))
			got := a.serve(http.MethodGet, "/schedules/"+url.PathEscape(v.ID), "")
			require.Equal(t, http.StatusOK, got.Code, "GET after pause: %s", got.Body.String())
			var d detail
			require.NoError(t, json.Unmarshal(got.Body.Bytes(), &d))
			require.Equal(t, v.Paused, d.Paused)
			if !d.Paused {
				require.Equal(t, api.StateActive, d.State, "resumed schedule not active: %s", got.Body.String())
			}
		default:
			checkError(t, rec, `body|schedule_id|paused`, http.StatusNotFound)
			require.Equal(t, before, a.snapshot(t), "a rejected pause wrote to Redis")
		}
	})
}

// FuzzRunStatus: status reports for a path key and body. Runs "fresh"
// and "fresh2" exist (manual).
func FuzzRunStatus(f *testing.F) {
	a := newFuzzAPI(f)
	for _, k := range []string{"fresh", "fresh2"} {
		rec := a.serve(http.MethodPost, "/run-launcher/start",
			`{"workflow_id":"wf-1","version":"7","user_id":"u-1","scheduled_for":"2026-01-01T12:00:00Z","idempotency_key":"`+k+`"}`)
		require.Equal(f, http.StatusOK, rec.Code, rec.Body.String())
	}
	for _, s := range []string{
		`{}`, `{"status": "DONE"}`, `{"status": "SKIPPED"}`, `{"status": "success"}`, `{"status": 1}`,
		`{"status": "STARTED", "run_id": 5}`, `{"status": "STARTED", "run_id": "` + strings.Repeat("r", 201) + `"}`,
		`{"status": "STARTED", "error": []}`, `"nope"`, `{"status": "STARTED", "run_id": "exec-1"}`,
		`{"status": "FAILED", "error": "boom"}`, `{"status": "SUCCESS"}`, `{"status":"STARTED","error":"\u00e9\u00e9"}`,
	} {
		f.Add("fresh", s)
	}
	f.Add("nope", `{"status": "SUCCESS"}`)
	f.Add(strings.Repeat("k", 201), `{"status": "SUCCESS"}`)
	f.Add("a/b", `{"status": "SUCCESS"}`)
	f.Add("x%41", `{"status": "SUCCESS"}`)
	f.Fuzz(func(t *testing.T, key, body string) {
		before := a.snapshot(t)
		rec := a.serve(http.MethodPost, "/runs/"+url.PathEscape(key)+"/status", body)
		switch rec.Code {
		case http.StatusOK:
			got := a.serve(http.MethodGet, "/runs/"+url.PathEscape(key), "")
			require.Equal(t, http.StatusOK, got.Code, "GET after status: %s", got.Body.String())
		default:
			// 404 also for a path echo does not route (an empty key).
			checkError(t, rec, `body|idempotency_key|status|run_id|error`, http.StatusNotFound, http.StatusConflict)
			if rec.Code == http.StatusBadRequest {
				require.Equal(t, before, a.snapshot(t), "a rejected report wrote to Redis")
			}
		}
	})
}

// FuzzManualStart: POST /run-launcher/start bodies.
func FuzzManualStart(f *testing.F) {
	a := newFuzzAPI(f)
	add := func(wf, ver, user, at, key string) { f.Add(wf, ver, user, at, key) }
	add(q("wf-1"), q("7"), q("u-1"), q("2026-01-01T12:00:00Z"), "")
	add(q("wf-1"), "7", q("u-1"), q("2026-01-01T12:00:00Z"), q("deploy-42"))
	add(q("a:b"), q("c"), q("u"), q("2026-02-01T00:00:00Z"), "")
	add("1", "{}", "", q("2026-01-01 12:00"), q("a b"))
	add(q("a}"), "null", "null", "1767268800", "true")
	add(q("w"), "1e400", q("u"), q("9999-12-31T23:59:59Z"), "")
	add(q("w"), "-0", q("u"), q("0001-01-01T00:00:00Z"), "")
	add(q("w"), "1", q("u"), q("9999-12-31T23:59:59-05:00"), "")
	add(q("w"), "1", q("u"), q("2026-01-01T12:00:00.123456789+14:00"), q("x%41"))
	f.Fuzz(func(t *testing.T, wf, ver, user, at, key string) {
		body := object([2]string{"workflow_id", wf}, [2]string{"version", ver}, [2]string{"user_id", user},
			[2]string{"scheduled_for", at}, [2]string{"idempotency_key", key})
		before := a.snapshot(t)
		rec := a.serve(http.MethodPost, "/run-launcher/start", body)
		if rec.Code != http.StatusOK {
			checkError(t, rec, `body|workflow_id|version|user_id|scheduled_for|idempotency_key`)
			require.Equal(t, before, a.snapshot(t), "a rejected start wrote to Redis: %s", body)
			return
		}
		var res api.ManualStartResponse
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &res))
		require.NotNil(t, res.Run)
		got := a.serve(http.MethodGet, "/runs/"+url.PathEscape(res.Run.IdempotencyKey), "")
		require.Equal(t, http.StatusOK, got.Code, "start %s, then GET run: %s", body, got.Body.String())
		again := a.serve(http.MethodPost, "/run-launcher/start", body)
		require.Equal(t, http.StatusOK, again.Code, "repeat: %s", again.Body.String())
		var r2 api.ManualStartResponse
		require.NoError(t, json.Unmarshal(again.Body.Bytes(), &r2))
		require.False(t, r2.Started, "repeat of %s started another run", body)
	})
}

// FuzzListSchedules: any cursor and limit.
func FuzzListSchedules(f *testing.F) {
	a := newFuzzAPI(f)
	for i := range 40 {
		body := `{"schedule_id":"s` + strings.Repeat("x", i) + `","workflow_id":"wf","version":1,"user_id":"u","cron_expr":"0 9 * * *"}`
		require.Equal(f, http.StatusOK, a.serve(http.MethodPost, "/schedules/upsert", body).Code)
	}
	l := a.serve(http.MethodGet, "/schedules?limit=7", "")
	var page api.ScheduleList
	require.NoError(f, json.Unmarshal(l.Body.Bytes(), &page))
	f.Add(page.NextCursor, "7")
	for _, s := range []string{"", "0:0:", "0:w:", "x", "1:2", "-1:0:", "99999:0:", "0:18446744073709551615:", "0:0:!!", "0:0:c3g", "0:w:c3h4eHg", "0:e:", "0:e:czEgczI", "0:5:czEgczI"} {
		f.Add(s, "1")
	}
	for _, s := range []string{"0", "501", "-1", "x", "1.5", "500", "9999999999999999999"} {
		f.Add("", s)
	}
	f.Fuzz(func(t *testing.T, cursor, limit string) {
		v := url.Values{"cursor": {cursor}, "limit": {limit}}
		rec := a.serve(http.MethodGet, "/schedules?"+v.Encode(), "")
		if rec.Code != http.StatusOK {
			checkError(t, rec, `cursor|limit`)
			return
		}
		var p api.ScheduleList
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p))
		require.NotNil(t, p.Schedules)
		n := api.ListLimitDefault
		if limit != "" {
			var err error
			n, err = strconv.Atoi(limit)
			require.NoError(t, err, "limit %q accepted", limit)
		}
		require.LessOrEqual(t, len(p.Schedules), n, "page longer than limit")
		if p.NextCursor != "" {
			// the cursor a page returns is accepted
			next := a.serve(http.MethodGet, "/schedules?limit=500&cursor="+url.QueryEscape(p.NextCursor), "")
			require.Equal(t, http.StatusOK, next.Code, "next_cursor %q of cursor %q rejected: %s", p.NextCursor, cursor, next.Body.String())
		}
	})
}
