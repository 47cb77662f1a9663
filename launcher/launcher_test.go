package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
	"github.com/chronos-sched/chronos/scheduler"
)

type testBundle struct {
	rdb      *redis.Client
	store    *queue.Store
	clock    *queue.SimClock
	launcher *Launcher
}

// setup starts a launcher on a real Redis. The simulated clock is in the
// past so that asynq, which reads the real clock, runs every task at once.
func setup(t *testing.T, ex Executor, qcfg *queue.Config) *testBundle {
	t.Helper()
	rdb := queuetest.StartRedis(t).Client(t)
	clock := queue.NewSimClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	store, err := queue.NewStore(context.Background(), rdb, clock, qcfg)
	require.NoError(t, err)
	l, err := New(store, &Config{Executor: ex, ShutdownTimeout: time.Second}, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	require.NoError(t, l.Start(context.Background()))
	stopAtCleanup(t, l)
	return &testBundle{rdb: rdb, store: store, clock: clock, launcher: l}
}

func (b *testBundle) manual(t *testing.T, key string, withWorkflow bool) {
	t.Helper()
	ctx := context.Background()
	if withWorkflow {
		require.NoError(t, b.store.PutWorkflow(ctx, "wf", "1", []byte(`{"nodes":["a"]}`)))
	}
	_, started, err := b.store.StartManualRun(ctx, queue.ManualRun{
		WorkflowID: "wf", Version: "1", UserID: "u", ScheduledFor: b.clock.Now(), IdempotencyKey: key,
	})
	require.NoError(t, err)
	require.True(t, started)
}

// waitStatus polls the run record until it reaches a final status.
func (b *testBundle) waitStatus(t *testing.T, key string, want model.RunStatus) *model.Run {
	t.Helper()
	var run *model.Run
	require.Eventually(t, func() bool {
		r, _, err := b.store.GetRun(context.Background(), key)
		if err != nil {
			return false
		}
		run = r
		return r.Status == want
	}, 20*time.Second, 20*time.Millisecond, "run %s never reached %s", key, want)
	return run
}

type recordingExecutor struct {
	mu   sync.Mutex
	reqs []Request
	res  Result
	err  error
}

func (e *recordingExecutor) Execute(_ context.Context, r Request) (Result, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.reqs = append(e.reqs, r)
	return e.res, e.err
}

func TestLaunchesRunWithDAGAndKey(t *testing.T) {
	t.Parallel()
	ex := &recordingExecutor{res: Result{RunID: "r-1", Status: model.RunSuccess}}
	b := setup(t, ex, nil)
	b.manual(t, "key-1", true)
	run := b.waitStatus(t, "key-1", model.RunSuccess)
	require.Equal(t, "r-1", run.RunID)
	ex.mu.Lock()
	defer ex.mu.Unlock()
	require.Len(t, ex.reqs, 1)
	require.JSONEq(t, `{"nodes":["a"]}`, string(ex.reqs[0].DAG))
	require.Equal(t, Meta{Source: model.SourceManual, WorkflowID: "wf", Version: "1", UserID: "u",
		ScheduledFor: b.clock.Now(), IdempotencyKey: "key-1"}, ex.reqs[0].Meta)
}

func TestMissingWorkflowFailsTheRun(t *testing.T) {
	t.Parallel()
	b := setup(t, &recordingExecutor{}, nil)
	b.manual(t, "key-2", false)
	run := b.waitStatus(t, "key-2", model.RunFailed)
	require.Contains(t, run.Error, "workflow wf version 1 not found")
	require.Contains(t, run.Error, "PUT /workflows/wf/versions/1")
	requireCount(t, b.launcher.metrics.failedLaunch, 1.0)
}

func TestHTTPExecutor(t *testing.T) {
	t.Parallel()
	var (
		mu   sync.Mutex
		got  []string
		body Request
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, r.Header.Get("Idempotency-Key"))
		_ = json.NewDecoder(r.Body).Decode(&body)
		_, _ = w.Write([]byte(`{"run_id":"wf-run-7"}`))
	}))
	t.Cleanup(srv.Close)
	b := setup(t, NewHTTPExecutor(srv.URL, 5*time.Second, 4), nil)
	b.manual(t, "key-3", true)
	run := b.waitStatus(t, "key-3", model.RunStarted)
	require.Equal(t, "wf-run-7", run.RunID)
	mu.Lock()
	require.Equal(t, []string{"key-3"}, got)
	require.Equal(t, "key-3", body.Meta.IdempotencyKey)
	require.Equal(t, model.SourceManual, body.Meta.Source)
	mu.Unlock()

	// The workflow reports its end to the run record.
	run, err := b.store.UpdateRunStatus(context.Background(), "key-3", queue.StatusUpdate{Status: model.RunSuccess})
	require.NoError(t, err)
	require.Equal(t, model.RunSuccess, run.Status)
}

// failingExecutor is an executor service that answers every call with
// status and counts the calls.
func failingExecutor(t *testing.T, status int) (url string, calls func() int) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		http.Error(w, "executor says no", status)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() int { return int(n.Load()) }
}

func TestHTTPExecutorRetriesThenFails(t *testing.T) {
	t.Parallel()
	url, calls := failingExecutor(t, http.StatusServiceUnavailable)
	b := setup(t, NewHTTPExecutor(url, 5*time.Second, 4), &queue.Config{TaskMaxRetry: 1})
	b.manual(t, "key-4", true)
	run := b.waitStatus(t, "key-4", model.RunFailed)
	require.Contains(t, run.Error, "after 2 attempts")
	require.Contains(t, run.Error, "503")
	require.Equal(t, 2, calls())
}

// A rate-limited or unavailable executor's Retry-After (seconds or an
// HTTP date) delays the retry at least that long, up to maxRetryAfter: the
// backoff alone could spend every attempt before the executor is back. Its
// error text is cut at a rune boundary.
func TestHTTPExecutorRetryAfterDelaysTheRetry(t *testing.T) {
	t.Parallel()
	ex := func(status int, retryAfter, body string) error {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
			w.WriteHeader(status)
			_, _ = w.Write([]byte(body))
		}))
		defer srv.Close()
		_, err := NewHTTPExecutor(srv.URL, 5*time.Second, 1).Execute(context.Background(), Request{Meta: Meta{IdempotencyKey: "k"}})
		require.Error(t, err)
		return err
	}
	require.Equal(t, 90*time.Second, retryDelay(0, ex(http.StatusTooManyRequests, "90", ""), nil))
	require.Equal(t, 4*time.Second, retryDelay(2, ex(http.StatusServiceUnavailable, "1", ""), nil), "the backoff when longer")
	require.Equal(t, maxRetryAfter, retryDelay(0, ex(http.StatusServiceUnavailable, "86400", ""), nil))
	date := time.Now().Add(2 * time.Minute).UTC().Format(http.TimeFormat)
	require.InDelta(t, 2*time.Minute, retryDelay(0, ex(http.StatusServiceUnavailable, date, ""), nil), float64(2*time.Second))
	require.Equal(t, time.Second, retryDelay(0, ex(http.StatusServiceUnavailable, "soon", ""), nil), "an unreadable one is ignored")

	err := ex(http.StatusBadGateway, "", strings.Repeat("é", 400))
	require.True(t, utf8.ValidString(err.Error()), "error text cut inside a rune: %q", err.Error())
}

func TestNoRetryFailsOnFirstError(t *testing.T) {
	t.Parallel()
	url, calls := failingExecutor(t, http.StatusServiceUnavailable)
	b := setup(t, NewHTTPExecutor(url, 5*time.Second, 4), &queue.Config{TaskMaxRetry: queue.NoRetry})
	b.manual(t, "key-7", true)
	run := b.waitStatus(t, "key-7", model.RunFailed)
	require.Contains(t, run.Error, "after 1 attempts")
	require.Equal(t, 1, calls())
}

