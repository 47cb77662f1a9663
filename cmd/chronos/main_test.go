package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

func TestPreviewCommand(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	err := execute(context.Background(), []string{"preview", "--cron", "0 9 * * 1-5", "--tz", "America/New_York",
		"--after", "2026-03-06T00:00:00Z", "--count", "3"}, &Env{Stdout: &out, Stderr: io.Discard})
	require.NoError(t, err)
	// Friday before DST (EST), then Monday after it (EDT).
	require.Equal(t, "At 09:00, Monday through Friday, in America/New_York\n"+
		"2026-03-06T14:00:00Z  2026-03-06T09:00:00-05:00\n"+
		"2026-03-09T13:00:00Z  2026-03-09T09:00:00-04:00\n"+
		"2026-03-10T13:00:00Z  2026-03-10T09:00:00-04:00\n", out.String())
}

func TestPreviewCommandDSTNotes(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	err := execute(context.Background(), []string{"preview", "--cron", "30 1,2 * * *", "--tz", "America/New_York",
		"--after", "2026-03-08T00:00:00Z", "--count", "2"}, &Env{Stdout: &out, Stderr: io.Discard})
	require.NoError(t, err)
	require.Equal(t, "At 01:30 and 02:30, in America/New_York\n"+
		"2026-03-08T06:30:00Z  2026-03-08T01:30:00-05:00\n"+
		"2026-03-09T05:30:00Z  2026-03-09T01:30:00-04:00\n"+
		"skipped 2026-03-08T02:30:00  dst_gap: clocks sprang forward over it\n", out.String())

	out.Reset()
	err = execute(context.Background(), []string{"preview", "--cron", "30 1 * * *", "--tz", "America/New_York",
		"--after", "2026-10-31T12:00:00Z", "--count", "2"}, &Env{Stdout: &out, Stderr: io.Discard})
	require.NoError(t, err)
	require.Equal(t, "At 01:30, in America/New_York\n"+
		"2026-11-01T05:30:00Z  2026-11-01T01:30:00-04:00  repeated: this local time happens twice and fires at both\n"+
		"2026-11-01T06:30:00Z  2026-11-01T01:30:00-05:00  repeated: this local time happens twice and fires at both\n", out.String())
}

func TestPreviewCommandRejectsBadInput(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"preview", "--cron", "61 * * * *"},
		{"preview", "--cron", "* * * * *", "--tz", "Mars/Base"},
		{"preview", "--cron", "* * * * *", "--after", "yesterday"},
		{"preview", "--cron", "* * * * *", "--after", "9999-12-31T23:59:00-05:00"}, // year 10000 in UTC
		{"preview", "--cron", "* * * * *", "--after", "0000-06-01T00:00:00Z"},
		{"preview", "--cron", "* * * * *", "--count", "0"},
		{"preview", "--cron", "*/5 * * * *", "--dialect", "posix"},
	} {
		err := execute(context.Background(), args, &Env{Stdout: io.Discard, Stderr: io.Discard})
		require.Error(t, err, "%v", args)
	}
}

// chronos dev (embedded Redis) and chronos all (a real redis-server) serve
// the API, fire a schedule through the demo executor, serve asynqmon and
// metrics, and shut down cleanly on cancel.
func TestDevRunsAScheduleEndToEnd(t *testing.T) {
	t.Parallel()
	runEndToEnd(t, "dev", "--http-addr", "127.0.0.1:0", "--tick-ms", "100", "--log-level", "warn")
}

func TestAllRunsAScheduleEndToEnd(t *testing.T) {
	t.Parallel()
	r := queuetest.StartRedis(t)
	runEndToEnd(t, "all", "--redis-url", r.URL, "--http-addr", "127.0.0.1:0", "--log-level", "warn", "--auth-jwt-secret", testSecret)
}

// startInProcess runs a chronos command in this process until the test
// ends (which must see it exit cleanly) and returns a request helper
// against its HTTP address.
func startInProcess(t *testing.T, args ...string) func(method, path, body string) (int, string) {
	t.Helper()
	req, _ := startInProcessAt(t, args...)
	return req
}

// startInProcessAt is startInProcess that also returns the base URL.
func startInProcessAt(t *testing.T, args ...string) (func(method, path, body string) (int, string), string) {
	t.Helper()
	return startInProcessEnv(t, Env{}, args...)
}

