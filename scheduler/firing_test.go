package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// TestFiring checks which runs a schedule's timing makes: every fire time
// once, across DST, inside its window, ahead by the lookahead, jittered,
// and none while paused.
func TestFiring(t *testing.T) {
	t.Parallel()

	t.Run("EveryPlannedRunFiresOnceAcrossDST", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, &queue.Config{Lookahead: time.Minute})
		ny := b.upsert(t, model.ScheduleRecord{ID: "ny", CronExpr: "30 1,2,3 * * *", Timezone: "America/New_York"})
		lh := b.upsert(t, model.ScheduleRecord{ID: "lh", CronExpr: "15 1,2 * * *", Timezone: "Australia/Lord_Howe"})
		until := start.Add(72 * time.Hour)
		b.runUntil(t, until, 7*time.Minute)

		gaps := map[string][]string{"ny": {"2024-03-10T07:00:00Z"}, "lh": {}}
		for _, rec := range []*model.ScheduleRecord{ny, lh} {
			want := expected(t, rec, start, until)
			require.NotEmpty(t, want)
			runs, records := splitDSTRecords(t, b.store, rec.ID)
			require.Equal(t, want, runTimes(runs), "run times of schedule %s", rec.ID)
			for _, r := range runs {
				require.Equal(t, model.RunEnqueued, r.Status)
				require.Equal(t, model.IdempotencyKey(rec.ID, r.RunAt), r.IdempotencyKey)
				queuetest.RequireTask(t, b.rdb, "chronos", r.IdempotencyKey)
				require.NotNil(t, r.EnqueuedAt)
			}
			// A local time a spring-forward gap skipped has a record
			// (dst_policy skip, the default), never a task.
			require.Equal(t, gaps[rec.ID], runTimes(records), "dst_skipped records of schedule %s", rec.ID)
			for _, r := range records {
				requireDSTRecord(t, b, rec.ID, r)
			}
		}
		require.Contains(t, recordOf(t, b.store, "ny", model.ReasonDSTSkipped).Error, "2024-03-10T02:30:00")
		// 2024-03-10 02:30 does not exist in New York: only 01:30 EST and
		// 03:30 EDT fire that day.
		require.Equal(t, []string{"2024-03-09T06:30:00Z", "2024-03-09T07:30:00Z", "2024-03-09T08:30:00Z",
			"2024-03-10T06:30:00Z", "2024-03-10T07:30:00Z", "2024-03-11T05:30:00Z"},
			expected(t, ny, start, until)[:6])
		require.Equal(t, 0, queuetest.CountTasks(t, b.rdb, "chronos")-len(expected(t, ny, start, until))-len(expected(t, lh, start, until)))
	})

	t.Run("LookaheadEnqueuesAheadWithFireTime", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, &queue.Config{Lookahead: time.Minute})
		rec := b.upsert(t, model.ScheduleRecord{ID: "la", CronExpr: "0 * * * * *"})
		b.clock.Advance(30 * time.Second)
		b.tickAll(t)
		// At 00:00:30 the run of 00:01:00 is within the minute of lookahead.
		runs := queuetest.RequireRuns(t, b.store, rec.ID, model.RunEnqueued, "2024-03-09T00:01:00Z")
		require.Equal(t, start.Add(30*time.Second), *runs[0].EnqueuedAt)
		require.Equal(t, start.Add(time.Minute), runs[0].FireAt)
	})

	t.Run("PausedEmitsNothingAndResumeSkipsPausedTime", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, nil)
		rec := b.upsert(t, model.ScheduleRecord{ID: "p", CronExpr: "*/10 * * * *"})
		_, err := b.store.SetPaused(context.Background(), rec.ID, true)
		require.NoError(t, err)
		b.runUntil(t, start.Add(time.Hour), time.Minute)
		queuetest.RequireRuns(t, b.store, rec.ID, "")
		_, err = b.store.SetPaused(context.Background(), rec.ID, false)
		require.NoError(t, err)
		b.runUntil(t, start.Add(90*time.Minute), time.Minute)
		queuetest.RequireRuns(t, b.store, rec.ID, model.RunEnqueued,
			"2024-03-09T01:10:00Z", "2024-03-09T01:20:00Z", "2024-03-09T01:30:00Z")
	})

	t.Run("WindowAndRetirement", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, nil)
		s, e := start.Add(20*time.Minute), start.Add(50*time.Minute)
		rec := b.upsert(t, model.ScheduleRecord{ID: "w", CronExpr: "*/10 * * * *", StartAt: &s, EndAt: &e})
		b.runUntil(t, start.Add(2*time.Hour), time.Minute)
		queuetest.RequireRuns(t, b.store, rec.ID, model.RunEnqueued,
			"2024-03-09T00:20:00Z", "2024-03-09T00:30:00Z", "2024-03-09T00:40:00Z", "2024-03-09T00:50:00Z")
		got, err := b.store.GetSchedule(context.Background(), rec.ID)
		require.NoError(t, err)
		require.Nil(t, got.NextRunAt, "a schedule past end_at is retired")
		n, err := b.rdb.ZScore(context.Background(), "chronos:{s0"+fmt.Sprint(queue.ShardOf("w", 4))+"}:due", "w").Result()
		require.NoError(t, err)
		require.Greater(t, n, 1e300, "retired schedules are never due")
	})

	t.Run("OnceFiresOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, nil)
		at := start.Add(5 * time.Minute)
		rec := b.upsert(t, model.ScheduleRecord{ID: "once", Kind: model.KindOnce, FireAt: &at})
		b.runUntil(t, start.Add(time.Hour), 30*time.Second)
		queuetest.RequireRuns(t, b.store, rec.ID, model.RunEnqueued, "2024-03-09T00:05:00Z")
	})

	t.Run("UpsertChangingTimingReplans", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, nil)
		rec := b.upsert(t, model.ScheduleRecord{ID: "u", CronExpr: "0 * * * *"})
		b.runUntil(t, start.Add(90*time.Minute), 5*time.Minute)
		rec.CronExpr = "*/15 * * * *"
		rec2 := *rec
		b.upsert(t, rec2)
		b.runUntil(t, start.Add(2*time.Hour), 5*time.Minute)
		queuetest.RequireRuns(t, b.store, rec.ID, model.RunEnqueued,
			"2024-03-09T01:00:00Z", "2024-03-09T01:45:00Z", "2024-03-09T02:00:00Z")
	})

	t.Run("JitterIsDeterministicAndBounded", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, nil)
		rec := b.upsert(t, model.ScheduleRecord{ID: "j", CronExpr: "*/10 * * * *", JitterMs: 30000})
		b.runUntil(t, start.Add(2*time.Hour), 20*time.Second)
		runs := queuetest.RequireRuns(t, b.store, rec.ID, model.RunEnqueued, expected(t, rec, start, start.Add(2*time.Hour))...)
		distinct := map[time.Duration]bool{}
		for _, r := range runs {
			off := r.FireAt.Sub(r.RunAt)
			require.LessOrEqual(t, off.Abs(), 30*time.Second)
			require.Equal(t, model.JitterOffset(r.IdempotencyKey, 30*time.Second), off)
			distinct[off] = true
		}
		require.Greater(t, len(distinct), 3)
	})
}
