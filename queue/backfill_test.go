package queue_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
	"github.com/chronos-sched/chronos/scheduler"
)

// bfT0 is when the backfill tests' schedules are created: 10:00 on a day.
var bfT0 = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

type bfBundle struct {
	r     *queuetest.Redis
	store *queue.Store
	clock *queue.SimClock
}

func bfSetup(t *testing.T, cfg *queue.Config) *bfBundle {
	t.Helper()
	r := queuetest.StartRedis(t)
	clock := queue.NewSimClock(bfT0)
	store, err := queue.NewStore(context.Background(), r.Universal(t), clock, cfg)
	require.NoError(t, err)
	return &bfBundle{r: r, store: store, clock: clock}
}

// hourly registers an hourly "allow" schedule at the clock's now.
func (b *bfBundle) hourly(t *testing.T, id string) {
	t.Helper()
	rec := &model.ScheduleRecord{ID: id, CronExpr: "0 * * * *", Timezone: "UTC", Target: model.TargetWorkflow,
		WorkflowID: "wf", Version: "1", UserID: "u", OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupNone}
	require.NoError(t, rec.Validate())
	_, err := b.store.UpsertSchedule(context.Background(), rec)
	require.NoError(t, err)
}

func (b *bfBundle) backfill(t *testing.T, bf queue.Backfill) *queue.BackfillResult {
	t.Helper()
	bf.MaxRuns, bf.Rate = cmpOr(bf.MaxRuns, 1000), cmpOr(bf.Rate, 10)
	res, err := b.store.RunBackfill(context.Background(), bf)
	require.NoError(t, err)
	return res
}

func cmpOr(v, d int) int {
	if v == 0 {
		return d
	}
	return v
}

func outcomes(res *queue.BackfillResult) map[queue.BackfillOutcome]int {
	m := map[queue.BackfillOutcome]int{}
	for _, r := range res.Runs {
		m[r.Outcome]++
	}
	return m
}

func hours(from time.Time, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = from.Add(time.Duration(i) * time.Hour).Format("2006-01-02T15:04:05Z")
	}
	return out
}

func TestBackfillTwiceCreatesNothingTwice(t *testing.T) {
	t.Parallel()
	b := bfSetup(t, nil)
	b.hourly(t, "bf")
	from := bfT0.Add(-10 * time.Hour)
	res := b.backfill(t, queue.Backfill{ScheduleID: "bf", From: from, To: bfT0, Rate: 4})
	require.Equal(t, 10, res.Created)
	require.Len(t, res.Runs, 10)
	for i, r := range res.Runs {
		require.Equal(t, queue.BackfillCreated, r.Outcome)
		require.Equal(t, model.IdempotencyKey("bf", from.Add(time.Duration(i)*time.Hour)), r.IdempotencyKey)
		// Rate 4: four runs a second, in order.
		require.Equal(t, bfT0.Add(time.Duration(i/4)*time.Second), r.FireAt.UTC(), "fire time of run %d", i)
	}
	runs := queuetest.RequireRuns(t, b.store, "bf", model.RunEnqueued, hours(from, 10)...)
	for _, r := range runs {
		require.Equal(t, model.SourceBackfill, r.Source)
	}
	require.Equal(t, 10, queuetest.CountTasks(t, b.r.Universal(t), queue.QueueNameDefault))

	b.clock.Advance(time.Minute)
	again := b.backfill(t, queue.Backfill{ScheduleID: "bf", From: from, To: bfT0})
	require.Zero(t, again.Created)
	require.Equal(t, map[queue.BackfillOutcome]int{queue.BackfillExists: 10}, outcomes(again))
	require.Equal(t, model.SourceBackfill, again.Runs[0].Source)
	require.Equal(t, 10, queuetest.CountTasks(t, b.r.Universal(t), queue.QueueNameDefault))
	queuetest.RequireRuns(t, b.store, "bf", model.RunEnqueued, hours(from, 10)...)
}

// The scheduler really runs the schedule's first hours; a backfill over a
// range holding them and earlier hours creates only the earlier ones.
func TestBackfillOverRunsTheSchedulerRanCreatesOnlyTheMissingOnes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := bfSetup(t, nil)
	b.hourly(t, "ran")
	sched, err := scheduler.New(b.store, nil, nil, nil)
	require.NoError(t, err)
	shard := queue.ShardOf("ran", b.store.Config().Shards)
	for h := 1; h <= 3; h++ { // 11:00, 12:00, 13:00 run
		b.clock.Set(bfT0.Add(time.Duration(h) * time.Hour))
		require.NoError(t, sched.TickShard(ctx, shard))
	}
	b.clock.Set(bfT0.Add(3*time.Hour + 30*time.Minute))
	ran := queuetest.RequireRuns(t, b.store, "ran", "", hours(bfT0.Add(time.Hour), 3)...)
	for _, r := range ran {
		require.Equal(t, model.SourceSchedule, r.Source)
	}
	tasks := queuetest.CountTasks(t, b.r.Universal(t), queue.QueueNameDefault)

	from := bfT0.Add(-2 * time.Hour) // 08:00 .. 13:00
	res := b.backfill(t, queue.Backfill{ScheduleID: "ran", From: from, To: bfT0.Add(3*time.Hour + time.Minute)})
	require.Equal(t, 3, res.Created) // 08:00, 09:00, 10:00
	require.Equal(t, map[queue.BackfillOutcome]int{queue.BackfillCreated: 3, queue.BackfillExists: 3}, outcomes(res))
	for _, r := range res.Runs[3:] {
		require.Equal(t, model.SourceSchedule, r.Source)
	}
	runs := queuetest.RequireRuns(t, b.store, "ran", "", hours(from, 6)...)
	for i, r := range runs {
		want := model.SourceBackfill
		if i >= 3 {
			want = model.SourceSchedule
		}
		require.Equal(t, want, r.Source, "run at %s", r.RunAt)
	}
	require.Equal(t, tasks+3, queuetest.CountTasks(t, b.r.Universal(t), queue.QueueNameDefault))
}