// startInProcessEnv is startInProcessAt with env's MetricsReady.
func startInProcessEnv(t *testing.T, env Env, args ...string) (func(method, path, body string) (int, string), string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	env.Stdout, env.Stderr, env.Ready = io.Discard, io.Discard, ready
	go func() {
		done <- execute(ctx, args, &env)
	}()
	authz := adminAuthorization(t, args) // access_test.go: "" unless args set a secret
	var base string
	select {
	case addr := <-ready:
		base = "http://" + addr
	case err := <-done:
		t.Fatalf("chronos %s exited: %v", args[0], err)
	case <-time.After(30 * time.Second):
		t.Fatalf("chronos %s did not start", args[0])
	}
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return func(method, path, body string) (int, string) {
		r, err := http.NewRequest(method, base+path, strings.NewReader(body))
		require.NoError(t, err)
		r.Header.Set("Content-Type", "application/json")
		if authz != "" {
			r.Header.Set("Authorization", authz)
		}
		resp, err := http.DefaultClient.Do(r)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}, base
}

func runEndToEnd(t *testing.T, args ...string) {
	t.Helper()
	req := startInProcess(t, args...)
	code, body := req(http.MethodPut, "/workflows/hello/versions/1", `{"nodes":[{"id":"say-hi"}]}`)
	require.Equal(t, http.StatusOK, code, body)
	code, body = req(http.MethodPost, "/schedules/upsert",
		`{"schedule_id":"every-second","workflow_id":"hello","version":1,"user_id":"me","cron_expr":"* * * * * *","timezone":"UTC"}`)
	require.Equal(t, http.StatusOK, code, body)

	require.Eventually(t, func() bool {
		_, body := req(http.MethodGet, "/schedules/every-second/runs?limit=100", "")
		var res struct {
			Runs []struct{ Status string } `json:"runs"`
		}
		_ = json.Unmarshal([]byte(body), &res)
		for _, r := range res.Runs {
			if r.Status == "SUCCESS" {
				return true
			}
		}
		return false
	}, 20*time.Second, 50*time.Millisecond, "no run succeeded")

	code, body = req(http.MethodGet, "/monitoring/api/queues", "")
	require.Equal(t, http.StatusOK, code, body)
	require.Regexp(t, `"queue":"s\d+}chronos"`, body, "each shard's run queue (queue.ShardQueue)")
	// Read-only unless MONITORING_WRITABLE: no one can delete the queue.
	code, body = req(http.MethodDelete, "/monitoring/api/queues/chronos", "")
	require.Equal(t, http.StatusMethodNotAllowed, code, body)
	code, body = req(http.MethodGet, "/metrics", "")
	require.Equal(t, http.StatusOK, code)
	for _, m := range []string{"chronos_runs_emitted_total", "chronos_schedules_due_total", "chronos_enqueue_drift_seconds",
		"chronos_runs_skipped_overlap_total", "chronos_runs_failed_launch_total", "chronos_queue_depth"} {
		require.Contains(t, body, m)
	}
	code, _ = req(http.MethodGet, "/healthz", "")
	require.Equal(t, http.StatusOK, code)
}

// While Redis stalls, probes and scrapes answer within their own bounds:
// /readyz within READY_TIMEOUT (2 s) with a 503, /metrics well inside
// Prometheus's 10 s scrape timeout (without the queue depth), rather
// than after go-redis's socket timeouts.
func TestProbesAndMetricsAnswerWhileRedisStalls(t *testing.T) {
	t.Parallel()
	proxy := queuetest.StartProxy(t, queuetest.StartRedis(t).Addr)
	req := startInProcess(t, "api", "--redis-url", "redis://"+proxy.Addr, "--http-addr", "127.0.0.1:0", "--log-level", "error", "--insecure")
	code, body := req(http.MethodGet, "/readyz", "")
	require.Equal(t, http.StatusOK, code, body)
	code, body = req(http.MethodGet, "/metrics", "")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "chronos_queue_depth")

	proxy.Freeze(true)
	defer proxy.Freeze(false) // let the process stop cleanly
	began := time.Now()
	code, _ = req(http.MethodGet, "/readyz", "")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Less(t, time.Since(began), 4*time.Second, "/readyz against a stalled Redis")
	began = time.Now()
	code, body = req(http.MethodGet, "/metrics", "")
	require.Equal(t, http.StatusOK, code, body)
	require.Less(t, time.Since(began), 4*time.Second, "/metrics against a stalled Redis")
	require.NotContains(t, body, "chronos_queue_depth")
}

