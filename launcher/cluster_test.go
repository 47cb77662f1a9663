package launcher

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
	"github.com/chronos-sched/chronos/scheduler"
)

// End to end on a Redis Cluster (3 masters): schedules in every shard are
// planned and committed by a scheduler, manual runs started, and a
// launcher (its lane and its loops on the cluster client) runs
// each run once, from every shard's queue.
func TestLauncherRunsEveryShardOnRedisCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := queuetest.StartCluster(t)
	rdb, err := queue.OpenRedis(c.URL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rdb.Close() })
	clock := queue.NewSimClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	store, err := queue.NewStore(ctx, rdb, clock, &queue.Config{Shards: 8})
	require.NoError(t, err)
	require.NoError(t, store.PutWorkflow(ctx, "wf", "1", []byte(`{}`)))
	sched, err := scheduler.New(store, nil, nil, nil)
	require.NoError(t, err)
	b := &testBundle{store: store, clock: clock}

	start := clock.Now()
	var keys []string
	shards := map[int]bool{}
	for i := 0; len(shards) < 8; i++ {
		id := fmt.Sprintf("c%d", i)
		if shards[queue.ShardOf(id, 8)] {
			continue
		}
		shards[queue.ShardOf(id, 8)] = true
		b.upsert(t, &model.ScheduleRecord{ID: id, CronExpr: "* * * * *", WorkflowID: "wf", Version: "1", UserID: "u",
			OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupFireImmediately})
		keys = append(keys, model.IdempotencyKey(id, start.Add(time.Minute)))
	}
	clock.Advance(time.Minute)
	b.tick(t, sched)
	for i := range 8 {
		key := fmt.Sprintf("manual-%d", i)
		_, started, err := store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
			ScheduledFor: clock.Now(), IdempotencyKey: key})
		require.NoError(t, err)
		require.True(t, started)
		keys = append(keys, key)
	}

	ex := &recordingExecutor{res: Result{Status: model.RunSuccess}}
	l, err := New(store, &Config{Executor: ex, ShutdownTimeout: time.Second}, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	require.NoError(t, l.Start(ctx))
	stopAtCleanup(t, l)
	for _, key := range keys {
		b.waitStatus(t, key, model.RunSuccess)
	}
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
