package main

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// While a process stops (here waiting on a run the executor never ends,
// up to SHUTDOWN_TIMEOUT) /readyz answers 503, and a second SIGTERM makes
// it exit at once (issue 26 finding 7: the second signal was ignored and
// /readyz stayed 200).
func TestStoppingProcessIsNotReadyAndASecondSignalForcesExit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the chronos binary; runs without -short")
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
		select { // the run never ends while the process lives
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(executor.Close)
	t.Cleanup(func() { close(hang) })
	p := c.start("all", "all", map[string]string{"EXECUTOR": "http", "EXECUTOR_URL": executor.URL,
		"EXECUTOR_TIMEOUT": "4m", "SHUTDOWN_TIMEOUT": "4m"})
	c.api = "http://" + p.addr
	code, body := c.call(http.MethodPut, "/workflows/wf/versions/1", `{"nodes":[]}`)
	require.Equal(t, http.StatusOK, code, body)
	code, body = c.call(http.MethodPost, "/run-launcher/start",
		`{"workflow_id":"wf","version":"1","user_id":"u","scheduled_for":"2026-01-01T00:00:00Z"}`)
	require.Equal(t, http.StatusOK, code, body)
	select {
	case <-called:
	case <-time.After(30 * time.Second):
		t.Fatal("the executor was never called")
	}

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	c.waitFor(10*time.Second, "/readyz 503 while stopping", func() (bool, string) {
		code, body := c.call(http.MethodGet, "/readyz", "")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "stopping"), body
	})
	select {
	case <-p.done:
		t.Fatalf("exited before its run ended or a second signal: %v", p.err)
	default:
	}

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatal("a second SIGTERM did not end the process")
	}
	var ee *exec.ExitError
	require.True(t, errors.As(p.err, &ee), "exit: %v", p.err)
	require.Equal(t, 2, ee.ExitCode())
	log, err := os.ReadFile(p.log)
	require.NoError(t, err)
	require.Contains(t, string(log), "a second signal (terminated) during shutdown: exiting now")
}
