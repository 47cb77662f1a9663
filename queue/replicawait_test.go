package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
	"github.com/chronos-sched/chronos/scheduler"
)

// waitTick upserts a schedule firing every second and ticks its shard
// once at start+1s, which commits its runs; it returns the runs recorded
// and the tick's error.
func waitTick(t *testing.T, rdb redis.UniversalClient, cfg *queue.Config, id string) (int, error) {
	t.Helper()
	ctx := context.Background()
	start := time.Date(2024, 3, 9, 0, 0, 0, 0, time.UTC)
	clock := queue.NewSimClock(start)
	store, err := queue.NewStore(ctx, rdb, clock, cfg)
	require.NoError(t, err)
	rec := &model.ScheduleRecord{ID: id, CronExpr: "* * * * * *", Timezone: "UTC", Target: model.TargetWorkflow,
		WorkflowID: "wf", Version: "1", UserID: "u", OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupNone}
	require.NoError(t, rec.Validate())
	_, err = store.UpsertSchedule(ctx, rec)
	require.NoError(t, err)
	sched, err := scheduler.New(store, nil, nil, nil)
	require.NoError(t, err)
	clock.Set(start.Add(time.Second))
	tickErr := sched.TickShard(ctx, queue.ShardOf(id, store.Config().Shards))
	runs, err := store.ListRuns(ctx, id, 1000)
	require.NoError(t, err)
	return len(runs), tickErr
}

// With WaitReplicas a commit returns once a replica acknowledged it; with
// none acknowledging in time (no replica, or one frozen), the commit
// stands on the master and the call says so, after WaitTimeout.
func TestCommitWaitsForReplicas(t *testing.T) {
	t.Parallel()
	cfg := &queue.Config{Shards: 4, WaitReplicas: 1, WaitTimeout: 200 * time.Millisecond}
	// A replica in sync may still take longer than 200 ms to answer on a
	// loaded machine (the whole suite under -race on 2 cores): the cases
	// that expect an acknowledgment give it time.
	patient := &queue.Config{Shards: 4, WaitReplicas: 1, WaitTimeout: 10 * time.Second}

	t.Run("a replica in sync acknowledges", func(t *testing.T) {
		t.Parallel()
		s := queuetest.StartSentinel(t)
		runs, err := waitTick(t, s.Client(t), patient, "synced")
		require.NoError(t, err)
		require.Positive(t, runs)
	})
	t.Run("a frozen replica does not", func(t *testing.T) {
		t.Parallel()
		s := queuetest.StartSentinel(t)
		replica := s.Redis[1]
		replica.Pause(t, true)
		t.Cleanup(func() { replica.Pause(t, false) })
		began := time.Now()
		runs, err := waitTick(t, s.Client(t), cfg, "frozen")
		require.ErrorIs(t, err, queue.ErrNotReplicated)
		require.ErrorContains(t, err, "0 of 1 replicas within 200ms")
		require.GreaterOrEqual(t, time.Since(began), 200*time.Millisecond)
		require.Positive(t, runs, "the commit stands on the master")
	})
	t.Run("a cluster master's replica acknowledges", func(t *testing.T) {
		t.Parallel()
		c := queuetest.StartCluster(t)
		runs, err := waitTick(t, c.Client(t), patient, "clustered")
		require.NoError(t, err)
		require.Positive(t, runs)
	})
	t.Run("without a replica no commit is acknowledged", func(t *testing.T) {
		t.Parallel()
		c := queuetest.StartClusterOf(t, 3, 0)
		runs, err := waitTick(t, c.Client(t), cfg, "alone")
		require.ErrorIs(t, err, queue.ErrNotReplicated)
		require.Positive(t, runs)
	})
	t.Run("off by default", func(t *testing.T) {
		t.Parallel()
		c := queuetest.StartClusterOf(t, 3, 0)
		runs, err := waitTick(t, c.Client(t), &queue.Config{Shards: 4}, "off")
		require.NoError(t, err)
		require.Positive(t, runs)
	})
}

// Bad WaitReplicas and WaitTimeout are refused by name.
func TestWaitReplicasValidated(t *testing.T) {
	t.Parallel()
	rdb := queuetest.StartRedis(t).Universal(t)
	for _, c := range []struct {
		cfg  queue.Config
		want string
	}{
		{queue.Config{WaitReplicas: -1}, "Config.WaitReplicas must be between 0 and 16, got -1"},
		{queue.Config{WaitReplicas: 17}, "Config.WaitReplicas must be between 0 and 16, got 17"},
		{queue.Config{WaitReplicas: 1, WaitTimeout: time.Microsecond}, "Config.WaitTimeout must be at least 1ms"},
	} {
		_, err := queue.NewStore(context.Background(), rdb, queue.RealClock{}, &c.cfg)
		require.ErrorContains(t, err, c.want)
	}
}
