package launcher

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
	"github.com/chronos-sched/chronos/scheduler"
)

// TestNoEarlyStart checks that no run starts before its time on the
// shared clock, whichever host's clock moved it to pending, and that one
// started from the dashboard on purpose does start.
func TestNoEarlyStart(t *testing.T) {
	t.Parallel()

	// A launcher whose host clock is ahead of Redis's (here 3 s) gets runs
	// enqueued ahead from asynq early (asynq forwards them by the host's
	// clock); it still starts none before its time on the shared clock.
	t.Run("ALauncherWithAFastHostClockDoesNotStartRunsEarly", func(t *testing.T) {
		t.Parallel()
		clock := behindClock{by: 3 * time.Second}
		store := storeWithRunsAhead(t, queuetest.StartRedis(t).Universal(t), clock)
		requireNoEarlyStarts(t, store, clock.Now)
	})

	// asynq's forwarder in every launcher moves runs to pending by its own
	// host's clock: a launcher on a host 3 s fast hands runs to every other
	// launcher 3 s early. Those wait too (the fast launcher reports its skew),
	// rather than pass for runs moved from the dashboard.
	t.Run("RunsForwardedEarlyByAnotherLauncherHostDoNotStartEarly", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		rdb := queuetest.StartRedis(t).Universal(t)
		store := storeWithRunsAhead(t, rdb, queue.RealClock{})

		// The other launcher's host, 3 s fast: it reports its skew and its
		// asynq forwards due runs by its clock.
		const fastBy = 3 * time.Second
		fast, err := queue.NewStore(ctx, rdb, behindClock{by: -fastBy}, &queue.Config{Shards: 1, Lookahead: time.Minute})
		require.NoError(t, err)
		_, err = store.LauncherHeartbeat(ctx, "fast-host", fastBy, time.Now(), time.Minute)
		require.NoError(t, err)
		// As asynq's forwarder does, on a ticker.
		forwardEvery(t, 100*time.Millisecond, func(ctx context.Context) {
			_, _ = fast.Tasks().Forward(ctx, fast.Clock().Now())
		})
		requireNoEarlyStarts(t, store, time.Now)
	})

	// A run moved to pending long before its time (the dashboard's "Run" on
	// a manual run booked for in an hour) starts when asked: held until its
	// time, it would hold a slot until TASK_TIMEOUT and be FAILED unstarted.
	t.Run("ARunStartedEarlyFromTheDashboardStarts", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		rdb := queuetest.StartRedis(t).Universal(t)
		store, err := queue.NewStore(ctx, rdb, queue.RealClock{}, &queue.Config{TaskTimeout: 2 * time.Second, TaskMaxRetry: queue.NoRetry})
		require.NoError(t, err)
		require.NoError(t, store.PutWorkflow(ctx, "wf", "1", []byte(`{}`)))
		_, _, err = store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
			ScheduledFor: time.Now().Add(time.Hour), IdempotencyKey: "booked"})
		require.NoError(t, err)
		require.NoError(t, asynq.NewInspectorFromRedisClient(rdb).RunTask(queuetest.TaskQueue(rdb, queue.QueueNameDefault, "booked"), "booked"))
		l, err := New(store, &Config{Executor: &recordingExecutor{res: Result{Status: model.RunSuccess}}, ShutdownTimeout: time.Second}, nil, prometheus.NewRegistry())
		require.NoError(t, err)
		require.NoError(t, l.Start(ctx))
		stopAtCleanup(t, l)
		b := &testBundle{store: store}
		b.waitStatus(t, "booked", model.RunSuccess)
	})
}

// storeWithRunsAhead is a store on clock with an every-second schedule
// whose next minute of runs is enqueued ahead.
func storeWithRunsAhead(t *testing.T, rdb redis.UniversalClient, clock queue.Clock) *queue.Store {
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

// behindClock is Redis's clock seen from a host whose clock is by ahead.
type behindClock struct{ by time.Duration }

func (c behindClock) Now() time.Time { return time.Now().Add(-c.by) }
