package main

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestOnceAndEveryThroughThePipeline: once schedules (by delay_seconds
// and by fire_at) and an every schedule, upserted through the API of
// chronos dev, are planned by its scheduler and run by its launcher's
// demo executor: each once schedule runs exactly once and ends completed
// with its run's status, the every schedule runs at its anchor plus whole
// intervals.
func TestOnceAndEveryThroughThePipeline(t *testing.T) {
	t.Parallel()
	req := startInProcess(t, "dev", "--http-addr", "127.0.0.1:0", "--tick-ms", "100", "--log-level", "warn")
	code, body := req(http.MethodPut, "/workflows/hello/versions/1", `{"nodes":[{"id":"say-hi"}]}`)
	require.Equal(t, http.StatusOK, code, body)

	upsert := func(body string) (next time.Time) {
		t.Helper()
		code, resp := req(http.MethodPost, "/schedules/upsert", body)
		require.Equal(t, http.StatusOK, code, resp)
		var res struct {
			NextRunAt *time.Time `json:"next_run_at"`
		}
		require.NoError(t, json.Unmarshal([]byte(resp), &res))
		require.NotNil(t, res.NextRunAt, resp)
		return *res.NextRunAt
	}
	const target = `"workflow_id":"hello","version":1,"user_id":"me"`
	byDelay := `{"schedule_id":"once-delay",` + target + `,"kind":"once","delay_seconds":1}`
	delayAt := upsert(byDelay)
	// fire_at a few seconds ahead of the server's clock, which the delay
	// just read: ahead still when the next request comes, on a loaded
	// machine too.
	fireAt := delayAt.Add(3 * time.Second).Format(time.RFC3339)
	byFireAt := `{"schedule_id":"once-at",` + target + `,"kind":"once","fire_at":"` + fireAt + `"}`
	require.Equal(t, delayAt.Add(3*time.Second), upsert(byFireAt))
	every := `{"schedule_id":"every",` + target + `,"kind":"every","every_seconds":1,"overlap_policy":"allow"}`
	upsert(every)

	type run struct {
		RunAt  time.Time `json:"run_at"`
		Status string    `json:"status"`
	}
	runs := func(id string) []run {
		_, body := req(http.MethodGet, "/schedules/"+id+"/runs?limit=100", "")
		var res struct {
			Runs []run `json:"runs"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &res), body)
		return res.Runs
	}
	type detail struct {
		State     string     `json:"state"`
		NextRunAt *time.Time `json:"next_run_at"`
		Anchor    time.Time  `json:"anchor"`
		LastRun   *run       `json:"last_run"`
	}
	get := func(id string) detail {
		_, body := req(http.MethodGet, "/schedules/"+id, "")
		var d detail
		require.NoError(t, json.Unmarshal([]byte(body), &d), body)
		return d
	}

	for _, id := range []string{"once-delay", "once-at"} {
		require.Eventually(t, func() bool {
			d := get(id)
			return d.State == "completed" && d.LastRun != nil && d.LastRun.Status == "SUCCESS"
		}, 20*time.Second, 50*time.Millisecond, "%s did not run and complete", id)
		require.Nil(t, get(id).NextRunAt)
	}
	// Repeated bodies, after the runs, change nothing and fire nothing.
	for _, b := range []string{byDelay, byFireAt} {
		code, resp := req(http.MethodPost, "/schedules/upsert", b)
		require.Equal(t, http.StatusOK, code, resp)
		require.Contains(t, resp, `"changed":false`)
		require.Contains(t, resp, `"state":"completed"`)
	}
	require.Eventually(t, func() bool { return len(runs("every")) >= 4 }, 20*time.Second, 50*time.Millisecond,
		"every did not run four times")
	// A tick after the repeats, an every run later, has planned nothing
	// more for the once schedules.
	require.Equal(t, []run{{delayAt, "SUCCESS"}}, runs("once-delay"))
	require.Equal(t, []run{{delayAt.Add(3 * time.Second), "SUCCESS"}}, runs("once-at"))

	anchor := get("every").Anchor
	for _, r := range runs("every") {
		d := r.RunAt.Sub(anchor)
		require.True(t, d > 0 && d%time.Second == 0, "every run at %s, anchor %s", r.RunAt, anchor)
	}
}
