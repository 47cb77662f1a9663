package queue_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
	"github.com/chronos-sched/chronos/scheduler"
)

// settleBundle is a store on a real Redis with a scheduler that ticks it.
type settleBundle struct {
	rdb   redis.UniversalClient
	store *queue.Store
	clock *queue.SimClock
	sched *scheduler.Scheduler
}

const settleShards = 4

var settleStart = time.Date(2024, 3, 9, 0, 0, 0, 0, time.UTC)

// setupSettle starts a real redis-server, or miniredis (which chronos dev
// embeds) when mini.
func setupSettle(t *testing.T, mini bool) *settleBundle {
	t.Helper()
	var rdb redis.UniversalClient
	if mini {
		rdb = (&queuetest.Redis{Addr: miniredis.RunT(t).Addr()}).Client(t)
	} else {
		rdb = queuetest.StartRedis(t).Universal(t)
	}
	clock := queue.NewSimClock(settleStart)
	store, err := queue.NewStore(context.Background(), rdb, clock, &queue.Config{Shards: settleShards, Lookahead: time.Minute})
	require.NoError(t, err)
	sched, err := scheduler.New(store, nil, nil, nil)
	require.NoError(t, err)
	return &settleBundle{rdb: rdb, store: store, clock: clock, sched: sched}
}

func (b *settleBundle) upsert(t *testing.T, id, expr string, overlap model.OverlapPolicy) {
	t.Helper()
	rec := &model.ScheduleRecord{ID: id, CronExpr: expr, Timezone: "UTC", Target: model.TargetWorkflow,
		WorkflowID: "wf", Version: "1", UserID: "u", OverlapPolicy: overlap, CatchupPolicy: model.CatchupNone}
	require.NoError(t, rec.Validate())
	_, err := b.store.UpsertSchedule(context.Background(), rec)
	require.NoError(t, err)
}

func (b *settleBundle) tickAt(t *testing.T, at time.Time) {
	t.Helper()
	b.clock.Set(at)
	for sh := range settleShards {
		require.NoError(t, b.sched.TickShard(context.Background(), sh))
	}
}

func (b *settleBundle) taskState(key string) string {
	keys, _ := queuetest.FindKeys(context.Background(), b.rdb, "asynq:{*}:t:"+key)
	if len(keys) != 1 {
		return strings.Join(keys, " ") // none: ""; more: each, which no state equals
	}
	return b.rdb.HGet(context.Background(), keys[0], "state").Val()
}

// taskKey is the key of schedule id's run task with this key.
func (b *settleBundle) taskKey(id, key string) string {
	return b.store.RunQueue(queue.ShardOf(id, settleShards)).Keys().Task(key)
}

func (b *settleBundle) inHistory(id, key string) bool {
	hk := fmt.Sprintf("chronos:{s%02d}:runs:%s", queue.ShardOf(id, settleShards), id)
	return b.rdb.ZScore(context.Background(), hk, key).Err() == nil
}

// Pausing or deleting a schedule settles, in the same script, the runs no
// launcher has touched: one due is SKIPPED with the reason, its task left
// to find it ended; one ahead of its time is removed, record, task and
// history entry. A run a launcher holds (its task active) is left to that
// launcher, and a manual run that took one of the keys keeps its run and
// its task. On Redis, and on miniredis, which chronos dev embeds.
func TestPauseAndDeleteSettleQueuedRuns(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		op, why string
		mini    bool
	}{
		{"pause", "schedule paused before the run started", false},
		{"delete", "schedule deleted before the run started", false},
		{"pause", "schedule paused before the run started", true},
		{"delete", "schedule deleted before the run started", true},
	} {
		t.Run(fmt.Sprintf("%s/miniredis=%v", c.op, c.mini), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := setupSettle(t, c.mini)
			at := func(s int) time.Time { return settleStart.Add(time.Duration(s) * time.Second) }
			key := func(s int) string { return model.IdempotencyKey("s", at(s)) }
			// "run the 00:00:30 run now", before the scheduler plans it
			_, started, err := b.store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
				ScheduledFor: at(30), IdempotencyKey: key(30)})
			require.NoError(t, err)
			require.True(t, started)
			b.upsert(t, "s", "*/10 * * * * *", model.OverlapAllow)
			b.tickAt(t, at(1)) // 00:00:10 to 00:01:00 queued ahead
			require.Equal(t, "scheduled", b.taskState(key(10)))
			// A launcher holds 00:00:20: moved ahead from the dashboard.
			require.NoError(t, b.rdb.HSet(ctx, b.taskKey("s", key(20)), "state", "active").Err())

			b.clock.Set(at(15))
			if c.op == "pause" {
				_, err = b.store.SetPaused(ctx, "s", true)
			} else {
				err = b.store.DeleteSchedule(ctx, "s")
			}
			require.NoError(t, err)

			r, err := b.store.GetScheduleRun(ctx, "s", key(10))
			require.NoError(t, err)
			require.Equal(t, model.RunSkipped, r.Status, "00:00:10 was due")
			require.Equal(t, c.why, r.Error)
			require.NotEmpty(t, b.taskState(key(10)), "its task stays, to find it ended")

			r, err = b.store.GetScheduleRun(ctx, "s", key(20))
			require.NoError(t, err)
			require.Equal(t, model.RunEnqueued, r.Status, "00:00:20 is the launcher's")
			require.Equal(t, "active", b.taskState(key(20)))

			r, _, err = b.store.GetRun(ctx, key(30))
			require.NoError(t, err)
			require.Equal(t, model.RunEnqueued, r.Status, "the manual run under 00:00:30's key")
			require.Equal(t, "scheduled", b.taskState(key(30)), "and its task stay")

			for _, s := range []int{40, 50, 60} {
				_, err := b.store.GetScheduleRun(ctx, "s", key(s))
				require.ErrorIs(t, err, queue.ErrNotFound, "00:00:%d ahead is removed", s)
				require.Empty(t, b.taskState(key(s)), "with its task")
				require.False(t, b.inHistory("s", key(s)), "and its history entry")
			}
			require.Equal(t, 3, queuetest.CountTasks(t, b.rdb, queue.QueueNameDefault), "the tasks of 00:00:10, 00:00:20 and the manual run, none ahead")
		})
	}
}

