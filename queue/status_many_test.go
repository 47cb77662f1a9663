package queue_test

import (
	"context"
	"strconv"
	"strings"
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

// The runs of a shard that end together are written in one
// status_done_many.lua call, each as status_done.lua would write it:
// its status recorded, its task completed and counted once, out of the
// active list and the lease set. A task recovered meanwhile (its lease expired) is left
// as it is; a run whose record names a schedule the task did not is
// written nothing, and FinishLaunched reports it again alone. asynq's
// total wraps at the largest int64 as asynq's own finish wraps it.
func TestEndsOfAShardAreWrittenInOneCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := queuetest.StartRedis(t).Client(t)
	c.AddHook(queuetest.NewKeyGuard()) // every key the script touches is in KEYS
	var rdb redis.UniversalClient = c
	s, err := queue.NewStore(ctx, rdb, queue.RealClock{}, &queue.Config{Shards: 1, TaskRetention: time.Hour})
	require.NoError(t, err)
	keys := []string{"a", "b", "c", "recovered", "other-schedule"}
	for _, k := range keys {
		_, started, err := s.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
			ScheduledFor: time.Now().Add(-time.Second), IdempotencyKey: k})
		require.NoError(t, err)
		require.True(t, started)
	}
	tasks, err := s.Tasks().Take(ctx, 10)
	require.NoError(t, err)
	require.Len(t, tasks, len(keys))
	qk := s.RunQueue(0).Keys()
	require.NoError(t, rdb.LRem(ctx, qk.Active(), 0, "recovered").Err(), "as a recovery of its expired lease takes it")
	require.NoError(t, rdb.HSet(ctx, queue.RunKey(0, "other-schedule"), queue.RfSchedule, "s1").Err())
	require.NoError(t, rdb.Set(ctx, qk.ProcessedTotal(), "9223372036854775806", 0).Err())

	byKey := map[string]*asynqwire.Task{}
	for _, tk := range tasks {
		byKey[tk.ID] = tk
	}
	before := scriptCalls(t, rdb)
	ends, err := s.EndTogether(ctx, tasks, queue.StatusUpdate{Status: model.RunSuccess, RunID: "exec-1"})
	require.NoError(t, err)
	require.Equal(t, int64(1), scriptCalls(t, rdb)-before, "one script call for the shard's ends")

	for i, e := range ends {
		key := tasks[i].ID
		require.NoError(t, e.Err, key)
		switch key {
		case "other-schedule":
			require.Equal(t, int64(queue.StatusRetry), e.Code, "nothing written: the caller reports it again")
			require.False(t, e.Finished)
		case "recovered":
			require.Equal(t, int64(queue.StatusChanged), e.Code)
			require.False(t, e.Finished, "no longer held: left to its recovery")
		default:
			require.Equal(t, int64(queue.StatusChanged), e.Code, key)
			require.True(t, e.Finished, key)
			run, err := s.GetScheduleRun(ctx, "", key)
			require.NoError(t, err)
			require.Equal(t, model.RunSuccess, run.Status)
			require.Equal(t, "exec-1", run.RunID)
		}
	}
	p, err := queue.DecodeTaskPayload(byKey["other-schedule"].Payload)
	require.NoError(t, err)
	fin, err := s.FinishLaunched(ctx, byKey["other-schedule"], p, queue.StatusUpdate{Status: model.RunSuccess})
	require.NoError(t, err)
	require.True(t, fin)
	require.Equal(t, string(model.RunSuccess), rdb.HGet(ctx, queue.RunKey(0, "other-schedule"), queue.RfStatus).Val())

	insp := asynq.NewInspectorFromRedisClient(rdb)
	for _, k := range []string{"a", "b", "c", "other-schedule"} {
		info, err := insp.GetTaskInfo(qk.Queue, k)
		require.NoError(t, err)
		require.Equal(t, asynq.TaskStateCompleted, info.State, k)
	}
	require.Equal(t, "active", rdb.HGet(ctx, qk.Task("recovered"), "state").Val(), "left as its recovery finds it")
	require.Zero(t, rdb.LLen(ctx, qk.Active()).Val())
	require.Equal(t, []string{"recovered"}, rdb.ZRange(ctx, qk.Lease(), 0, -1).Val())
	require.Equal(t, "4", rdb.Get(ctx, qk.Processed(time.Now())).Val(), "each finished task counted once")
	require.Positive(t, rdb.TTL(ctx, qk.Processed(time.Now())).Val(), "the day's counter expires as asynq's")
	// 9223372036854775806, then the largest int64, wrapped to 1, 2 by the
	// three ended together; 3 by the task reported again alone.
	require.Equal(t, "3", rdb.Get(ctx, qk.ProcessedTotal()).Val())
	require.Zero(t, rdb.Exists(ctx, qk.Failed(time.Now()), qk.FailedTotal()).Val(), "nothing failed")
}

// scriptCalls is Redis's count of script calls so far that ran: EVAL and
// EVALSHA, not the EVALSHA answered NOSCRIPT (a script's first call on a
// Redis, which EVAL follows).
func scriptCalls(t *testing.T, rdb redis.UniversalClient) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	var n int64
	for _, line := range strings.Split(info, "\r\n") {
		v, ok := strings.CutPrefix(line, "cmdstat_evalsha:")
		if !ok {
			v, ok = strings.CutPrefix(line, "cmdstat_eval:")
		}
		if !ok {
			continue
		}
		for _, f := range strings.Split(v, ",") {
			k, x, _ := strings.Cut(f, "=")
			c, _ := strconv.ParseInt(x, 10, 64)
			switch k {
			case "calls":
				n += c
			case "failed_calls", "rejected_calls":
				n -= c
			}
		}
	}
	return n
}
