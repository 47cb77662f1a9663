package launcher

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
	"github.com/chronos-sched/chronos/scheduler"
)

type testBundle struct {
	rdb      redis.UniversalClient
	store    *queue.Store
	clock    *queue.SimClock
	launcher *Launcher
}

// setup starts a launcher on a real Redis. The simulated clock is in the
// past so that asynq, which reads the real clock, runs every task at once.
func setup(t *testing.T, ex Executor, qcfg *queue.Config) *testBundle {
	t.Helper()
	rdb := queuetest.StartRedis(t).Universal(t)
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

// requireCount waits for a launcher counter to reach want: a handler
// counts a run just after its record shows it.
func requireCount(t *testing.T, c prometheus.Collector, want float64) {
	t.Helper()
	require.Eventually(t, func() bool { return testutil.ToFloat64(c) == want }, 5*time.Second, 10*time.Millisecond,
		"counter never reached %v", want)
}

func histogramCount(t *testing.T, h prometheus.Histogram) uint64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, h.Write(&m))
	return m.GetHistogram().GetSampleCount()
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

type executorFunc func(context.Context, Request) (Result, error)

func (f executorFunc) Execute(ctx context.Context, r Request) (Result, error) { return f(ctx, r) }

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
	require.Equal(t, "pending", b.rdb.HGet(ctx, queuetest.TaskKey(t, b.rdb, queue.QueueNameDefault, first.key), "state").Val(), "its task still waits")
	return b, first
}
