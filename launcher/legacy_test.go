package launcher

import (
	"context"
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

// A deployment upgraded from the single run queue (every task in
// asynq:{chronos}) to one queue per shard loses no run: the runs
// recorded before the upgrade keep their records in their shards, and
// their tasks, pending or scheduled ahead, still in the old queue, are
// forwarded and run by the new launchers, each once, until the old
// queue is empty.
func TestLaunchersDrainTheLegacySingleQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ex := &recordingExecutor{res: Result{Status: model.RunSuccess}}
	b, sched := setupLaunchersDown(t, ex)
	start := b.clock.Now()

	// The runs as the old layout left them: a schedule's run due now and
	// one planned ahead (scheduled), and manual runs due now and ahead.
	b.upsert(t, &model.ScheduleRecord{ID: "old", CronExpr: "* * * * *", WorkflowID: "wf", Version: "1",
		OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupFireImmediately})
	b.clock.Advance(time.Minute)
	b.tick(t, sched)
	keys := []string{model.IdempotencyKey("old", start.Add(time.Minute))}
	for i, at := range []time.Time{b.clock.Now(), b.clock.Now().Add(time.Minute)} {
		key := []string{"manual-now", "manual-ahead"}[i]
		_, started, err := b.store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
			ScheduledFor: at, IdempotencyKey: key})
		require.NoError(t, err)
		require.True(t, started)
		keys = append(keys, key)
	}
	for _, key := range keys {
		toLegacyQueue(t, b, key)
	}
	require.Equal(t, len(keys), queuetest.CountTasks(t, b.rdb, queue.QueueNameDefault))

	l, err := New(b.store, &Config{Executor: ex, ShutdownTimeout: time.Second}, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	require.NoError(t, l.Start(ctx))
	stopAtCleanup(t, l)
	b.waitStatus(t, keys[0], model.RunSuccess)
	b.waitStatus(t, "manual-now", model.RunSuccess)
	b.clock.Advance(time.Minute) // manual-ahead comes due on the shared clock
	b.waitStatus(t, "manual-ahead", model.RunSuccess)

	insp := asynq.NewInspectorFromRedisClient(b.rdb)
	require.Eventually(t, func() bool {
		qi, err := insp.GetQueueInfo(queue.QueueNameDefault)
		return err == nil && qi.Size == qi.Completed && qi.Completed == len(keys)
	}, 10*time.Second, 20*time.Millisecond, "the legacy queue holds only completed tasks")
	ex.mu.Lock()
	defer ex.mu.Unlock()
	calls := map[string]int{}
	for _, r := range ex.reqs {
		calls[r.Meta.IdempotencyKey]++
	}
	for _, key := range keys {
		require.Equal(t, 1, calls[key], "executor calls with key %s", key)
	}
}

// toLegacyQueue moves a run's task from its shard's queue to the legacy
// single queue, written by asynq's own client as the old layout wrote it
// (TestAsynqWireMatchesClient pins that those bytes are the same).
func toLegacyQueue(t *testing.T, b *testBundle, key string) {
	t.Helper()
	ctx := context.Background()
	insp := asynq.NewInspectorFromRedisClient(b.rdb)
	shardQueue := queuetest.TaskQueue(b.rdb, queue.QueueNameDefault, key)
	require.NotEmpty(t, shardQueue, "task %s", key)
	info, err := insp.GetTaskInfo(shardQueue, key)
	require.NoError(t, err)
	require.NoError(t, insp.DeleteTask(shardQueue, key))
	p, err := queue.DecodeTaskPayload(info.Payload)
	require.NoError(t, err)
	opts := []asynq.Option{asynq.TaskID(key), asynq.Queue(queue.QueueNameDefault), asynq.MaxRetry(info.MaxRetry),
		asynq.Retention(info.Retention), asynq.Timeout(info.Timeout)}
	scheduled := info.State == asynq.TaskStateScheduled
	if scheduled {
		// Ahead of the real clock, so asynq's client schedules it; then
		// scored by its fire time on the shared (simulated) clock, as
		// chronos scored it.
		opts = append(opts, asynq.ProcessAt(time.Now().Add(time.Hour)))
	}
	_, err = asynq.NewClientFromRedisClient(b.rdb).EnqueueContext(ctx, asynq.NewTask(info.Type, info.Payload), opts...)
	require.NoError(t, err)
	if scheduled {
		require.NoError(t, b.rdb.ZAdd(ctx, "asynq:{"+queue.QueueNameDefault+"}:scheduled",
			redis.Z{Score: float64(queueScore(p.FireAt)), Member: key}).Err())
	}
	require.Equal(t, queue.QueueNameDefault, queuetest.TaskQueue(b.rdb, queue.QueueNameDefault, key))
}

// queueScore is the scheduled score of a run due at t (asynqwire's
// ScheduledScore: whole seconds, rounded up).
func queueScore(t time.Time) int64 { return t.Add(time.Second - time.Nanosecond).Unix() }
