package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// A Redis restart that loses its data (no persistence) must not need a
// chronos restart: schedules registered again fire, and their run queue is
// listed in asynq's set of queues again, where asynqmon, asynq's Inspector
// and the chronos_queue_depth collector look for it.
func TestRunQueueIsListedAgainAfterARedisRestartThatLostItsData(t *testing.T) {
	t.Parallel()
	r := queuetest.StartServer(t, "--enable-debug-command", "yes")
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	clock := queue.NewRedisClock(rdb)
	require.NoError(t, clock.Sync(context.Background()))
	store, err := queue.NewStore(context.Background(), rdb, clock, &queue.Config{Shards: 4})
	require.NoError(t, err)
	s, err := New(store, &Config{LeaseTTL: time.Second, TickInterval: 100 * time.Millisecond}, nil, nil)
	require.NoError(t, err)
	require.NoError(t, s.Start(context.Background()))
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	rec := model.ScheduleRecord{ID: "every-second", CronExpr: "* * * * * *", Target: model.TargetWorkflow,
		WorkflowID: "wf", Version: "1", UserID: "u",
		OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupFireImmediately}
	require.NoError(t, rec.Validate())
	upsert := func() bool { r := rec; _, err := store.UpsertSchedule(context.Background(), &r); return err == nil }
	require.True(t, upsert())
	require.Eventually(t, func() bool { return queuetest.CountTasks(t, rdb, "chronos") > 0 }, 5*time.Second, 20*time.Millisecond)
	runQueue := store.RunQueue(queue.ShardOf(rec.ID, store.Config().Shards)).Name()
	_, err = asynq.NewInspectorFromRedisClient(rdb).GetQueueInfo(runQueue)
	require.NoError(t, err)

	r.Kill()
	// Real time must pass: the outage outlasts LeaseTTL (1 s), as a real
	// restart does, so the scheduler finds its leases gone as well.
	const outage = 2 * time.Second
	<-time.After(outage)
	r.Restart(t) // empty: the data is gone
	// The registrar registers its schedules again (go-redis may take a
	// second to dial again).
	require.Eventually(t, upsert, 10*time.Second, 100*time.Millisecond)
	require.Eventually(t, func() bool { return queuetest.CountTasks(t, rdb, "chronos") > 0 }, 10*time.Second, 20*time.Millisecond,
		"the schedule registered again never fired")
	_, err = asynq.NewInspectorFromRedisClient(rdb).GetQueueInfo(runQueue)
	require.NoError(t, err, "run queue not listed in asynq:queues after the restart")
}
