package queue_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
	"github.com/chronos-sched/chronos/scheduler"
)

// parkedScore is the scheduled-set score of a queue backfill's task that
// waits for the run before it (schema.go's taskParked, 9999-12-31).
const parkedScore = 253402300799

// taskScore reads the scheduled-set score of the task of run key of
// schedule id (Unix seconds), and whether it is there.
func (b *bfBundle) taskScore(t *testing.T, id, key string) (float64, bool) {
	t.Helper()
	sh := queue.ShardOf(id, b.store.Config().Shards)
	set := "asynq:{" + queue.ShardQueue(queue.QueueNameDefault, sh) + "}:scheduled"
	v, err := b.r.Client(t).ZScore(context.Background(), set, key).Result()
	if err == redis.Nil {
		return 0, false
	}
	require.NoError(t, err)
	return v, true
}

// chain reads the schedule's queue backfill chain, first to start first.
func (b *bfBundle) chain(t *testing.T, id string) []string {
	t.Helper()
	key := fmt.Sprintf("chronos:{s%02d}:bfq:%s", queue.ShardOf(id, b.store.Config().Shards), id)
	v, err := b.r.Client(t).ZRange(context.Background(), key, 0, -1).Result()
	require.NoError(t, err)
	return v
}

// end records a final status for the run key and returns the run.
func (b *bfBundle) end(t *testing.T, store *queue.Store, key string, st model.RunStatus) *model.Run {
	t.Helper()
	run, err := store.UpdateRunStatus(context.Background(), key, queue.StatusUpdate{Status: st})
	require.NoError(t, err)
	require.Equal(t, st, run.Status)
	return run
}

// A queue backfill creates every run of the range once: the first starts
// now and becomes the schedule's run in flight, the others wait with
// their tasks parked, and each run's end (a status, a run timeout) starts
// the next, in time order, until the schedule has nothing in flight. The
// dry run says so first and writes nothing; a second backfill creates
// nothing twice.
func TestBackfillQueueRunsTheRangeOneAfterAnother(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := bfSetup(t, nil)
	b.hourly(t, "q")
	bf := queue.Backfill{ScheduleID: "q", From: bfT0.Add(-4 * time.Hour), To: bfT0, OverlapPolicy: model.OverlapQueue,
		RunTimeout: 20 * time.Minute}
	dry := bf
	dry.DryRun = true
	require.Equal(t, []queue.BackfillOutcome{queue.BackfillWouldCreate, queue.BackfillWouldQueue, queue.BackfillWouldQueue,
		queue.BackfillWouldQueue}, outcomeList(b.backfill(t, dry)))
	require.Empty(t, b.inflightOf(t, "q"), "a dry run writes nothing")
	queuetest.RequireRuns(t, b.store, "q", "")

	res := b.backfill(t, bf)
	require.Equal(t, []queue.BackfillOutcome{queue.BackfillCreated, queue.BackfillQueued, queue.BackfillQueued,
		queue.BackfillQueued}, outcomeList(res))
	require.Equal(t, 4, res.Created)
	keys := make([]string, 4)
	for i, r := range res.Runs {
		keys[i] = r.IdempotencyKey
		require.Equal(t, bfT0.Add(time.Duration(i)*100*time.Millisecond), r.FireAt.UTC(), "Rate 10 a second")
	}
	require.Equal(t, keys[0], b.inflightOf(t, "q"))
	require.Equal(t, keys[1:], b.chain(t, "q"))
	runs := queuetest.RequireRuns(t, b.store, "q", "", hours(bfT0.Add(-4*time.Hour), 4)...)
	for i, r := range runs {
		require.Equal(t, model.RunEnqueued, r.Status)
		require.Equal(t, model.SourceBackfill, r.Source)
		queuetest.RequireTask(t, b.r.Client(t), queue.QueueNameDefault, keys[i])
		score, parked := b.taskScore(t, "q", keys[i])
		require.Equal(t, i > 0, parked && score == parkedScore, "run %d's task parked", i)
	}
	require.Equal(t, map[queue.BackfillOutcome]int{queue.BackfillExists: 4}, outcomes(b.backfill(t, bf)), "again: nothing twice")

	// The first succeeds: the second starts, due now.
	b.clock.Set(bfT0.Add(time.Minute))
	b.end(t, b.store, keys[0], model.RunSuccess)
	require.Equal(t, keys[1], b.inflightOf(t, "q"))
	score, _ := b.taskScore(t, "q", keys[1])
	require.Equal(t, float64(bfT0.Add(time.Minute).Unix()), score)
	require.Equal(t, keys[2:], b.chain(t, "q"))

	// The second fails: the third starts.
	b.end(t, b.store, keys[1], model.RunFailed)
	require.Equal(t, keys[2], b.inflightOf(t, "q"))

	// The third never reports: past its run timeout (20 min) the
	// scheduler fails it, and that starts the fourth.
	sched, err := scheduler.New(b.store, nil, nil, nil)
	require.NoError(t, err)
	b.clock.Set(bfT0.Add(22 * time.Minute))
	require.NoError(t, sched.TickShard(ctx, queue.ShardOf("q", b.store.Config().Shards)))
	third, _, err := b.store.GetRun(ctx, keys[2])
	require.NoError(t, err)
	require.Equal(t, model.RunFailed, third.Status)
	require.Equal(t, model.ReasonRunTimeout, third.Reason)
	require.Equal(t, keys[3], b.inflightOf(t, "q"))

	b.end(t, b.store, keys[3], model.RunSuccess)
	require.Empty(t, b.inflightOf(t, "q"), "the last run's end frees the schedule")
	require.Empty(t, b.chain(t, "q"))
}