func TestHTTPExecutorClientErrorIsPermanent(t *testing.T) {
	t.Parallel()
	url, calls := failingExecutor(t, http.StatusUnprocessableEntity)
	b := setup(t, NewHTTPExecutor(url, 5*time.Second, 4), nil)
	b.manual(t, "key-5", true)
	run := b.waitStatus(t, "key-5", model.RunFailed)
	require.Contains(t, run.Error, "422")
	require.Equal(t, 1, calls())
}

// A redirect in front of the executor (http to https, a trailing slash)
// fails the run with the redirect's target: followed, Go's client would
// send a GET without the run, and a 2xx answer would pass for a start.
func TestHTTPExecutorDoesNotFollowRedirects(t *testing.T) {
	t.Parallel()
	var posts, gets atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/runs", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/runs/", http.StatusMovedPermanently)
	})
	mux.HandleFunc("/runs/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posts.Add(1)
			w.WriteHeader(http.StatusAccepted)
			return
		}
		gets.Add(1)
		_, _ = w.Write([]byte(`[]`))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	b := setup(t, NewHTTPExecutor(srv.URL+"/runs", 5*time.Second, 2), nil)
	b.manual(t, "key-redirect", true)
	run := b.waitStatus(t, "key-redirect", model.RunFailed)
	require.Contains(t, run.Error, `301 Moved Permanently, a redirect to "/runs/"`)
	require.Contains(t, run.Error, "set EXECUTOR_URL")
	require.Zero(t, posts.Load()+gets.Load())
}

// A launcher stopped during an executor call longer than its shutdown
// timeout gives the run back to the queue, even on its last attempt: the
// next launcher starts it, rather than finding it FAILED.
func TestShutdownDuringAnExecutorCallRequeuesTheRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	inCall := make(chan struct{}, 1)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case inCall <- struct{}{}:
		default:
		}
		_, _ = io.Copy(io.Discard, r.Body) // then the server sees the client leave
		select {
		case <-r.Context().Done(): // the launcher gave up
		case <-time.After(20 * time.Second):
		}
	}))
	t.Cleanup(slow.Close)
	b := setup(t, NewHTTPExecutor(slow.URL, 30*time.Second, 2), &queue.Config{TaskMaxRetry: queue.NoRetry})
	b.manual(t, "key-stop", true)
	select {
	case <-inCall:
	case <-time.After(20 * time.Second):
		t.Fatal("the executor was never called")
	}
	require.NoError(t, b.launcher.Stop(context.Background())) // SIGTERM; ShutdownTimeout is 1 s
	r, _, err := b.store.GetRun(ctx, "key-stop")
	require.NoError(t, err)
	require.Equal(t, model.RunEnqueued, r.Status, "error: %s", r.Error)

	ex := &recordingExecutor{res: Result{Status: model.RunSuccess}}
	next, err := New(b.store, &Config{Executor: ex, ShutdownTimeout: time.Second}, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	require.NoError(t, next.Start(ctx))
	stopAtCleanup(t, next)
	b.waitStatus(t, "key-stop", model.RunSuccess)
}

// An executor that names no final status has started a run that goes on
// elsewhere.
func TestResultWithoutStatusIsStarted(t *testing.T) {
	t.Parallel()
	b := setup(t, &recordingExecutor{res: Result{RunID: "r-9"}}, nil)
	b.manual(t, "key-6", true)
	run := b.waitStatus(t, "key-6", model.RunStarted)
	require.Equal(t, "r-9", run.RunID)
	require.Equal(t, 1.0, testutil.ToFloat64(b.launcher.metrics.launched.WithLabelValues("STARTED")))
}

// setupLaunchersDown is setup with workflow wf version 1 registered, a
// scheduler to tick by hand, and the launcher stopped: tests start their
// own when the runs are in place.
func setupLaunchersDown(t *testing.T, ex Executor) (*testBundle, *scheduler.Scheduler) {
	t.Helper()
	b := setup(t, ex, nil)
	require.NoError(t, b.store.PutWorkflow(context.Background(), "wf", "1", []byte(`{}`)))
	sched, err := scheduler.New(b.store, nil, nil, nil)
	require.NoError(t, err)
	require.NoError(t, b.launcher.Stop(context.Background()))
	return b, sched
}

func (b *testBundle) upsert(t *testing.T, rec *model.ScheduleRecord) {
	t.Helper()
	require.NoError(t, rec.Validate())
	_, err := b.store.UpsertSchedule(context.Background(), rec)
	require.NoError(t, err)
}

// tick ticks every shard once.
func (b *testBundle) tick(t *testing.T, sched *scheduler.Scheduler) {
	t.Helper()
	for sh := range b.store.Config().Shards {
		require.NoError(t, sched.TickShard(context.Background(), sh))
	}
}

// Runs are enqueued ahead of their time; one whose schedule was deleted,
// paused or changed before it started is SKIPPED, not executed. One whose
// schedule now names another workflow version runs that version.
func TestSkipsRunsNoLongerPlanned(t *testing.T) {
	t.Parallel()
	ex := &recordingExecutor{res: Result{Status: model.RunSuccess}}
	b, sched := setupLaunchersDown(t, ex) // until the schedules have changed
	ctx := context.Background()

	mk := func(id string) *model.ScheduleRecord {
		rec := &model.ScheduleRecord{ID: id, CronExpr: "0 * * * *", WorkflowID: "wf", Version: "1",
			OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupFireImmediately}
		b.upsert(t, rec)
		return rec
	}
	keep, del, pause, change, repoint := mk("keep"), mk("del"), mk("pause"), mk("change"), mk("repoint")
	b.clock.Advance(time.Hour)
	b.tick(t, sched)
	require.NoError(t, b.store.DeleteSchedule(ctx, del.ID))
	_, err := b.store.SetPaused(ctx, pause.ID, true)
	require.NoError(t, err)
	change.CronExpr = "30 * * * *"
	_, err = b.store.UpsertSchedule(ctx, change)
	require.NoError(t, err)
	require.NoError(t, b.store.PutWorkflow(ctx, "wf", "2", []byte(`{"v":2}`)))
	repoint.Version, repoint.UserID = "2", "someone-else"
	_, err = b.store.UpsertSchedule(ctx, repoint)
	require.NoError(t, err)

	l, err := New(b.store, &Config{Executor: ex, ShutdownTimeout: time.Second}, nil, nil)
	require.NoError(t, err)
	require.NoError(t, l.Start(ctx))
	stopAtCleanup(t, l)

	at := b.clock.Now()
	b.waitStatus(t, model.IdempotencyKey(keep.ID, at), model.RunSuccess)
	b.waitStatus(t, model.IdempotencyKey(repoint.ID, at), model.RunSuccess)
	for id, reason := range map[string]string{del.ID: "deleted", pause.ID: "paused", change.ID: "no longer one of its fire times"} {
		run := b.waitStatus(t, model.IdempotencyKey(id, at), model.RunSkipped)
		require.Contains(t, run.Error, reason)
	}
	ex.mu.Lock()
	defer ex.mu.Unlock()
	require.Len(t, ex.reqs, 2)
	byID := map[string]Request{}
	for _, r := range ex.reqs {
		byID[r.Meta.ScheduleID] = r
	}
	require.Equal(t, "1", byID[keep.ID].Meta.Version)
	require.Equal(t, "2", byID[repoint.ID].Meta.Version)
	require.Equal(t, "someone-else", byID[repoint.ID].Meta.UserID)
	require.JSONEq(t, `{"v":2}`, string(byID[repoint.ID].DAG))
}

