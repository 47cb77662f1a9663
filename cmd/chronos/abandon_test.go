package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A launcher killed during a run's last attempt (TASK_MAX_RETRY=0: its
// first) leaves the task to the surviving launcher's recovery, which
// archives it once the lease has expired; that launcher then marks the run
// FAILED, where it would otherwise stay ENQUEUED. asynq's recoverer's
// timings, which recovery keeps (30 s leases, a pass a minute, 30 s of
// slack), make this take one to two
// minutes, so the test runs alongside the others.
func TestKilledLauncherOnLastAttemptFailsTheRun(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the launchers' lease recovery (1-2 minutes); runs without -short")
	}
	t.Parallel()
	c := newChaosCluster(t)
	called := make(chan struct{}, 1)
	hang := make(chan struct{})
	executor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case called <- struct{}{}:
		default:
		}
		select { // the run never ends while its launcher lives
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(executor.Close)
	t.Cleanup(func() { close(hang) })
	env := map[string]string{"EXECUTOR": "http", "EXECUTOR_URL": executor.URL, "EXECUTOR_TIMEOUT": "4m",
		"TASK_MAX_RETRY": "0", "ARCHIVE_SWEEP_INTERVAL": "1s"}

	// The retry count travels in the task, so it is the enqueuing
	// process's (the API's, for a manual run) that counts.
	api := c.start("api", "api", map[string]string{"TASK_MAX_RETRY": "0"})
	c.api = "http://" + api.addr
	doomed := c.start("launcher-0", "launcher", env)
	code, body := c.call(http.MethodPut, "/workflows/wf/versions/1", `{"nodes":[]}`)
	require.Equal(t, http.StatusOK, code, body)
	code, body = c.call(http.MethodPost, "/run-launcher/start",
		`{"workflow_id":"wf","version":"1","user_id":"u","scheduled_for":"2026-01-01T00:00:00Z","idempotency_key":"doomed-run"}`)
	require.Equal(t, http.StatusOK, code, body)
	select {
	case <-called:
	case <-time.After(30 * time.Second):
		t.Fatal("the executor was never called")
	}
	c.kill(doomed)
	killed := time.Now()
	c.start("launcher-1", "launcher", env)

	var run struct{ Status, Error string }
	c.waitFor(3*time.Minute, "the killed launcher's run FAILED", func() (bool, string) {
		_, body := c.call(http.MethodGet, "/runs/doomed-run", "")
		_ = json.Unmarshal([]byte(body), &run)
		return run.Status == "FAILED", "status " + run.Status
	})
	require.Contains(t, run.Error, "launch abandoned: asynq archived its task")
	require.Contains(t, run.Error, "lease expired")
	t.Logf("run FAILED %s after the kill: %s", time.Since(killed).Round(time.Second), run.Error)
}