// A chained run starts no sooner than the rate allows: with Rate 1, the
// second run's task is due a second after the backfill, however soon
// the first ends.
func TestBackfillQueueKeepsTheRate(t *testing.T) {
	t.Parallel()
	b := bfSetup(t, nil)
	b.hourly(t, "rate")
	res := b.backfill(t, queue.Backfill{ScheduleID: "rate", From: bfT0.Add(-3 * time.Hour), To: bfT0, OverlapPolicy: model.OverlapQueue, Rate: 1})
	b.end(t, b.store, res.Runs[0].IdempotencyKey, model.RunSuccess)
	score, _ := b.taskScore(t, "rate", res.Runs[1].IdempotencyKey)
	require.Equal(t, float64(bfT0.Add(time.Second).Unix()), score)
	run, _, err := b.store.GetRun(context.Background(), res.Runs[2].IdempotencyKey)
	require.NoError(t, err)
	require.Equal(t, bfT0.Add(2*time.Second), run.FireAt.UTC(), "the record's fire_at is the earliest it starts")
}

// A queue schedule's own runs and a queue backfill wait for each other:
// the backfill waits behind the schedule's run in flight, the schedule's
// next run is held while the backfill's runs go, and the last one's end
// releases it. A skip backfill meanwhile starts nothing.
func TestBackfillQueueAndTheScheduleWaitForEachOther(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := bfSetup(t, nil)
	rec := &model.ScheduleRecord{ID: "own", CronExpr: "0 * * * *", Timezone: "UTC", Target: model.TargetWorkflow,
		WorkflowID: "wf", Version: "1", UserID: "u", OverlapPolicy: model.OverlapQueue, CatchupPolicy: model.CatchupNone}
	require.NoError(t, rec.Validate())
	b.clock.Set(bfT0.Add(-30 * time.Minute))
	_, err := b.store.UpsertSchedule(ctx, rec)
	require.NoError(t, err)
	sched, err := scheduler.New(b.store, &scheduler.Config{RunTimeout: 5 * time.Hour}, nil, nil)
	require.NoError(t, err)
	shard := queue.ShardOf("own", b.store.Config().Shards)
	b.clock.Set(bfT0)
	require.NoError(t, sched.TickShard(ctx, shard))
	own := model.IdempotencyKey("own", bfT0)
	require.Equal(t, own, b.inflightOf(t, "own"), "the schedule's run at 10:00 is in flight")

	res := b.backfill(t, queue.Backfill{ScheduleID: "own", From: bfT0.Add(-3 * time.Hour), To: bfT0, OverlapPolicy: model.OverlapQueue})
	require.Equal(t, map[queue.BackfillOutcome]int{queue.BackfillQueued: 3}, outcomes(res))
	skip := b.backfill(t, queue.Backfill{ScheduleID: "own", From: bfT0.Add(-5 * time.Hour), To: bfT0.Add(-3 * time.Hour),
		OverlapPolicy: model.OverlapSkip})
	require.Equal(t, map[queue.BackfillOutcome]int{queue.BackfillSkipped: 2}, outcomes(skip))

	// 11:00 comes while 10:00 runs: held.
	b.clock.Set(bfT0.Add(time.Hour))
	require.NoError(t, sched.TickShard(ctx, shard))
	next := model.IdempotencyKey("own", bfT0.Add(time.Hour))
	_, _, err = b.store.GetRun(ctx, next)
	require.ErrorIs(t, err, queue.ErrNotFound, "11:00 is held, not planned")

	// 10:00 ends: the backfill's runs go first, one by one; 11:00 waits.
	prev := own
	for _, r := range res.Runs {
		b.end(t, b.store, prev, model.RunSuccess)
		require.Equal(t, r.IdempotencyKey, b.inflightOf(t, "own"))
		require.NoError(t, sched.TickShard(ctx, shard))
		_, _, err = b.store.GetRun(ctx, next)
		require.ErrorIs(t, err, queue.ErrNotFound, "11:00 still waits behind the backfill")
		prev = r.IdempotencyKey
	}
	// The last backfill run ends: 11:00 is released and starts.
	b.end(t, b.store, prev, model.RunSuccess)
	require.NoError(t, sched.TickShard(ctx, shard))
	run, _, err := b.store.GetRun(ctx, next)
	require.NoError(t, err)
	require.Equal(t, model.RunEnqueued, run.Status)
	require.Equal(t, model.SourceSchedule, run.Source)
	require.Equal(t, next, b.inflightOf(t, "own"))
}