// Runs enqueued on time that wait while every launcher is down follow
// their schedule's catch-up policy when a launcher comes back more than
// LAUNCH_GRACE later: none skips them all, latest runs only the latest
// due one, fire_immediately runs them all.
func TestRunsLateFromALauncherOutageFollowTheCatchupPolicy(t *testing.T) {
	t.Parallel()
	ex := &recordingExecutor{res: Result{Status: model.RunSuccess}}
	b, sched := setupLaunchersDown(t, ex) // from 00:00
	ctx := context.Background()

	start := b.clock.Now()
	policies := map[string]struct {
		catchup model.CatchupPolicy
		overlap model.OverlapPolicy
	}{
		"none":             {model.CatchupNone, model.OverlapAllow},
		"latest":           {model.CatchupLatest, model.OverlapAllow},
		"fire_immediately": {model.CatchupFireImmediately, model.OverlapAllow},
		// The scheduler records 00:20 to 00:50 SKIPPED while 00:10 is in
		// flight: 00:10 is the latest run left, so it starts.
		"latest-skip": {model.CatchupLatest, model.OverlapSkip},
		// The schedule waits for 00:10, SKIPPED late; then its scheduler
		// applies the policy to the runs missed meanwhile: 00:50 fires.
		"latest-queue": {model.CatchupLatest, model.OverlapQueue},
	}
	for id, p := range policies {
		rec := &model.ScheduleRecord{ID: id, CronExpr: "*/10 * * * *", WorkflowID: "wf", Version: "1",
			OverlapPolicy: p.overlap, CatchupPolicy: p.catchup}
		b.upsert(t, rec)
	}
	// The schedulers stay up: every run from 00:10 to 00:50 is enqueued on time.
	for b.clock.Now().Before(start.Add(52 * time.Minute)) {
		b.clock.Advance(time.Minute)
		b.tick(t, sched)
	}

	l, err := New(b.store, &Config{Executor: ex, ShutdownTimeout: time.Second, LaunchGrace: time.Minute}, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	require.NoError(t, l.Start(ctx)) // at 00:52: 00:50 is 2 minutes late, 00:10 42
	stopAtCleanup(t, l)

	S, K := model.RunSuccess, model.RunSkipped
	want := map[string][]model.RunStatus{
		"none":             {K, K, K, K, K},
		"latest":           {K, K, K, K, S},
		"fire_immediately": {S, S, S, S, S},
		"latest-skip":      {S, K, K, K, K},
	}
	for id, statuses := range want {
		for i, st := range statuses {
			run := b.waitStatus(t, model.IdempotencyKey(id, start.Add(time.Duration(i+1)*10*time.Minute)), st)
			switch {
			case st == K && id == "latest-skip":
				require.Contains(t, run.Error, "(overlap_policy skip)")
			case st == K:
				require.Contains(t, run.Error, "more than LAUNCH_GRACE 1m0s")
				require.Contains(t, run.Error, "(catchup_policy "+string(policies[id].catchup)+")")
			}
		}
	}
	b.waitStatus(t, model.IdempotencyKey("latest-queue", start.Add(10*time.Minute)), K)
	b.tick(t, sched)
	b.waitStatus(t, model.IdempotencyKey("latest-queue", start.Add(50*time.Minute)), S)
	for _, m := range []time.Duration{20, 30, 40} {
		_, _, err := b.store.GetRun(ctx, model.IdempotencyKey("latest-queue", start.Add(m*time.Minute)))
		require.ErrorIs(t, err, queue.ErrNotFound, "00:%d", m)
	}
	requireCount(t, l.metrics.skippedLate, 10.0)
	ex.mu.Lock()
	defer ex.mu.Unlock()
	require.Len(t, ex.reqs, 8)
}

// A run a scheduler enqueued late, within MISFIRE_GRACE_MS (here 8 s after
// its fire time, as after a shard takeover), is due from when it was
// enqueued: that wait is not held against LAUNCH_GRACE.
func TestLaunchGraceCountsFromALateEnqueue(t *testing.T) {
	t.Parallel()
	ex := &recordingExecutor{res: Result{Status: model.RunSuccess}}
	b, sched := setupLaunchersDown(t, ex)
	ctx := context.Background()
	rec := &model.ScheduleRecord{ID: "s", CronExpr: "0 * * * *", WorkflowID: "wf", Version: "1",
		OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupNone}
	b.upsert(t, rec)

	b.clock.Advance(time.Hour + 8*time.Second) // the first tick since 00:00
	b.tick(t, sched)
	l, err := New(b.store, &Config{Executor: ex, ShutdownTimeout: time.Second, LaunchGrace: 5 * time.Second}, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	require.NoError(t, l.Start(ctx))
	stopAtCleanup(t, l)
	b.waitStatus(t, model.IdempotencyKey("s", b.clock.Now().Truncate(time.Hour)), model.RunSuccess)
	require.Zero(t, testutil.ToFloat64(l.metrics.skippedLate))
}

// A retry after the executor failed is late by its backoff, not missed: it
// starts however long the backoff. A task asynq retries for another reason
// (here a failed read; also a failed status report, or a task recovered
// from a launcher that died) has not reached the executor, and its
// lateness is judged again.
func TestOnlyExecutorRetriesEscapeLaunchGrace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, sched := setupLaunchersDown(t, &recordingExecutor{})
	for _, id := range []string{"executor-error", "read-error"} {
		rec := &model.ScheduleRecord{ID: id, CronExpr: "0 * * * *", WorkflowID: "wf-" + id, Version: "1",
			OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupNone}
		b.upsert(t, rec)
	}
	require.NoError(t, b.store.PutWorkflow(ctx, "wf-executor-error", "1", []byte(`{}`)))
	// Not a string: reading it fails until the test registers the workflow.
	badKey := "chronos:wf:{wf-read-error}:1"
	require.NoError(t, b.rdb.HSet(ctx, badKey, "not", "a dag").Err())

	b.clock.Advance(time.Hour)
	b.tick(t, sched)
	at := b.clock.Now()
	ex := &flakyExecutor{fail: 1, onFail: func() { b.clock.Advance(10 * time.Minute) }}
	l, err := New(b.store, &Config{Executor: ex, ShutdownTimeout: time.Second, LaunchGrace: time.Minute}, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	require.NoError(t, l.Start(ctx))
	stopAtCleanup(t, l)

	b.waitStatus(t, model.IdempotencyKey("executor-error", at), model.RunSuccess)
	inspector := asynq.NewInspectorFromRedisClient(b.rdb)
	require.Eventually(t, func() bool {
		info, err := inspector.GetTaskInfo(queue.QueueNameDefault, model.IdempotencyKey("read-error", at))
		return err == nil && info.Retried > 0
	}, 20*time.Second, 20*time.Millisecond)
	require.NoError(t, b.rdb.Del(ctx, badKey).Err())
	require.NoError(t, b.store.PutWorkflow(ctx, "wf-read-error", "1", []byte(`{}`)))
	run := b.waitStatus(t, model.IdempotencyKey("read-error", at), model.RunSkipped)
	require.Contains(t, run.Error, "more than LAUNCH_GRACE 1m0s")
	requireCount(t, l.metrics.skippedLate, 1)
	require.Equal(t, int32(2), ex.calls.Load())
}

// A retry is late by its backoff, not missed; but one that comes more than
// LAUNCH_GRACE after its backoff ended (every launcher was down meanwhile)
// is judged as a first attempt would be.
func TestRetryLateAfterItsBackoffIsMissed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, sched := setupLaunchersDown(t, &recordingExecutor{})
	b.upsert(t, &model.ScheduleRecord{ID: "s", CronExpr: "0 * * * *", WorkflowID: "wf", Version: "1",
		OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupNone})
	b.clock.Advance(time.Hour)
	b.tick(t, sched)
	key := model.IdempotencyKey("s", b.clock.Now())
	ex := &flakyExecutor{fail: 1, onFail: func() {}}
	cfg := &Config{Executor: ex, ShutdownTimeout: time.Second, LaunchGrace: time.Minute}
	l, err := New(b.store, cfg, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	require.NoError(t, l.Start(ctx))
	require.Eventually(t, func() bool {
		st, err := b.store.LoadLaunch(ctx, &queue.TaskPayload{IdempotencyKey: key, ScheduleID: "s", WorkflowID: "wf", Version: "1"})
		return err == nil && st.FailedAttempts == 1
	}, 20*time.Second, 5*time.Millisecond)
	require.NoError(t, l.Stop(context.Background()))

	b.clock.Advance(time.Hour)
	l, err = New(b.store, cfg, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	require.NoError(t, l.Start(ctx))
	stopAtCleanup(t, l)
	run := b.waitStatus(t, key, model.RunSkipped)
	require.Contains(t, run.Error, "more than LAUNCH_GRACE 1m0s")
	require.Equal(t, int32(1), ex.calls.Load())
}

// storeWithRunsAhead is a store on clock with an every-second schedule
// whose next minute of runs is enqueued ahead.
func storeWithRunsAhead(t *testing.T, rdb *redis.Client, clock queue.Clock) *queue.Store {
	t.Helper()
	ctx := context.Background()
	store, err := queue.NewStore(ctx, rdb, clock, &queue.Config{Shards: 1, Lookahead: time.Minute})
	require.NoError(t, err)
	require.NoError(t, store.PutWorkflow(ctx, "wf", "1", []byte(`{}`)))
	rec := &model.ScheduleRecord{ID: "every-second", CronExpr: "* * * * * *", Target: model.TargetWorkflow,
		WorkflowID: "wf", Version: "1", UserID: "u", OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupFireImmediately}
	require.NoError(t, rec.Validate())
	_, err = store.UpsertSchedule(ctx, rec)
	require.NoError(t, err)
	sched, err := scheduler.New(store, nil, nil, nil)
	require.NoError(t, err)
	require.NoError(t, sched.TickShard(ctx, 0))
	return store
}

// requireNoEarlyStarts runs a launcher on store for 5 s and fails if it
// started a run before its time by now (Redis's clock).
func requireNoEarlyStarts(t *testing.T, store *queue.Store, now func() time.Time) {
	t.Helper()
	var mu sync.Mutex
	var calls, early int
	var worst time.Duration
	ex := executorFunc(func(_ context.Context, r Request) (Result, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if d := r.Meta.ScheduledFor.Sub(now()); d > 0 {
			early++
			worst = max(worst, d)
		}
		return Result{Status: model.RunSuccess}, nil
	})
	l, err := New(store, &Config{Executor: ex, ShutdownTimeout: time.Second, Concurrency: 20}, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	require.NoError(t, l.Start(context.Background()))
	// Real time must pass: runs come due one after another, and the test
	// watches every start over a stretch of them for one that is early.
	const watched = 5 * time.Second
	<-time.After(watched)
	require.NoError(t, l.Stop(context.Background()))
	mu.Lock()
	defer mu.Unlock()
	require.Positive(t, calls)
	require.Zero(t, early, "runs started before their time on the shared clock (up to %s early), of %d", worst, calls)
}

// A launcher whose host clock is ahead of Redis's (here 3 s) gets runs
// enqueued ahead from asynq early (asynq forwards them by the host's
// clock); it still starts none before its time on the shared clock.
func TestALauncherWithAFastHostClockDoesNotStartRunsEarly(t *testing.T) {
	t.Parallel()
	clock := behindClock{by: 3 * time.Second}
	store := storeWithRunsAhead(t, queuetest.StartRedis(t).Client(t), clock)
	requireNoEarlyStarts(t, store, clock.Now)
}

// asynq's forwarder in every launcher moves runs to pending by its own
// host's clock: a launcher on a host 3 s fast hands runs to every other
// launcher 3 s early. Those wait too (the fast launcher reports its skew),
// rather than pass for runs moved from the dashboard.
func TestRunsForwardedEarlyByAnotherLauncherHostDoNotStartEarly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := queuetest.StartRedis(t).Client(t)
	store := storeWithRunsAhead(t, rdb, queue.RealClock{})

	// The other launcher's host, 3 s fast: it reports its skew and its
	// asynq forwards due runs by its clock.
	const fastBy = 3 * time.Second
	fast, err := queue.NewStore(ctx, rdb, behindClock{by: -fastBy}, &queue.Config{Shards: 1, Lookahead: time.Minute})
	require.NoError(t, err)
	_, err = store.LauncherHeartbeat(ctx, "fast-host", fastBy, time.Now(), time.Minute)
	require.NoError(t, err)
	fwdCtx, stopFwd := context.WithCancel(ctx)
	var fwd sync.WaitGroup
	fwd.Go(func() {
		// As asynq's forwarder does, on a ticker until stopped.
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			_, _ = fast.Tasks().Forward(fwdCtx, fast.Clock().Now())
			select {
			case <-fwdCtx.Done():
				return
			case <-tick.C:
			}
		}
	})
	defer func() { stopFwd(); fwd.Wait() }()
	requireNoEarlyStarts(t, store, time.Now)
}

// A run moved to pending long before its time (the dashboard's "Run" on
// a manual run booked for in an hour) starts when asked: held until its
// time, it would hold a slot until TASK_TIMEOUT and be FAILED unstarted.
func TestARunStartedEarlyFromTheDashboardStarts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := queuetest.StartRedis(t).Client(t)
	store, err := queue.NewStore(ctx, rdb, queue.RealClock{}, &queue.Config{TaskTimeout: 2 * time.Second, TaskMaxRetry: queue.NoRetry})
	require.NoError(t, err)
	require.NoError(t, store.PutWorkflow(ctx, "wf", "1", []byte(`{}`)))
	_, _, err = store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
		ScheduledFor: time.Now().Add(time.Hour), IdempotencyKey: "booked"})
	require.NoError(t, err)
	require.NoError(t, asynq.NewInspectorFromRedisClient(rdb).RunTask(queue.QueueNameDefault, "booked"))
	l, err := New(store, &Config{Executor: &recordingExecutor{res: Result{Status: model.RunSuccess}}, ShutdownTimeout: time.Second}, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	require.NoError(t, l.Start(ctx))
	stopAtCleanup(t, l)
	b := &testBundle{store: store}
	b.waitStatus(t, "booked", model.RunSuccess)
}

