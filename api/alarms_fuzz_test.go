package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api"
	"github.com/chronos-sched/chronos/api/auth"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

const alarmFields = `body|kind|label|delay_seconds|fire_at|cron_expr|timezone|every_seconds|conversation_id|wake_message|payload|idempotency_key|max_failures|owner|user_id`

// newAlarmFuzzAPI is newFuzzAPI with owner tokens verified, and a token of
// didA.
func newAlarmFuzzAPI(f *testing.F) (*fuzzAPI, string) {
	rdb := queuetest.StartRedis(f).Client(f)
	store, err := queue.NewStore(f.Context(), rdb, queue.NewSimClock(t0), nil)
	require.NoError(f, err)
	v, err := auth.NewVerifier(auth.Config{Secret: testSecret})
	require.NoError(f, err)
	e, err := api.New(store, openUnlessAuth(&api.Config{OwnerAuth: v}), nil, nil)
	require.NoError(f, err)
	tok, err := auth.Mint(auth.Grant{Subject: didA, TTL: 100 * 365 * 24 * time.Hour}, testSecret, nil)
	require.NoError(f, err)
	return &fuzzAPI{e: e, rdb: rdb}, tok
}

func (a *fuzzAPI) serveAs(tok, method, target, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	rec := httptest.NewRecorder()
	a.e.ServeHTTP(rec, req)
	return rec
}

// FuzzAlarmBody: any body to POST /v1/alarms answers 201 (or 200 for a
// repeated key), a 400 naming a field, or 413; a refusal writes nothing;
// a created alarm reads back with its payload and wake message as posted.
func FuzzAlarmBody(f *testing.F) {
	a, tok := newAlarmFuzzAPI(f)
	for _, s := range []string{
		"", `{`, `[]`, `"x"`, `{"kind":"once"}`,
		`{"kind":"once","delay_seconds":600,"payload":{"a": [1, 2.50, 123456789012345678901234567890]}}`,
		`{"kind":"once","fire_at":"2026-01-01T00:00:01Z","wake_message":"<b>\u00e9</b>\n"}`,
		`{"kind":"cron","cron_expr":"0 9 * * 1-5","timezone":"Europe/Berlin","idempotency_key":"k"}`,
		`{"kind":"cron","cron_expr":"@every 90s","payload":"s","label":"l","conversation_id":"c","max_failures":25}`,
		`{"kind":"every","every_seconds":1,"payload":null}`,
		`{"kind":"once","delay_seconds":1e3}`, `{"kind":"once","delay_seconds":-1}`,
		`{"kind":"once","delay_seconds":9223372036854775807}`,
		`{"kind":"cron","cron_expr":"0 0 30 2 *"}`, `{"kind":"cron","cron_expr":"* * * * *","timezone":"Local"}`,
		`{"kind":"once","delay_seconds":5,"payload":{"x":1},"payload":[2]}`,
		`{"kind":"once","delay_seconds":5,"color":"red"}`,
		"{\"kind\":\"once\",\"delay_seconds\":5,\"label\":\"\xff\"}",
		"{\"kind\":\"once\",\"delay_seconds\":5,\"payload\":[\"\xff\"]}",
		`{"kind":"once","delay_seconds":5,"wake_message":"\ud800"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		before := a.snapshot(t)
		rec := a.serveAs(tok, http.MethodPost, "/v1/alarms", body)
		if rec.Code != http.StatusCreated && rec.Code != http.StatusOK {
			checkError(t, rec, alarmFields)
			require.Equal(t, before, a.snapshot(t), "a refused post wrote to Redis: %s", body)
			return
		}
		var v api.AlarmView
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &v), "body: %s", rec.Body.String())
		got := a.serveAs(tok, http.MethodGet, "/v1/alarms/"+v.ID, "")
		require.Equal(t, http.StatusOK, got.Code, got.Body.String())
		var back api.AlarmView
		require.NoError(t, json.Unmarshal(got.Body.Bytes(), &back))
		require.Equal(t, v, back)
		require.Equal(t, "active", back.Status)
		require.NotNil(t, back.NextFireAt)
		require.True(t, back.NextFireAt.After(t0))

		if rec.Code == http.StatusCreated {
			var o map[string]json.RawMessage
			require.NoError(t, json.Unmarshal([]byte(body), &o))
			want := []byte("{}")
			if p, ok := o["payload"]; ok && !bytes.Equal(bytes.TrimSpace(p), []byte("null")) {
				want = p
			}
			require.Contains(t, got.Body.String(), `"payload":`+string(want), "payload as posted")
			var msg string
			if m, ok := o["wake_message"]; ok {
				_ = json.Unmarshal(m, &msg)
			}
			require.Equal(t, msg, back.WakeMessage)
		}
		a.serveAs(tok, http.MethodDelete, "/v1/alarms/"+v.ID, "")
	})
}