// Pausing the schedule settles the runs a queue backfill chained
// (SKIPPED, paused), removes their parked tasks and ends the chain: the
// run in flight's end, after the resume, starts nothing.
func TestBackfillQueuePauseEndsTheChain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := bfSetup(t, nil)
	b.hourly(t, "p")
	res := b.backfill(t, queue.Backfill{ScheduleID: "p", From: bfT0.Add(-3 * time.Hour), To: bfT0, OverlapPolicy: model.OverlapQueue})
	first := res.Runs[0].IdempotencyKey
	_, err := b.store.UpdateRunStatus(ctx, first, queue.StatusUpdate{Status: model.RunStarted})
	require.NoError(t, err)
	_, err = b.store.SetPaused(ctx, "p", true)
	require.NoError(t, err)
	for _, r := range res.Runs[1:] {
		run, _, err := b.store.GetRun(ctx, r.IdempotencyKey)
		require.NoError(t, err)
		require.Equal(t, model.RunSkipped, run.Status)
		require.Equal(t, model.ReasonPaused, run.Reason)
		_, parked := b.taskScore(t, "p", r.IdempotencyKey)
		require.False(t, parked, "its parked task went with it")
	}
	require.Empty(t, b.chain(t, "p"))
	_, err = b.store.SetPaused(ctx, "p", false)
	require.NoError(t, err)
	b.end(t, b.store, first, model.RunSuccess)
	require.Empty(t, b.inflightOf(t, "p"))
	require.Equal(t, 1, queuetest.CountTasks(t, b.r.Client(t), queue.QueueNameDefault), "the first run's task only")
}

// The chain lives in Redis: a store that never saw the backfill (another
// process, after the one that ran it died) ends its runs and each end
// starts the next.
func TestBackfillQueueChainOutlivesTheProcess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := bfSetup(t, nil)
	b.hourly(t, "die")
	res := b.backfill(t, queue.Backfill{ScheduleID: "die", From: bfT0.Add(-3 * time.Hour), To: bfT0, OverlapPolicy: model.OverlapQueue})
	other, err := queue.NewStore(ctx, b.r.Universal(t), b.clock, nil)
	require.NoError(t, err)
	for i, r := range res.Runs {
		require.Equal(t, r.IdempotencyKey, b.inflightOf(t, "die"), "run %d", i)
		b.end(t, other, r.IdempotencyKey, model.RunSuccess)
	}
	require.Empty(t, b.inflightOf(t, "die"))
}

