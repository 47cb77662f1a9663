package launcher

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
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
	t.Cleanup(l.Stop)
	skipped := b.waitStatus(t, model.IdempotencyKey(id, first), model.RunSkipped)
	require.Contains(t, skipped.Error, "schedule changed")

	b.tick(t, sched)
	run, err := b.store.GetScheduleRun(ctx, id, model.IdempotencyKey(id, newAt))
	require.NoError(t, err, "the run at 00:05:45, held behind 00:01, has no record")
	require.Equal(t, b.clock.Now(), run.FireAt,
		"00:05:45 waited behind 00:01 (SKIPPED: schedule changed) and fires %s after its release, spread again", run.FireAt.Sub(b.clock.Now()))
}
