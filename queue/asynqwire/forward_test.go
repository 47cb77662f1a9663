package asynqwire_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/asynqwire"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// Runs enqueued ahead, and retries, become runnable when their second comes on the
// clock Forward is given, not before: moved to asynq's pending list in pages,
// each as asynq's own forwarder would leave it.
func TestForwardMakesTasksRunnableOnTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := queuetest.StartRedis(t).Universal(t)
	// Ahead of the real clock, so the tasks are written to the scheduled set.
	now := time.Now().Add(time.Hour).Truncate(time.Second)
	clock := queue.NewSimClock(now)
	store, err := queue.NewStore(ctx, rdb, clock, &queue.Config{Shards: 1}) // every run in one queue
	require.NoError(t, err)
	n := asynqwire.ForwardBatch + 100 // more than one page
	due := now.Add(time.Minute)
	for i := range n {
		_, _, err := store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
			ScheduledFor: due, IdempotencyKey: fmt.Sprintf("k%d", i)})
		require.NoError(t, err)
	}
	_, _, err = store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
		ScheduledFor: due.Add(time.Second), IdempotencyKey: "later"})
	require.NoError(t, err)

	moved, err := store.Tasks().Forward(ctx, due.Add(-time.Millisecond))
	require.NoError(t, err)
	require.Zero(t, moved, "before their second")
	require.Equal(t, asynq.TaskStateScheduled, queuetest.RequireTask(t, rdb, queue.QueueNameDefault, "k0").State)

	moved, err = store.Tasks().Forward(ctx, due)
	require.NoError(t, err)
	require.Equal(t, n, moved)
	require.Equal(t, int64(n), rdb.LLen(ctx, "asynq:{s00}chronos}:pending").Val())
	for _, k := range []string{"k0", fmt.Sprintf("k%d", n-1)} {
		info := queuetest.RequireTask(t, rdb, queue.QueueNameDefault, k)
		require.Equal(t, asynq.TaskStatePending, info.State, k)
		require.NotEmpty(t, rdb.HGet(ctx, "asynq:{s00}chronos}:t:"+k, "pending_since").Val())
	}
	require.Equal(t, asynq.TaskStateScheduled, queuetest.RequireTask(t, rdb, queue.QueueNameDefault, "later").State)
	moved, err = store.Tasks().Forward(ctx, due)
	require.NoError(t, err)
	require.Zero(t, moved, "each task moves once")

	// A retry is forwarded the same way, when its time comes.
	taken, err := store.Tasks().Take(ctx, 1)
	require.NoError(t, err)
	require.Len(t, taken, 1)
	retryAt := due.Add(time.Hour)
	mine, err := store.Tasks().Finish(ctx, taken[0], asynqwire.Retry, retryAt, "executor answered 503")
	require.NoError(t, err)
	require.True(t, mine)
	moved, err = store.Tasks().Forward(ctx, retryAt)
	require.NoError(t, err)
	require.Equal(t, 1, moved, "Forward moves the run due at due+1s, not the retry")
	moved, err = store.Tasks().ForwardRetries(ctx, retryAt.Add(-time.Second))
	require.NoError(t, err)
	require.Zero(t, moved, "before its second")
	moved, err = store.Tasks().ForwardRetries(ctx, retryAt)
	require.NoError(t, err)
	require.Equal(t, 1, moved)
	info := queuetest.RequireTask(t, rdb, queue.QueueNameDefault, taken[0].ID)
	require.Equal(t, asynq.TaskStatePending, info.State)
	require.Equal(t, 1, info.Retried)
}