// Two API replicas run queue backfills of overlapping ranges at once,
// again and again: every time is created once, one run is in flight and
// the others are chained once each; ending the run in flight over and
// over runs each time exactly once.
func TestBackfillQueueAtOnceFromTwoReplicasCreatesEachRunOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := bfSetup(t, nil)
	b.hourly(t, "two")
	other, err := queue.NewStore(ctx, b.r.Client(t), b.clock, nil)
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		st := b.store
		if i%2 == 1 {
			st = other
		}
		from := bfT0.Add(-time.Duration(20+i) * time.Hour) // 20 to 27 hours back, to now
		wg.Go(func() {
			_, errs[i] = st.RunBackfill(ctx, queue.Backfill{ScheduleID: "two", From: from, To: bfT0, MaxRuns: 100, Rate: 10,
				OverlapPolicy: model.OverlapQueue})
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	runs := queuetest.RequireRuns(t, b.store, "two", "", hours(bfT0.Add(-27*time.Hour), 27)...)
	for _, r := range runs {
		require.Equal(t, model.RunEnqueued, r.Status)
		require.Equal(t, model.SourceBackfill, r.Source)
	}
	require.Len(t, b.chain(t, "two"), 26)
	require.NotContains(t, b.chain(t, "two"), b.inflightOf(t, "two"))
	require.Equal(t, 27, queuetest.CountTasks(t, b.r.Client(t), queue.QueueNameDefault))

	ran := map[string]int{}
	for key := b.inflightOf(t, "two"); key != ""; key = b.inflightOf(t, "two") {
		ran[key]++
		require.LessOrEqual(t, len(ran), 27)
		b.end(t, b.store, key, model.RunSuccess)
	}
	require.Len(t, ran, 27)
	for k, n := range ran {
		require.Equal(t, 1, n, "run %s", k)
	}
}

// A dry run under queue says what the backfill then does, also while a
// run is in flight: every time would wait.
func TestBackfillQueueDryRunAgreesWithTheBackfill(t *testing.T) {
	t.Parallel()
	b := bfSetup(t, nil)
	b.hourly(t, "agree")
	b.backfill(t, queue.Backfill{ScheduleID: "agree", From: bfT0.Add(-2 * time.Hour), To: bfT0.Add(-time.Hour), OverlapPolicy: model.OverlapSkip})
	bf := queue.Backfill{ScheduleID: "agree", From: bfT0.Add(-4 * time.Hour), To: bfT0, OverlapPolicy: model.OverlapQueue}
	dry := bf
	dry.DryRun = true
	planned := b.backfill(t, dry)
	require.Equal(t, []queue.BackfillOutcome{queue.BackfillWouldQueue, queue.BackfillWouldQueue, queue.BackfillExists,
		queue.BackfillWouldQueue}, outcomeList(planned))
	done := b.backfill(t, bf)
	want := map[queue.BackfillOutcome]queue.BackfillOutcome{queue.BackfillWouldQueue: queue.BackfillQueued,
		queue.BackfillWouldCreate: queue.BackfillCreated, queue.BackfillExists: queue.BackfillExists}
	for i, r := range done.Runs {
		require.Equal(t, want[planned.Runs[i].Outcome], r.Outcome, "run at %s", r.RunAt)
	}
	require.Equal(t, 3, done.Created)
}

// Deleting the schedule records its queued runs SKIPPED (deleted),
// removes their parked tasks and the chain.
func TestBackfillQueueDeleteEndsTheChain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := bfSetup(t, nil)
	b.hourly(t, "del")
	res := b.backfill(t, queue.Backfill{ScheduleID: "del", From: bfT0.Add(-3 * time.Hour), To: bfT0, OverlapPolicy: model.OverlapQueue})
	require.NoError(t, b.store.DeleteSchedule(ctx, "del"))
	for _, r := range res.Runs {
		run, _, err := b.store.GetRun(ctx, r.IdempotencyKey)
		require.NoError(t, err)
		require.Equal(t, model.RunSkipped, run.Status)
		require.Equal(t, model.ReasonDeleted, run.Reason)
		_, parked := b.taskScore(t, "del", r.IdempotencyKey)
		require.False(t, parked)
	}
	require.Empty(t, b.chain(t, "del"))
}
