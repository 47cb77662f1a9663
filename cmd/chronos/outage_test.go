package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
)

// Runs the schedulers enqueue on time while every launcher is down follow
// their schedule's catch-up policy when a launcher comes back more than
// LAUNCH_GRACE late (real binary, real clock): none and latest skip them
// (latest: each has a later run due too), fire_immediately starts them
// all; runs due after the launcher is back start as usual.
func TestLauncherOutageFollowsTheCatchupPolicy(t *testing.T) {
	if testing.Short() {
		t.Skip("runs processes for about 20 seconds")
	}
	t.Parallel()
	c := newChaosCluster(t)
	api := c.start("api", "api", nil)
	c.api = "http://" + api.addr
	c.start("scheduler", "scheduler", nil)
	code, body := c.call(http.MethodPut, "/workflows/chaos/versions/1", `{"steps":["tick"]}`)
	require.Equal(t, http.StatusOK, code, body)

	policies := []string{"none", "latest", "fire_immediately"}
	created := time.Now()
	for _, p := range policies {
		code, body := c.call(http.MethodPost, "/schedules/upsert", fmt.Sprintf(
			`{"schedule_id":"outage-%s","workflow_id":"chaos","version":1,"user_id":"u","cron_expr":"* * * * * *","timezone":"UTC","overlap_policy":"allow","catchup_policy":%q}`, p, p))
		require.Equal(t, http.StatusOK, code, body)
	}
	// Real time must pass: with no launcher the runs wait in asynq, and
	// the outage must last long enough that the first runs are judged
	// late when the launcher comes up.
	const outage = 12 * time.Second
	<-time.After(outage)
	env := c.launcherEnv()
	env["LAUNCH_GRACE"] = "3s"
	up := time.Now()
	c.start("launcher", "launcher", env)

	// Runs due 5 s or more before the launcher came up are at least 5 s
	// late when it takes them; runs due a second after it are on time.
	var judged, onTime []time.Time
	for at := created.Truncate(time.Second).Add(2 * time.Second); !at.After(up.Add(-5 * time.Second)); at = at.Add(time.Second) {
		judged = append(judged, at)
	}
	for at := up.Truncate(time.Second).Add(2 * time.Second); !at.After(up.Add(4 * time.Second)); at = at.Add(time.Second) {
		onTime = append(onTime, at)
	}
	require.NotEmpty(t, judged)
	status := func(p string, at time.Time) (st, errText string) {
		key := model.IdempotencyKey("outage-"+p, at)
		var run struct{ Status, Error string }
		if code, body := c.call(http.MethodGet, "/runs/"+key, ""); code == http.StatusOK {
			_ = json.Unmarshal([]byte(body), &run)
		}
		return run.Status, run.Error
	}
	c.waitFor(30*time.Second, "every judged and on-time run ended", func() (bool, string) {
		for _, p := range policies {
			for _, at := range append(append([]time.Time{}, judged...), onTime...) {
				if st, _ := status(p, at); st != "SUCCESS" && st != "SKIPPED" {
					return false, fmt.Sprintf("run of outage-%s at %s is %q", p, at.Format(time.TimeOnly), st)
				}
			}
		}
		return true, ""
	})
	calls, _ := c.exec.snapshot()
	for _, p := range policies {
		for _, at := range judged {
			st, errText := status(p, at)
			key := model.IdempotencyKey("outage-"+p, at)
			if p == "fire_immediately" {
				require.Equal(t, "SUCCESS", st, "%s at %s", p, at)
				require.Positive(t, calls[key], "%s at %s never reached the executor", p, at)
				continue
			}
			require.Equal(t, "SKIPPED", st, "%s at %s", p, at)
			require.Contains(t, errText, "more than LAUNCH_GRACE 3s")
			require.Contains(t, errText, "(catchup_policy "+p+")")
			require.Zero(t, calls[key], "skipped run %s at %s reached the executor", p, at)
		}
		for _, at := range onTime {
			st, _ := status(p, at)
			require.Equal(t, "SUCCESS", st, "%s at %s (after the launcher came back)", p, at)
		}
	}
	t.Logf("%d runs per schedule judged late, %d on time", len(judged), len(onTime))
}
