package launcher

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// TestArchived checks runs whose asynq task was archived before it
// launched: the sweep fails them, whatever the archiving host's clock, and
// the key can be started again.
func TestArchived(t *testing.T) {
	t.Parallel()

	// A task asynq archived before it launched (here from the dashboard; in
	// production also a launcher dying on the last attempt) fails its run
	// instead of leaving it ENQUEUED. A run already started or ended is left
	// alone.
	t.Run("TasksFailTheirRuns", func(t *testing.T) {
		t.Parallel()
		rdb := queuetest.StartRedis(t).Universal(t)
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
			require.NoError(t, inspector.ArchiveTask(queuetest.TaskQueue(rdb, queue.QueueNameDefault, key), key))
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
	})

	// asynq scores an archived task by the archiving process's own clock. A
	// task archived by a launcher whose clock runs ahead must not make the
	// sweeps pass over tasks archived later by launchers with right clocks.
	t.Run("ArchiveSweepSurvivesALauncherClockAhead", func(t *testing.T) {
		t.Parallel()
		rdb := queuetest.StartRedis(t).Universal(t)
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
		require.NoError(t, inspector.ArchiveTask(queuetest.TaskQueue(rdb, queue.QueueNameDefault, "ahead"), "ahead"))
		require.NoError(t, rdb.ZAdd(ctx, "asynq:{"+queuetest.TaskQueue(rdb, queue.QueueNameDefault, "ahead")+"}:archived", redis.Z{Score: float64(time.Now().Add(5 * time.Minute).Unix()), Member: "ahead"}).Err())
		since, err := l.sweepArchived(ctx, time.Now().Add(-time.Hour))
		require.NoError(t, err)
		require.NoError(t, inspector.ArchiveTask(queuetest.TaskQueue(rdb, queue.QueueNameDefault, "right"), "right"))
		_, err = l.sweepArchived(ctx, since)
		require.NoError(t, err)
		for _, key := range []string{"ahead", "right"} {
			r, _, err := store.GetRun(ctx, key)
			require.NoError(t, err)
			require.Equal(t, model.RunFailed, r.Status, "run %s of an archived task", key)
		}
	})

	// A manual run whose task asynq archived outlives its record (asynq keeps
	// archived tasks for 90 days). Starting the same key again must run it,
	// not record it ENQUEUED behind a task that will never run.
	t.Run("ManualRunStartedAgainBehindAnArchivedTaskRuns", func(t *testing.T) {
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
		keys, err := queuetest.FindKeys(ctx, b.rdb, "chronos:*key-arch")
		require.NoError(t, err)
		require.Len(t, keys, 2, "the run record and the key's manual mark: %v", keys)
		for _, k := range keys {
			require.NoError(t, b.rdb.PExpire(ctx, k, time.Millisecond).Err())
		}
		require.Eventually(t, func() bool {
			_, _, err := b.store.GetRun(ctx, "key-arch")
			return errors.Is(err, queue.ErrNotFound) // the record expired
		}, 10*time.Second, 20*time.Millisecond)
		info, err := asynq.NewInspectorFromRedisClient(b.rdb).GetTaskInfo(queuetest.TaskQueue(b.rdb, queue.QueueNameDefault, "key-arch"), "key-arch")
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
	})
}
