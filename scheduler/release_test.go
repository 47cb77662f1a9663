package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// A "queue" schedule held behind its in-flight run whose timing changes
// (upsert) or that is paused and resumed meanwhile has a new next time, in
// the future: no run waits behind the one in flight any more. When that run
// ends, the schedule must plan its next run at the run's act time (its
// jittered fire time), as any queue run; it must not be "released" (rel) and
// planned at once, up to 2·jitter before its fire time.
func TestANewTimingsRunIsNotReleasedBeforeItsTime(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"upsert", "resume"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			const jitter = 20 * time.Second
			ctx := context.Background()
			b := setup(t, nil, nil)
			newAt := start.Add(2*time.Minute + 30*time.Second) // next fire time after the change
			cron := "30 * * * * *"
			if how == "resume" {
				newAt = start.Add(3 * time.Minute)
				cron = "0 * * * * *"
			}
			var id string
			for i := 0; ; i++ { // newAt jittered at least 10 s late
				id = fmt.Sprintf("rq%d", i)
				if model.JitterOffset(model.IdempotencyKey(id, newAt), jitter) > 10*time.Second {
					break
				}
			}
			rec := model.ScheduleRecord{ID: id, CronExpr: "0 * * * * *", OverlapPolicy: model.OverlapQueue}
			if how == "resume" {
				rec.JitterMs = jitter.Milliseconds()
				// 00:01's offset is irrelevant: it only has to be in flight
				// at 00:02 + jitter.
			}
			b.upsert(t, rec)
			b.runUntil(t, start.Add(time.Minute+25*time.Second), time.Second) // 00:01 in flight
			first := model.IdempotencyKey(id, start.Add(time.Minute))
			b.report(t, id, first, model.RunStarted)
			b.runUntil(t, start.Add(2*time.Minute+25*time.Second), time.Second) // 00:02 held behind it
			runs, err := b.store.ListRuns(ctx, id, 10)
			require.NoError(t, err)
			require.Len(t, runs, 1, "00:02 is held")

			switch how {
			case "upsert": // a new timing (and jitter) while held
				rec.CronExpr, rec.JitterMs = cron, jitter.Milliseconds()
				b.upsert(t, rec)
			case "resume": // paused and resumed while held
				_, err := b.store.SetPaused(ctx, id, true)
				require.NoError(t, err)
				b.clock.Set(start.Add(2*time.Minute + 40*time.Second))
				_, err = b.store.SetPaused(ctx, id, false)
				require.NoError(t, err)
			}
			b.clock.Advance(time.Second)
			b.report(t, id, first, model.RunSuccess) // the run in flight ends
			fire := newAt.Add(model.JitterOffset(model.IdempotencyKey(id, newAt), jitter))
			for b.clock.Now().Before(fire.Add(-time.Second)) {
				b.clock.Advance(time.Second)
				b.tickAll(t)
				runs, err := b.store.ListRuns(ctx, id, 10)
				require.NoError(t, err)
				for _, r := range runs {
					require.False(t, r.RunAt.Equal(newAt),
						"the run at %s (fire %s) was planned at %s, %s before its fire time, as if it had waited behind the run in flight",
						newAt.Format(time.TimeOnly), r.FireAt.Format(time.TimeOnly), r.CreatedAt.Format(time.TimeOnly), r.FireAt.Sub(r.CreatedAt))
				}
			}
			b.runUntil(t, fire.Add(2*time.Second), time.Second)
			runs, err = b.store.ListRuns(ctx, id, 10)
			require.NoError(t, err)
			require.Len(t, runs, 2)
			require.Equal(t, newAt, runs[0].RunAt.UTC())
			require.Equal(t, fire, runs[0].FireAt.UTC())
		})
	}
}