// behindClock is Redis's clock seen from a host whose clock is by ahead.
type behindClock struct{ by time.Duration }

func (c behindClock) Now() time.Time { return time.Now().Add(-c.by) }

type executorFunc func(context.Context, Request) (Result, error)

func (f executorFunc) Execute(ctx context.Context, r Request) (Result, error) { return f(ctx, r) }

// flakyExecutor fails its first fail calls with a retryable error, calling
// onFail each time, then succeeds.
type flakyExecutor struct {
	fail   int32
	onFail func()
	calls  atomic.Int32
}

func (e *flakyExecutor) Execute(context.Context, Request) (Result, error) {
	if e.calls.Add(1) <= e.fail {
		e.onFail()
		return Result{}, errors.New("executor unavailable")
	}
	return Result{Status: model.RunSuccess}, nil
}

// A task asynq archived before it launched (here from the dashboard; in
// production also a launcher dying on the last attempt) fails its run
// instead of leaving it ENQUEUED. A run already started or ended is left
// alone.
func TestArchivedTasksFailTheirRuns(t *testing.T) {
	t.Parallel()
	rdb := queuetest.StartRedis(t).Client(t)
	clock := queue.NewSimClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	ctx := context.Background()
	store, err := queue.NewStore(ctx, rdb, clock, nil)
	require.NoError(t, err)
	require.NoError(t, store.PutWorkflow(ctx, "wf", "1", []byte(`{}`)))
	l, err := New(store, &Config{Executor: &recordingExecutor{}, ShutdownTimeout: time.Second,
		ArchiveSweepInterval: 20 * time.Millisecond}, nil, prometheus.NewRegistry())
	require.NoError(t, err)

	// Far in the (real) future, so asynq holds them in its scheduled set.
	later := time.Now().Add(24 * time.Hour).Truncate(time.Second)
	inspector := asynq.NewInspectorFromRedisClient(rdb)
	for _, key := range []string{"enqueued", "started", "ended"} {
		_, _, err := store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u", ScheduledFor: later, IdempotencyKey: key})
		require.NoError(t, err)
	}
	_, err = store.UpdateRunStatus(ctx, "started", queue.StatusUpdate{Status: model.RunStarted, RunID: "r-1"})
	require.NoError(t, err)
	_, err = store.UpdateRunStatus(ctx, "ended", queue.StatusUpdate{Status: model.RunSuccess})
	require.NoError(t, err)
	for _, key := range []string{"enqueued", "started", "ended"} {
		require.NoError(t, inspector.ArchiveTask(queue.QueueNameDefault, key))
	}

	require.NoError(t, l.Start(ctx))
	stopAtCleanup(t, l)
	b := &testBundle{rdb: rdb, store: store, clock: clock, launcher: l}
	run := b.waitStatus(t, "enqueued", model.RunFailed)
	require.Contains(t, run.Error, "launch abandoned: asynq archived its task")
	requireCount(t, l.metrics.failedLaunch, 1.0)

	// Sweeping again, from the beginning, changes nothing.
	_, err = l.sweepArchived(ctx, time.Time{})
	require.NoError(t, err)
	requireCount(t, l.metrics.failedLaunch, 1.0)
	for key, want := range map[string]model.RunStatus{"enqueued": model.RunFailed, "started": model.RunStarted, "ended": model.RunSuccess} {
		r, _, err := store.GetRun(ctx, key)
		require.NoError(t, err)
		require.Equal(t, want, r.Status, key)
	}
}

