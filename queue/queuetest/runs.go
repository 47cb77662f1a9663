package queuetest

import (
	"context"
	"strings"
	"sync"
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

// RequireTask asserts that asynq holds exactly one task for a run: the
// task whose TaskID is the run's idempotency key, in one of the run
// queues of base (Config.QueueName: its shards' queues, or the legacy
// queue itself).
func RequireTask(t testing.TB, rdb redis.UniversalClient, base, key string) *asynq.TaskInfo {
	t.Helper()
	names := TaskQueues(t, rdb, base, key)
	require.Len(t, names, 1, "asynq queues of base %s holding task %s", base, key)
	info, err := asynq.NewInspectorFromRedisClient(rdb).GetTaskInfo(names[0], key)
	require.NoError(t, err, "asynq task %s", key)
	require.Equal(t, key, info.ID)
	return info
}

// TaskQueues returns the names of the run queues of base (see
// RequireTask) that hold a task with this id.
func TaskQueues(t testing.TB, rdb redis.UniversalClient, base, id string) []string {
	t.Helper()
	var out []string
	for _, k := range taskKeys(t, rdb, base, id) {
		out = append(out, strings.TrimSuffix(strings.TrimPrefix(k, "asynq:{"), "}:t:"+id))
	}
	return out
}

// TaskKey returns the key of the task with this id in base's run queues
// (see RequireTask), failing unless exactly one holds it.
func TaskKey(t testing.TB, rdb redis.UniversalClient, base, id string) string {
	t.Helper()
	keys := taskKeys(t, rdb, base, id)
	require.Len(t, keys, 1, "asynq tasks %s in the queues of %s", id, base)
	return keys[0]
}

// CountTasks counts the run tasks asynq holds in the run queues of base
// (see RequireTask), in every state.
func CountTasks(t testing.TB, rdb redis.UniversalClient, base string) int {
	t.Helper()
	return len(taskKeys(t, rdb, base, "*"))
}

// taskKeys lists the task keys matching id in base's run queues:
// asynq:{sNN}<base>}:t:<id> and the legacy asynq:{<base>}:t:<id>. A
// glob id is a KEYS walk; a plain one asks each queue asynq knows
// (asynq:queues, where stores add every shard queue) for its task in one
// pipeline, since an audit asks this of every run and a KEYS walk per run
// grows with the square of the runs.
func taskKeys(t testing.TB, rdb redis.UniversalClient, base, id string) []string {
	t.Helper()
	keys, err := findTaskKeys(context.Background(), rdb, base, id)
	require.NoError(t, err)
	return keys
}

func findTaskKeys(ctx context.Context, rdb redis.UniversalClient, base, id string) ([]string, error) {
	var out []string
	queues, err := rdb.SMembers(ctx, "asynq:queues").Result()
	if err != nil {
		return nil, err
	}
	candidates := []string{"asynq:{" + base + "}:t:" + id}
	for _, q := range queues {
		if q != base && strings.HasSuffix(q, "}"+base) && strings.HasPrefix(q, "s") {
			candidates = append(candidates, "asynq:{"+q+"}:t:"+id)
		}
	}
	// No shard queue published yet (a test that wrote tasks itself): walk.
	if strings.ContainsAny(id, "*?[") || len(candidates) == 1 {
		for _, pattern := range []string{"asynq:{s[0-9]*}" + base + "}:t:" + id, "asynq:{" + base + "}:t:" + id} {
			keys, err := keysEverywhere(ctx, rdb, pattern)
			if err != nil {
				return nil, err
			}
			out = append(out, keys...)
		}
		return out, nil
	}
	exists := make([]*redis.IntCmd, len(candidates))
	if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range candidates {
			exists[i] = p.Exists(ctx, k)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	for i, k := range candidates {
		if exists[i].Val() == 1 {
			out = append(out, k)
		}
	}
	return out, nil
}

// keysEverywhere is KEYS pattern, on every master of a cluster (the run
// queues' keys are in every shard's slot).
func keysEverywhere(ctx context.Context, rdb redis.UniversalClient, pattern string) ([]string, error) {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return rdb.Keys(ctx, pattern).Result()
	}
	var mu sync.Mutex
	var out []string
	err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		keys, err := m.Keys(ctx, pattern).Result()
		mu.Lock()
		out = append(out, keys...)
		mu.Unlock()
		return err
	})
	return out, err
}

// TaskQueue returns the name of the one run queue of base (see
// RequireTask) that holds a task with this id, or "" when none or more
// than one does (or Redis does not answer): a test that polls passes it
// on to asynq's Inspector, which then says the queue is not found.
func TaskQueue(rdb redis.UniversalClient, base, id string) string {
	keys, err := findTaskKeys(context.Background(), rdb, base, id)
	if err != nil || len(keys) != 1 {
		return ""
	}
	return strings.TrimSuffix(strings.TrimPrefix(keys[0], "asynq:{"), "}:t:"+id)
}