// A "queue" run whose task asynq gave up on before any launcher took it
// (every launcher down, then the task archived from the dashboard) is
// FAILED by the launchers' sweep; it never ran, so the run held behind it
// was missed too and follows the catch-up policy, as when RUN_TIMEOUT
// fails it.
func TestARunHeldBehindAnAbandonedUnstartedRunFollowsTheCatchupPolicy(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	rec := b.upsert(t, model.ScheduleRecord{ID: "qa", CronExpr: "* * * * *",
		OverlapPolicy: model.OverlapQueue, CatchupPolicy: model.CatchupNone})
	b.runUntil(t, start.Add(6*time.Minute+30*time.Second), 5*time.Second)
	_, err := b.store.UpdateRunStatus(context.Background(), model.IdempotencyKey(rec.ID, start.Add(time.Minute)),
		queue.StatusUpdate{Status: model.RunFailed, From: model.RunEnqueued, Error: "launch abandoned", Release: queue.ReleaseAbandoned})
	require.NoError(t, err)
	b.runUntil(t, start.Add(6*time.Minute+40*time.Second), 5*time.Second)
	_, _, err = b.store.GetRun(context.Background(), model.IdempotencyKey(rec.ID, start.Add(2*time.Minute)))
	require.ErrorIs(t, err, queue.ErrNotFound, "00:02, held behind a run that never started, was enqueued late")
}

// A jitter raised on a running schedule can put its next run's jittered
// fire time before the upsert (its timing, so its anchor, is unchanged):
// that run fires at the upsert, not judged missed and dropped (catchup
// none), as after a resume or a timing change.
func TestRunsJitteredBeforeAJitterChangeAreNotMissed(t *testing.T) {
	t.Parallel()
	const jitter = 5 * time.Minute
	second := start.Add(2 * time.Minute)
	var id string
	for i := 0; ; i++ { // 00:02 jittered to before 00:00:50
		if id = fmt.Sprintf("jc%d", i); model.JitterOffset(model.IdempotencyKey(id, second), jitter) < -70*time.Second {
			break
		}
	}
	b := setup(t, nil, nil)
	rec := model.ScheduleRecord{ID: id, CronExpr: "* * * * *", OverlapPolicy: model.OverlapSkip, CatchupPolicy: model.CatchupNone}
	b.upsert(t, rec)
	b.runUntil(t, start.Add(time.Minute+30*time.Second), time.Second)
	b.report(t, id, model.IdempotencyKey(id, start.Add(time.Minute)), model.RunSuccess)
	rec.JitterMs = jitter.Milliseconds()
	b.upsert(t, rec)
	b.runUntil(t, start.Add(3*time.Minute), time.Second)
	run, err := b.store.GetScheduleRun(context.Background(), id, model.IdempotencyKey(id, second))
	require.NoError(t, err, "the run at 00:02 was dropped as missed")
	require.Equal(t, start.Add(time.Minute+30*time.Second), run.FireAt, "00:02 fires at the jitter change")
}

// A "queue" schedule held behind its run in flight that is changed to
// "allow" must start every run from then on (README, Policies: allow
// "start every run"), and one changed to "skip" must record the runs due
// while that run is in flight SKIPPED: the hold (held, and its +inf due
// score) must not outlive the policy change, which would leave the
// schedule waiting for the run in flight, up to RUN_TIMEOUT.
func TestAHeldQueueScheduleChangedToAnotherOverlapPolicyIsNotHeld(t *testing.T) {
	t.Parallel()
	for _, to := range []model.OverlapPolicy{model.OverlapAllow, model.OverlapSkip} {
		t.Run(string(to), func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil, nil)
			rec := model.ScheduleRecord{ID: "h", CronExpr: "* * * * *", OverlapPolicy: model.OverlapQueue}
			b.upsert(t, rec)
			b.runUntil(t, start.Add(2*time.Minute+30*time.Second), 10*time.Second) // 00:01 in flight, 00:02 held
			queuetest.RequireRuns(t, b.store, "h", model.RunEnqueued, "2024-03-09T00:01:00Z")

			rec.OverlapPolicy = to
			b.upsert(t, rec)
			b.runUntil(t, start.Add(5*time.Minute+30*time.Second), 10*time.Second)
			runs, err := b.store.ListRuns(context.Background(), "h", 100)
			require.NoError(t, err)
			var got []string
			for _, r := range runs {
				got = append(got, r.RunAt.UTC().Format("15:04")+" "+string(r.Status))
			}
			want := map[model.OverlapPolicy][]string{
				model.OverlapAllow: {"00:05 ENQUEUED", "00:04 ENQUEUED", "00:03 ENQUEUED", "00:02 ENQUEUED", "00:01 ENQUEUED"},
				model.OverlapSkip:  {"00:05 SKIPPED", "00:04 SKIPPED", "00:03 SKIPPED", "00:02 SKIPPED", "00:01 ENQUEUED"},
			}[to]
			require.Equal(t, want, got, "runs of a schedule changed from queue to %s while held", to)
		})
	}
}