// asynq scores an archived task by the archiving process's own clock. A
// task archived by a launcher whose clock runs ahead must not make the
// sweeps pass over tasks archived later by launchers with right clocks.
func TestArchiveSweepSurvivesALauncherClockAhead(t *testing.T) {
	t.Parallel()
	rdb := queuetest.StartRedis(t).Client(t)
	ctx := context.Background()
	store, err := queue.NewStore(ctx, rdb, queue.RealClock{}, nil)
	require.NoError(t, err)
	require.NoError(t, store.PutWorkflow(ctx, "wf", "1", []byte(`{}`)))
	l, err := New(store, &Config{Executor: &recordingExecutor{}}, nil, prometheus.NewRegistry()) // not started: no sweeps of its own
	require.NoError(t, err)
	later := time.Now().Add(24 * time.Hour).Truncate(time.Second)
	inspector := asynq.NewInspectorFromRedisClient(rdb)
	for _, key := range []string{"ahead", "right"} {
		_, _, err := store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u", ScheduledFor: later, IdempotencyKey: key})
		require.NoError(t, err)
	}
	require.NoError(t, inspector.ArchiveTask(queue.QueueNameDefault, "ahead"))
	require.NoError(t, rdb.ZAdd(ctx, "asynq:{chronos}:archived", redis.Z{Score: float64(time.Now().Add(5 * time.Minute).Unix()), Member: "ahead"}).Err())
	since, err := l.sweepArchived(ctx, time.Now().Add(-time.Hour))
	require.NoError(t, err)
	require.NoError(t, inspector.ArchiveTask(queue.QueueNameDefault, "right"))
	_, err = l.sweepArchived(ctx, since)
	require.NoError(t, err)
	for _, key := range []string{"ahead", "right"} {
		r, _, err := store.GetRun(ctx, key)
		require.NoError(t, err)
		require.Equal(t, model.RunFailed, r.Status, "run %s of an archived task", key)
	}
}

// reportsThenErrs is an executor that records the run itself (as a
// workflow system does through POST /runs/:key/status) but whose answer
// to the launcher is lost: the launcher sees an error. onFail runs first.
type reportsThenErrs struct {
	store  *queue.Store
	status model.RunStatus
	onFail func()
	calls  atomic.Int32
}

func (e *reportsThenErrs) Execute(ctx context.Context, r Request) (Result, error) {
	e.calls.Add(1)
	if _, err := e.store.UpdateRunStatus(ctx, r.Meta.IdempotencyKey, queue.StatusUpdate{Status: e.status, RunID: "wf-run-1"}); err != nil {
		return Result{}, err
	}
	if e.onFail != nil {
		e.onFail()
	}
	return Result{}, errors.New("call executor: context deadline exceeded")
}

// A run the executor has (STARTED, or ended) is never overwritten by its
// launcher: not FAILED on the last attempt, not SKIPPED when a retry finds
// its schedule paused; a retry does not call the executor again, and the
// metrics count only what was recorded.
func TestALaunchedRunIsNeverOverwrittenByItsLauncher(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("last attempt", func(t *testing.T) {
		t.Parallel()
		for _, st := range []model.RunStatus{model.RunStarted, model.RunSuccess} {
			b := setup(t, &recordingExecutor{}, &queue.Config{TaskMaxRetry: queue.NoRetry})
			require.NoError(t, b.launcher.Stop(context.Background()))
			ex := &reportsThenErrs{store: b.store, status: st}
			l, err := New(b.store, &Config{Executor: ex, ShutdownTimeout: time.Second}, nil, prometheus.NewRegistry())
			require.NoError(t, err)
			b.manual(t, "key", true)
			require.NoError(t, l.Start(ctx))
			stopAtCleanup(t, l)
			require.Eventually(t, func() bool {
				info, err := asynq.NewInspectorFromRedisClient(b.rdb).GetTaskInfo(queue.QueueNameDefault, "key")
				return err == nil && info.State == asynq.TaskStateArchived
			}, 20*time.Second, 20*time.Millisecond)
			r, _, err := b.store.GetRun(ctx, "key")
			require.NoError(t, err)
			require.Equal(t, st, r.Status, "error: %s", r.Error)
			require.Zero(t, testutil.ToFloat64(l.metrics.failedLaunch))
		}
	})
	t.Run("retry after a pause", func(t *testing.T) {
		t.Parallel()
		b, sched := setupLaunchersDown(t, &recordingExecutor{})
		rec := &model.ScheduleRecord{ID: "s", CronExpr: "0 * * * *", WorkflowID: "wf", Version: "1",
			OverlapPolicy: model.OverlapSkip, CatchupPolicy: model.CatchupFireImmediately}
		b.upsert(t, rec)
		b.clock.Advance(time.Hour)
		b.tick(t, sched)
		key := model.IdempotencyKey("s", b.clock.Now())
		ex := &reportsThenErrs{store: b.store, status: model.RunStarted, onFail: func() {
			_, err := b.store.SetPaused(context.Background(), "s", true)
			assert.NoError(t, err)
		}}
		l, err := New(b.store, &Config{Executor: ex, ShutdownTimeout: time.Second}, nil, prometheus.NewRegistry())
		require.NoError(t, err)
		require.NoError(t, l.Start(ctx))
		stopAtCleanup(t, l)
		require.Eventually(t, func() bool { // the retry comes after a 2 s backoff
			info, err := asynq.NewInspectorFromRedisClient(b.rdb).GetTaskInfo(queue.QueueNameDefault, key)
			return err == nil && info.State == asynq.TaskStateCompleted
		}, 20*time.Second, 20*time.Millisecond)
		r, _, err := b.store.GetRun(ctx, key)
		require.NoError(t, err)
		require.Equal(t, model.RunStarted, r.Status, "error: %s", r.Error)
		require.Equal(t, int32(1), ex.calls.Load())
		require.Equal(t, uint64(1), histogramCount(t, l.metrics.startDelay), "start delay observed once per run")
		_, err = b.store.UpdateRunStatus(ctx, key, queue.StatusUpdate{Status: model.RunSuccess})
		require.NoError(t, err, "the executor's own end is recorded")
	})
}

func histogramCount(t *testing.T, h prometheus.Histogram) uint64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, h.Write(&m))
	return m.GetHistogram().GetSampleCount()
}