// A replica taking a free shard while Redis is busy for a second (a long
// script, a fork) gets the lease once Redis answers: redsync bounds an
// acquire by 5% of LEASE_TTL, and a client that cut the socket at that
// deadline would leave the lease taken in Redis by no replica.
func TestLeaseAcquireWaitsOutABusyRedis(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := queuetest.StartRedis(t)
	rdb, err := newRedis(r.URL) // the client chronos builds
	require.NoError(t, err)
	t.Cleanup(func() { rdb.Close() })
	store, err := queue.NewStore(ctx, rdb, queue.RealClock{}, nil)
	require.NoError(t, err)
	busy := r.Client(t)
	done := make(chan error, 1)
	go func() {
		done <- busy.Eval(ctx, `local s = redis.call('TIME')
			repeat local n = redis.call('TIME') until (n[1] - s[1]) * 1000000 + (n[2] - s[2]) > 1000000
			return 1`, nil).Err()
	}()
	// Redis is busy once a PING goes unanswered: the script blocks every
	// other client until it returns.
	probe := redis.NewClient(&redis.Options{Addr: r.Addr, ReadTimeout: 50 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = probe.Close() })
	require.Eventually(t, func() bool { return probe.Ping(ctx).Err() != nil },
		time.Second, 10*time.Millisecond, "the busy script never started")
	lease, err := store.NewLeases(5*time.Second).TryAcquire(ctx, 0)
	require.NoError(t, <-done)
	require.NoError(t, err)
	require.NotNil(t, lease)
}

// chronos dev's embedded Redis keeps a manual run centuries ahead as a
// real one does (an EXPIRE of more than 2^63 ns overflowed miniredis: the
// record vanished at once, the API answered 404 and then 409 for ever).
func TestDevKeepsAManualRunCenturiesAhead(t *testing.T) {
	t.Parallel()
	req := startInProcess(t, "dev", "--http-addr", "127.0.0.1:0", "--log-level", "error")
	code, body := req(http.MethodPut, "/workflows/w/versions/1", `{"nodes":[]}`)
	require.Equal(t, http.StatusOK, code, body)
	start := `{"workflow_id":"w","version":1,"user_id":"u","scheduled_for":"2400-01-01T00:00:00Z"}`
	for _, started := range []bool{true, false} {
		code, body = req(http.MethodPost, "/run-launcher/start", start)
		require.Equal(t, http.StatusOK, code, body)
		require.Contains(t, body, fmt.Sprintf(`"started":%v`, started))
	}
}

func TestMissingRedisURLIsExplained(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"api", "scheduler", "launcher", "all"} {
		err := execute(context.Background(), []string{cmd, "--http-addr", "127.0.0.1:0"},
			&Env{Stdout: io.Discard, Stderr: io.Discard})
		require.ErrorContains(t, err, "REDIS_URL is required", cmd)
	}
	err := execute(context.Background(), []string{"launcher", "--redis-url", "redis://127.0.0.1:1", "--executor", "http"},
		&Env{Stdout: io.Discard, Stderr: io.Discard})
	require.ErrorContains(t, err, "EXECUTOR_URL")
}