// A schedule deleted with a run enqueued ahead ("allow", lookahead) and
// created again under its id: that run is not the new schedule's. Its
// record and task are removed, and the new schedule plans the time by its
// own policy: with its own run in flight then, "skip" records it SKIPPED
// and "queue" holds it, where the old run, adopted, was started by a
// launcher alongside (two runs in flight at once). A run the deleted
// schedule left due is recorded SKIPPED.
func TestARecreatedScheduleDoesNotTakeOverTheDeletedOnesRuns(t *testing.T) {
	t.Parallel()
	for _, op := range []model.OverlapPolicy{model.OverlapSkip, model.OverlapQueue, model.OverlapAllow} {
		t.Run(string(op), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := setup(t, nil, &queue.Config{Lookahead: time.Minute})
			b.upsert(t, model.ScheduleRecord{ID: "d", CronExpr: "*/30 * * * * *"})
			b.runUntil(t, start.Add(35*time.Second), 5*time.Second) // 00:00:30 due, 00:01 enqueued ahead
			due, ahead := model.IdempotencyKey("d", start.Add(30*time.Second)), model.IdempotencyKey("d", start.Add(time.Minute))
			for _, k := range []string{due, ahead} {
				r, err := b.store.GetScheduleRun(ctx, "d", k)
				require.NoError(t, err)
				require.Equal(t, model.RunEnqueued, r.Status)
			}

			require.NoError(t, b.store.DeleteSchedule(ctx, "d"))
			b.upsert(t, model.ScheduleRecord{ID: "d", CronExpr: "*/20 * * * * *", OverlapPolicy: op})
			r, _, err := b.store.GetRun(ctx, due)
			require.NoError(t, err)
			require.Equal(t, model.RunSkipped, r.Status, "the deleted schedule's run left due")
			require.Equal(t, "schedule deleted before the run started", r.Error)
			_, _, err = b.store.GetRun(ctx, ahead)
			require.ErrorIs(t, err, queue.ErrNotFound, "the deleted schedule's run ahead is removed")
			require.Zero(t, b.rdb.Exists(ctx, b.taskKey("d", ahead)).Val(), "and its task")

			b.runUntil(t, start.Add(time.Minute+5*time.Second), 5*time.Second) // 00:00:40 in flight at 00:01
			own, err := b.store.GetScheduleRun(ctx, "d", model.IdempotencyKey("d", start.Add(40*time.Second)))
			require.NoError(t, err)
			require.Equal(t, model.RunEnqueued, own.Status, "the new schedule's run at 00:00:40 is in flight")
			r, err = b.store.GetScheduleRun(ctx, "d", ahead)
			switch op {
			case model.OverlapSkip:
				require.NoError(t, err)
				require.Equal(t, model.RunSkipped, r.Status, "00:01, planned by the new skip schedule while 00:00:40 is in flight")
			case model.OverlapQueue:
				require.ErrorIs(t, err, queue.ErrNotFound, "00:01 is held behind 00:00:40, not planned yet")
			case model.OverlapAllow:
				require.NoError(t, err)
				require.Equal(t, model.RunEnqueued, r.Status)
				require.Equal(t, start.Add(time.Minute), r.FireAt, "planned by the new definition (no jitter)")
			}
		})
	}
}

