package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// nyGapEnd is when New York's clocks sprang forward in 2024 (02:00 EST
// became 03:00 EDT), two days after start.
var nyGapEnd = time.Date(2024, 3, 10, 7, 0, 0, 0, time.UTC)

// splitDSTRecords returns the runs of a schedule, oldest first, apart
// from its dst_skipped records.
func splitDSTRecords(t *testing.T, store *queue.Store, id string) (runs, records []*model.Run) {
	t.Helper()
	all, err := store.ListRuns(context.Background(), id, 100000)
	require.NoError(t, err)
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].Reason == model.ReasonDSTSkipped {
			records = append(records, all[i])
		} else {
			runs = append(runs, all[i])
		}
	}
	return runs, records
}

func runTimes(runs []*model.Run) []string {
	out := []string{}
	for _, r := range runs {
		out = append(out, r.RunAt.UTC().Format("2006-01-02T15:04:05Z"))
	}
	return out
}

// recordOf returns the one run of schedule id with reason.
func recordOf(t *testing.T, store *queue.Store, id string, reason model.RunReason) *model.Run {
	t.Helper()
	all, err := store.ListRuns(context.Background(), id, 100000)
	require.NoError(t, err)
	var out []*model.Run
	for _, r := range all {
		if r.Reason == reason {
			out = append(out, r)
		}
	}
	require.Len(t, out, 1, "runs of %s with reason %s", id, reason)
	return out[0]
}

// requireDSTRecord checks a dst_skipped record: SKIPPED, under the gap's
// own key, at the gap's end, and no task.
func requireDSTRecord(t *testing.T, b *testBundle, id string, r *model.Run) {
	t.Helper()
	require.Equal(t, model.RunSkipped, r.Status)
	require.Equal(t, model.ReasonDSTSkipped, r.Reason)
	require.Equal(t, model.DSTSkippedKey(id, r.RunAt), r.IdempotencyKey)
	require.Equal(t, r.RunAt, r.FireAt)
	require.Contains(t, r.Error, "dst_policy spring_forward skip")
	require.Empty(t, queuetest.TaskQueues(t, b.rdb, "chronos", r.IdempotencyKey), "a dst_skipped record has no task")
}

func TestDSTSkippedRecords(t *testing.T) {
	t.Parallel()

	// Each schedule whose local times the gap skipped gets one record of
	// them, whatever their number, ticked again and again; one that
	// matches none, or shifts them, or is not cron, gets none.
	t.Run("OnePerGapPerSchedule", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, &queue.Config{Lookahead: time.Minute})
		ny := "America/New_York"
		quarter := b.upsert(t, model.ScheduleRecord{ID: "quarter", CronExpr: "*/15 * * * *", Timezone: ny})
		daily := b.upsert(t, model.ScheduleRecord{ID: "daily", CronExpr: "30 2 * * *", Timezone: ny, OverlapPolicy: model.OverlapSkip})
		nine := b.upsert(t, model.ScheduleRecord{ID: "nine", CronExpr: "0 9 * * *", Timezone: ny})
		shift := b.upsert(t, model.ScheduleRecord{ID: "shift", CronExpr: "30 2 * * *", Timezone: ny,
			DSTPolicy: model.DSTPolicy{SpringForward: model.SpringForwardShift}})
		every := b.upsert(t, model.ScheduleRecord{ID: "every", Kind: model.KindEvery, EverySeconds: 3600})
		b.runUntil(t, start.Add(72*time.Hour), 7*time.Minute)

		for _, rec := range []*model.ScheduleRecord{quarter, daily} {
			runs, records := splitDSTRecords(t, b.store, rec.ID)
			require.Equal(t, expected(t, rec, start, start.Add(72*time.Hour)), runTimes(runs), "runs of %s", rec.ID)
			require.Equal(t, []string{"2024-03-10T07:00:00Z"}, runTimes(records), "records of %s", rec.ID)
			requireDSTRecord(t, b, rec.ID, records[0])
		}
		q := recordOf(t, b.store, "quarter", model.ReasonDSTSkipped)
		require.Contains(t, q.Error, "local times 2024-03-10T02:00:00, 2024-03-10T02:15:00, 2024-03-10T02:30:00 and 1 more do not exist in America/New_York")
		require.Contains(t, recordOf(t, b.store, "daily", model.ReasonDSTSkipped).Error, "local time 2024-03-10T02:30:00 does not exist")
		for _, rec := range []*model.ScheduleRecord{nine, shift, every} {
			runs, records := splitDSTRecords(t, b.store, rec.ID)
			require.Empty(t, records, "records of %s", rec.ID)
			require.Equal(t, expected(t, rec, start, start.Add(72*time.Hour)), runTimes(runs), "runs of %s", rec.ID)
		}
		require.Contains(t, runTimes(queuetest.RequireRuns(t, b.store, "shift", model.RunEnqueued,
			expected(t, shift, start, start.Add(72*time.Hour))...)), nyGapEnd.Format("2006-01-02T15:04:05Z"), "shift fires at the gap's end")
	})

	// Down across the gap, catch-up none drops the run after it: the gap
	// is recorded all the same, once, beside the record of the drop.
	t.Run("OutageDropsTheRunAfterTheGap", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, nil)
		rec := b.upsert(t, model.ScheduleRecord{ID: "down", CronExpr: "30 2 * * *", Timezone: "America/New_York",
			CatchupPolicy: model.CatchupNone})
		b.clock.Set(time.Date(2024, 3, 12, 12, 0, 0, 0, time.UTC))
		b.tickAll(t)
		b.clock.Advance(time.Second)
		b.tickAll(t)
		b.clock.Set(time.Date(2024, 3, 13, 6, 30, 0, 0, time.UTC)) // the next run, on time
		b.tickAll(t)
		queuetest.RequireRuns(t, b.store, rec.ID, "", "2024-03-10T07:00:00Z", "2024-03-12T06:30:00Z", "2024-03-13T06:30:00Z")
		_, records := splitDSTRecords(t, b.store, rec.ID)
		require.Equal(t, []string{"2024-03-10T07:00:00Z"}, runTimes(records))
		requireDSTRecord(t, b, rec.ID, records[0])
		require.Equal(t, time.Date(2024, 3, 12, 6, 30, 0, 0, time.UTC), recordOf(t, b.store, rec.ID, model.ReasonCatchupDropped).RunAt)
	})

	// A schedule created after the gap, or paused across it, did not
	// have its local times skipped: it was not in force.
	t.Run("NotWhenNotInForce", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, nil)
		b.clock.Set(nyGapEnd.Add(time.Minute))
		late := b.upsert(t, model.ScheduleRecord{ID: "late", CronExpr: "30 2 * * *", Timezone: "America/New_York"})
		b.runUntil(t, nyGapEnd.Add(72*time.Hour), 13*time.Minute)
		runs, records := splitDSTRecords(t, b.store, late.ID)
		require.Empty(t, records)
		require.Len(t, runs, 3)
	})
}
