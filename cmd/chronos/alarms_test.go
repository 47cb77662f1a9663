package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/queue/queuetest"
)

// chronos dev prints a token of its demo agent and a curl line that
// creates an alarm with it: the alarms need an owner even on dev's open
// API, whose other routes stay open.
func TestDevPrintsAnAlarmToken(t *testing.T) {
	t.Parallel()
	var out syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- execute(ctx, []string{"dev", "--http-addr", "127.0.0.1:0", "--log-level", "error"},
			&Env{Stdout: &out, Stderr: io.Discard, Ready: ready})
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("dev exited: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("dev did not start")
	}
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	printed := out.String()
	require.Contains(t, printed, DevDID)
	m := regexp.MustCompile(`export CHRONOS_TOKEN=(\S+)`).FindStringSubmatch(printed)
	require.NotNil(t, m, printed)
	curl := regexp.MustCompile(`-d '([^']+)'`).FindStringSubmatch(printed)
	require.NotNil(t, curl, printed)
	require.Contains(t, printed, "curl -s -X POST http://"+addr+"/v1/alarms")

	call := func(method, path, token, body string) (int, string) {
		req, err := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := call(http.MethodPost, "/v1/alarms", m[1], curl[1])
	require.Equal(t, http.StatusCreated, code, body)
	require.Contains(t, body, `"payload":{"step":1}`)
	code, body = call(http.MethodGet, "/v1/alarms", "", "")
	require.Equal(t, http.StatusUnauthorized, code, body)
	code, body = call(http.MethodGet, "/v1/alarms", "not-a-token", "")
	require.Equal(t, http.StatusUnauthorized, code, body)
	code, body = call(http.MethodGet, "/schedules", "", "")
	require.Equal(t, http.StatusOK, code, "the rest stays open on loopback: %s", body)
}

// Outside chronos dev, an open API (INSECURE) verifies no owner tokens
// without a secret: the alarms answer 401. With a secret, a service's
// token (no DID) is refused too.
func TestAlarmsOutsideDev(t *testing.T) {
	t.Parallel()
	r := queuetest.StartRedis(t)
	req := startInProcess(t, "all", "--redis-url", r.URL, "--http-addr", "127.0.0.1:0", "--log-level", "error", "--insecure")
	code, body := req(http.MethodGet, "/v1/alarms", "")
	require.Equal(t, http.StatusUnauthorized, code, body)
	require.Contains(t, body, "set AUTH_JWT_SECRET")
	code, body = req(http.MethodGet, "/schedules", "")
	require.Equal(t, http.StatusOK, code, body)

	req = startInProcess(t, "dev", "--http-addr", "127.0.0.1:0", "--log-level", "error", "--auth-jwt-secret", testSecret)
	code, body = req(http.MethodGet, "/v1/alarms", "")
	require.Equal(t, http.StatusUnauthorized, code, "an admin token is no DID: %s", body)
	require.Contains(t, body, "malformed DID")
}