// A run of the deleted schedule that a launcher SKIPPED ahead of its time
// (moved to pending from the dashboard, it found its schedule gone) did
// not run: a schedule created again under the id plans that time afresh,
// rather than take the SKIPPED record for its own run and never run it.
// A run SKIPPED because a manual run took its key is removed too, but the
// manual run's task, which has that key, stays.
func TestARecreatedSchedulePlansAgainATimeALauncherSkippedAhead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, nil, &queue.Config{Lookahead: time.Minute})
	at := func(i int) time.Time { return start.Add(time.Duration(i) * 20 * time.Second) }
	i := 4 // a time whose key lives in another shard than "d", so its SKIPPED record is d's
	for queue.ShardOf(model.IdempotencyKey("d", at(i)), 4) == queue.ShardOf("d", 4) {
		i++
	}
	skipped, taken := model.IdempotencyKey("d", at(i-1)), model.IdempotencyKey("d", at(i))
	_, started, err := b.store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
		ScheduledFor: at(i), IdempotencyKey: taken})
	require.NoError(t, err)
	require.True(t, started)
	b.upsert(t, model.ScheduleRecord{ID: "d", CronExpr: "*/20 * * * * *"})
	b.runUntil(t, at(i-2).Add(5*time.Second), 5*time.Second) // at(i-1) and at(i) planned ahead
	r, err := b.store.GetScheduleRun(ctx, "d", taken)
	require.NoError(t, err)
	require.Equal(t, model.RunSkipped, r.Status, "the manual run has the key")

	// A launcher takes at(i-1) early (moved ahead from the dashboard), so
	// the delete leaves it to that launcher, which skips it: its schedule
	// is gone.
	tkey := b.taskKey("d", skipped)
	dq := "asynq:{" + b.store.RunQueue(queue.ShardOf("d", b.store.Config().Shards)).Name() + "}:"
	require.NoError(t, b.rdb.HSet(ctx, tkey, "state", "active").Err())
	require.NoError(t, b.store.DeleteSchedule(ctx, "d"))
	r, err = b.store.UpdateRunStatus(ctx, skipped, queue.StatusUpdate{Status: model.RunSkipped, From: model.RunEnqueued,
		Error: "schedule deleted"})
	require.NoError(t, err)
	require.Equal(t, model.RunSkipped, r.Status)
	require.NoError(t, b.rdb.ZRem(ctx, dq+"scheduled", skipped).Err())
	require.NoError(t, b.rdb.HSet(ctx, tkey, "state", "completed").Err())
	require.NoError(t, b.rdb.ZAdd(ctx, dq+"completed", redis.Z{Score: float64(at(i + 100).Unix()), Member: skipped}).Err())

	b.upsert(t, model.ScheduleRecord{ID: "d", CronExpr: "*/20 * * * * *"})
	_, _, err = b.store.GetRun(ctx, skipped)
	require.ErrorIs(t, err, queue.ErrNotFound, "the SKIPPED run ahead is removed")
	require.Zero(t, b.rdb.Exists(ctx, tkey).Val(), "and its completed task")
	require.Zero(t, b.rdb.ZScore(ctx, dq+"completed", skipped).Val())
	_, err = b.store.GetScheduleRun(ctx, "d", taken)
	require.ErrorIs(t, err, queue.ErrNotFound, "the run SKIPPED for the manual run's key is removed")
	require.Equal(t, "scheduled", b.rdb.HGet(ctx, queuetest.TaskKey(t, b.rdb, queue.QueueNameDefault, taken), "state").Val(), "the manual run's task stays")

	b.runUntil(t, at(i-2).Add(10*time.Second), 5*time.Second)
	r, err = b.store.GetScheduleRun(ctx, "d", skipped)
	require.NoError(t, err)
	require.Equal(t, model.RunEnqueued, r.Status, "the new schedule plans at(i-1)")
	require.Equal(t, "scheduled", b.rdb.HGet(ctx, tkey, "state").Val(), "with a task")
	r, err = b.store.GetScheduleRun(ctx, "d", taken)
	require.NoError(t, err)
	require.Equal(t, model.RunSkipped, r.Status, "at(i): the manual run still has the key")
}

