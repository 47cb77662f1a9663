package launcher

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// The lane finishes each task it took as asynq's server would after its
// handler: done, retried with the run's failed attempt counted, archived
// when the retries are spent or the task cannot be read (a panic is an
// error, not a crash), and given back to the queue, not counted, when
// the launcher stops during the executor call.
func TestLaneFinishesTasksAsAsynqWould(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := queuetest.StartRedis(t).Universal(t)
	store, err := queue.NewStore(ctx, rdb, queue.RealClock{}, &queue.Config{TaskMaxRetry: 1})
	require.NoError(t, err)
	require.NoError(t, store.PutWorkflow(ctx, "wf", "1", []byte(`{}`)))
	insp := asynq.NewInspectorFromRedisClient(rdb)

	var ex executorFunc
	l, err := New(store, &Config{Executor: executorFunc(func(ctx context.Context, r Request) (Result, error) { return ex(ctx, r) }),
		ShutdownTimeout: time.Second}, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	// Take the task itself rather than start the launcher, whose lane
	// would take it first.
	// holding is a lane holding task tk as takeLoop leaves it: leased,
	// with a hold.
	holding := func(tk *taken) *lane {
		ln := newLane(l)
		ln.runCtx, ln.cancelRun = context.WithCancel(ctx)
		ln.held[tk.Task] = true
		ln.holds <- struct{}{}
		return ln
	}
	take := func(key string, retried int) (*lane, *taken) {
		t.Helper()
		_, started, err := store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
			ScheduledFor: time.Now().Add(-time.Second), IdempotencyKey: key})
		require.NoError(t, err)
		require.True(t, started)
		tasks, err := l.take(ctx, 10)
		require.NoError(t, err)
		require.Len(t, tasks, 1)
		tasks[0].Retried = retried
		return holding(tasks[0]), tasks[0]
	}
	state := func(key string) *asynq.TaskInfo {
		t.Helper()
		info, err := insp.GetTaskInfo(queuetest.TaskQueue(rdb, queue.QueueNameDefault, key), key)
		require.NoError(t, err)
		return info
	}
	status := func(key string) *model.Run {
		t.Helper()
		r, _, err := store.GetRun(ctx, key)
		require.NoError(t, err)
		return r
	}

	ex = func(context.Context, Request) (Result, error) { return Result{Status: model.RunSuccess}, nil }
	ln, tk := take("ok", 0)
	ln.run(tk)
	require.Equal(t, asynq.TaskStateCompleted, state("ok").State)
	require.Equal(t, model.RunSuccess, status("ok").Status)
	require.Empty(t, ln.held, "a finished task's lease is no longer extended")

	ex = func(context.Context, Request) (Result, error) { return Result{}, errors.New("executor down") }
	ln, tk = take("flaky", 0)
	before := time.Now()
	ln.run(tk)
	info := state("flaky")
	require.Equal(t, asynq.TaskStateRetry, info.State)
	require.Equal(t, 1, info.Retried)
	require.Equal(t, "executor down", info.LastErr)
	require.WithinDuration(t, before.Add(retryDelay(0, nil, nil)), info.NextProcessAt, 2*time.Second)
	st, err := store.LoadLaunch(ctx, tk.payload)
	require.NoError(t, err)
	require.Equal(t, 1, st.FailedAttempts, "the failed attempt is counted on the run")
	require.Equal(t, model.RunEnqueued, status("flaky").Status)

	ln, tk = take("spent", 1)
	ln.run(tk)
	info = state("spent")
	require.Equal(t, asynq.TaskStateArchived, info.State)
	require.Contains(t, info.LastErr, "executor failed after 2 attempts")
	require.Equal(t, model.RunFailed, status("spent").Status)

	ex = func(context.Context, Request) (Result, error) { panic("executor bug") }
	ln, tk = take("panics", 0)
	ln.run(tk)
	info = state("panics")
	require.Equal(t, asynq.TaskStateRetry, info.State)
	require.Equal(t, "panic: executor bug", info.LastErr)

	inCall := make(chan struct{})
	ex = func(ctx context.Context, _ Request) (Result, error) {
		close(inCall)
		<-ctx.Done()
		return Result{}, ctx.Err()
	}
	ln, tk = take("stopping", 1)
	go func() { <-inCall; ln.cancelRun() }()
	ln.run(tk)
	require.Equal(t, asynq.TaskStatePending, state("stopping").State, "given back, even on its last attempt")
	require.Zero(t, state("stopping").Retried, "not counted as an attempt")
	require.Equal(t, model.RunEnqueued, status("stopping").Status)

	// A payload that does not decode is archived at once.
	_, err = asynq.NewClientFromRedisClient(rdb).EnqueueContext(ctx, asynq.NewTask(queue.TaskTypeRun, []byte(`not json`)),
		asynq.TaskID("garbage"), asynq.Queue(queue.QueueNameDefault), asynq.MaxRetry(5), asynq.Retention(time.Hour))
	require.NoError(t, err)
	require.NoError(t, rdb.LRem(ctx, "asynq:{"+queuetest.TaskQueue(rdb, queue.QueueNameDefault, "stopping")+"}:pending", 0, "stopping").Err()) // left for good
	tasks, err := l.take(ctx, 10)
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	require.Nil(t, tasks[0].payload)
	holding(tasks[0]).run(tasks[0])
	info = state("garbage")
	require.Equal(t, asynq.TaskStateArchived, info.State)
	require.Contains(t, info.LastErr, "decode run task payload")
}