// What an executor answers is bounded like what the API accepts: error
// text cut at model.MaxRunErrorLen bytes, a run id at model.MaxIDLen.
func TestExecutorAnswersAreBounded(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("é", 256<<10)
	b := setup(t, &recordingExecutor{res: Result{RunID: big, Status: model.RunFailed, Error: big}}, nil)
	b.manual(t, "key-big", true)
	run := b.waitStatus(t, "key-big", model.RunFailed)
	require.Len(t, run.Error, model.MaxRunErrorLen)
	require.Len(t, run.RunID, model.MaxIDLen)
}

// A manual run whose task asynq archived outlives its record (asynq keeps
// archived tasks for 90 days). Starting the same key again must run it,
// not record it ENQUEUED behind a task that will never run.
func TestManualRunStartedAgainBehindAnArchivedTaskRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ex := &recordingExecutor{err: &PermanentError{errors.New("bad request")}}
	b := setup(t, ex, &queue.Config{TaskMaxRetry: queue.NoRetry})
	b.manual(t, "key-arch", true)
	b.waitStatus(t, "key-arch", model.RunFailed)
	// The record (and the key's manual mark) reach the end of their
	// retention. Expired here rather than by a short RunRetention: a
	// record that expires before a busy launcher first takes the run is
	// never started (CI saw it with a 1 s retention).
	keys, err := b.rdb.Keys(ctx, "chronos:*key-arch").Result()
	require.NoError(t, err)
	require.Len(t, keys, 2, "the run record and the key's manual mark: %v", keys)
	for _, k := range keys {
		require.NoError(t, b.rdb.PExpire(ctx, k, time.Millisecond).Err())
	}
	require.Eventually(t, func() bool {
		_, _, err := b.store.GetRun(ctx, "key-arch")
		return errors.Is(err, queue.ErrNotFound) // the record expired
	}, 10*time.Second, 20*time.Millisecond)
	info, err := asynq.NewInspectorFromRedisClient(b.rdb).GetTaskInfo(queue.QueueNameDefault, "key-arch")
	require.NoError(t, err)
	require.Equal(t, asynq.TaskStateArchived, info.State)

	ex.mu.Lock()
	ex.err, ex.res = nil, Result{Status: model.RunSuccess}
	ex.mu.Unlock()
	b.manual(t, "key-arch", false)
	b.waitStatus(t, "key-arch", model.RunSuccess)
	ex.mu.Lock()
	defer ex.mu.Unlock()
	require.Len(t, ex.reqs, 2, "started once for each manual run")
}

// chronos_run_start_delay_seconds is "Time from a run's fire time to a
// launcher starting it." A run the launcher SKIPPED (late after a
// launcher outage, or its schedule paused) never started: it must not be
// observed, or one outage puts runs that never ran into the p99.
func TestStartDelayObservesOnlyStartedRuns(t *testing.T) {
	t.Parallel()
	ex := &recordingExecutor{res: Result{Status: model.RunSuccess}}
	b, sched := setupLaunchersDown(t, ex)
	ctx := context.Background()
	for _, id := range []string{"late", "paused"} {
		rec := &model.ScheduleRecord{ID: id, CronExpr: "0 * * * *", WorkflowID: "wf", Version: "1",
			OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupNone}
		b.upsert(t, rec)
	}
	b.clock.Advance(time.Hour)
	b.tick(t, sched)
	at := b.clock.Now()
	_, err := b.store.SetPaused(ctx, "paused", true)
	require.NoError(t, err)
	b.clock.Advance(30 * time.Minute) // every launcher was down for half an hour

	l, err := New(b.store, &Config{Executor: ex, ShutdownTimeout: time.Second, LaunchGrace: time.Minute}, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	require.NoError(t, l.Start(ctx))
	stopAtCleanup(t, l)
	b.waitStatus(t, model.IdempotencyKey("late", at), model.RunSkipped)
	b.waitStatus(t, model.IdempotencyKey("paused", at), model.RunSkipped)
	requireCount(t, l.metrics.skippedLate, 1.0)
	ex.mu.Lock()
	require.Empty(t, ex.reqs, "nothing was started")
	ex.mu.Unlock()
	require.Zero(t, histogramCount(t, l.metrics.startDelay), "start delay observed for runs that never started")
}

// endsBeforeAnswering is an executor whose workflow is quick: it reports
// its own end to the run record (POST /runs/:key/status) before the
// executor's 202 answer reaches the launcher.
type endsBeforeAnswering struct{ store *queue.Store }

func (e endsBeforeAnswering) Execute(ctx context.Context, r Request) (Result, error) {
	if _, err := e.store.UpdateRunStatus(ctx, r.Meta.IdempotencyKey, queue.StatusUpdate{Status: model.RunSuccess}); err != nil {
		return Result{}, err
	}
	return Result{RunID: "wf-run-1"}, nil // 202, started
}

// chronos_runs_launched_total is "Runs the executor accepted". A run the
// executor accepted and whose workflow ended before the answer arrived
// was accepted all the same.
func TestLaunchedCountsRunsThatEndedBeforeTheAnswer(t *testing.T) {
	t.Parallel()
	b := setup(t, &recordingExecutor{}, nil)
	require.NoError(t, b.launcher.Stop(context.Background()))
	l, err := New(b.store, &Config{Executor: endsBeforeAnswering{b.store}, ShutdownTimeout: time.Second}, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	b.manual(t, "quick", true)
	require.NoError(t, l.Start(context.Background()))
	stopAtCleanup(t, l)
	b.waitStatus(t, "quick", model.RunSuccess)
	require.Eventually(t, func() bool {
		info, err := asynq.NewInspectorFromRedisClient(b.rdb).GetTaskInfo(queue.QueueNameDefault, "quick")
		return err == nil && info.State == asynq.TaskStateCompleted
	}, 20*time.Second, 20*time.Millisecond)
	require.Equal(t, 1, testutil.CollectAndCount(l.metrics.launched), "the accepted run is not counted")
}

// An executor that deduplicates on the Idempotency-Key header the way the
// IETF Idempotency-Key draft (and chronos's own "deduplicate on it")
// describes answers 409 Conflict to a retry that arrives while the first
// request with that key is still being processed. chronos retries exactly
// then: after its own EXECUTOR_TIMEOUT gave up on the first call. The run
// is in progress at the executor; recording it FAILED (final) is wrong,
// and the workflow's own end report is then refused.
func TestIdempotencyConflictFromTheExecutorDoesNotFailTheRun(t *testing.T) {
	t.Parallel()
	var (
		mu         sync.Mutex
		processing = map[string]bool{}
		done       = map[string]bool{}
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		switch {
		case done[key]:
			mu.Unlock()
			w.WriteHeader(http.StatusAccepted) // replay of the stored answer
			return
		case processing[key]:
			mu.Unlock()
			http.Error(w, "a request with this Idempotency-Key is being processed", http.StatusConflict)
			return
		}
		processing[key] = true
		mu.Unlock()
		// Real time must pass: the executor is slow to accept, longer than
		// EXECUTOR_TIMEOUT, so the launcher gives up on the call meanwhile.
		const slowAccept = 4 * time.Second
		<-time.After(slowAccept)
		mu.Lock()
		done[key] = true
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(srv.Close)
	// One retry: the 409 comes on the last attempt, where an error would
	// fail the run.
	b := setup(t, NewHTTPExecutor(srv.URL, 300*time.Millisecond, 2), &queue.Config{TaskMaxRetry: 1})
	b.manual(t, "key-409", true)
	// Polled by hand rather than with require.Eventually: a FAILED status
	// seen on the way must fail the test at once.
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for deadline := time.Now().Add(20 * time.Second); ; <-poll.C {
		r, _, err := b.store.GetRun(context.Background(), "key-409")
		require.NoError(t, err)
		require.NotEqual(t, model.RunFailed, r.Status, "run FAILED while the executor runs it: %s", r.Error)
		if r.Status == model.RunStarted {
			return
		}
		require.True(t, time.Now().Before(deadline), "run never STARTED: %s", r.Status)
	}
}

// A manual run backfilling a past time (POST /run-launcher/start with
// scheduled_for a month ago) is due when it is asked for, as
// missedAtLaunch already reckons: started within milliseconds, it must not
// add a month to chronos_run_start_delay_seconds.
func TestStartDelayOfABackfillIsFromItsRequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, &recordingExecutor{res: Result{Status: model.RunSuccess}}, nil)
	require.NoError(t, b.store.PutWorkflow(ctx, "wf", "1", []byte(`{}`)))
	_, _, err := b.store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
		ScheduledFor: b.clock.Now().Add(-30 * 24 * time.Hour), IdempotencyKey: "backfill"})
	require.NoError(t, err)
	b.waitStatus(t, "backfill", model.RunSuccess)
	var m dto.Metric
	require.NoError(t, b.launcher.metrics.startDelay.Write(&m))
	require.Less(t, m.GetHistogram().GetSampleSum(), 60.0, "seconds of start delay for a run started at once")
}

