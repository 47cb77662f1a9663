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
)

// The scripts whose keys depend on what Redis holds get those keys from
// their caller, which reads first; each script checks again what was
// read and writes nothing on what changed since. These tests change it
// between the read and the script.

// ExpireInflight reads which run a schedule has in flight before its
// script; a schedule that put another run in flight meanwhile is left
// alone, and the next call fails the run it has now.
func TestExpireInflightLeavesAScheduleWhoseRunChangedSinceRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupMethod(t, queuetest.StartRedis(t), 1)
	const id = "s1"
	sh := queue.ShardOf(id, queue.ShardsDefault)
	T := methodNow
	sched, infl := queue.ScheduleKey(sh, id), queue.InflightKey(sh)
	b.seed(t, redisState{
		hashes: map[string]map[string]string{
			sched:                  {queue.SfCreated: "1", queue.SfVer: "1", queue.SfNext: msStr(T.Add(time.Minute)), queue.SfInflight: "k1"},
			queue.RunKey(sh, "k1"): {queue.RfSchedule: id, queue.RfStatus: string(model.RunEnqueued)},
			queue.RunKey(sh, "k2"): {queue.RfSchedule: id, queue.RfStatus: string(model.RunStarted)},
		},
		zsets: map[string]map[string]float64{infl: {id: float64(T.UnixMilli() - 1)}},
	})
	hook := &queuetest.ScriptHook{
		Match: func(keys []string) bool { return len(keys) > 3 && keys[1] == infl },
		Fail: func(n int) error {
			if n == 1 { // k1 ended and k2 went in flight after the read
				require.NoError(t, b.rdb.HSet(ctx, sched, queue.SfInflight, "k2").Err())
			}
			return nil
		},
	}
	b.rdb.AddHook(hook)

	failed, err := b.store.ExpireInflight(ctx, sh, T, 100, "timed out")
	require.NoError(t, err)
	require.Empty(t, failed, "the run read is no longer in flight")
	require.Equal(t, string(model.RunEnqueued), b.rdb.HGet(ctx, queue.RunKey(sh, "k1"), queue.RfStatus).Val(), "k1 untouched")
	require.Equal(t, "k2", b.rdb.HGet(ctx, sched, queue.SfInflight).Val())

	failed, err = b.store.ExpireInflight(ctx, sh, T, 100, "timed out")
	require.NoError(t, err)
	require.Equal(t, []string{"k2"}, failed)
	require.Equal(t, string(model.RunFailed), b.rdb.HGet(ctx, queue.RunKey(sh, "k2"), queue.RfStatus).Val())
	require.Len(t, hook.Calls(), 2)
}

// A status report that names no schedule for a schedule's run (or the
// wrong one) is answered with the run's schedule, and the report is made
// again with that schedule's keys: the schedule is released as always.
func TestReportStatusFollowsTheScheduleTheRunNames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupMethod(t, queuetest.StartRedis(t), 1)
	const id = "s1"
	sh := queue.ShardOf(id, queue.ShardsDefault)
	sched, infl := queue.ScheduleKey(sh, id), queue.InflightKey(sh)
	b.seed(t, redisState{
		hashes: map[string]map[string]string{
			sched:                  {queue.SfCreated: "1", queue.SfVer: "1", queue.SfNext: msStr(methodNow.Add(time.Minute)), queue.SfInflight: "k1"},
			queue.RunKey(sh, "k1"): {queue.RfSchedule: id, queue.RfStatus: string(model.RunStarted)},
		},
		zsets: map[string]map[string]float64{infl: {id: float64(methodNow.Add(time.Hour).UnixMilli())}},
	})

	// The task routes to the schedule's shard but does not say whose run
	// it is.
	p := &queue.TaskPayload{IdempotencyKey: "k1", ShardOf: id}
	require.NoError(t, b.store.ReportTaskStatus(ctx, p, queue.StatusUpdate{Status: model.RunSuccess}))
	require.Equal(t, string(model.RunSuccess), b.rdb.HGet(ctx, queue.RunKey(sh, "k1"), queue.RfStatus).Val())
	require.False(t, b.rdb.HExists(ctx, sched, queue.SfInflight).Val(), "released: the script got the schedule's keys")
	require.Zero(t, b.rdb.ZCard(ctx, infl).Val())
}