// A run of the deleted schedule that a launcher holds when the schedule is
// created again (its task active) is left to that launcher: recording it
// SKIPPED, or removing it, would refuse the reports of a run its executor
// may have.
func TestARunALauncherHoldsIsLeftWhenItsScheduleIsCreatedAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, nil, &queue.Config{Lookahead: time.Minute})
	b.upsert(t, model.ScheduleRecord{ID: "d", CronExpr: "* * * * *"})
	b.runUntil(t, start.Add(30*time.Second), 10*time.Second) // 00:01 enqueued ahead
	taken := model.IdempotencyKey("d", start.Add(time.Minute))
	// A launcher has dequeued 00:01 (moved ahead from the dashboard) and
	// read it ENQUEUED: its executor call is under way.
	require.NoError(t, b.rdb.HSet(ctx, b.taskKey("d", taken), "state", "active").Err())
	require.NoError(t, b.store.DeleteSchedule(ctx, "d"))
	b.upsert(t, model.ScheduleRecord{ID: "d", CronExpr: "*/20 * * * * *", OverlapPolicy: model.OverlapSkip})
	b.runUntil(t, start.Add(time.Minute+5*time.Second), 5*time.Second) // the skip plan of 00:01 commits
	_, err := b.store.UpdateRunStatus(ctx, taken, queue.StatusUpdate{Status: model.RunStarted})
	require.NoError(t, err, "the launcher's STARTED report for a run its executor has is refused")
}

// Only the time a queue schedule held is released however late: a next
// time set while it was held (a timing change, a pause and resume) waited
// for nothing, so after a scheduler outage it follows the catch-up policy
// ("none": dropped), whether the run in flight ends under "queue" or after
// a change to "allow" or "skip".
func TestANextTimeSetWhileHeldIsNotReleasedLate(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"timing", "resume"} {
		for _, to := range []model.OverlapPolicy{model.OverlapAllow, model.OverlapSkip, model.OverlapQueue} {
			t.Run(how+"/"+string(to), func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				b := setup(t, nil, nil)
				rec := model.ScheduleRecord{ID: "q", CronExpr: "0 * * * * *", OverlapPolicy: model.OverlapQueue, CatchupPolicy: model.CatchupNone}
				b.upsert(t, rec)
				b.runUntil(t, start.Add(2*time.Minute+25*time.Second), time.Second) // 00:01 in flight, 00:02 held
				first := model.IdempotencyKey("q", start.Add(time.Minute))
				b.report(t, "q", first, model.RunStarted)
				newAt := start.Add(3 * time.Minute)
				switch how {
				case "timing":
					rec.CronExpr = "30 * * * * *"
					b.upsert(t, rec)
					newAt = start.Add(2*time.Minute + 30*time.Second)
				case "resume":
					_, err := b.store.SetPaused(ctx, "q", true)
					require.NoError(t, err)
					_, err = b.store.SetPaused(ctx, "q", false)
					require.NoError(t, err)
				}
				b.clock.Advance(time.Second)
				if to != model.OverlapQueue {
					rec.OverlapPolicy = to
					b.upsert(t, rec)
				}
				b.report(t, "q", first, model.RunSuccess)
				b.clock.Set(start.Add(10 * time.Minute)) // every scheduler down until now
				b.tickAll(t)
				r, err := b.store.GetScheduleRun(ctx, "q", model.IdempotencyKey("q", newAt))
				if err == nil {
					t.Fatalf("run at %s (never held) fired %s late under catchup none: %s",
						newAt.Format(time.TimeOnly), r.FireAt.Sub(newAt), r.Status)
				}
				require.ErrorIs(t, err, queue.ErrNotFound)
			})
		}
	}
}

