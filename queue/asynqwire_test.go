package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
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
	rdb := queuetest.StartRedis(t).Client(t)
	now := time.Now()
	client := asynq.NewClientFromRedisClient(rdb)

	for name, fire := range map[string]time.Time{"pending": now.Add(-time.Second), "scheduled": now.Add(time.Hour)} {
		p := queue.TaskPayload{IdempotencyKey: "run-" + name, ScheduleID: "s", RunAt: fire, FireAt: fire,
			WorkflowID: "wf", Version: "1", Source: model.SourceSchedule}
		payload, err := p.Encode()
		require.NoError(t, err)
		key := "asynq:{chronos}:t:run-" + name

		_, err = client.EnqueueContext(ctx, asynq.NewTask(queue.TaskTypeRun, []byte(payload)),
			asynq.TaskID(p.IdempotencyKey), asynq.Queue("chronos"), asynq.ProcessAt(fire),
			asynq.MaxRetry(7), asynq.Retention(2*time.Hour), asynq.Timeout(90*time.Second))
		require.NoError(t, err)
		theirs := rdb.HGetAll(ctx, key).Val()
		theirScore := rdb.ZScore(ctx, "asynq:{chronos}:scheduled", p.IdempotencyKey).Val()
		require.NoError(t, rdb.FlushDB(ctx).Err())

		store, err := queue.NewStore(ctx, rdb, queue.RealClock{}, &queue.Config{TaskMaxRetry: 7, TaskRetention: 2 * time.Hour, TaskTimeout: 90 * time.Second})
		require.NoError(t, err)
		require.NoError(t, store.EnqueueBatch(ctx, []queue.EnqueueTask{{Payload: payload, Task: p}}))
		ours := rdb.HGetAll(ctx, key).Val()
		require.Equal(t, theirs["msg"], ours["msg"], "%s: encoded TaskMessage", name)
		require.Equal(t, theirs["state"], ours["state"], name)
		require.Equal(t, theirScore, rdb.ZScore(ctx, "asynq:{chronos}:scheduled", p.IdempotencyKey).Val(), name)
		require.Equal(t, theirs["pending_since"] != "", ours["pending_since"] != "", name)

		info, err := asynq.NewInspectorFromRedisClient(rdb).GetTaskInfo("chronos", p.IdempotencyKey)
		require.NoError(t, err)
		require.Equal(t, 7, info.MaxRetry)
		require.Equal(t, payload, string(info.Payload))
		if name == "scheduled" {
			require.Equal(t, asynq.TaskStateScheduled, info.State)
			require.Equal(t, fire.Unix(), info.NextProcessAt.Unix())
		} else {
			require.Equal(t, asynq.TaskStatePending, info.State)
		}

		// A second enqueue of the same run is a no-op.
		require.NoError(t, store.EnqueueBatch(ctx, []queue.EnqueueTask{{Payload: "{}", Task: p}}))
		require.Equal(t, ours, rdb.HGetAll(ctx, key).Val())
		require.LessOrEqual(t, rdb.LLen(ctx, "asynq:{chronos}:pending").Val(), int64(1))
		require.NoError(t, rdb.FlushDB(ctx).Err())
	}
}
