package launcher

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// A "queue" schedule with catchup spread: a run missed in a scheduler
// outage is spread over the next minute and holds the schedule meanwhile.
// Its timing changes while that run waits for its spread fire time, so
// when a launcher takes the run it skips it ("schedule changed"). The new
// timing's run that came due meanwhile waited behind it, as behind any run
// in flight: it must start at once (a held run released from its hold
// starts at once whatever the catch-up policy), not be judged missed and
// spread over another minute, holding the schedule that long again.
func TestARunHeldBehindARunSkippedAsChangedStartsAtOnce(t *testing.T) {
	t.Parallel()
	ex := &recordingExecutor{res: Result{Status: model.RunSuccess}}
	b, sched := setupLaunchersDown(t, ex)
	ctx := context.Background()
	t0 := b.clock.Now()
	first := t0.Add(time.Minute)
	newAt := t0.Add(5*time.Minute + 45*time.Second)
	spreadAt := func(id string, at, now time.Time) time.Time { // as plan.go spreads a missed run
		key := model.IdempotencyKey(id, at)
		return now.Add(model.JitterOffset(key, 30*time.Second) + 30*time.Second)
	}
	var id string
	for i := 0; ; i++ { // 00:01 spread past 00:06:15, and 00:05:45 would be spread 10 s+ out
		id = fmt.Sprintf("qs%d", i)
		if spreadAt(id, first, t0.Add(5*time.Minute+30*time.Second)).After(t0.Add(6*time.Minute+15*time.Second)) &&
			spreadAt(id, newAt, t0.Add(6*time.Minute+30*time.Second)).Sub(t0.Add(6*time.Minute+30*time.Second)) > 10*time.Second {
			break
		}
	}
	rec := &model.ScheduleRecord{ID: id, CronExpr: "0 * * * * *", WorkflowID: "wf", Version: "1",
		OverlapPolicy: model.OverlapQueue, CatchupPolicy: model.CatchupSpread, Target: model.TargetWorkflow}
	b.upsert(t, rec)

	// Every scheduler down from 00:00 to 00:05:30: 00:01 to 00:05 are
	// missed; 00:01 is spread past 00:06:15 and in flight, 00:02 held.
	b.clock.Set(t0.Add(5*time.Minute + 30*time.Second))
	b.tick(t, sched)
	runs, err := b.store.ListRuns(ctx, id, 10)
	require.NoError(t, err)
	require.Len(t, runs, 1)
	aFire := runs[0].FireAt
	require.True(t, aFire.After(t0.Add(6*time.Minute+15*time.Second)), "00:01 fires %s", aFire)

	// The timing changes: its next run, 00:05:45, comes due while 00:01
	// waits for its spread fire time (the schedule stays held).
	b.clock.Advance(time.Second)
	rec.CronExpr = "45 * * * * *"
	b.upsert(t, rec)
	for b.clock.Now().Before(aFire) {
		b.clock.Advance(time.Second)
		b.tick(t, sched)
	}

	// At 00:01's fire time a launcher takes it: its time is no fire time
	// any more, so it is SKIPPED, which releases the schedule.
	l, err := New(b.store, &Config{Executor: ex, ShutdownTimeout: time.Second}, nil, nil)
	require.NoError(t, err)
	require.NoError(t, l.Start(ctx))
	stopAtCleanup(t, l)
	skipped := b.waitStatus(t, model.IdempotencyKey(id, first), model.RunSkipped)
	require.Contains(t, skipped.Error, "schedule changed")

	b.tick(t, sched)
	run, err := b.store.GetScheduleRun(ctx, id, model.IdempotencyKey(id, newAt))
	require.NoError(t, err, "the run at 00:05:45, held behind 00:01, has no record")
	require.Equal(t, b.clock.Now(), run.FireAt,
		"00:05:45 waited behind 00:01 (SKIPPED: schedule changed) and fires %s after its release, spread again", run.FireAt.Sub(b.clock.Now()))
}