// breaksTheRecordOnce accepts runs, but the first time it also turns the
// run's record into a string for a moment, so the launcher's status
// write after the call fails (as when Redis is briefly unreachable).
type breaksTheRecordOnce struct {
	rdb   *redis.Client
	calls atomic.Int32
}

func (e *breaksTheRecordOnce) Execute(ctx context.Context, r Request) (Result, error) {
	if e.calls.Add(1) > 1 {
		return Result{RunID: "wf-run"}, nil
	}
	keys, err := e.rdb.Keys(ctx, "*run:"+r.Meta.IdempotencyKey).Result()
	if err != nil || len(keys) != 1 {
		return Result{}, fmt.Errorf("run record of %s: %v %v", r.Meta.IdempotencyKey, keys, err)
	}
	fields, err := e.rdb.HGetAll(ctx, keys[0]).Result()
	if err != nil {
		return Result{}, err
	}
	e.rdb.Del(ctx, keys[0])
	e.rdb.Set(ctx, keys[0], "broken", 0)
	go func() {
		// Real time must pass: the record stays broken for a moment, as
		// through a short Redis outage, while the launcher writes the status.
		const brokenFor = 300 * time.Millisecond
		<-time.After(brokenFor)
		// In one transaction: a status write between the two would find
		// no record, and rightly give up.
		_, _ = e.rdb.TxPipelined(context.Background(), func(p redis.Pipeliner) error {
			p.Del(context.Background(), keys[0])
			p.HSet(context.Background(), keys[0], fields)
			return nil
		})
	}()
	return Result{RunID: "wf-run"}, nil
}

// The executor accepted a run on its only attempt (TASK_MAX_RETRY=0) and
// the status write then failed for a moment: the write is retried, the
// task not archived (and the run swept FAILED while the executor has it).
func TestALostStatusWriteAfterTheExecutorAcceptedIsRetried(t *testing.T) {
	t.Parallel()
	rdb := queuetest.StartRedis(t).Client(t)
	ex := &breaksTheRecordOnce{rdb: rdb}
	clock := queue.NewSimClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	store, err := queue.NewStore(context.Background(), rdb, clock, &queue.Config{TaskMaxRetry: queue.NoRetry})
	require.NoError(t, err)
	b := &testBundle{rdb: rdb, store: store, clock: clock}
	b.manual(t, "lost-write", true)
	l, err := New(store, &Config{Executor: ex, ShutdownTimeout: time.Second}, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	require.NoError(t, l.Start(context.Background()))
	stopAtCleanup(t, l)

	run := b.waitStatus(t, "lost-write", model.RunStarted)
	require.Equal(t, "wf-run", run.RunID)
	require.Equal(t, int32(1), ex.calls.Load())
	info, err := asynq.NewInspectorFromRedisClient(rdb).GetTaskInfo(queue.QueueNameDefault, "lost-write")
	require.NoError(t, err)
	require.NotEqual(t, asynq.TaskStateArchived, info.State)
}

// A "skip" schedule's run that RUN_TIMEOUT marked FAILED while every
// launcher was down, and whose record the history trim then deleted, must
// not be executed when a launcher comes back: its task is still pending.
func TestATimedOutRunTrimmedFromHistoryIsNotExecuted(t *testing.T) {
	t.Parallel()
	ex := &recordingExecutor{res: Result{Status: model.RunSuccess}}
	b, first := trimmedRunWithItsTaskPending(t, ex)
	ctx := context.Background()
	start := first.runAt.Add(-time.Minute)

	l, err := New(b.store, &Config{Executor: ex, ShutdownTimeout: time.Second}, nil, nil)
	require.NoError(t, err)
	require.NoError(t, l.Start(ctx))
	stopAtCleanup(t, l)
	latest := model.IdempotencyKey("skip", start.Add(2*time.Hour+time.Minute))
	b.waitStatus(t, latest, model.RunSuccess)
	// Real time must pass: the subject is a call that must not happen, so
	// the launcher gets a second after the latest run in which to make it.
	const quiet = time.Second
	<-time.After(quiet)
	ex.mu.Lock()
	defer ex.mu.Unlock()
	for _, r := range ex.reqs {
		require.NotEqual(t, first.key, r.Meta.IdempotencyKey, "the 00:01 run, marked FAILED by RUN_TIMEOUT an hour ago, was executed")
	}
}

// A manual run given the idempotency key of a scheduled run not planned
// yet (to start it early, deduplicated with the schedule) claims the key's
// task; when the scheduler then plans the run, its record must not be left
// ENQUEUED for ever with no task to carry it out.
func TestManualRunWithAScheduledRunsKeyLeavesNoOrphanRecord(t *testing.T) {
	t.Parallel()
	for _, sameShard := range []bool{false, true} {
		t.Run(fmt.Sprintf("same shard %v", sameShard), func(t *testing.T) {
			t.Parallel()
			ex := &recordingExecutor{res: Result{Status: model.RunSuccess}}
			b, sched := setupLaunchersDown(t, ex)
			ctx := context.Background()
			start := b.clock.Now()
			var id, key string
			for i := 0; ; i++ { // the schedule's shard and the run key's: the same or not
				id, key = fmt.Sprintf("s%d", i), model.IdempotencyKey(fmt.Sprintf("s%d", i), start.Add(time.Hour))
				if (queue.ShardOf(id, 16) == queue.ShardOf(key, 16)) == sameShard {
					break
				}
			}
			b.upsert(t, &model.ScheduleRecord{ID: id, CronExpr: "0 * * * *", WorkflowID: "wf", Version: "1",
				OverlapPolicy: model.OverlapSkip, CatchupPolicy: model.CatchupFireImmediately})
			_, started, err := b.store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
				ScheduledFor: start.Add(time.Hour), IdempotencyKey: key})
			require.NoError(t, err)
			require.True(t, started)

			b.clock.Advance(time.Hour)
			b.tick(t, sched)
			l, err := New(b.store, &Config{Executor: ex, ShutdownTimeout: time.Second}, nil, nil)
			require.NoError(t, err)
			require.NoError(t, l.Start(ctx))
			stopAtCleanup(t, l)
			manual := b.waitStatus(t, key, model.RunSuccess) // GET /runs/:key: the manual run, which ran
			require.Equal(t, model.SourceManual, manual.Source)
			run, err := b.store.GetScheduleRun(ctx, id, key)
			require.NoError(t, err)
			require.NotEqual(t, model.RunEnqueued, run.Status, "the schedule's run record waits for a task that is not its own")
			// 02:00: the schedule (overlap skip) must not see 01:00 in flight.
			b.clock.Advance(time.Hour)
			b.tick(t, sched)
			run, err = b.store.GetScheduleRun(ctx, id, model.IdempotencyKey(id, start.Add(2*time.Hour)))
			require.NoError(t, err)
			require.NotEqual(t, model.RunSkipped, run.Status, run.Error)
			require.Eventually(t, func() bool {
				ex.mu.Lock()
				defer ex.mu.Unlock()
				return len(ex.reqs) == 2 // the manual run, then 02:00
			}, 10*time.Second, 20*time.Millisecond)
		})
	}
}