// runBacklog starts n manual runs, then a launcher with executor ex and
// the concurrency given, and waits until their tasks are all completed.
func runBacklog(t *testing.T, n, concurrency int, ex Executor) {
	t.Helper()
	ctx := context.Background()
	rdb := queuetest.StartRedis(t).Universal(t)
	store, err := queue.NewStore(ctx, rdb, queue.RealClock{}, nil)
	require.NoError(t, err)
	require.NoError(t, store.PutWorkflow(ctx, "wf", "1", []byte(`{}`)))
	for i := range n {
		_, _, err := store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
			ScheduledFor: time.Now().Add(-time.Second), IdempotencyKey: fmt.Sprintf("k%03d", i)})
		require.NoError(t, err)
	}
	l, err := New(store, &Config{Executor: ex, Concurrency: concurrency, ShutdownTimeout: time.Second}, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	require.NoError(t, l.Start(ctx))
	stopAtCleanup(t, l)
	insp := asynq.NewInspectorFromRedisClient(rdb)
	require.Eventually(t, func() bool {
		completed := 0
		for _, q := range store.Tasks().Names() {
			qi, err := insp.GetQueueInfo(q)
			if err == nil {
				completed += qi.Completed
			}
		}
		return completed == n
	}, 20*time.Second, 20*time.Millisecond)
}

// Started, the lane takes the tasks of many runs together and carries
// them all out, each once.
func TestLaneRunsABacklog(t *testing.T) {
	t.Parallel()
	const n = 300
	ex := &recordingExecutor{res: Result{Status: model.RunSuccess}}
	runBacklog(t, n, 20, ex)
	ex.mu.Lock()
	defer ex.mu.Unlock()
	seen := map[string]bool{}
	for _, r := range ex.reqs {
		require.False(t, seen[r.Meta.IdempotencyKey], "%s started twice", r.Meta.IdempotencyKey)
		seen[r.Meta.IdempotencyKey] = true
	}
	require.Len(t, seen, n)
}

// A run taken before its time (a launcher host's clock ahead) waits for
// it, and is checked after the wait, not on what was read with its task:
// its schedule may be paused or deleted meanwhile.
func TestARunTakenEarlyIsCheckedAfterItsWait(t *testing.T) {
	t.Parallel()
	ex := &recordingExecutor{res: Result{Status: model.RunSuccess}}
	b, _ := setupLaunchersDown(t, ex)
	ctx := context.Background()
	rec := &model.ScheduleRecord{ID: "s", CronExpr: "* * * * *", WorkflowID: "wf", Version: "1",
		OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupFireImmediately}
	b.upsert(t, rec)
	runAt := b.clock.Now().Truncate(time.Minute).Add(time.Minute)
	b.clock.Set(runAt.Add(-300 * time.Millisecond))
	p := &queue.TaskPayload{IdempotencyKey: model.IdempotencyKey("s", runAt), ScheduleID: "s", RunAt: runAt, FireAt: runAt,
		WorkflowID: "wf", Version: "1", UserID: "u", Source: model.SourceSchedule}
	// Read with the task: still planned. Since then: deleted, with its runs.
	stale, err := b.store.LoadLaunch(ctx, p)
	require.NoError(t, err)
	stale.Status = model.RunEnqueued
	require.NoError(t, b.store.DeleteSchedule(ctx, "s"))

	l, err := New(b.store, &Config{Executor: ex}, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	require.NoError(t, l.launch(ctx, attempt{p: p, maxRetry: 1, state: stale}))
	ex.mu.Lock()
	defer ex.mu.Unlock()
	require.Empty(t, ex.reqs, "the run was started on what was read before its wait")
}

// LAUNCHER_CONCURRENCY bounds the executor calls in progress, all the
// lane's, though a lane run frees its slot as
// soon as the executor answers, before its status and its task's end are
// written.
func TestExecutorCallsStayWithinConcurrency(t *testing.T) {
	t.Parallel()
	const limit = 4
	var inCall, most atomic.Int32
	ex := executorFunc(func(context.Context, Request) (Result, error) {
		c := inCall.Add(1)
		defer inCall.Add(-1)
		for m := most.Load(); c > m && !most.CompareAndSwap(m, c); m = most.Load() {
		}
		// Real time must pass: each call lasts a moment, so calls overlap
		// and the bound on them is put to the test.
		const callTakes = 5 * time.Millisecond
		<-time.After(callTakes)
		return Result{Status: model.RunSuccess}, nil
	})
	runBacklog(t, 60, limit, ex)
	require.LessOrEqual(t, most.Load(), int32(limit))
	require.Greater(t, most.Load(), int32(1), "the lane runs several at once")
}
