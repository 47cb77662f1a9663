package queue_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
	"github.com/chronos-sched/chronos/scheduler"
)

// inflightOf reads the schedule's run in flight ("" for none).
func (b *bfBundle) inflightOf(t *testing.T, id string) string {
	t.Helper()
	key := fmt.Sprintf("chronos:{s%02d}:sched:%s", queue.ShardOf(id, b.store.Config().Shards), id)
	v, err := b.r.Client(t).HGet(context.Background(), key, "inflight").Result()
	if err != nil {
		return ""
	}
	return v
}

// skippedOverlap reads the store's chronos_runs_skipped_total{reason="overlap"}.
func skippedOverlap(t *testing.T, store *queue.Store) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	require.NoError(t, store.RegisterMetrics(reg))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if mf.GetName() == "chronos_runs_skipped_total" && l.GetName() == "reason" && l.GetValue() == "overlap" {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func outcomeList(res *queue.BackfillResult) []queue.BackfillOutcome {
	out := make([]queue.BackfillOutcome, len(res.Runs))
	for i, r := range res.Runs {
		out[i] = r.Outcome
	}
	return out
}

// Under overlap_policy skip every run of the range is due at once: the
// first starts and becomes the schedule's run in flight, the others are
// recorded SKIPPED (overlap) naming it, with no task; the dry run says so
// first. While it is in flight a further skip backfill starts nothing;
// once it ends, the next one starts one run again.
func TestBackfillSkipStartsOneRunWhileNoneIsInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := bfSetup(t, nil)
	b.hourly(t, "skip")
	bf := queue.Backfill{ScheduleID: "skip", From: bfT0.Add(-4 * time.Hour), To: bfT0, OverlapPolicy: model.OverlapSkip}
	dry := bf
	dry.DryRun = true
	require.Equal(t, []queue.BackfillOutcome{queue.BackfillWouldCreate, queue.BackfillWouldSkip, queue.BackfillWouldSkip,
		queue.BackfillWouldSkip}, outcomeList(b.backfill(t, dry)))
	require.Empty(t, b.inflightOf(t, "skip"), "a dry run writes nothing")

	res := b.backfill(t, bf)
	require.Equal(t, []queue.BackfillOutcome{queue.BackfillCreated, queue.BackfillSkipped, queue.BackfillSkipped,
		queue.BackfillSkipped}, outcomeList(res))
	require.Equal(t, 1, res.Created)
	first := res.Runs[0].IdempotencyKey
	require.Equal(t, first, b.inflightOf(t, "skip"), "the started run is the schedule's run in flight")
	require.Equal(t, bfT0, res.Runs[0].FireAt.UTC(), "it starts now")
	runs := queuetest.RequireRuns(t, b.store, "skip", "", hours(bfT0.Add(-4*time.Hour), 4)...)
	require.Equal(t, model.RunEnqueued, runs[0].Status)
	queuetest.RequireTask(t, b.r.Client(t), queue.QueueNameDefault, first)
	for _, r := range runs[1:] {
		require.Equal(t, model.RunSkipped, r.Status)
		require.Equal(t, model.ReasonOverlap, r.Reason)
		require.Equal(t, model.SourceBackfill, r.Source)
		require.Contains(t, r.Error, "run "+first+" is still in flight")
		require.Empty(t, queuetest.TaskQueues(t, b.r.Client(t), queue.QueueNameDefault, r.IdempotencyKey))
	}
	require.Equal(t, 1, queuetest.CountTasks(t, b.r.Client(t), queue.QueueNameDefault))
	require.Equal(t, 3.0, skippedOverlap(t, b.store), "the ledger counts the runs skipped")

	// Again: nothing twice. An earlier range: skipped for the run in flight.
	again := b.backfill(t, bf)
	require.Equal(t, map[queue.BackfillOutcome]int{queue.BackfillExists: 4}, outcomes(again))
	earlier := queue.Backfill{ScheduleID: "skip", From: bfT0.Add(-6 * time.Hour), To: bfT0.Add(-4 * time.Hour), OverlapPolicy: model.OverlapSkip}
	require.Equal(t, map[queue.BackfillOutcome]int{queue.BackfillSkipped: 2}, outcomes(b.backfill(t, earlier)))

	// The run ends: the schedule is free, and a skip backfill starts one.
	_, err := b.store.UpdateRunStatus(ctx, first, queue.StatusUpdate{Status: model.RunSuccess})
	require.NoError(t, err)
	require.Empty(t, b.inflightOf(t, "skip"), "its end released the schedule")
	older := queue.Backfill{ScheduleID: "skip", From: bfT0.Add(-9 * time.Hour), To: bfT0.Add(-6 * time.Hour), OverlapPolicy: model.OverlapSkip}
	require.Equal(t, []queue.BackfillOutcome{queue.BackfillCreated, queue.BackfillSkipped, queue.BackfillSkipped},
		outcomeList(b.backfill(t, older)))
}

