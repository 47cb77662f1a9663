package queuetest

import (
	"context"
	"testing"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
)

// RequireRuns asserts that a schedule's run history holds exactly the runs
// at the given times, each with the given status, and returns them oldest
// first.
func RequireRuns(t testing.TB, store *queue.Store, scheduleID string, status model.RunStatus, want ...string) []*model.Run {
	t.Helper()
	runs, err := store.ListRuns(context.Background(), scheduleID, 100000)
	require.NoError(t, err)
	got := make([]string, len(runs))
	out := make([]*model.Run, len(runs))
	for i, r := range runs {
		j := len(runs) - 1 - i
		got[j] = r.RunAt.UTC().Format("2006-01-02T15:04:05Z")
		out[j] = r
	}
	if want == nil {
		want = []string{}
	}
	require.Equal(t, want, got, "run times of schedule %s", scheduleID)
	if status != "" {
		for _, r := range out {
			require.Equal(t, status, r.Status, "status of run at %s", r.RunAt)
		}
	}
	return out
}

// RequireTask asserts that asynq holds exactly one task for a run: the task
// whose TaskID is the run's idempotency key.
func RequireTask(t testing.TB, rdb redis.UniversalClient, queueName, key string) *asynq.TaskInfo {
	t.Helper()
	info, err := asynq.NewInspectorFromRedisClient(rdb).GetTaskInfo(queueName, key)
	require.NoError(t, err, "asynq task %s", key)
	require.Equal(t, key, info.ID)
	return info
}

// CountTasks counts the run tasks asynq holds in a queue, in every state.
// On Cluster it asks the master of the queue's slot.
func CountTasks(t testing.TB, rdb redis.UniversalClient, queueName string) int {
	t.Helper()
	ctx := context.Background()
	prefix := "asynq:{" + queueName + "}:t:"
	var node redis.Cmdable = rdb
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		m, err := cc.MasterForKey(ctx, prefix)
		require.NoError(t, err)
		node = m
	}
	n, err := node.Keys(ctx, prefix+"*").Result()
	require.NoError(t, err)
	return len(n)
}