// The times whose runs a pause removed are planned afresh after a resume
// that comes before them: one run, one task, created at the resume.
func TestAResumedSchedulePlansAgainTheTimesItsPauseRemoved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupSettle(t, false)
	b.upsert(t, "s", "*/10 * * * * *", model.OverlapAllow)
	b.tickAt(t, settleStart.Add(time.Second))
	k40 := model.IdempotencyKey("s", settleStart.Add(40*time.Second))
	r, err := b.store.GetScheduleRun(ctx, "s", k40)
	require.NoError(t, err)
	require.Equal(t, settleStart.Add(time.Second), r.CreatedAt.UTC())

	b.clock.Set(settleStart.Add(15 * time.Second))
	_, err = b.store.SetPaused(ctx, "s", true)
	require.NoError(t, err)
	_, err = b.store.GetScheduleRun(ctx, "s", k40)
	require.ErrorIs(t, err, queue.ErrNotFound)

	b.clock.Set(settleStart.Add(35 * time.Second))
	_, err = b.store.SetPaused(ctx, "s", false)
	require.NoError(t, err)
	b.tickAt(t, settleStart.Add(35*time.Second))
	r, err = b.store.GetScheduleRun(ctx, "s", k40)
	require.NoError(t, err)
	require.Equal(t, model.RunEnqueued, r.Status)
	require.Equal(t, settleStart.Add(35*time.Second), r.CreatedAt.UTC(), "planned afresh")
	require.Equal(t, "scheduled", b.taskState(k40))
	require.True(t, b.inHistory("s", k40))
}

// A skip schedule's run in flight that no launcher took yet is SKIPPED by
// the pause, which frees the schedule of it: once resumed, the next run is
// enqueued, not SKIPPED behind a run that will never end.
func TestPauseFreesTheScheduleOfTheRunInFlightItSettles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupSettle(t, false)
	b.upsert(t, "k", "* * * * *", model.OverlapSkip)
	b.tickAt(t, settleStart.Add(time.Minute))
	k1 := model.IdempotencyKey("k", settleStart.Add(time.Minute))
	skey := fmt.Sprintf("chronos:{s%02d}:sched:k", queue.ShardOf("k", settleShards))
	require.Equal(t, k1, b.rdb.HGet(ctx, skey, "inflight").Val())

	b.clock.Set(settleStart.Add(time.Minute + time.Second))
	_, err := b.store.SetPaused(ctx, "k", true)
	require.NoError(t, err)
	r, err := b.store.GetScheduleRun(ctx, "k", k1)
	require.NoError(t, err)
	require.Equal(t, model.RunSkipped, r.Status)
	require.Zero(t, b.rdb.HExists(ctx, skey, "inflight").Val(), "nothing is in flight")
	inflight := fmt.Sprintf("chronos:{s%02d}:inflight", queue.ShardOf("k", settleShards))
	require.Error(t, b.rdb.ZScore(ctx, inflight, "k").Err())

	b.clock.Set(settleStart.Add(90 * time.Second))
	_, err = b.store.SetPaused(ctx, "k", false)
	require.NoError(t, err)
	b.tickAt(t, settleStart.Add(2*time.Minute))
	r, err = b.store.GetScheduleRun(ctx, "k", model.IdempotencyKey("k", settleStart.Add(2*time.Minute)))
	require.NoError(t, err)
	require.Equal(t, model.RunEnqueued, r.Status, r.Error)
}