// DeleteSchedule reads the run history before its script, which gets the
// runs' keys in KEYS; a run a commit added in between makes the script
// answer stale, write nothing, and the delete reads the history again:
// every run's record, the new one too, gets the retention.
func TestDeleteReadsTheHistoryAgainWhenItChanged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupMethod(t, queuetest.StartRedis(t), 1)
	const id = "s1"
	sh := queue.ShardOf(id, queue.ShardsDefault)
	hist := queue.HistoryKey(sh, id)
	b.seed(t, redisState{
		hashes: map[string]map[string]string{
			queue.ScheduleKey(sh, id): {queue.SfCreated: "1", queue.SfVer: "1"},
			queue.RunKey(sh, "k1"):    {queue.RfSchedule: id, queue.RfStatus: string(model.RunSuccess)},
		},
		zsets: map[string]map[string]float64{hist: {"k1": 1}},
	})
	hook := &queuetest.ScriptHook{
		Match: func(keys []string) bool { return len(keys) > 4 && keys[4] == queue.DeletedKey(sh, id) },
		Fail: func(n int) error {
			if n == 1 { // a commit records k2 after the history was read
				require.NoError(t, b.rdb.HSet(ctx, queue.RunKey(sh, "k2"), queue.RfSchedule, id, queue.RfStatus, string(model.RunStarted)).Err())
				require.NoError(t, b.rdb.ZAdd(ctx, hist, redis.Z{Member: "k2", Score: 2}).Err())
			}
			return nil
		},
	}
	b.rdb.AddHook(hook)

	require.NoError(t, b.store.DeleteSchedule(ctx, id))
	require.Len(t, hook.Calls(), 2, "stale, then done")
	require.Zero(t, b.rdb.Exists(ctx, queue.ScheduleKey(sh, id)).Val())
	for _, k := range []string{"k1", "k2"} {
		require.Positive(t, b.rdb.TTL(ctx, queue.RunKey(sh, k)).Val(), "%s keeps the retention", k)
	}
}

// A schedule created under the id of a deleted one settles the runs that
// one left in its history. The upsert's first call names no history (the
// usual id has none); the script answers stale, and the call made again
// with the history read gets those runs' keys in KEYS: a run ahead is
// removed with its task, a due one recorded SKIPPED.
func TestUpsertOfADeletedIDSettlesItsRunsWithTheirKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupMethod(t, queuetest.StartRedis(t), 1)
	const id = "s1"
	sh := queue.ShardOf(id, queue.ShardsDefault)
	hist := queue.HistoryKey(sh, id)
	q := b.store.RunQueue(sh).Keys()
	ahead, due := methodNow.Add(time.Hour), methodNow.Add(-time.Minute)
	run := func(at time.Time) map[string]string {
		return map[string]string{queue.RfSchedule: id, queue.RfStatus: string(model.RunEnqueued), queue.RfRunAt: msStr(at)}
	}
	b.seed(t, redisState{
		hashes: map[string]map[string]string{
			queue.RunKey(sh, "ahead"): run(ahead), q.Task("ahead"): {"state": "scheduled"},
			queue.RunKey(sh, "due"): run(due), q.Task("due"): {"state": "pending"},
		},
		zsets: map[string]map[string]float64{
			hist:          {"ahead": float64(ahead.UnixMilli()), "due": float64(due.UnixMilli())},
			q.Scheduled(): {"ahead": float64(ahead.Unix())},
		},
	})
	require.NoError(t, b.rdb.LPush(ctx, q.Pending(), "due").Err())

	rec := &model.ScheduleRecord{ID: id, CronExpr: "0 0 1 1 *", Timezone: "UTC", Target: model.TargetWorkflow,
		WorkflowID: "wf", Version: "1", UserID: "u", OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupNone}
	require.NoError(t, rec.Validate())
	res, err := b.store.UpsertSchedule(ctx, rec)
	require.NoError(t, err)
	require.True(t, res.Created)

	require.Zero(t, b.rdb.Exists(ctx, queue.RunKey(sh, "ahead"), q.Task("ahead"), hist).Val(), "the run ahead and its task are gone, and the old history")
	require.Zero(t, b.rdb.ZCard(ctx, q.Scheduled()).Val())
	got, err := b.store.GetScheduleRun(ctx, id, "due")
	require.NoError(t, err)
	require.Equal(t, model.RunSkipped, got.Status)
	require.Equal(t, model.ReasonDeleted, got.Reason)
}