// A run enqueued ahead of its time (jitter) is the schedule's run in
// flight; a timing change that plans that time again (here a zone with
// the same minutes) plans the same run, which is not behind itself: it
// stays ENQUEUED and in flight, and the next run is SKIPPED or held
// behind it, not behind a run that never starts (seed 432 of the
// simulation recorded it SKIPPED "behind" itself, and every run after it
// SKIPPED for RUN_TIMEOUT).
func TestARunInFlightPlannedAgainByATimingChangeIsNotBehindItself(t *testing.T) {
	t.Parallel()
	const jitter = 30 * time.Second
	second := start.Add(2 * time.Minute)
	var id string
	for i := 0; ; i++ { // 00:02 jittered into [00:01:30, 00:01:40)
		off := model.JitterOffset(model.IdempotencyKey(fmt.Sprintf("ri%d", i), second), jitter)
		if off < -20*time.Second {
			id = fmt.Sprintf("ri%d", i)
			break
		}
	}
	key := model.IdempotencyKey(id, second)
	for _, policy := range []model.OverlapPolicy{model.OverlapSkip, model.OverlapQueue} {
		t.Run(string(policy), func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil, nil)
			b.clock.Advance(time.Minute + 30*time.Second)
			rec := model.ScheduleRecord{ID: id, CronExpr: "* * * * *", OverlapPolicy: policy, JitterMs: jitter.Milliseconds()}
			b.upsert(t, rec)
			b.runUntil(t, start.Add(time.Minute+45*time.Second), time.Second)
			queuetest.RequireRuns(t, b.store, id, model.RunEnqueued, "2024-03-09T00:02:00Z")

			rec.Timezone = "Asia/Kolkata" // a new timing key, the same minutes
			b.upsert(t, rec)
			b.runUntil(t, start.Add(3*time.Minute+45*time.Second), time.Second)
			want := []string{"2024-03-09T00:02:00Z"} // "queue": 00:03 held
			if policy == model.OverlapSkip {
				want = append(want, "2024-03-09T00:03:00Z")
			}
			runs := queuetest.RequireRuns(t, b.store, id, "", want...)
			require.Equal(t, model.RunEnqueued, runs[0].Status, "00:02, planned again, %s", runs[0].Error)
			queuetest.RequireTask(t, b.rdb, "chronos", key)
			if policy == model.OverlapSkip {
				require.Equal(t, model.RunSkipped, runs[1].Status)
				require.Contains(t, runs[1].Error, key, "00:03 is skipped behind 00:02")
			}

			b.report(t, id, key, model.RunSuccess)
			b.runUntil(t, start.Add(4*time.Minute+45*time.Second), time.Second)
			runs, err := b.store.ListRuns(context.Background(), id, 10)
			require.NoError(t, err)
			require.Equal(t, model.RunEnqueued, runs[0].Status, "the run after 00:02 ended is enqueued")
		})
	}
}

// Issue 26, finding 5: a per-second "queue" schedule stalled for 22 s
// (Redis down) must catch up. It releases one held run per tick, so
// before the fix it ran each run just under MISFIRE_GRACE late, forever:
// the runs due behind a released run were not "missed", yet could never
// drain. Now that backlog follows the catch-up policy: none drops it,
// latest keeps its last run; either way the schedule is back on time
// within a few ticks.
func TestAHeldBacklogDrainsAfterAStall(t *testing.T) {
	t.Parallel()
	for _, policy := range []model.CatchupPolicy{model.CatchupNone, model.CatchupLatest} {
		t.Run(string(policy), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := setup(t, nil, nil)
			rec := b.upsert(t, model.ScheduleRecord{ID: "q1s", CronExpr: "* * * * * *",
				OverlapPolicy: model.OverlapQueue, CatchupPolicy: policy})
			// A launcher that runs each run the moment it may start, and
			// ends it at once.
			launch := func() {
				runs, err := b.store.ListRuns(ctx, rec.ID, 1000)
				require.NoError(t, err)
				for _, r := range runs {
					if r.Status == model.RunEnqueued && !r.FireAt.After(b.clock.Now()) {
						b.report(t, rec.ID, r.IdempotencyKey, model.RunSuccess)
					}
				}
			}
			second := func() {
				b.clock.Advance(time.Second)
				b.tickAll(t)
				launch()
			}
			for range 10 {
				second()
			}
			// The stall: no tick, no launch for 22 s.
			b.clock.Advance(22 * time.Second)
			for range 30 {
				second()
			}
			runs, err := b.store.ListRuns(ctx, rec.ID, 1000)
			require.NoError(t, err)
			var late []string
			for _, r := range runs {
				if r.EnqueuedAt != nil && r.EnqueuedAt.After(b.clock.Now().Add(-20*time.Second)) && r.EnqueuedAt.Sub(r.RunAt) > 2*time.Second {
					late = append(late, fmt.Sprintf("%s enqueued %s late", r.RunAt.Format(time.TimeOnly), r.EnqueuedAt.Sub(r.RunAt)))
				}
			}
			require.Empty(t, late, "runs of the last 20 s still behind the stall")
			// Under latest, each run waits a tick for the run before it.
			require.LessOrEqual(t, b.clock.Now().Sub(runs[0].RunAt), time.Second, "the last run %s is behind", runs[0].RunAt.Format(time.TimeOnly))
		})
	}
}
