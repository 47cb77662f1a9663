package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
)

// serialExecutor is an executor service that records when each call
// began and ended, and holds one call (the hold-th) unanswered until its
// caller goes away.
type serialExecutor struct {
	srv  *httptest.Server
	hold int
	held chan string // the held call's key, once it is held
	stop chan struct{}

	mu    sync.Mutex
	n     int
	calls []serialCall
}

type serialCall struct {
	key        string
	begun, end time.Time
}

func newSerialExecutor(t *testing.T, hold int) *serialExecutor {
	t.Helper()
	e := &serialExecutor{hold: hold, held: make(chan string, 1), stop: make(chan struct{})}
	e.srv = httptest.NewServer(http.HandlerFunc(e.serve))
	t.Cleanup(e.srv.Close)
	t.Cleanup(func() { close(e.stop) }) // before Close: cleanups run last first
	return e
}

func (e *serialExecutor) serve(w http.ResponseWriter, r *http.Request) {
	// The body read to its end, the server watches the connection: the
	// request's context ends when the launcher dies.
	_, _ = io.Copy(io.Discard, r.Body)
	key := r.Header.Get("Idempotency-Key")
	c := serialCall{key: key, begun: time.Now()}
	e.mu.Lock()
	e.n++
	n := e.n
	e.mu.Unlock()
	if n == e.hold {
		e.held <- key
		select {
		case <-r.Context().Done(): // the launcher holding it was killed
		case <-e.stop:
		}
	} else {
		<-time.After(20 * time.Millisecond) // real time passes while a run runs
	}
	c.end = time.Now()
	e.mu.Lock()
	e.calls = append(e.calls, c)
	e.mu.Unlock()
	if n == e.hold {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"run_id":"exec-%s","status":"SUCCESS"}`, key[:min(12, len(key))])
}

// A queue backfill's chain lives in Redis: the API that created it is
// killed at once, and the launcher is killed while it holds one of the
// runs (SIGKILL both). The run it held is FAILED by RUN_TIMEOUT (the
// scheduler's, read by the API for the backfill too), which starts the
// next; a new launcher runs the rest. Every run of the range is created
// once and ends, the executor never has two of them at once, and they
// start in time order.
func TestBackfillQueueSurvivesKilledProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("a multi-process test: it runs without -short")
	}
	c := newChaosCluster(t)
	exec := newSerialExecutor(t, 3)
	timeout := map[string]string{"RUN_TIMEOUT": "3s"}
	api := c.start("api", "api", timeout)
	c.api = "http://" + api.addr
	launcherEnv := map[string]string{"EXECUTOR": "http", "EXECUTOR_URL": exec.srv.URL + "/runs"}
	launcher := c.start("launcher.0", "launcher", launcherEnv)
	schedEnv := map[string]string{"RUN_TIMEOUT": "3s"}
	for k, v := range schedulerEnv {
		schedEnv[k] = v
	}
	c.start("scheduler.0", "scheduler", schedEnv)

	code, body := c.call(http.MethodPut, "/workflows/chaos/versions/1", `{"nodes":[{"id":"tick"}]}`)
	require.Equal(t, http.StatusOK, code, body)
	code, body = c.call(http.MethodPost, "/schedules/upsert",
		`{"schedule_id":"bq","workflow_id":"chaos","version":1,"user_id":"chaos-test","cron_expr":"0 * * * *","timezone":"UTC","overlap_policy":"allow"}`)
	require.Equal(t, http.StatusOK, code, body)
	top := time.Now().UTC().Truncate(time.Hour)
	from := top.Add(-10 * time.Hour)
	code, body = c.call(http.MethodPost, "/schedules/bq/backfill", fmt.Sprintf(`{"from":%q,"to":%q,"overlap_policy":"queue"}`,
		from.Format(time.RFC3339), top.Add(-time.Minute).Format(time.RFC3339)))
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `"created":10`)
	c.kill(api)

	var want []string
	for i := range 10 {
		want = append(want, model.IdempotencyKey("bq", from.Add(time.Duration(i)*time.Hour)))
	}
	held := <-exec.held
	require.Equal(t, want[2], held, "the third run of the range is the third call")
	c.kill(launcher)
	c.start("launcher.1", "launcher", launcherEnv)

	sh := queue.ShardOf("bq", chaosShards)
	status := func(key string) (string, string) {
		v, err := c.rdb.HMGet(c.ctx, shardKey(sh, "run:"+key), "st", "rsn").Result() // queue/schema.go's rfStatus, rfReason
		require.NoError(t, err)
		st, _ := v[0].(string)
		rsn, _ := v[1].(string)
		return st, rsn
	}
	c.waitFor(60*time.Second, "every backfill run ended", func() (bool, string) {
		var open []string
		for _, k := range want {
			if st, _ := status(k); st != string(model.RunSuccess) && st != string(model.RunFailed) {
				open = append(open, k[:8]+" "+st)
			}
		}
		return len(open) == 0, strings.Join(open, ", ")
	})
	for i, k := range want {
		st, rsn := status(k)
		if k == held {
			require.Equal(t, string(model.RunFailed), st, "the held run")
			require.Equal(t, string(model.ReasonRunTimeout), rsn)
			continue
		}
		require.Equal(t, string(model.RunSuccess), st, "run %d", i)
	}
	inflight, err := c.rdb.HGet(c.ctx, shardKey(sh, "sched:bq"), "inflight").Result()
	require.True(t, err != nil || inflight == "", "nothing left in flight: %q", inflight)
	n, err := c.rdb.Exists(c.ctx, shardKey(sh, "bfq:bq")).Result()
	require.NoError(t, err)
	require.Zero(t, n, "the chain is used up")

	// The executor's calls of the range: one at a time, in time order.
	exec.mu.Lock()
	calls := append([]serialCall{}, exec.calls...)
	exec.mu.Unlock()
	index := map[string]int{}
	for i, k := range want {
		index[k] = i
	}
	var ours []serialCall
	for _, cl := range calls {
		if _, ok := index[cl.key]; ok {
			ours = append(ours, cl)
		}
	}
	sort.Slice(ours, func(i, j int) bool { return ours[i].begun.Before(ours[j].begun) })
	for i := 1; i < len(ours); i++ {
		require.False(t, ours[i].begun.Before(ours[i-1].end), "call of run %d began before the call of run %d ended",
			index[ours[i].key], index[ours[i-1].key])
		require.LessOrEqual(t, index[ours[i-1].key], index[ours[i].key], "runs start in time order")
	}
	seen := map[string]bool{}
	for _, cl := range ours {
		seen[cl.key] = true
	}
	require.Len(t, seen, len(want), "the executor saw every run of the range")
}