// A skip backfill's run in flight holds back the schedule's own runs as
// a run of its own would: a skip schedule's next run is SKIPPED (overlap)
// while it is in flight. Its deadline fails it (run_timeout) if it never
// reports, releasing the schedule.
func TestBackfillSkipRunHoldsBackTheSchedule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := bfSetup(t, nil)
	rec := &model.ScheduleRecord{ID: "own", CronExpr: "0 * * * *", Timezone: "UTC", Target: model.TargetWorkflow,
		WorkflowID: "wf", Version: "1", UserID: "u", OverlapPolicy: model.OverlapSkip, CatchupPolicy: model.CatchupNone}
	require.NoError(t, rec.Validate())
	_, err := b.store.UpsertSchedule(ctx, rec)
	require.NoError(t, err)
	b.clock.Set(bfT0.Add(30 * time.Minute))
	res := b.backfill(t, queue.Backfill{ScheduleID: "own", From: bfT0.Add(-2 * time.Hour), To: bfT0, OverlapPolicy: model.OverlapSkip,
		RunTimeout: 2 * time.Hour})
	require.Equal(t, 1, res.Created)
	first := res.Runs[0].IdempotencyKey

	sched, err := scheduler.New(b.store, nil, nil, nil)
	require.NoError(t, err)
	shard := queue.ShardOf("own", b.store.Config().Shards)
	b.clock.Set(bfT0.Add(time.Hour))
	require.NoError(t, sched.TickShard(ctx, shard))
	own, _, err := b.store.GetRun(ctx, model.IdempotencyKey("own", bfT0.Add(time.Hour)))
	require.NoError(t, err)
	require.Equal(t, model.RunSkipped, own.Status, "the schedule's run, planned while the backfill run is in flight")
	require.Equal(t, model.ReasonOverlap, own.Reason)
	require.Contains(t, own.Error, first)

	// Past its deadline (30 min + 2 h) with no status: failed, released.
	b.clock.Set(bfT0.Add(2*time.Hour + 31*time.Minute))
	require.NoError(t, sched.TickShard(ctx, shard))
	run, _, err := b.store.GetRun(ctx, first)
	require.NoError(t, err)
	require.Equal(t, model.RunFailed, run.Status)
	require.Equal(t, model.ReasonRunTimeout, run.Reason)
	require.Empty(t, b.inflightOf(t, "own"))
}

// An overlap policy chronos does not know is a 400-class field error
// that lists the valid ones, and nothing is written.
func TestBackfillRefusesAnUnknownOverlapPolicy(t *testing.T) {
	t.Parallel()
	b := bfSetup(t, nil)
	b.hourly(t, "q")
	_, err := b.store.RunBackfill(context.Background(), queue.Backfill{ScheduleID: "q", From: bfT0.Add(-2 * time.Hour), To: bfT0,
		MaxRuns: 10, Rate: 1, OverlapPolicy: "buffer_all"})
	var fe *model.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "overlap_policy", fe.Field)
	require.Contains(t, fe.Message, "want allow, skip or queue")
	queuetest.RequireRuns(t, b.store, "q", "")
}

// Two API replicas run skip backfills of overlapping ranges at once,
// again and again: one run starts in all, every other time is recorded
// skipped once.
func TestBackfillSkipAtOnceFromTwoReplicasStartsOneRun(t *testing.T) {
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
				OverlapPolicy: model.OverlapSkip})
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	runs := queuetest.RequireRuns(t, b.store, "two", "", hours(bfT0.Add(-27*time.Hour), 27)...)
	started := 0
	for _, r := range runs {
		switch r.Status {
		case model.RunEnqueued:
			started++
			require.Equal(t, r.IdempotencyKey, b.inflightOf(t, "two"))
		case model.RunSkipped:
			require.Equal(t, model.ReasonOverlap, r.Reason)
		default:
			t.Fatalf("run at %s is %s", r.RunAt, r.Status)
		}
	}
	require.Equal(t, 1, started, "runs started by the eight skip backfills")
	require.Equal(t, 1, queuetest.CountTasks(t, b.r.Client(t), queue.QueueNameDefault))
}