// A manual run given a future scheduled run's key (README: "A key a
// schedule's run will have is taken: that scheduled run is recorded
// SKIPPED") that has already finished when the schedule plans that run:
// A manual run started with a schedule's future run's key ("run the 01:00
// run now") that has already finished when the scheduler plans 01:00: the
// scheduled run is recorded SKIPPED, not executed again.
func TestAScheduledRunWhoseKeyAFinishedManualRunTookIsNotRunAgain(t *testing.T) {
	ex := &recordingExecutor{res: Result{Status: model.RunSuccess}}
	b := setup(t, ex, nil)
	ctx := context.Background()
	require.NoError(t, b.store.PutWorkflow(ctx, "wf", "1", []byte(`{}`)))
	sched, err := scheduler.New(b.store, nil, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	start := b.clock.Now()
	var id, key string
	for i := 0; ; i++ {
		id, key = fmt.Sprintf("s%d", i), model.IdempotencyKey(fmt.Sprintf("s%d", i), start.Add(time.Hour))
		if queue.ShardOf(id, 16) != queue.ShardOf(key, 16) {
			break
		}
	}
	b.upsert(t, &model.ScheduleRecord{ID: id, CronExpr: "0 * * * *", WorkflowID: "wf", Version: "1",
		OverlapPolicy: model.OverlapSkip, CatchupPolicy: model.CatchupFireImmediately})
	// "run the 01:00 run now"
	_, started, err := b.store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
		ScheduledFor: start, IdempotencyKey: key})
	require.NoError(t, err)
	require.True(t, started)
	b.waitStatus(t, key, model.RunSuccess)

	b.clock.Advance(time.Hour)
	b.tick(t, sched)
	// Real time must pass: the subject is a second executor call that must
	// not happen, so the launcher gets 2 s after the tick in which to make it.
	const quiet = 2 * time.Second
	<-time.After(quiet)
	run, err := b.store.GetScheduleRun(ctx, id, key)
	require.NoError(t, err)
	ex.mu.Lock()
	defer ex.mu.Unlock()
	require.Len(t, ex.reqs, 1, "executor called again with key %s; schedule's record: %s %s", key, run.Status, run.Error)
	require.Equal(t, model.RunSkipped, run.Status)
}

// A manual run started with a key a scheduler commits between the API's
// look-up and its script: it is not created (the scheduled run has the
// key's task) and the API answers with the scheduled run, started false.
func TestAManualRunRacingTheScheduledRunWithItsKeyIsNotCreated(t *testing.T) {
	ctx := context.Background()
	r := queuetest.StartRedis(t)
	clock := queue.NewSimClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	hooked, hook := r.Client(t), &queuetest.BeforeScriptHook{}
	hooked.AddHook(hook)
	api, err := queue.NewStore(ctx, hooked, clock, nil)
	require.NoError(t, err)
	store, err := queue.NewStore(ctx, r.Client(t), clock, nil)
	require.NoError(t, err)
	require.NoError(t, store.PutWorkflow(ctx, "wf", "1", []byte(`{}`)))
	ex := &recordingExecutor{res: Result{Status: model.RunSuccess}}
	sched, err := scheduler.New(store, nil, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	b := &testBundle{rdb: r.Client(t), store: store, clock: clock}

	start := clock.Now()
	var id, key string
	for i := 0; ; i++ {
		id, key = fmt.Sprintf("s%d", i), model.IdempotencyKey(fmt.Sprintf("s%d", i), start.Add(time.Hour))
		if queue.ShardOf(id, 16) != queue.ShardOf(key, 16) {
			break
		}
	}
	b.upsert(t, &model.ScheduleRecord{ID: id, CronExpr: "0 * * * *", WorkflowID: "wf", Version: "1",
		OverlapPolicy: model.OverlapSkip, CatchupPolicy: model.CatchupFireImmediately})
	clock.Advance(time.Hour)
	hook.Fn = func() { b.tick(t, sched) } // the scheduler commits 01:00 meanwhile
	run, started, err := api.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
		ScheduledFor: clock.Now(), IdempotencyKey: key})
	require.NoError(t, err)
	require.False(t, started, "a scheduled run took the key meanwhile")
	require.Equal(t, model.SourceSchedule, run.Source)

	l, err := New(store, &Config{Executor: ex, ShutdownTimeout: time.Second}, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	require.NoError(t, l.Start(ctx))
	stopAtCleanup(t, l)
	require.Eventually(t, func() bool {
		r, err := store.GetScheduleRun(ctx, id, key)
		return err == nil && r.Status == model.RunSuccess
	}, 10*time.Second, 20*time.Millisecond)
	// Real time must pass: a run left ENQUEUED is an absence of change, so
	// the launcher gets a second after the scheduled run's end to settle it.
	const quiet = time.Second
	<-time.After(quiet)
	got, _, err := store.GetRun(ctx, key)
	require.NoError(t, err)
	require.NotEqual(t, model.RunEnqueued, got.Status,
		"GET /runs/%s: %s run stuck ENQUEUED (started=%v) though the only task under the key ran", key, got.Source, started)
}

// An executor deduplicating on the key answers 409 while the call this
// launcher gave up on (EXECUTOR_TIMEOUT) is still being accepted. The doc
// says "the run is not failed, it is being started"; on the task's last
// attempt a 409 fails it all the same.

// A manual run asked for with the key of a schedule's run whose record was
// trimmed while its task waits (FAILED by RUN_TIMEOUT while no launcher
// ran) is refused as a conflict, not answered "not found" nor recorded
// without a task of its own.
func TestAManualRunOnAKeyWhoseTaskOutlivedItsRecordIsAConflict(t *testing.T) {
	t.Parallel()
	b, first := trimmedRunWithItsTaskPending(t, &recordingExecutor{})
	ctx := context.Background()
	_, _, err := b.store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
		ScheduledFor: b.clock.Now(), IdempotencyKey: first.key})
	require.ErrorIs(t, err, queue.ErrConflict)
	_, _, err = b.store.GetRun(ctx, first.key)
	require.ErrorIs(t, err, queue.ErrNotFound, "nothing recorded")
}

type plannedRun struct {
	key   string
	runAt time.Time
}

// trimmedRunWithItsTaskPending runs a per-minute "skip" schedule for two
// hours with every launcher down (RUN_HISTORY 100, RUN_TIMEOUT 1h): its
// first run, FAILED by RUN_TIMEOUT, has had its record trimmed from the
// history while its task still waits in asynq.
func trimmedRunWithItsTaskPending(t *testing.T, ex Executor) (*testBundle, plannedRun) {
	t.Helper()
	b, sched := setupLaunchersDown(t, ex)
	ctx := context.Background()
	start := b.clock.Now()
	b.upsert(t, &model.ScheduleRecord{ID: "skip", CronExpr: "* * * * *", WorkflowID: "wf", Version: "1",
		OverlapPolicy: model.OverlapSkip, CatchupPolicy: model.CatchupFireImmediately})
	for b.clock.Now().Before(start.Add(2*time.Hour + 5*time.Minute)) {
		b.clock.Advance(time.Minute)
		b.tick(t, sched)
	}
	first := plannedRun{key: model.IdempotencyKey("skip", start.Add(time.Minute)), runAt: start.Add(time.Minute)}
	_, _, err := b.store.GetRun(ctx, first.key)
	require.ErrorIs(t, err, queue.ErrNotFound, "the first run timed out (FAILED) and was trimmed")
	require.Equal(t, "pending", b.rdb.HGet(ctx, "asynq:{chronos}:t:"+first.key, "state").Val(), "its task still waits")
	return b, first
}

// requireCount waits for a launcher counter to reach want: a handler
// counts a run just after its record shows it.
func requireCount(t *testing.T, c prometheus.Collector, want float64) {
	t.Helper()
	require.Eventually(t, func() bool { return testutil.ToFloat64(c) == want }, 5*time.Second, 10*time.Millisecond,
		"counter never reached %v", want)
}