// Zero means "the default" inside the packages; on the command line it is
// a mistake, and says so, except TASK_MAX_RETRY=0 (no retries).
func TestZeroSettingsAreRejected(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"all", "--shards", "0"}, "SHARDS must be greater than 0, got 0"},
		{[]string{"scheduler", "--tick-ms", "0"}, "TICK_MS must be greater than 0, got 0"},
		{[]string{"scheduler", "--lease-ttl", "0s"}, "LEASE_TTL must be greater than 0, got 0s"},
		{[]string{"scheduler", "--forward-lead-ms=-1"}, "FORWARD_LEAD_MS must be between 0 (runnable at their second) and 1000, got -1"},
		{[]string{"scheduler", "--forward-lead-ms", "1001"}, "FORWARD_LEAD_MS must be between 0 (runnable at their second) and 1000, got 1001"},
		{[]string{"launcher", "--launcher-concurrency", "0"}, "LAUNCHER_CONCURRENCY must be greater than 0, got 0"},
		{[]string{"launcher", "--shutdown-timeout=-1s"}, "SHUTDOWN_TIMEOUT must be greater than 0, got -1s"},
		{[]string{"api", "--run-history", "0"}, "RUN_HISTORY must be greater than 0, got 0"},
		{[]string{"api", "--task-max-retry=-1"}, "TASK_MAX_RETRY must be 0 (no retries) or more, got -1"},
		{[]string{"api", "--task-timeout=0s"}, "TASK_TIMEOUT must be greater than 0, got 0s"},
		{[]string{"launcher", "--executor-timeout=10m"}, "EXECUTOR_TIMEOUT (10m0s) must be shorter than TASK_TIMEOUT (5m0s)"},
		{[]string{"api", "--alarm-max-active", "0"}, "ALARM_MAX_ACTIVE must be greater than 0, got 0"},
		{[]string{"api", "--alarm-max-failures", "0"}, "ALARM_MAX_FAILURES must be greater than 0, got 0"},
		{[]string{"api", "--alarm-max-failures", "26"}, "ALARM_MAX_FAILURES must be between 1 and 25, got 26"},
		{[]string{"api", "--alarm-payload-max-bytes", "0"}, "ALARM_PAYLOAD_MAX_BYTES must be greater than 0, got 0"},
		{[]string{"api", "--alarm-label-max-bytes", "0"}, "ALARM_LABEL_MAX_BYTES must be greater than 0, got 0"},
		{[]string{"api", "--alarm-wake-message-max-bytes", "0"}, "ALARM_WAKE_MESSAGE_MAX_BYTES must be greater than 0, got 0"},
	} {
		err := execute(context.Background(), append(tc.args, "--redis-url", "redis://127.0.0.1:1", "--http-addr", "127.0.0.1:0"),
			&Env{Stdout: io.Discard, Stderr: io.Discard})
		require.ErrorContains(t, err, tc.want, "%v", tc.args)
	}
}

func TestRedisURLs(t *testing.T) {
	t.Parallel()
	c, err := newRedis("redis-sentinel://:s3cret@h1:26379,h2:26379/mymaster/3")
	require.NoError(t, err)
	opt := c.(*redis.Client).Options()
	require.Equal(t, 3, opt.DB)
	require.Equal(t, "s3cret", opt.Password)
	require.NoError(t, c.Close())

	for _, bad := range []string{"redis-sentinel://:s3cret@h1:26379/", "redis-sentinel://:s3cret@h1:26379/m/x", "redis://:s3cret@h1:notaport/0"} {
		_, err := newRedis(bad)
		require.Error(t, err, bad)
		require.NotContains(t, err.Error(), "s3cret", bad)
	}
	for in, want := range map[string]string{
		"redis://:s3cret@h:6379/0":             "redis://:xxxxx@h:6379/0",
		"redis://user:s3cret@h:6379":           "redis://user:xxxxx@h:6379",
		"redis-sentinel://:s3cret@h1:1,h2:2/m": "redis-sentinel://:xxxxx@h1:1,h2:2/m",
		"redis://user@h:6379":                  "redis://user@h:6379",
		"redis://h:6379/0":                     "redis://h:6379/0",
	} {
		require.Equal(t, want, redactURL(in))
	}
}

// EXECUTOR_URL set without EXECUTOR=http leaves the default demo executor
// in place: every run is logged and recorded SUCCESS, none reaches the
// URL. The contradiction must be a startup error naming the fix.
func TestExecutorURLWithoutHTTPExecutorIsRejected(t *testing.T) {
	t.Parallel()
	err := execute(context.Background(), []string{"launcher", "--redis-url", "redis://127.0.0.1:1",
		"--http-addr", "127.0.0.1:0", "--executor-url", "http://executor.internal/runs"},
		&Env{Stdout: io.Discard, Stderr: io.Discard})
	require.ErrorContains(t, err, "EXECUTOR=http")
}

// A choice setting's bad value names the environment variable it came
// from, as a bad number's does. (Not parallel: it sets the environment.)
func TestABadChoiceFromTheEnvironmentNamesTheVariable(t *testing.T) {
	for _, tc := range []struct{ name, value, cmd string }{
		{"DEFAULT_OVERLAP_POLICY", "never", "dev"},
		{"EXECUTOR", "carrier-pigeon", "launcher"},
		{"LOG_LEVEL", "loud", "api"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(tc.name, tc.value)
			err := execute(context.Background(), []string{tc.cmd}, &Env{Stdout: io.Discard, Stderr: io.Discard})
			require.ErrorContains(t, err, tc.name+`="`+tc.value+`": --`)
			require.ErrorContains(t, err, "must be one of")
		})
	}
}