// As above, but the run skipped as changed had itself waited past
// LAUNCH_GRACE with every launcher down: the run held behind it was missed
// in that outage too, so its schedule's catch-up policy ("none") applies
// to it, as it would had the timing not changed.
func TestAHeldRunBehindALateRunSkippedAsChangedFollowsTheCatchupPolicy(t *testing.T) {
	t.Parallel()
	ex := &recordingExecutor{res: Result{Status: model.RunSuccess}}
	b, sched := setupLaunchersDown(t, ex)
	ctx := context.Background()
	t0 := b.clock.Now()
	rec := &model.ScheduleRecord{ID: "q", CronExpr: "*/10 * * * *", WorkflowID: "wf", Version: "1",
		OverlapPolicy: model.OverlapQueue, CatchupPolicy: model.CatchupNone, Target: model.TargetWorkflow}
	b.upsert(t, rec)
	for b.clock.Now().Before(t0.Add(15 * time.Minute)) {
		b.clock.Advance(time.Minute)
		b.tick(t, sched)
	}
	rec.CronExpr = "5-59/10 * * * *" // at 00:15: 00:10 in flight, next 00:25 (held at its time)
	b.upsert(t, rec)
	for b.clock.Now().Before(t0.Add(52 * time.Minute)) {
		b.clock.Advance(time.Minute)
		b.tick(t, sched)
	}
	l, err := New(b.store, &Config{Executor: ex, ShutdownTimeout: time.Second, LaunchGrace: time.Minute}, nil, nil)
	require.NoError(t, err)
	require.NoError(t, l.Start(ctx))
	stopAtCleanup(t, l)
	b.waitStatus(t, model.IdempotencyKey("q", t0.Add(10*time.Minute)), model.RunSkipped)
	b.tick(t, sched)
	_, err = b.store.GetScheduleRun(ctx, "q", model.IdempotencyKey("q", t0.Add(25*time.Minute)))
	require.ErrorIs(t, err, queue.ErrNotFound, "00:25, missed in the launcher outage, was planned under catchup_policy none")
}

// A "queue" run whose task is archived from the dashboard before any
// launcher tried it did not run: the launchers' sweep fails it, and the
// run held behind it follows the catch-up policy ("none": dropped), as
// when RUN_TIMEOUT fails such a run.
func TestAHeldRunBehindARunArchivedUntriedFollowsTheCatchupPolicy(t *testing.T) {
	t.Parallel()
	ex := &recordingExecutor{res: Result{Status: model.RunSuccess}}
	b, sched := setupLaunchersDown(t, ex)
	ctx := context.Background()
	t0 := b.clock.Now()
	rec := &model.ScheduleRecord{ID: "qa", CronExpr: "* * * * *", WorkflowID: "wf", Version: "1",
		OverlapPolicy: model.OverlapQueue, CatchupPolicy: model.CatchupNone, Target: model.TargetWorkflow}
	b.upsert(t, rec)
	for b.clock.Now().Before(t0.Add(3*time.Minute + 30*time.Second)) { // 00:01 in flight, 00:02 held
		b.clock.Advance(10 * time.Second)
		b.tick(t, sched)
	}
	first := model.IdempotencyKey("qa", t0.Add(time.Minute))
	require.NoError(t, asynq.NewInspectorFromRedisClient(b.rdb).ArchiveTask(queuetest.TaskQueue(b.rdb, queue.QueueNameDefault, first), first))

	l, err := New(b.store, &Config{Executor: ex}, nil, nil)
	require.NoError(t, err)
	_, err = l.sweepArchived(ctx, time.Time{})
	require.NoError(t, err)
	b.waitStatus(t, first, model.RunFailed)
	b.tick(t, sched)
	_, err = b.store.GetScheduleRun(ctx, "qa", model.IdempotencyKey("qa", t0.Add(2*time.Minute)))
	require.ErrorIs(t, err, queue.ErrNotFound, "00:02, held behind a run archived before any launcher tried it, was planned under catchup_policy none")
}
