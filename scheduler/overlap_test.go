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

// TestOverlap checks the overlap policies skip and queue: what a run due
// while another is in flight becomes, and when a held run starts.
func TestOverlap(t *testing.T) {
	t.Parallel()

	t.Run("Skip", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, nil)
		rec := b.upsert(t, model.ScheduleRecord{ID: "sk", CronExpr: "* * * * *", OverlapPolicy: model.OverlapSkip})
		b.runUntil(t, start.Add(3*time.Minute), 15*time.Second)
		runs := queuetest.RequireRuns(t, b.store, rec.ID, "", "2024-03-09T00:01:00Z", "2024-03-09T00:02:00Z", "2024-03-09T00:03:00Z")
		require.Equal(t, model.RunEnqueued, runs[0].Status)
		require.Equal(t, model.RunSkipped, runs[1].Status)
		require.Contains(t, runs[1].Error, "still in flight")
		require.Equal(t, model.RunSkipped, runs[2].Status)
		require.Equal(t, 1, queuetest.CountTasks(t, b.rdb, "chronos"), "skipped runs get no task")

		b.report(t, rec.ID, runs[0].IdempotencyKey, model.RunSuccess)
		b.runUntil(t, start.Add(4*time.Minute), 15*time.Second)
		runs = queuetest.RequireRuns(t, b.store, rec.ID, "", "2024-03-09T00:01:00Z", "2024-03-09T00:02:00Z",
			"2024-03-09T00:03:00Z", "2024-03-09T00:04:00Z")
		require.Equal(t, model.RunEnqueued, runs[3].Status, "after the in-flight run ended, the next one starts")
	})

	t.Run("QueueHoldsThenEmitsNext", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, nil)
		rec := b.upsert(t, model.ScheduleRecord{ID: "q", CronExpr: "* * * * *", OverlapPolicy: model.OverlapQueue})
		b.runUntil(t, start.Add(3*time.Minute), 15*time.Second)
		runs := queuetest.RequireRuns(t, b.store, rec.ID, model.RunEnqueued, "2024-03-09T00:01:00Z")

		b.report(t, rec.ID, runs[0].IdempotencyKey, model.RunStarted)
		b.tickAll(t)
		queuetest.RequireRuns(t, b.store, rec.ID, "", "2024-03-09T00:01:00Z")

		// The run ends at 00:03:20: the held 00:02 run starts at once.
		b.clock.Advance(20 * time.Second)
		b.report(t, rec.ID, runs[0].IdempotencyKey, model.RunSuccess)
		b.tickAll(t)
		runs = queuetest.RequireRuns(t, b.store, rec.ID, "", "2024-03-09T00:01:00Z", "2024-03-09T00:02:00Z")
		require.Equal(t, model.RunEnqueued, runs[1].Status)
		require.Equal(t, start.Add(3*time.Minute+20*time.Second), *runs[1].EnqueuedAt)
	})

	// A run held behind a long in-flight run ("queue") is not missed: when
	// that run ends, it starts, whatever the catch-up policy, which applies
	// to the times after it only.
	t.Run("QueuedRunStartsWhateverTheCatchupPolicy", func(t *testing.T) {
		t.Parallel()
		for policy, want := range map[model.CatchupPolicy][]string{
			// 00:03 and 00:04 are dropped (00:04 the record of both,
			// SKIPPED catchup_dropped); 00:05 comes after 00:02 ended.
			model.CatchupNone: {"2024-03-09T00:01:00Z", "2024-03-09T00:02:00Z", "2024-03-09T00:04:00Z", "2024-03-09T00:05:00Z"},
			// 00:04, the latest of those missed, waits for 00:02; 00:03
			// is dropped (SKIPPED catchup_dropped).
			model.CatchupLatest: {"2024-03-09T00:01:00Z", "2024-03-09T00:02:00Z", "2024-03-09T00:03:00Z", "2024-03-09T00:04:00Z"},
		} {
			t.Run(string(policy), func(t *testing.T) {
				t.Parallel()
				b := setup(t, nil, nil)
				rec := b.upsert(t, model.ScheduleRecord{ID: "q", CronExpr: "* * * * *",
					OverlapPolicy: model.OverlapQueue, CatchupPolicy: policy})
				b.runUntil(t, start.Add(4*time.Minute+30*time.Second), 5*time.Second) // 00:01 runs until 00:04:30
				first := model.IdempotencyKey(rec.ID, start.Add(time.Minute))
				b.report(t, rec.ID, first, model.RunSuccess)
				b.clock.Advance(time.Second)
				b.tickAll(t)
				// The backlog behind it is judged at once: the record of
				// the runs dropped is written with the queued run.
				runs := queuetest.RequireRuns(t, b.store, rec.ID, "", want[:3]...)
				require.Equal(t, model.RunEnqueued, runs[1].Status, "the queued run starts when the one in flight ends")

				b.report(t, rec.ID, runs[1].IdempotencyKey, model.RunSuccess)
				b.runUntil(t, start.Add(6*time.Minute+5*time.Second), 5*time.Second)
				runs = queuetest.RequireRuns(t, b.store, rec.ID, "", want...)
				require.Equal(t, model.ReasonCatchupDropped, runs[2].Reason)
				require.Equal(t, model.RunEnqueued, runs[3].Status)
				keys := queuetest.Keys(t, b.rdb, "chronos:*:sched:q")
				require.Len(t, keys, 1)
				require.False(t, b.rdb.HExists(context.Background(), keys[0], "rel").Val(), "the release mark outlived its plan")
			})
		}
	})

	// Released late from its hold, a "spread" schedule's queued run starts at
	// once too: spreading it over the next minute would hold the schedule that
	// long (and, behind each late run, again).
	t.Run("QueuedRunReleasedWithSpreadStartsAtOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, nil)
		rec := b.upsert(t, model.ScheduleRecord{ID: "q", CronExpr: "* * * * *",
			OverlapPolicy: model.OverlapQueue, CatchupPolicy: model.CatchupSpread})
		b.runUntil(t, start.Add(4*time.Minute+30*time.Second), 5*time.Second) // 00:01 runs until 00:04:30
		b.report(t, rec.ID, model.IdempotencyKey(rec.ID, start.Add(time.Minute)), model.RunSuccess)
		b.clock.Advance(time.Second)
		b.tickAll(t)
		runs := queuetest.RequireRuns(t, b.store, rec.ID, "", "2024-03-09T00:01:00Z", "2024-03-09T00:02:00Z")
		require.Equal(t, model.RunEnqueued, runs[1].Status)
		require.Equal(t, b.clock.Now(), runs[1].FireAt, "the released run fires %s after its release", runs[1].FireAt.Sub(b.clock.Now()))
	})

	// A "skip" or "queue" schedule decides at a run's jittered fire time
	// whether the run before it is in flight: a run with a negative offset is
	// planned (here held) at its fire time, not at its unjittered time, and
	// released by the run before it ending, it starts at once.
	t.Run("HeldRunKeepsItsJitteredFireTime", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, nil)
		const jitter = 30 * time.Second
		second := start.Add(2 * time.Minute)
		var id string
		var off time.Duration
		for i := 0; ; i++ { // an id whose 00:02 run fires at least 10 s early
			id = fmt.Sprintf("qj%d", i)
			if off = model.JitterOffset(model.IdempotencyKey(id, second), jitter); off < -10*time.Second {
				break
			}
		}
		rec := b.upsert(t, model.ScheduleRecord{ID: id, CronExpr: "* * * * *", JitterMs: jitter.Milliseconds(),
			OverlapPolicy: model.OverlapQueue})
		b.runUntil(t, second.Add(off).Add(-time.Second), time.Second)
		first := queuetest.RequireRuns(t, b.store, rec.ID, model.RunEnqueued, "2024-03-09T00:01:00Z")
		b.runUntil(t, second.Add(off).Add(2*time.Second), time.Second) // 00:02 came due: held behind 00:01

		b.report(t, rec.ID, first[0].IdempotencyKey, model.RunSuccess)
		b.tickAll(t)
		runs := queuetest.RequireRuns(t, b.store, rec.ID, "", "2024-03-09T00:01:00Z", "2024-03-09T00:02:00Z")
		require.Equal(t, model.RunEnqueued, runs[1].Status)
		require.Equal(t, b.clock.Now(), *runs[1].EnqueuedAt, "enqueued when released")
		require.Equal(t, second.Add(off), runs[1].FireAt)
	})
}

