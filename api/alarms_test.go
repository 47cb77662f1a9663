package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/chronos-sched/chronos/api"
	"github.com/chronos-sched/chronos/api/auth"
	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/scheduler"
)

const (
	didA = "did:matrix:user-a:keyA"
	didB = "did:matrix:user-b:keyB"
)

// setupAlarms serves the API as chronos dev does: open, but for the
// alarms, whose tokens testSecret signs.
func setupAlarms(t *testing.T, cfg api.Config, qcfg *queue.Config) *testBundle {
	t.Helper()
	v, err := auth.NewVerifier(auth.Config{Secret: testSecret})
	require.NoError(t, err)
	cfg.OwnerAuth = v
	return setup(t, setupOpts{cfg: &cfg, queue: qcfg})
}

// as serves a request of owner did (no token when did is ""); body is
// sent as is.
func (b *testBundle) as(t *testing.T, did, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if did != "" {
		req.Header.Set("Authorization", "Bearer "+token(t, testSecret, did, time.Hour))
	}
	rec := httptest.NewRecorder()
	b.e.ServeHTTP(rec, req)
	return rec
}

// alarmOK serves a request of did requiring status want, and decodes the
// alarm it answers.
func (b *testBundle) alarmOK(t *testing.T, did string, want int, method, path, body string) api.CreatedAlarm {
	t.Helper()
	rec := b.as(t, did, method, path, body)
	require.Equal(t, want, rec.Code, "body: %s", rec.Body.String())
	var v api.CreatedAlarm
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &v.AlarmView), rec.Body.String())
	var d struct {
		Deduped bool `json:"deduped"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &d))
	v.Deduped = d.Deduped
	return v
}

func (b *testBundle) listAlarms(t *testing.T, did, query string) []api.AlarmView {
	t.Helper()
	rec := b.as(t, did, http.MethodGet, "/v1/alarms"+query, "")
	require.Equal(t, http.StatusOK, rec.Code, "body: %s", rec.Body.String())
	var l api.AlarmList
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &l))
	return l.Alarms
}

var uuidText = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestAlarmCreateOnce(t *testing.T) {
	t.Parallel()
	b := setupAlarms(t, api.Config{}, nil)
	rec := b.as(t, didA, http.MethodPost, "/v1/alarms", `{"kind":"once","delay_seconds":600,"label":"tea","wake_message":"the tea is ready"}`)
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	var raw map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &raw))
	var names []string
	for k := range raw {
		names = append(names, k)
	}
	require.ElementsMatch(t, []string{"id", "label", "kind", "timezone", "next_fire_at", "wake_message", "payload", "status",
		"max_failures", "failure_count", "created_at", "fire_at", "deduped"}, names, rec.Body.String())

	v := b.alarmOK(t, didA, http.StatusOK, http.MethodGet, "/v1/alarms/"+string(mustString(t, raw["id"])), "")
	require.Regexp(t, uuidText, v.ID)
	require.Equal(t, "once", v.Kind)
	require.Equal(t, "tea", v.Label)
	require.Equal(t, "the tea is ready", v.WakeMessage)
	require.Equal(t, "active", v.Status)
	require.Equal(t, "UTC", v.Timezone)
	require.Equal(t, `{}`, string(v.Payload), "payload defaults to {}")
	require.Equal(t, api.AlarmMaxFailuresDefault, v.MaxFailures)
	require.Zero(t, v.FailureCount)
	require.Equal(t, t0, v.CreatedAt)
	require.Equal(t, t0.Add(10*time.Minute), *v.NextFireAt)
	require.Equal(t, t0.Add(10*time.Minute), *v.FireAt)
	require.Nil(t, v.LastFiredAt)
	require.Equal(t, `false`, string(raw["deduped"]))

	at := b.alarmOK(t, didA, http.StatusCreated, http.MethodPost, "/v1/alarms",
		`{"kind":"once","fire_at":"2026-01-01T05:30:00+02:00","max_failures":3,"conversation_id":"conv-1","timezone":"Europe/Berlin"}`)
	require.Equal(t, time.Date(2026, 1, 1, 3, 30, 0, 0, time.UTC), *at.NextFireAt)
	require.Equal(t, 3, at.MaxFailures)
	require.Equal(t, "conv-1", at.ConversationID)
	require.Equal(t, "Europe/Berlin", at.Timezone)

	// delay_seconds 0 is "not set", as the specification's NextOnce reads it.
	zero := b.alarmOK(t, didA, http.StatusCreated, http.MethodPost, "/v1/alarms", `{"kind":"once","delay_seconds":0,"fire_at":"2026-01-02T00:00:00Z"}`)
	require.Equal(t, time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC), *zero.NextFireAt)
}

func mustString(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var s string
	require.NoError(t, json.Unmarshal(raw, &s))
	return s
}

func TestAlarmCreateCronAndEvery(t *testing.T) {
	t.Parallel()
	b := setupAlarms(t, api.Config{}, nil)
	v := b.alarmOK(t, didA, http.StatusCreated, http.MethodPost, "/v1/alarms",
		`{"kind":"cron","cron_expr":"0 9 * * *","timezone":"America/New_York"}`)
	require.Equal(t, "cron", v.Kind)
	require.Equal(t, "0 9 * * *", v.CronExpr)
	require.Equal(t, time.Date(2026, 1, 1, 14, 0, 0, 0, time.UTC), *v.NextFireAt, "the specification's example")
	require.Nil(t, v.FireAt)

	v = b.alarmOK(t, didA, http.StatusCreated, http.MethodPost, "/v1/alarms", `{"kind":"cron","cron_expr":"@every 10m"}`)
	require.Equal(t, t0.Add(10*time.Minute), *v.NextFireAt)
	v = b.alarmOK(t, didA, http.StatusCreated, http.MethodPost, "/v1/alarms", `{"kind":"cron","cron_expr":"@hourly"}`)
	require.Equal(t, t0.Add(time.Hour), *v.NextFireAt)

	v = b.alarmOK(t, didA, http.StatusCreated, http.MethodPost, "/v1/alarms", `{"kind":"every","every_seconds":90}`)
	require.Equal(t, "every", v.Kind)
	require.Equal(t, int64(90), v.EverySeconds)
	require.Equal(t, t0.Add(90*time.Second), *v.NextFireAt)
}

// Every error of the fire-time engine reaches the agent with its text,
// after the field's name.
func TestAlarmEngineErrors(t *testing.T) {
	t.Parallel()
	b := setupAlarms(t, api.Config{}, nil)
	for _, tc := range []struct{ body, field, text string }{
		{`{"kind":"once","delay_seconds":60,"fire_at":"2026-01-02T00:00:00Z"}`, "fire_at", "once alarm takes either delay_seconds or fire_at, not both"},
		{`{"kind":"once"}`, "fire_at", "once alarm requires delay_seconds or fire_at"},
		{`{"kind":"once","fire_at":"tomorrow"}`, "fire_at", `invalid fire_at "tomorrow" (want RFC3339)`},
		{`{"kind":"once","fire_at":"2025-12-31T23:00:00Z"}`, "fire_at", "fire_at 2025-12-31T23:00:00Z is not in the future"},
		{`{"kind":"once","fire_at":"2026-01-01T00:00:00Z"}`, "fire_at", "fire_at 2026-01-01T00:00:00Z is not in the future"},
		{`{"kind":"once","delay_seconds":-5}`, "delay_seconds", "delay_seconds must be > 0"},
		{`{"kind":"once","delay_seconds":0}`, "fire_at", "once alarm requires delay_seconds or fire_at"},
		{`{"kind":"cron"}`, "cron_expr", "empty cron expression"},
		{`{"kind":"cron","cron_expr":"  "}`, "cron_expr", "empty cron expression"},
		{`{"kind":"cron","cron_expr":"61 * * * *"}`, "cron_expr", `invalid cron expression "61 * * * *"`},
		{`{"kind":"cron","cron_expr":"@every 10"}`, "cron_expr", `invalid cron expression "@every 10"`},
		{`{"kind":"cron","cron_expr":"0 0 30 2 *"}`, "cron_expr", `cron "0 0 30 2 *" yields no future time`},
		{`{"kind":"cron","cron_expr":"0 9 * * *","timezone":"Mars/Olympus"}`, "timezone", `unknown time zone "Mars/Olympus"`},
		{`{"kind":"once","delay_seconds":60,"timezone":"Nowhere"}`, "timezone", `unknown time zone "Nowhere"`},
		{`{"kind":"every"}`, "every_seconds", "is required for kind every"},
		{`{"kind":"every","every_seconds":0}`, "every_seconds", "must be between 1 and"},
		{`{"kind":"weekly"}`, "kind", `unknown kind "weekly" (want once, cron or every)`},
		{`{}`, "kind", "is required: once, cron or every"},
		{`{"kind":"cron","cron_expr":"* * * * *","delay_seconds":5}`, "delay_seconds", "is only for kind once, not cron"},
		{`{"kind":"once","delay_seconds":5,"max_failures":26}`, "max_failures", "must be between 1 and 25, got 26"},
		{`{"kind":"once","delay_seconds":5,"label":"a\nb"}`, "label", "must not contain control characters"},
		{"{\"kind\":\"once\",\"delay_seconds\":5,\"payload\":{\"a\":\"\xff\"}}", "payload", "must be valid UTF-8"},
	} {
		rec := b.as(t, didA, http.MethodPost, "/v1/alarms", tc.body)
		requireError(t, rec, http.StatusBadRequest, api.CodeInvalidArgument, tc.field+": "+tc.text)
	}
	require.Empty(t, b.listAlarms(t, didA, ""), "no refused post wrote")
}

// The body decoder refuses unknown fields with a suggestion and reports
// every field at fault at once.
func TestAlarmBodyAllErrorsAtOnce(t *testing.T) {
	t.Parallel()
	b := setupAlarms(t, api.Config{}, nil)
	rec := b.as(t, didA, http.MethodPost, "/v1/alarms",
		`{"kind":"once","delay_second":600,"lable":"x","fire_at":5,"max_failures":"3","payload":{"ok":true}}`)
	e := requireError(t, rec, http.StatusBadRequest, api.CodeInvalidArgument, "")
	var fields []string
	for _, d := range e.Details {
		fields = append(fields, d.Field)
	}
	require.ElementsMatch(t, []string{"delay_second", "lable", "fire_at", "max_failures"}, fields, e.Message)
	require.Contains(t, e.Message, `unknown field "delay_second" (did you mean "delay_seconds"?)`)
	require.Contains(t, e.Message, `unknown field "lable" (did you mean "label"?)`)
	require.Contains(t, e.Message, "fire_at: must be a string")
	require.Contains(t, e.Message, "max_failures: must be an integer")

	requireError(t, b.as(t, didA, http.MethodPost, "/v1/alarms", `[1]`), http.StatusBadRequest, api.CodeInvalidArgument, "body: must be a JSON object")
	rec = httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/v1/alarms", strings.NewReader(`{"kind":"once","delay_seconds":5}`))
	req.Header.Set("Authorization", "Bearer "+token(t, testSecret, didA, time.Hour))
	b.e.ServeHTTP(rec, req)
	requireError(t, rec, http.StatusUnsupportedMediaType, api.CodeUnsupportedMedia, "Content-Type: must be application/json")
}

func TestAlarmDedup(t *testing.T) {
	t.Parallel()
	b := setupAlarms(t, api.Config{}, nil)
	body := `{"kind":"once","delay_seconds":600,"idempotency_key":"k-1"}`
	first := b.alarmOK(t, didA, http.StatusCreated, http.MethodPost, "/v1/alarms", body)
	require.False(t, first.Deduped)
	require.Equal(t, "k-1", first.IdempotencyKey)
	b.clock.Advance(time.Minute)
	again := b.alarmOK(t, didA, http.StatusOK, http.MethodPost, "/v1/alarms", `{"kind":"cron","cron_expr":"* * * * *","idempotency_key":"k-1"}`)
	require.True(t, again.Deduped)
	require.Equal(t, first.AlarmView, again.AlarmView, "the existing alarm, unchanged")

	// Owner B's equal key is B's own: it neither finds nor blocks A's.
	other := b.alarmOK(t, didB, http.StatusCreated, http.MethodPost, "/v1/alarms", body)
	require.False(t, other.Deduped)
	require.NotEqual(t, first.ID, other.ID)
	require.Len(t, b.listAlarms(t, didA, ""), 1)
	require.Len(t, b.listAlarms(t, didB, ""), 1)

	// Without a key, each post is an alarm.
	b.alarmOK(t, didA, http.StatusCreated, http.MethodPost, "/v1/alarms", `{"kind":"once","delay_seconds":600}`)
	b.alarmOK(t, didA, http.StatusCreated, http.MethodPost, "/v1/alarms", `{"kind":"once","delay_seconds":600}`)
	require.Len(t, b.listAlarms(t, didA, ""), 3)
}

func TestAlarmDedupConcurrent(t *testing.T) {
	t.Parallel()
	b := setupAlarms(t, api.Config{}, nil)
	var wg sync.WaitGroup
	codes := make(chan int, 50)
	ids := make(chan string, 50)
	for range 50 {
		wg.Go(func() {
			rec := b.as(t, didA, http.MethodPost, "/v1/alarms", `{"kind":"cron","cron_expr":"0 9 * * 1-5","timezone":"Europe/Berlin","idempotency_key":"standup"}`)
			codes <- rec.Code
			var v api.AlarmView
			if err := json.Unmarshal(rec.Body.Bytes(), &v); err == nil {
				ids <- v.ID
			}
		})
	}
	wg.Wait()
	close(codes)
	close(ids)
	created := 0
	for c := range codes {
		require.Contains(t, []int{http.StatusCreated, http.StatusOK}, c)
		if c == http.StatusCreated {
			created++
		}
	}
	require.Equal(t, 1, created)
	distinct := map[string]bool{}
	for id := range ids {
		distinct[id] = true
	}
	require.Len(t, distinct, 1)
	require.Len(t, b.listAlarms(t, didA, ""), 1)
}

// Owner B can neither read, list, cancel nor dedupe against A's alarm,
// and B's 404 for A's alarm reads as for one that does not exist.
func TestAlarmOwnerIsolation(t *testing.T) {
	t.Parallel()
	b := setupAlarms(t, api.Config{}, nil)
	a := b.alarmOK(t, didA, http.StatusCreated, http.MethodPost, "/v1/alarms", `{"kind":"once","delay_seconds":600,"idempotency_key":"k"}`)
	missing := "5b0f4a52-3c1e-4a8b-9d6e-0123456789ab"
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		theirs := b.as(t, didB, method, "/v1/alarms/"+a.ID, "")
		none := b.as(t, didB, method, "/v1/alarms/"+missing, "")
		requireError(t, theirs, http.StatusNotFound, api.CodeNotFound, "alarm "+a.ID+": not found")
		requireError(t, none, http.StatusNotFound, api.CodeNotFound, "alarm "+missing+": not found")
		require.Equal(t, strings.ReplaceAll(theirs.Body.String(), a.ID, "ID"), strings.ReplaceAll(none.Body.String(), missing, "ID"))
	}
	require.Empty(t, b.listAlarms(t, didB, ""))
	require.Empty(t, b.listAlarms(t, didB, "?status=active"))
	mine := b.alarmOK(t, didB, http.StatusCreated, http.MethodPost, "/v1/alarms", `{"kind":"once","delay_seconds":600,"idempotency_key":"k"}`)
	require.NotEqual(t, a.ID, mine.ID)

	// A's alarm is untouched.
	got := b.alarmOK(t, didA, http.StatusOK, http.MethodGet, "/v1/alarms/"+a.ID, "")
	require.Equal(t, "active", got.Status)
	// Another key of the same user is another owner.
	requireError(t, b.as(t, "did:matrix:user-a:otherKey", http.MethodGet, "/v1/alarms/"+a.ID, ""), http.StatusNotFound, api.CodeNotFound, "")
}

// Every alarm route needs a verified token whose sub is a DID, even on an
// open API, and refuses anything else with 401 before Redis is touched.
func TestAlarmUnauthenticated(t *testing.T) {
	t.Parallel()
	v, err := auth.NewVerifier(auth.Config{Secret: testSecret})
	require.NoError(t, err)
	for name, cfg := range map[string]api.Config{
		"dev (open, owner tokens verified)": {OwnerAuth: v, RateLimit: rate.Inf},
		"auth":                              {Auth: v, RateLimit: rate.Inf},
		"open without a verifier":           {RateLimit: rate.Inf},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOpts{cfg: &cfg})
			ctx := context.Background()
			before := b.keys(t)
			require.NoError(t, b.rdb.ConfigResetStat(ctx).Err())
			cases := map[string]string{
				"missing":    "",
				"expired":    "Bearer " + token(t, testSecret, didA, -1),
				"foreign":    "Bearer " + token(t, foreignSecret, didA, time.Hour),
				"malformed":  "Bearer abc.def.ghi",
				"basic":      "Basic b3BzOnB3",
				"not a DID":  "Bearer " + token(t, testSecret, "ops", time.Hour, auth.ScopeAdmin),
				"empty user": "Bearer " + token(t, testSecret, "did:matrix::key", time.Hour),
				"no key":     "Bearer " + token(t, testSecret, "did:matrix:user", time.Hour),
			}
			if cfg.Auth == nil && cfg.OwnerAuth == nil {
				cases["valid"] = "Bearer " + token(t, testSecret, didA, time.Hour)
			}
			for why, authz := range cases {
				for _, r := range [][2]string{{http.MethodPost, "/v1/alarms"}, {http.MethodGet, "/v1/alarms"},
					{http.MethodGet, "/v1/alarms/x"}, {http.MethodDelete, "/v1/alarms/x"}} {
					req := httptest.NewRequest(r[0], r[1], strings.NewReader(`{"kind":"once","delay_seconds":5}`))
					req.Header.Set("Content-Type", "application/json")
					if authz != "" {
						req.Header.Set("Authorization", authz)
					}
					rec := httptest.NewRecorder()
					b.e.ServeHTTP(rec, req)
					e := requireError(t, rec, http.StatusUnauthorized, api.CodeUnauthenticated, "")
					require.NotEmpty(t, e.Message, "%s %s %s", why, r[0], r[1])
					require.Equal(t, `Bearer realm="chronos"`, rec.Header().Get("WWW-Authenticate"))
					if why == "not a DID" && (cfg.Auth != nil || cfg.OwnerAuth != nil) {
						require.Contains(t, e.Message, "malformed DID")
					}
				}
			}
			stats, err := b.rdb.Info(ctx, "commandstats").Result()
			require.NoError(t, err)
			for _, line := range strings.Split(stats, "\n") {
				if strings.HasPrefix(line, "cmdstat_") {
					require.Regexp(t, `^cmdstat_(config\|resetstat|info):`, line)
				}
			}
			require.Equal(t, before, b.keys(t))
		})
	}
}

// With Auth, an agent's token needs no scope for its alarms.
func TestAlarmNeedsNoScope(t *testing.T) {
	t.Parallel()
	b := setupAuth(t, api.Config{RateLimit: rate.Inf})
	v := b.alarmOK(t, didA, http.StatusCreated, http.MethodPost, "/v1/alarms", `{"kind":"once","delay_seconds":60}`)
	b.alarmOK(t, didA, http.StatusOK, http.MethodGet, "/v1/alarms/"+v.ID, "")
	// The same DID's token reads no schedules without a scope.
	requireError(t, b.as(t, didA, http.MethodGet, "/schedules", ""), http.StatusForbidden, api.CodePermissionDenied, "")
}

func TestAlarmCancel(t *testing.T) {
	t.Parallel()
	b := setupAlarms(t, api.Config{}, nil)
	a := b.alarmOK(t, didA, http.StatusCreated, http.MethodPost, "/v1/alarms", `{"kind":"cron","cron_expr":"* * * * *"}`)
	b.clock.Advance(time.Second)
	c := b.alarmOK(t, didA, http.StatusOK, http.MethodDelete, "/v1/alarms/"+a.ID, "")
	require.Equal(t, "cancelled", c.Status)
	require.Nil(t, c.NextFireAt, "next_fire_at only while active")
	again := b.alarmOK(t, didA, http.StatusOK, http.MethodDelete, "/v1/alarms/"+a.ID, "")
	require.Equal(t, c.AlarmView, again.AlarmView, "terminal already: success, unchanged")
	got := b.alarmOK(t, didA, http.StatusOK, http.MethodGet, "/v1/alarms/"+a.ID, "")
	require.Equal(t, "cancelled", got.Status)

	// No scheduler plans it: a tick well past its times records no run.
	b.clock.Advance(10 * time.Minute)
	s, err := scheduler.New(b.store, nil, nil, nil)
	require.NoError(t, err)
	require.NoError(t, s.TickShard(context.Background(), queue.ShardOf(didA, b.store.Config().Shards)))
	runs, err := b.store.ListRuns(context.Background(), a.ID, 10)
	require.NoError(t, err)
	require.Empty(t, runs)
}

// payload and wake_message come back byte for byte: whitespace, key
// order, unicode, escapes, nesting and numbers past float64 and int64.
func TestAlarmPayloadByteForByte(t *testing.T) {
	t.Parallel()
	b := setupAlarms(t, api.Config{}, nil)
	payloads := []string{
		`{ "b": 1,   "a": [1, 2.50, 1e400, 12345678901234567890123456789, -0.0],
  "ü→😀": "ß\u00e9\n\"<&>\u2028", "nested": {"x": {"y": [null, true, {"z": []}]}} }`,
		`[1,2,3]`,
		`"just a string"`,
		`12345678901234567890.123456789e-5`,
		`null`,
		`{}`,
	}
	msg := "résumé 😀 <b>bold</b> & \"quotes\"\nline two\t\\"
	for _, p := range payloads {
		wm, _ := json.Marshal(msg)
		body := `{"kind":"once","delay_seconds":60,"wake_message":` + string(wm) + `,"payload":` + p + `}`
		rec := b.as(t, didA, http.MethodPost, "/v1/alarms", body)
		require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
		var v api.AlarmView
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &v))
		want := p
		if p == `null` {
			want = `{}` // null is an absent payload
		}
		for _, got := range []*httptest.ResponseRecorder{rec, b.as(t, didA, http.MethodGet, "/v1/alarms/"+v.ID, "")} {
			require.Contains(t, got.Body.String(), `"payload":`+want, "payload as posted")
			var back api.AlarmView
			require.NoError(t, json.Unmarshal(got.Body.Bytes(), &back))
			require.Equal(t, msg, back.WakeMessage)
			require.Contains(t, got.Body.String(), `<b>bold</b> & `, "not escaped for HTML")
		}
		require.Contains(t, b.as(t, didA, http.MethodGet, "/v1/alarms", "").Body.String(), `"payload":`+want)
	}
}

func TestAlarmLimits(t *testing.T) {
	t.Parallel()
	b := setupAlarms(t, api.Config{AlarmPayloadMaxBytes: 64, AlarmLabelMaxBytes: 8, AlarmWakeMessageMaxBytes: 16},
		&queue.Config{AlarmMaxActive: 2})
	big := `{"data":"` + strings.Repeat("x", 60) + `"}`
	requireError(t, b.as(t, didA, http.MethodPost, "/v1/alarms", `{"kind":"once","delay_seconds":5,"payload":`+big+`}`),
		http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge, "payload: larger than 64 bytes (ALARM_PAYLOAD_MAX_BYTES), got 71")
	requireError(t, b.as(t, didA, http.MethodPost, "/v1/alarms", `{"kind":"once","delay_seconds":5,"label":"123456789"}`),
		http.StatusBadRequest, api.CodeInvalidArgument, "label: longer than 8 bytes (ALARM_LABEL_MAX_BYTES), got 9")
	requireError(t, b.as(t, didA, http.MethodPost, "/v1/alarms", `{"kind":"once","delay_seconds":5,"wake_message":"12345678901234567"}`),
		http.StatusBadRequest, api.CodeInvalidArgument, "wake_message: longer than 16 bytes (ALARM_WAKE_MESSAGE_MAX_BYTES), got 17")
	b.alarmOK(t, didA, http.StatusCreated, http.MethodPost, "/v1/alarms", `{"kind":"once","delay_seconds":5,"label":"12345678","wake_message":"1234567890123456"}`)
	k := b.alarmOK(t, didA, http.StatusCreated, http.MethodPost, "/v1/alarms", `{"kind":"once","delay_seconds":5,"idempotency_key":"k"}`)
	requireError(t, b.as(t, didA, http.MethodPost, "/v1/alarms", `{"kind":"once","delay_seconds":5}`),
		http.StatusBadRequest, api.CodeQuotaExceeded, didA+" has 2 active alarms, the most allowed (ALARM_MAX_ACTIVE)")
	again := b.alarmOK(t, didA, http.StatusOK, http.MethodPost, "/v1/alarms", `{"kind":"once","delay_seconds":5,"idempotency_key":"k"}`)
	require.Equal(t, k.ID, again.ID, "a repeat is answered at the limit")
	b.alarmOK(t, didA, http.StatusOK, http.MethodDelete, "/v1/alarms/"+k.ID, "")
	b.alarmOK(t, didA, http.StatusCreated, http.MethodPost, "/v1/alarms", `{"kind":"once","delay_seconds":5}`)
	b.alarmOK(t, didB, http.StatusCreated, http.MethodPost, "/v1/alarms", `{"kind":"once","delay_seconds":5}`)
}

func TestAlarmListOrderFilterAndCap(t *testing.T) {
	t.Parallel()
	b := setupAlarms(t, api.Config{}, nil)
	var ids []string
	for i := range 5 {
		v := b.alarmOK(t, didA, http.StatusCreated, http.MethodPost, "/v1/alarms", fmt.Sprintf(`{"kind":"once","delay_seconds":%d}`, 60+i))
		ids = append(ids, v.ID)
		b.clock.Advance(time.Millisecond)
	}
	b.alarmOK(t, didA, http.StatusOK, http.MethodDelete, "/v1/alarms/"+ids[1], "")
	b.alarmOK(t, didA, http.StatusOK, http.MethodDelete, "/v1/alarms/"+ids[3], "")
	idsOf := func(vs []api.AlarmView) []string {
		out := make([]string, len(vs))
		for i, v := range vs {
			out[i] = v.ID
		}
		return out
	}
	require.Equal(t, []string{ids[4], ids[3], ids[2], ids[1], ids[0]}, idsOf(b.listAlarms(t, didA, "")))
	require.Equal(t, []string{ids[4], ids[2], ids[0]}, idsOf(b.listAlarms(t, didA, "?status=active")))
	require.Equal(t, []string{ids[3], ids[1]}, idsOf(b.listAlarms(t, didA, "?status=cancelled")))
	require.Empty(t, b.listAlarms(t, didA, "?status=fired"))
	require.Equal(t, []string{ids[4], ids[3]}, idsOf(b.listAlarms(t, didA, "?limit=2")))
	require.Equal(t, []string{ids[4]}, idsOf(b.listAlarms(t, didA, "?status=active&limit=1")))
	for _, v := range b.listAlarms(t, didA, "") {
		require.Equal(t, v.Status == "active", v.NextFireAt != nil, "next_fire_at only while active")
	}
	requireError(t, b.as(t, didA, http.MethodGet, "/v1/alarms?status=done", ""), http.StatusBadRequest, api.CodeInvalidArgument,
		`status: unknown status "done" (want active, fired, cancelled or failed)`)
	requireError(t, b.as(t, didA, http.MethodGet, "/v1/alarms?limit=501", ""), http.StatusBadRequest, api.CodeInvalidArgument,
		`limit: must be an integer between 1 and 500`)
	rec := b.as(t, didA, http.MethodGet, "/v1/alarms", "")
	require.JSONEq(t, `{"alarms":[]}`, b.as(t, didB, http.MethodGet, "/v1/alarms", "").Body.String())
	require.Equal(t, http.StatusOK, rec.Code)
}

// The registrar's routes leave alarms alone: an alarm's id is not found
// there, and the list leaves alarms out.
func TestRegistrarRoutesHideAlarms(t *testing.T) {
	t.Parallel()
	b := setupAlarms(t, api.Config{}, nil)
	a := b.alarmOK(t, didA, http.StatusCreated, http.MethodPost, "/v1/alarms", `{"kind":"cron","cron_expr":"* * * * *"}`)
	requireError(t, b.do(t, http.MethodGet, "/schedules/"+a.ID, nil), http.StatusNotFound, api.CodeNotFound, "")
	requireError(t, b.do(t, http.MethodGet, "/schedules/"+a.ID+"/runs", nil), http.StatusNotFound, api.CodeNotFound, "")
	requireError(t, b.do(t, http.MethodDelete, "/schedules/"+a.ID, nil), http.StatusNotFound, api.CodeNotFound, "")
	requireError(t, b.do(t, http.MethodPost, "/schedules/pause", map[string]any{"schedule_id": a.ID, "paused": true}),
		http.StatusNotFound, api.CodeNotFound, "")
	requireError(t, b.do(t, http.MethodPost, "/schedules/upsert", schedule(a.ID)), http.StatusConflict, api.CodeConflict,
		"schedule_id "+a.ID+" is an agent's alarm")
	ok[api.UpsertResponse](t, b, http.StatusOK, http.MethodPost, "/schedules/upsert", schedule("plain"))
	l := ok[api.ScheduleList](t, b, http.StatusOK, http.MethodGet, "/schedules?limit=500", nil)
	require.Len(t, l.Schedules, 1)
	require.Equal(t, "plain", l.Schedules[0].ID)
	got := b.alarmOK(t, didA, http.StatusOK, http.MethodGet, "/v1/alarms/"+a.ID, "")
	require.Equal(t, a.AlarmView, got.AlarmView, "untouched")
	requireError(t, b.as(t, didA, http.MethodGet, "/v1/alarms/plain", ""), http.StatusNotFound, api.CodeNotFound, "alarm plain: not found")
}

// Alarms catch up with policy latest: a once alarm missed in downtime
// fires late rather than never; a cron alarm delivers one wake for all it
// missed, then goes on at its times.
func TestAlarmCatchupAfterDowntime(t *testing.T) {
	t.Parallel()
	b := setupAlarms(t, api.Config{}, nil)
	ctx := context.Background()
	once := b.alarmOK(t, didA, http.StatusCreated, http.MethodPost, "/v1/alarms", `{"kind":"once","delay_seconds":60}`)
	cron := b.alarmOK(t, didA, http.StatusCreated, http.MethodPost, "/v1/alarms", `{"kind":"cron","cron_expr":"* * * * *"}`)
	s, err := scheduler.New(b.store, nil, nil, nil)
	require.NoError(t, err)
	shard := queue.ShardOf(didA, b.store.Config().Shards)

	b.clock.Advance(time.Hour + 30*time.Second) // down for an hour
	require.NoError(t, s.TickShard(ctx, shard))
	runs, err := b.store.ListRuns(ctx, once.ID, 10)
	require.NoError(t, err)
	require.Len(t, runs, 1, "the missed once alarm fires, late")
	require.Equal(t, t0.Add(time.Minute), runs[0].RunAt)
	require.Equal(t, model.RunEnqueued, runs[0].Status)

	runs, err = b.store.ListRuns(ctx, cron.ID, 100)
	require.NoError(t, err)
	var enqueued []time.Time
	for _, r := range runs {
		if r.Status == model.RunEnqueued {
			enqueued = append(enqueued, r.RunAt)
		}
	}
	require.Equal(t, []time.Time{t0.Add(time.Hour)}, enqueued, "one wake for the hour missed: its latest time")

	// Then it goes on at its times.
	b.clock.Set(t0.Add(61 * time.Minute))
	require.NoError(t, s.TickShard(ctx, shard))
	runs, err = b.store.ListRuns(ctx, cron.ID, 1)
	require.NoError(t, err)
	require.Equal(t, t0.Add(61*time.Minute), runs[0].RunAt)
	require.Equal(t, model.RunEnqueued, runs[0].Status)
	got := b.alarmOK(t, didA, http.StatusOK, http.MethodGet, "/v1/alarms/"+cron.ID, "")
	require.Equal(t, t0.Add(time.Hour), *got.NextFireAt, "the earliest wake not yet delivered")
}

// An alarm the cron tool disabled is active, paused, without a
// next_fire_at.
func TestAlarmPausedByTheCronTool(t *testing.T) {
	t.Parallel()
	b := setupAlarms(t, api.Config{}, nil)
	a := b.alarmOK(t, didA, http.StatusCreated, http.MethodPost, "/v1/alarms", `{"kind":"cron","cron_expr":"@hourly"}`)
	require.False(t, a.Paused)
	_, err := b.store.PauseAlarm(context.Background(), didA, a.ID, true)
	require.NoError(t, err)
	rec := b.as(t, didA, http.MethodGet, "/v1/alarms/"+a.ID, "")
	require.Equal(t, http.StatusOK, rec.Code)
	var v api.AlarmView
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &v))
	require.Equal(t, "active", v.Status)
	require.True(t, v.Paused)
	require.Nil(t, v.NextFireAt)
	require.NotContains(t, rec.Body.String(), "next_fire_at")
}

// Every AlarmRequest property of the OpenAPI document is a field POST
// /v1/alarms takes, and the document lists every field it takes.
func TestOpenAPIAlarmRequestFields(t *testing.T) {
	t.Parallel()
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(api.OpenAPI(), &doc))
	props := doc.Components.Schemas["AlarmRequest"].Properties
	require.NotEmpty(t, props)
	b := setupAlarms(t, api.Config{}, nil)
	for name := range props {
		e := requireError(t, b.as(t, didA, http.MethodPost, "/v1/alarms", `{"`+name+`":{"not":"a valid value"},"kind":"once"}`),
			http.StatusBadRequest, api.CodeInvalidArgument, "")
		require.NotContains(t, e.Message, `unknown field "`+name+`"`)
	}
	// A field the decoder takes that the document leaves out would read
	// as unknown here: each one the handler names in an error is listed.
	e := requireError(t, b.as(t, didA, http.MethodPost, "/v1/alarms", `{"kind":"once","x":1}`), http.StatusBadRequest, api.CodeInvalidArgument, "")
	require.Contains(t, e.Message, `unknown field "x"`)
	for _, f := range []string{"kind", "label", "delay_seconds", "fire_at", "cron_expr", "timezone", "every_seconds",
		"conversation_id", "wake_message", "payload", "idempotency_key", "max_failures"} {
		require.Contains(t, props, f)
	}
}
