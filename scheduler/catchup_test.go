package scheduler

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// TestCatchup checks what the catch-up policies do with runs found late,
// how much a tick catches up, and that jitter alone never makes a run late.
func TestCatchup(t *testing.T) {
	t.Parallel()

	t.Run("Policies", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			policy  model.CatchupPolicy
			want    int     // runs recorded for the missed hour (00:05 to 00:55: 11 missed), the one record of those dropped aside
			dropped float64 // chronos_runs_missed_total: catch-ups that dropped runs
		}{
			{model.CatchupNone, 0, 1},
			{model.CatchupLatest, 1, 1},
			{model.CatchupFireImmediately, 11, 0},
			{model.CatchupSpread, 11, 0},
		} {
			t.Run(string(tc.policy), func(t *testing.T) {
				t.Parallel()
				b := setup(t, nil, nil)
				rec := b.upsert(t, model.ScheduleRecord{ID: "c", CronExpr: "*/5 * * * *", CatchupPolicy: tc.policy})
				// Down for an hour: the first tick is at 01:00:03.
				b.clock.Set(start.Add(time.Hour + 3*time.Second))
				b.tickAll(t)
				runs, err := b.store.ListRuns(context.Background(), rec.ID, 100)
				require.NoError(t, err)
				var missed, records []*model.Run
				for _, r := range runs {
					switch {
					case r.Reason == model.ReasonCatchupDropped:
						records = append(records, r)
					case r.RunAt.Before(start.Add(time.Hour)):
						missed = append(missed, r)
					}
				}
				require.Len(t, records, int(tc.dropped), "one record of the runs dropped")
				require.Len(t, missed, tc.want)
				now := b.clock.Now()
				for _, r := range missed {
					switch tc.policy {
					case model.CatchupSpread:
						require.False(t, r.FireAt.Before(now))
						require.False(t, r.FireAt.After(now.Add(SpreadWindowDefault)))
					default:
						require.Equal(t, now, r.FireAt)
					}
				}
				if tc.policy == model.CatchupLatest {
					require.Equal(t, start.Add(55*time.Minute), missed[0].RunAt)
				}
				require.Equal(t, tc.dropped, testutil.ToFloat64(b.sched.metrics.missed))
				// Caught-up runs show their lateness (run_at to now) in their
				// own histogram, not as enqueue drift.
				var lateness float64
				for _, r := range missed {
					lateness += now.Sub(r.RunAt).Seconds()
				}
				catchup := histogramOf(t, b.sched.metrics.catchupLateness)
				require.Equal(t, uint64(tc.want), catchup.GetSampleCount())
				require.InDelta(t, lateness, catchup.GetSampleSum(), 1e-6)
				require.Equal(t, uint64(1), histogramOf(t, b.sched.metrics.drift).GetSampleCount(), "the 01:00 run")
				// The 01:00 run was within the misfire grace: it fires as planned.
				require.Equal(t, start.Add(time.Hour), runs[0].RunAt)
			})
		}
	})

	// With one missed run, "latest" fires it and drops nothing.
	t.Run("LatestWithOneMissedRunDropsNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, nil)
		rec := b.upsert(t, model.ScheduleRecord{ID: "h", CronExpr: "0 * * * *", CatchupPolicy: model.CatchupLatest})
		b.clock.Set(start.Add(time.Hour + 30*time.Second)) // the 01:00 run is found 30 s late
		b.tickAll(t)
		queuetest.RequireRuns(t, b.store, rec.ID, model.RunEnqueued, "2024-03-09T01:00:00Z")
		require.Zero(t, testutil.ToFloat64(b.sched.metrics.missed))
	})

	t.Run("MaxCatchupPerTick", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &Config{MaxCatchupPerTick: 10}, nil)
		rec := b.upsert(t, model.ScheduleRecord{ID: "m", CronExpr: "* * * * *"})
		b.clock.Set(start.Add(time.Hour))
		b.tickAll(t)
		runs, err := b.store.ListRuns(context.Background(), rec.ID, 1000)
		require.NoError(t, err)
		require.Len(t, runs, 10)
		for range 6 {
			b.clock.Advance(time.Second)
			b.tickAll(t)
		}
		runs, err = b.store.ListRuns(context.Background(), rec.ID, 1000)
		require.NoError(t, err)
		require.Len(t, runs, 60, "the backlog drains over later ticks, each run once")
	})

	// A skip or queue schedule is planned at each run's jittered fire time,
	// which with a jitter above MISFIRE_GRACE is more than the grace after
	// the run's own time: that is on time, not missed. Under catchup none (or
	// latest) a run jittered late must still fire, at its jittered time.
	t.Run("RunsJitteredPastTheMisfireGraceAreNotMissed", func(t *testing.T) {
		t.Parallel()
		for _, policy := range []model.OverlapPolicy{model.OverlapSkip, model.OverlapQueue} {
			for _, catchup := range []model.CatchupPolicy{model.CatchupNone, model.CatchupLatest, model.CatchupFireImmediately} {
				t.Run(string(policy)+"/"+string(catchup), func(t *testing.T) {
					t.Parallel()
					b := setup(t, nil, nil)
					ctx := context.Background()
					id := "j-" + string(policy) + string(catchup)
					rec := b.upsert(t, model.ScheduleRecord{ID: id, CronExpr: "*/5 * * * *", JitterMs: 60000,
						OverlapPolicy: policy, CatchupPolicy: catchup})
					end := start.Add(58*time.Minute + 30*time.Second) // before 01:00 can fire (jitter ≤ 60 s)
					for b.clock.Now().Before(end) {
						b.clock.Advance(time.Second)
						b.tickAll(t)
						runs, err := b.store.ListRuns(ctx, id, 100)
						require.NoError(t, err)
						for _, r := range runs {
							if r.Status == model.RunEnqueued { // the executor ends it at once
								require.False(t, r.FireAt.After(b.clock.Now()), "%s planned before its fire time %s", r.RunAt, r.FireAt)
								b.report(t, id, r.IdempotencyKey, model.RunSuccess)
							}
						}
					}
					want := expected(t, rec, start, end)
					queuetest.RequireRuns(t, b.store, id, model.RunSuccess, want...)
				})
			}
		}
	})

	// A run jittered to before its schedule existed (or was resumed) was never
	// missable: with ticks every second from then on, catch-up "none" drops
	// nothing. It fires when the schedule came to be, not missed.
	t.Run("RunsJitteredBeforeTheScheduleBeganAreNotMissed", func(t *testing.T) {
		t.Parallel()
		const jitter = 5 * time.Minute
		// A schedule id whose run at minute m is jittered more than 70 s early.
		earlyAt := func(m time.Time) string {
			for i := 0; ; i++ {
				if id := fmt.Sprintf("jn%d", i); model.JitterOffset(model.IdempotencyKey(id, m), jitter) < -70*time.Second {
					return id
				}
			}
		}
		for _, resume := range []bool{false, true} {
			t.Run(fmt.Sprintf("resumed=%v", resume), func(t *testing.T) {
				t.Parallel()
				b := setup(t, nil, &queue.Config{Lookahead: time.Minute})
				began := start
				if resume {
					began = start.Add(time.Hour)
				}
				first := began.Add(time.Minute)
				id := earlyAt(first)
				rec := b.upsert(t, model.ScheduleRecord{ID: id, CronExpr: "* * * * *", JitterMs: jitter.Milliseconds(),
					CatchupPolicy: model.CatchupNone})
				if resume {
					_, err := b.store.SetPaused(context.Background(), id, true)
					require.NoError(t, err)
					b.runUntil(t, began, time.Minute)
					_, err = b.store.SetPaused(context.Background(), id, false)
					require.NoError(t, err)
				}
				end := began.Add(10 * time.Minute)
				b.runUntil(t, end.Add(jitter+time.Second), time.Second)
				runs, err := b.store.ListRuns(context.Background(), id, 1000)
				require.NoError(t, err)
				var got []time.Time
				for _, r := range runs {
					if !r.RunAt.After(end) {
						got = append(got, r.RunAt)
					}
					if r.RunAt.Equal(first) {
						require.True(t, r.FireAt.Equal(began), "the first run fires at %s, want when the schedule began (%s)", r.FireAt, began)
					}
				}
				slices.SortFunc(got, time.Time.Compare)
				require.Equal(t, expected(t, rec, began, end), times(got))
			})
		}
	})
}