// TestRunTimeout checks that RUN_TIMEOUT fails a run left in flight and
// what happens to the run held behind it.
func TestRunTimeout(t *testing.T) {
	t.Parallel()

	t.Run("ReleasesSchedule", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &Config{RunTimeout: 5 * time.Minute}, nil)
		rec := b.upsert(t, model.ScheduleRecord{ID: "to", CronExpr: "*/2 * * * *", OverlapPolicy: model.OverlapQueue})
		// 00:02 runs and never reports; 00:04 is held behind it; at 00:07 the
		// 00:02 run times out, which releases 00:04; at 00:09 that one times out
		// in turn and 00:06 starts.
		b.runUntil(t, start.Add(12*time.Minute+30*time.Second), 30*time.Second)
		runs := queuetest.RequireRuns(t, b.store, rec.ID, "", "2024-03-09T00:02:00Z", "2024-03-09T00:04:00Z",
			"2024-03-09T00:06:00Z")
		require.Equal(t, model.RunFailed, runs[0].Status)
		require.Contains(t, runs[0].Error, "RUN_TIMEOUT")
		require.Equal(t, model.RunFailed, runs[1].Status)
		require.Equal(t, model.RunEnqueued, runs[2].Status)
	})

	// A "queue" run held behind one that RUN_TIMEOUT failed before any
	// launcher started it (every launcher down) was missed as well: catchup
	// none drops it rather than start it minutes late.
	t.Run("ARunHeldBehindARunThatTimedOutUnstartedFollowsTheCatchupPolicy", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &Config{RunTimeout: 5 * time.Minute}, nil)
		rec := b.upsert(t, model.ScheduleRecord{ID: "qn", CronExpr: "* * * * *",
			OverlapPolicy: model.OverlapQueue, CatchupPolicy: model.CatchupNone})
		b.runUntil(t, start.Add(6*time.Minute+30*time.Second), 5*time.Second)
		runs, err := b.store.ListRuns(context.Background(), rec.ID, 100)
		require.NoError(t, err)
		byTime := map[time.Time]*model.Run{}
		for _, r := range runs {
			byTime[r.RunAt] = r
		}
		require.Equal(t, model.RunFailed, byTime[start.Add(time.Minute)].Status, "00:01 timed out")
		require.NotContains(t, byTime, start.Add(2*time.Minute), "00:02, held behind a run that never started, was enqueued late")
	})

	// A "queue" run whose executor calls failed (a launcher is retrying it:
	// still ENQUEUED), or whose first call is in progress (its task active),
	// was being started: when RUN_TIMEOUT fails it, the run held behind it
	// waited, as behind a STARTED one, and starts.
	t.Run("ARunHeldBehindARunBeingRetriedStartsWhenItTimesOut", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := setup(t, &Config{RunTimeout: 5 * time.Minute}, nil)
		ids := []string{"started", "retrying", "launching"}
		for _, id := range ids {
			b.upsert(t, model.ScheduleRecord{ID: id, CronExpr: "*/2 * * * *",
				OverlapPolicy: model.OverlapQueue, CatchupPolicy: model.CatchupNone})
		}
		b.runUntil(t, start.Add(2*time.Minute), 30*time.Second) // 00:02 in flight
		b.report(t, "started", model.IdempotencyKey("started", start.Add(2*time.Minute)), model.RunStarted)
		require.NoError(t, b.store.RecordFailedAttempt(ctx, &queue.TaskPayload{
			IdempotencyKey: model.IdempotencyKey("retrying", start.Add(2*time.Minute)), ScheduleID: "retrying"},
			b.clock.Now().Add(time.Minute), "boom"))
		require.NoError(t, b.rdb.HSet(ctx, b.taskKey("launching", model.IdempotencyKey("launching", start.Add(2*time.Minute))), "state", "active").Err())
		// 00:04 is held behind 00:02; at 00:07 RUN_TIMEOUT fails 00:02.
		b.runUntil(t, start.Add(7*time.Minute+30*time.Second), 30*time.Second)
		for _, id := range ids {
			runs, err := b.store.ListRuns(ctx, id, 100)
			require.NoError(t, err)
			byTime := map[time.Time]*model.Run{}
			for _, r := range runs {
				byTime[r.RunAt] = r
			}
			require.Equal(t, model.RunFailed, byTime[start.Add(2*time.Minute)].Status, "%s: 00:02 timed out", id)
			require.Contains(t, byTime, start.Add(4*time.Minute), "%s: 00:04, held behind 00:02, was dropped", id)
		}
	})
}

