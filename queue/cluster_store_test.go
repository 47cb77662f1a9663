package queue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/asynqwire"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// The store works on a Redis Cluster through the client REDIS_URL's
// redis-cluster:// opens: every script touches one slot (no CROSSSLOT),
// a shard's keys and its run queue's keys share a slot, pipelines that
// span shards (GetRun, the lane's take, forwarding) are split by slot, and
// the shards spread over every master.
func TestStoreOnRedisCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := queuetest.StartCluster(t)
	rdb, err := queue.OpenRedis(c.URL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rdb.Close() })
	cc, ok := rdb.(*redis.ClusterClient)
	require.True(t, ok, "%s opens a cluster client", c.URL)
	clock := queue.NewSimClock(methodNow)
	store, err := queue.NewStore(ctx, rdb, clock, &queue.Config{Shards: 8, Lookahead: time.Minute})
	require.NoError(t, err)

	t.Run("EachShardAndItsQueueShareASlotAndTheShardsSpreadOverTheMasters", func(t *testing.T) {
		masters := map[string]bool{}
		for sh := range 8 {
			tag := fmt.Sprintf("chronos:{s%02d}:due", sh)
			q := store.RunQueue(sh).Keys()
			for _, k := range []string{q.Pending(), q.Scheduled(), q.Task("k"), q.Active(), q.Lease()} {
				require.Equal(t, queuetest.Slot(tag), queuetest.Slot(k), "%s beside %s", k, tag)
			}
			masters[c.MasterOf(t, tag).Addr] = true
		}
		require.Len(t, masters, 3, "8 shards over 3 masters")
		names, err := cc.SMembers(ctx, asynqwire.AllQueues).Result()
		require.NoError(t, err)
		require.Len(t, names, 8, "every shard's queue is listed for asynqmon")
	})

	require.NoError(t, store.PutWorkflow(ctx, "wf", "1", []byte(`{}`)))
	require.NoError(t, store.PutWorkflow(ctx, "wf", "2", []byte(`{}`)))
	require.NoError(t, store.DeleteWorkflow(ctx, "wf", "2"))
	require.ErrorIs(t, store.DeleteWorkflow(ctx, "wf", "2"), queue.ErrNotFound)

	t.Run("ScheduleCommitStatusPauseDelete", func(t *testing.T) {
		for i := range 6 { // spread over shards, and so over masters
			id := fmt.Sprintf("sched-%d", i)
			rec := &model.ScheduleRecord{ID: id, CronExpr: "* * * * *", WorkflowID: "wf", Version: "1", UserID: "u",
				OverlapPolicy: model.OverlapSkip, CatchupPolicy: model.CatchupLatest}
			require.NoError(t, rec.Validate())
			_, err := store.UpsertSchedule(ctx, rec)
			require.NoError(t, err)
			at := methodNow.Truncate(time.Minute).Add(time.Minute)
			task := commitOneRun(t, store, id, at)
			state, err := store.LoadLaunch(ctx, task)
			require.NoError(t, err)
			require.Equal(t, model.RunEnqueued, state.Status)
			require.NoError(t, store.RecordFailedAttempt(ctx, task, methodNow.Add(time.Second), "boom"))
			require.NoError(t, store.ReportTaskStatus(ctx, task, queue.StatusUpdate{Status: model.RunStarted, RunID: "r"}))
			r, err := store.UpdateRunStatus(ctx, task.IdempotencyKey, queue.StatusUpdate{Status: model.RunSuccess})
			require.NoError(t, err)
			require.Equal(t, model.RunSuccess, r.Status)
			runs, err := store.ListRuns(ctx, id, 10)
			require.NoError(t, err)
			require.Len(t, runs, 1)
			_, err = store.SetPaused(ctx, id, true)
			require.NoError(t, err)
			_, err = store.SetPaused(ctx, id, false)
			require.NoError(t, err)
		}
		list, _, err := store.ListSchedules(ctx, "", 100)
		require.NoError(t, err)
		require.Len(t, list, 6)
		expired, err := store.ExpireInflight(ctx, queue.ShardOf("sched-0", 8), methodNow.Add(time.Hour), 10, "timed out")
		require.NoError(t, err)
		require.Empty(t, expired)
		require.NoError(t, store.DeleteSchedule(ctx, "sched-0"))
	})

	t.Run("ManualRunsLiveInTheirKeysShard", func(t *testing.T) {
		for i := range 6 {
			key := fmt.Sprintf("manual-%d", i)
			run, started, err := store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
				ScheduledFor: methodNow, IdempotencyKey: key})
			require.NoError(t, err)
			require.True(t, started)
			require.Equal(t, model.SourceManual, run.Source)
			q := store.RunQueue(queue.ShardOf(key, 8))
			require.Equal(t, "pending", cc.HGet(ctx, q.Keys().Task(key), "state").Val())
			info, err := asynq.NewInspectorFromRedisClient(cc).GetTaskInfo(q.Name(), key)
			require.NoError(t, err, "asynq's Inspector reads it on the cluster")
			require.Equal(t, asynq.TaskStatePending, info.State)
			_, started, err = store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
				ScheduledFor: methodNow, IdempotencyKey: key})
			require.NoError(t, err)
			require.False(t, started)
		}
		// A schedule's run's key (Go API): marked in every shard first.
		at := methodNow.Truncate(time.Minute).Add(2 * time.Minute)
		key := model.IdempotencyKey("sched-1", at)
		_, started, err := store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
			ScheduledFor: at, IdempotencyKey: key})
		require.NoError(t, err)
		require.True(t, started)
	})

	t.Run("TheLaneTakesFinishesAndForwardsAcrossShards", func(t *testing.T) {
		_, err := store.Tasks().Forward(ctx, methodNow.Add(time.Hour))
		require.NoError(t, err)
		_, err = store.Tasks().ForwardRetries(ctx, time.Now())
		require.NoError(t, err)
		var all []*asynqwire.Task
		for {
			got, err := store.Tasks().Take(ctx, 4)
			require.NoError(t, err)
			if len(got) == 0 {
				break
			}
			all = append(all, got...)
		}
		require.GreaterOrEqual(t, len(all), 6, "the manual runs at least")
		require.NoError(t, store.Tasks().ExtendLeases(ctx, all))
		queues := map[string]bool{}
		for _, tk := range all {
			queues[tk.Queue()] = true
			mine, err := store.Tasks().Finish(ctx, tk, asynqwire.Done, time.Time{}, "")
			require.NoError(t, err)
			require.True(t, mine)
		}
		require.Greater(t, len(queues), 1, "taken from several shard queues")
		_, _, err = store.Tasks().Archived(ctx, time.Now().Add(-time.Hour))
		require.NoError(t, err)
	})

	t.Run("AlarmsRequestsHeartbeatsLeases", func(t *testing.T) {
		rec := createAlarm(t, store, model.KindOnce, methodNow.Add(time.Hour))
		alarms, err := store.ListAlarms(ctx, rec.Owner, "", 10)
		require.NoError(t, err)
		require.Len(t, alarms, 1)
		_, err = store.PauseAlarm(ctx, rec.Owner, rec.ID, true)
		require.NoError(t, err)
		_, err = store.CancelAlarm(ctx, rec.Owner, rec.ID)
		require.NoError(t, err)

		claim, err := store.ClaimRequest(ctx, "scope", "k", "digest")
		require.NoError(t, err)
		require.NotNil(t, claim)
		require.NoError(t, store.AnswerRequest(ctx, "scope", "k", "digest", 200, []byte(`{}`)))

		_, err = store.Heartbeat(ctx, "r1", 3, methodNow, time.Minute)
		require.NoError(t, err)
		_, err = store.LauncherHeartbeat(ctx, "l1", time.Millisecond, methodNow, time.Minute)
		require.NoError(t, err)
		require.NoError(t, store.Leave(ctx, "r1"))
		lease, err := store.NewLeases(5*time.Second).TryAcquire(ctx, 3)
		require.NoError(t, err)
		require.NotNil(t, lease)
		require.NoError(t, store.CheckWritable(ctx))
		require.NoError(t, store.Ping(ctx))
	})
}
