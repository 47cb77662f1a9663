package launcher

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/scheduler"
)

// A schedule with pause_after_failures 3, run by a real scheduler and a
// real launcher on a real Redis, whose executor answers FAILED: a
// SUCCESS resets the count, and the third FAILED run in a row pauses the
// schedule, which then plans no run.
func TestAutoPauseThroughTheLauncher(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ex := &recordingExecutor{}
	answer := func(st model.RunStatus, msg string) {
		ex.mu.Lock()
		defer ex.mu.Unlock()
		ex.res = Result{RunID: "run-1", Status: st, Error: msg}
	}
	b := setup(t, ex, nil)
	require.NoError(t, b.store.PutWorkflow(ctx, "wf", "1", []byte(`{}`)))
	sched, err := scheduler.New(b.store, nil, nil, nil)
	require.NoError(t, err)
	b.upsert(t, &model.ScheduleRecord{ID: "ap", CronExpr: "0 * * * *", WorkflowID: "wf", Version: "1", UserID: "u",
		OverlapPolicy: model.OverlapSkip, CatchupPolicy: model.CatchupFireImmediately, PauseAfterFailures: 3})
	collector := b.store.AutoPausedCollector()

	// runHour plans the next hour's run and waits for the launcher to
	// record it with want.
	runHour := func(want model.RunStatus) *model.Run {
		t.Helper()
		b.clock.Advance(time.Hour)
		b.tick(t, sched)
		return b.waitStatus(t, model.IdempotencyKey("ap", b.clock.Now()), want)
	}
	requireCount := func(n int) *model.ScheduleRecord {
		t.Helper()
		rec, err := b.store.GetSchedule(ctx, "ap")
		require.NoError(t, err)
		require.Equal(t, n, rec.ConsecutiveFailures)
		return rec
	}

	answer(model.RunFailed, "step a: out of memory")
	run := runHour(model.RunFailed)
	require.Equal(t, model.ReasonExecutorRejected, run.Reason)
	requireCount(1)
	answer(model.RunSuccess, "")
	runHour(model.RunSuccess)
	require.False(t, requireCount(0).Paused, "a SUCCESS resets the count")

	answer(model.RunFailed, "step a: out of memory")
	for n := 1; n <= 2; n++ {
		runHour(model.RunFailed)
		require.False(t, requireCount(n).Paused, "paused after %d failures", n)
	}
	require.Zero(t, testutil.ToFloat64(collector))
	answer(model.RunFailed, "step b: disk full")
	runHour(model.RunFailed)
	rec := requireCount(3)
	require.True(t, rec.Paused, "the third FAILED run in a row pauses it")
	require.Equal(t, model.PausedFailures, rec.PausedReason)
	require.NotNil(t, rec.PausedAt)
	require.Equal(t, b.clock.Now(), rec.PausedAt.UTC())
	require.Contains(t, rec.LastError, "disk full")
	require.Contains(t, rec.PausedNote, "3")
	require.Equal(t, 1.0, testutil.ToFloat64(collector))

	// Paused, it plans nothing, and the executor is not called again.
	b.clock.Advance(time.Hour)
	b.tick(t, sched)
	runs, err := b.store.ListRuns(ctx, "ap", 100)
	require.NoError(t, err)
	require.Len(t, runs, 5)
	ex.mu.Lock()
	defer ex.mu.Unlock()
	require.Len(t, ex.reqs, 5)
}
