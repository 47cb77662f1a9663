package asynqwire_test

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// chronos writes asynq tasks itself, in batches. This pins that the bytes
// and fields it writes are exactly what asynq's own Client writes for the
// same task, pending and scheduled, so asynq's server, Inspector and
// asynqmon read them as their own.
func TestAsynqWireMatchesClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := queuetest.StartRedis(t).Universal(t)
	now := time.Now().Truncate(time.Second)
	client := asynq.NewClientFromRedisClient(rdb)
	q := queue.ShardQueue(queue.QueueNameDefault, 0) // one shard: every run in its queue

	for name, fire := range map[string]time.Time{"pending": now.Add(-time.Second), "scheduled": now.Add(time.Hour)} {
		key := "run-" + name
		store, err := queue.NewStore(ctx, rdb, queue.RealClock{}, &queue.Config{Shards: 1, TaskMaxRetry: 7, TaskRetention: 2 * time.Hour, TaskTimeout: 90 * time.Second})
		require.NoError(t, err)
		_, started, err := store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
			ScheduledFor: fire, IdempotencyKey: key})
		require.NoError(t, err)
		require.True(t, started)
		tkey := "asynq:{s00}chronos}:t:" + key
		ours := rdb.HGetAll(ctx, tkey).Val()
		ourScore := rdb.ZScore(ctx, "asynq:{s00}chronos}:scheduled", key).Val()
		info, err := asynq.NewInspectorFromRedisClient(rdb).GetTaskInfo(q, key)
		require.NoError(t, err)
		require.Equal(t, 7, info.MaxRetry)
		require.Equal(t, queue.TaskTypeRun, info.Type)
		if name == "scheduled" {
			require.Equal(t, asynq.TaskStateScheduled, info.State)
			require.Equal(t, fire.Unix(), info.NextProcessAt.Unix())
			// asynq schedules in whole seconds: a fire time within a
			// second rounds up, so a run never starts early.
			_, _, err := store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1",
				ScheduledFor: fire.Add(300 * time.Millisecond), IdempotencyKey: "fraction"})
			require.NoError(t, err)
			require.Equal(t, float64(fire.Unix()+1), rdb.ZScore(ctx, "asynq:{s00}chronos}:scheduled", "fraction").Val())
		} else {
			require.Equal(t, asynq.TaskStatePending, info.State)
		}

		// A second start of the same run writes nothing.
		_, started, err = store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1",
			ScheduledFor: fire, IdempotencyKey: key})
		require.NoError(t, err)
		require.False(t, started)
		require.Equal(t, ours, rdb.HGetAll(ctx, tkey).Val())

		queuetest.FlushAll(t, rdb)
		_, err = client.EnqueueContext(ctx, asynq.NewTask(queue.TaskTypeRun, info.Payload),
			asynq.TaskID(key), asynq.Queue(q), asynq.ProcessAt(fire),
			asynq.MaxRetry(7), asynq.Retention(2*time.Hour), asynq.Timeout(90*time.Second))
		require.NoError(t, err)
		theirs := rdb.HGetAll(ctx, tkey).Val()
		require.Equal(t, theirs["msg"], ours["msg"], "%s: encoded TaskMessage", name)
		require.Equal(t, theirs["state"], ours["state"], name)
		require.Equal(t, rdb.ZScore(ctx, "asynq:{s00}chronos}:scheduled", key).Val(), ourScore, name)
		require.Equal(t, theirs["pending_since"] != "", ours["pending_since"] != "", name)
		queuetest.FlushAll(t, rdb)
	}
}