// Two API replicas (two stores, two connections) backfill the same range
// at once, again and again: every run is created once.
func TestBackfillAtOnceFromTwoReplicasCreatesEachRunOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := bfSetup(t, nil)
	b.hourly(t, "two")
	other, err := queue.NewStore(ctx, b.r.Universal(t), b.clock, nil)
	require.NoError(t, err)
	from := bfT0.Add(-300 * time.Hour) // 300 runs: three script pages each
	var wg sync.WaitGroup
	created := make([]int, 8)
	for i := range created {
		st := b.store
		if i%2 == 1 {
			st = other
		}
		wg.Go(func() {
			res, err := st.RunBackfill(ctx, queue.Backfill{ScheduleID: "two", From: from, To: bfT0, MaxRuns: 1000, Rate: 100})
			if err == nil {
				created[i] = res.Created
			}
		})
	}
	wg.Wait()
	total := 0
	for _, n := range created {
		total += n
	}
	require.Equal(t, 300, total, "runs created by the eight backfills")
	queuetest.RequireRuns(t, b.store, "two", model.RunEnqueued, hours(from, 300)...)
	require.Equal(t, 300, queuetest.CountTasks(t, b.r.Universal(t), queue.QueueNameDefault))
}

func TestBackfillDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := bfSetup(t, nil)
	b.hourly(t, "dry")
	rdb := b.r.Universal(t)
	b.backfill(t, queue.Backfill{ScheduleID: "dry", From: bfT0.Add(-2 * time.Hour), To: bfT0})
	dump := func() map[string]string {
		out := map[string]string{}
		for _, k := range queuetest.Keys(t, rdb, "*") {
			v, err := rdb.Dump(ctx, k).Result()
			require.NoError(t, err)
			out[k] = v
		}
		return out
	}
	before := dump()
	res := b.backfill(t, queue.Backfill{ScheduleID: "dry", From: bfT0.Add(-5 * time.Hour), To: bfT0, DryRun: true})
	require.Zero(t, res.Created)
	require.Equal(t, map[queue.BackfillOutcome]int{queue.BackfillWouldCreate: 3, queue.BackfillExists: 2}, outcomes(res))
	for _, r := range res.Runs {
		require.Nil(t, r.FireAt)
	}
	require.Equal(t, before, dump(), "a dry run wrote to Redis")
}

func TestBackfillBoundAndRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := bfSetup(t, nil)
	b.hourly(t, "max")
	_, err := b.store.RunBackfill(ctx, queue.Backfill{ScheduleID: "max", From: bfT0.Add(-10 * time.Hour), To: bfT0, MaxRuns: 5, Rate: 1})
	var fe *model.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "to", fe.Field)
	require.Contains(t, fe.Message, "more than 5 runs")
	require.Contains(t, fe.Message, "2026-03-02T05:00:00Z", "where to cut the range")
	require.Zero(t, queuetest.CountTasks(t, b.r.Universal(t), queue.QueueNameDefault))

	_, err = b.store.RunBackfill(ctx, queue.Backfill{ScheduleID: "nope", From: bfT0.Add(-time.Hour), To: bfT0, MaxRuns: 5, Rate: 1})
	require.ErrorIs(t, err, queue.ErrNotFound)

	_, err = b.store.SetPaused(ctx, "max", true)
	require.NoError(t, err)
	_, err = b.store.RunBackfill(ctx, queue.Backfill{ScheduleID: "max", From: bfT0.Add(-time.Hour), To: bfT0, MaxRuns: 5, Rate: 1})
	require.ErrorIs(t, err, queue.ErrConflict)
	require.Contains(t, err.Error(), "paused")
}

// A time older than the oldest record of a full history may have run, its
// record trimmed since: it is not created again.
func TestBackfillBeforeAFullHistoryCreatesNothing(t *testing.T) {
	t.Parallel()
	b := bfSetup(t, &queue.Config{RunHistory: 3})
	b.hourly(t, "full")
	res := b.backfill(t, queue.Backfill{ScheduleID: "full", From: bfT0.Add(-4 * time.Hour), To: bfT0})
	require.Equal(t, 4, res.Created)
	older := b.backfill(t, queue.Backfill{ScheduleID: "full", From: bfT0.Add(-6 * time.Hour), To: bfT0.Add(-3 * time.Hour), DryRun: true})
	require.Equal(t, map[queue.BackfillOutcome]int{queue.BackfillBeforeHistory: 2, queue.BackfillExists: 1}, outcomes(older))
	older = b.backfill(t, queue.Backfill{ScheduleID: "full", From: bfT0.Add(-6 * time.Hour), To: bfT0.Add(-3 * time.Hour)})
	require.Zero(t, older.Created)
	require.Equal(t, map[queue.BackfillOutcome]int{queue.BackfillBeforeHistory: 2, queue.BackfillExists: 1}, outcomes(older))
}