// TestReplannedRun checks a run planned a second time after it ended
// (a launcher held it when its schedule was paused and skipped it, then
// the schedule was resumed before its time): it is not in flight, and the
// runs behind it are planned as if nothing were.
func TestReplannedRun(t *testing.T) {
	t.Parallel()

	// Paused, the schedule's run is skipped by the launcher; resumed before
	// that run's time, the schedule plans the same run again. Its record has
	// ended, so it must not become the in-flight run: nothing would release
	// it, and every run until RUN_TIMEOUT would be skipped.
	t.Run("ThatEndedIsNotInFlight", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, nil)
		ctx := context.Background()
		const jitter = 20 * time.Second
		var at time.Time // an hour whose run fires at least 5 s early
		for h := 2; ; h++ {
			at = start.Add(time.Duration(h) * time.Hour)
			if model.JitterOffset(model.IdempotencyKey("w", at), jitter) < -5*time.Second {
				break
			}
		}
		b.clock.Set(at.Add(-time.Hour - time.Minute))
		b.upsert(t, model.ScheduleRecord{ID: "w", CronExpr: "0 * * * *", JitterMs: jitter.Milliseconds(), OverlapPolicy: model.OverlapSkip})
		b.runUntil(t, at.Add(-time.Hour+jitter), time.Second)
		b.report(t, "w", model.IdempotencyKey("w", at.Add(-time.Hour)), model.RunSuccess)
		b.runUntil(t, at.Add(model.JitterOffset(model.IdempotencyKey("w", at), jitter)), time.Second) // its fire time
		key := model.IdempotencyKey("w", at)
		_, err := b.store.GetScheduleRun(ctx, "w", key)
		require.NoError(t, err, "the run at %s is planned", at)

		// A launcher has taken it (fired early), so pausing leaves it to
		// that launcher, which skips it.
		require.NoError(t, b.rdb.HSet(ctx, b.taskKey("w", key), "state", "active").Err())
		_, err = b.store.SetPaused(ctx, "w", true)
		require.NoError(t, err)
		b.report(t, "w", key, model.RunSkipped) // as the launcher does while paused
		b.clock.Set(at.Add(-2 * time.Second))   // resumed before the run's own time: it comes again
		_, err = b.store.SetPaused(ctx, "w", false)
		require.NoError(t, err)
		b.runUntil(t, at.Add(time.Hour+time.Minute), time.Second)

		r, err := b.store.GetScheduleRun(ctx, "w", model.IdempotencyKey("w", at.Add(time.Hour)))
		require.NoError(t, err)
		require.Equal(t, model.RunEnqueued, r.Status, "nothing is in flight: %s", r.Error)
	})

	// The same re-planned run that ended, but found in one plan with a later
	// run (the scheduler was down meanwhile): the plan decided the later run
	// (held for "queue", SKIPPED for "skip") as if the ended run were in
	// flight. Nothing was: the later run must be planned as if nothing were,
	// not held for ever or skipped.
	t.Run("ThatEndedDoesNotHoldOrSkipTheNextInOnePlan", func(t *testing.T) {
		t.Parallel()
		for _, policy := range []model.OverlapPolicy{model.OverlapQueue, model.OverlapSkip} {
			t.Run(string(policy), func(t *testing.T) {
				t.Parallel()
				b := setup(t, nil, nil)
				ctx := context.Background()
				const jitter = 30 * time.Second
				second := start.Add(2 * time.Minute)
				var id string
				var off time.Duration
				for i := 0; ; i++ { // an id whose 00:02 run fires at least 10 s early
					id = fmt.Sprintf("%s%d", policy, i)
					if off = model.JitterOffset(model.IdempotencyKey(id, second), jitter); off < -10*time.Second {
						break
					}
				}
				b.clock.Set(second.Add(off).Add(-5 * time.Second))
				b.upsert(t, model.ScheduleRecord{ID: id, CronExpr: "* * * * *", JitterMs: jitter.Milliseconds(), OverlapPolicy: policy})
				b.runUntil(t, second.Add(off).Add(time.Second), time.Second)
				key := model.IdempotencyKey(id, second)
				queuetest.RequireRuns(t, b.store, id, model.RunEnqueued, "2024-03-09T00:02:00Z")

				b.skipWhilePaused(t, id, key) // before 00:02: it is next again

				// The scheduler is down until 00:04:05.
				b.clock.Set(start.Add(4*time.Minute + 5*time.Second))
				b.tickAll(t)
				b.runUntil(t, start.Add(6*time.Minute), 5*time.Second)
				for _, m := range []time.Duration{3, 4, 5} {
					r, err := b.store.GetScheduleRun(ctx, id, model.IdempotencyKey(id, start.Add(m*time.Minute)))
					require.NoError(t, err, "the 00:0%d run is planned", m)
					if policy == model.OverlapSkip && m > 3 {
						continue // the 00:03 run is in flight (no launcher here): these are skipped
					}
					require.Equal(t, model.RunEnqueued, r.Status, "00:0%d: %s", m, r.Error)
					if policy == model.OverlapQueue {
						break // 00:04 waits for 00:03
					}
				}
			})
		}
	})

	// A plan cut at a re-planned run that ended is planned again a tick later;
	// the run behind it, found on time (within MISFIRE_GRACE) by the cut plan,
	// must not be judged missed by then and dropped under catchup none.
	t.Run("ARunBehindACutPlanIsNotJudgedMissedAgain", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, nil)
		ctx := context.Background()
		const jitter = 90 * time.Second
		r, nb := start.Add(2*time.Minute), start.Add(3*time.Minute)
		var id string
		var fr, fb time.Time
		for i := 0; ; i++ { // R (00:02) fires 1-55 s early, B (00:03) 1-300 ms after R
			id = fmt.Sprintf("cut%d", i)
			fr = r.Add(model.JitterOffset(model.IdempotencyKey(id, r), jitter))
			fb = nb.Add(model.JitterOffset(model.IdempotencyKey(id, nb), jitter))
			if d := fb.Sub(fr); fr.Before(r.Add(-time.Second)) && fr.After(r.Add(-55*time.Second)) && d > 0 && d <= 300*time.Millisecond {
				break
			}
		}
		b.clock.Set(start.Add(time.Minute + time.Second))
		b.upsert(t, model.ScheduleRecord{ID: id, CronExpr: "* * * * *", JitterMs: jitter.Milliseconds(),
			OverlapPolicy: model.OverlapSkip, CatchupPolicy: model.CatchupNone})
		b.clock.Set(fr)
		b.tickAll(t)
		keyR := model.IdempotencyKey(id, r)
		queuetest.RequireRuns(t, b.store, id, model.RunEnqueued, "2024-03-09T00:02:00Z")
		b.skipWhilePaused(t, id, keyR) // before 00:02: it is next again

		// The scheduler next ticks 9.5 s after B's fire time: B is on time.
		b.clock.Set(fb.Add(9500 * time.Millisecond))
		b.tickAll(t)
		b.clock.Advance(time.Second)
		b.tickAll(t)
		rb, err := b.store.GetScheduleRun(ctx, id, model.IdempotencyKey(id, nb))
		require.NoError(t, err, "the 00:03 run, found 9.5 s after its fire time, is planned")
		require.Equal(t, model.RunEnqueued, rb.Status, rb.Error)
	})
}
