package launcher

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
	"github.com/chronos-sched/chronos/scheduler"
)

// ledgerCount reads the store's count of runs ended with reason r
// (chronos_runs_skipped_total or chronos_runs_failed_total), as a
// process's /metrics shows it.
func ledgerCount(t *testing.T, store *queue.Store, r model.RunReason) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	require.NoError(t, store.RegisterMetrics(reg))
	name := "chronos_runs_skipped_total"
	if r.Status() == model.RunFailed {
		name = "chronos_runs_failed_total"
	}
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == string(r) {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("%s{reason=%q} not exported", name, r)
	return 0
}

// startLauncher starts a launcher on b's store with executor ex.
func (b *testBundle) startLauncher(t *testing.T, ex Executor) *Launcher {
	t.Helper()
	l, err := New(b.store, &Config{Executor: ex, ShutdownTimeout: time.Second, ArchiveSweepInterval: 20 * time.Millisecond}, nil, nil)
	require.NoError(t, err)
	require.NoError(t, l.Start(context.Background()))
	stopAtCleanup(t, l)
	return l
}

// requireReason checks a run's status and reason, and that the store
// counted it under that reason once.
func requireReason(t *testing.T, store *queue.Store, run *model.Run, want model.RunReason) {
	t.Helper()
	require.Equal(t, want.Status(), run.Status, "%s: %s", run.IdempotencyKey, run.Error)
	require.Equal(t, want, run.Reason, "%s: %s", run.IdempotencyKey, run.Error)
	require.NotEmpty(t, run.Error, "a reason comes with words")
	// The store counts when the script's answer reaches it, a moment
	// after the record shows the run ended: on a loaded machine a check
	// right after the record saw 0 (before and after issue 27's launcher
	// change, TestLedgerReasons -count=30).
	require.Eventually(t, func() bool { return ledgerCount(t, store, want) == 1.0 }, 5*time.Second, 10*time.Millisecond,
		"%s counted once", want)
}

// TestLedgerReasons produces each reason of the run ledger by the
// situation that causes it (a schedule paused, deleted or changed, a
// run in flight, an outage, an executor's answer, ...), never by writing
// a record, and checks the record's reason and its count.
func TestLedgerReasons(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ok := &recordingExecutor{res: Result{Status: model.RunSuccess}}
	hourly := func(id string) *model.ScheduleRecord {
		return &model.ScheduleRecord{ID: id, CronExpr: "0 * * * *", WorkflowID: "wf", Version: "1",
			OverlapPolicy: model.OverlapSkip, CatchupPolicy: model.CatchupFireImmediately}
	}
	// enqueuedAt01 plans rec's 01:00 run with every launcher down: it is
	// ENQUEUED, its task waiting, and in flight.
	enqueuedAt01 := func(t *testing.T, rec *model.ScheduleRecord) (*testBundle, *scheduler.Scheduler, string) {
		t.Helper()
		b, sched := setupLaunchersDown(t, ok)
		b.upsert(t, rec)
		b.clock.Advance(time.Hour)
		b.tick(t, sched)
		key := model.IdempotencyKey(rec.ID, b.clock.Now())
		run, err := b.store.GetScheduleRun(ctx, rec.ID, key)
		require.NoError(t, err)
		require.Equal(t, model.RunEnqueued, run.Status)
		return b, sched, key
	}

	t.Run(string(model.ReasonOverlap), func(t *testing.T) {
		t.Parallel()
		b, _ := setupLaunchersDown(t, ok)
		b.upsert(t, hourly("s"))
		sched, err := scheduler.New(b.store, &scheduler.Config{RunTimeout: 3 * time.Hour}, nil, nil)
		require.NoError(t, err)
		b.clock.Advance(time.Hour)
		b.tick(t, sched)
		b.clock.Advance(time.Hour) // 01:00 still in flight at 02:00
		b.tick(t, sched)
		run, err := b.store.GetScheduleRun(ctx, "s", model.IdempotencyKey("s", b.clock.Now()))
		require.NoError(t, err)
		requireReason(t, b.store, run, model.ReasonOverlap)
	})

	t.Run(string(model.ReasonPaused), func(t *testing.T) {
		t.Parallel()
		b, _, key := enqueuedAt01(t, hourly("s"))
		_, err := b.store.SetPaused(ctx, "s", true)
		require.NoError(t, err)
		run, err := b.store.GetScheduleRun(ctx, "s", key)
		require.NoError(t, err)
		requireReason(t, b.store, run, model.ReasonPaused)
	})

	// Paused while a launcher retries the run's executor call: the pause
	// leaves it to that launcher, which skips it on its retry.
	t.Run(string(model.ReasonPaused)+" at launch", func(t *testing.T) {
		t.Parallel()
		b, _, key := enqueuedAt01(t, hourly("s"))
		ex := &flakyExecutor{fail: 1}
		ex.onFail = func() {
			_, err := b.store.SetPaused(ctx, "s", true)
			require.NoError(t, err)
		}
		b.startLauncher(t, ex)
		run := b.waitStatus(t, key, model.RunSkipped)
		requireReason(t, b.store, run, model.ReasonPaused)
		require.Equal(t, "schedule paused before the run started", run.Error)
		require.Equal(t, int32(1), ex.calls.Load(), "not called again once paused")
		require.Equal(t, 1, run.Attempts, "its failed attempt was counted: the pause left it ENQUEUED to the launcher, which skipped it")
	})

	t.Run(string(model.ReasonDeleted), func(t *testing.T) {
		t.Parallel()
		b, _, key := enqueuedAt01(t, hourly("s"))
		require.NoError(t, b.store.DeleteSchedule(ctx, "s"))
		run, err := b.store.GetScheduleRun(ctx, "s", key)
		require.NoError(t, err)
		requireReason(t, b.store, run, model.ReasonDeleted)
	})

	// The launcher finds the schedule changed: its run's time is no
	// longer one of the new timing's fire times.
	t.Run(string(model.ReasonScheduleChanged), func(t *testing.T) {
		t.Parallel()
		rec := hourly("s")
		b, _, key := enqueuedAt01(t, rec)
		rec.CronExpr = "30 * * * *"
		b.upsert(t, rec)
		b.startLauncher(t, ok)
		requireReason(t, b.store, b.waitStatus(t, key, model.RunSkipped), model.ReasonScheduleChanged)
	})

	// The launcher finds the run outside the schedule's new window.
	t.Run(string(model.ReasonOutsideWindow), func(t *testing.T) {
		t.Parallel()
		rec := hourly("s")
		b, _, key := enqueuedAt01(t, rec)
		startAt := b.clock.Now().Add(2 * time.Hour)
		rec.StartAt = &startAt
		b.upsert(t, rec)
		b.startLauncher(t, ok)
		run := b.waitStatus(t, key, model.RunSkipped)
		requireReason(t, b.store, run, model.ReasonOutsideWindow)
		require.Contains(t, run.Error, "outside its window")
	})

	// Every launcher was down past LAUNCH_GRACE; catch-up none drops the
	// run when one comes back.
	t.Run(string(model.ReasonLateAtLaunch), func(t *testing.T) {
		t.Parallel()
		rec := hourly("s")
		rec.CatchupPolicy = model.CatchupNone
		b, _, key := enqueuedAt01(t, rec)
		b.clock.Advance(LaunchGraceDefault + time.Minute)
		b.startLauncher(t, ok)
		requireReason(t, b.store, b.waitStatus(t, key, model.RunSkipped), model.ReasonLateAtLaunch)
	})

	// Every scheduler was down for a day; catch-up none drops the 24 runs
	// missed, with one record for them all.
	t.Run(string(model.ReasonCatchupDropped), func(t *testing.T) {
		t.Parallel()
		b, sched := setupLaunchersDown(t, ok)
		rec := hourly("s")
		rec.CatchupPolicy = model.CatchupNone
		b.upsert(t, rec)
		start := b.clock.Now()
		b.clock.Advance(24*time.Hour + 30*time.Minute)
		b.tick(t, sched)
		runs, err := b.store.ListRuns(ctx, "s", 100)
		require.NoError(t, err)
		require.Len(t, runs, 1, "one record of the runs dropped")
		requireReason(t, b.store, runs[0], model.ReasonCatchupDropped)
		require.Equal(t, start.Add(24*time.Hour), runs[0].RunAt, "the last run dropped")
		require.Contains(t, runs[0].Error, "the runs from "+start.Add(time.Hour).Format(time.RFC3339)+" to "+start.Add(24*time.Hour).Format(time.RFC3339))
		require.Empty(t, queuetest.TaskQueues(t, b.rdb, queue.QueueNameDefault, runs[0].IdempotencyKey), "a record of dropped runs has no task")
	})

	// New York's clocks spring forward from 02:00 to 03:00: the 02:30 of
	// a daily schedule under dst_policy skip (the default) does not
	// exist. The scheduler records it when it plans the next day's run.
	t.Run(string(model.ReasonDSTSkipped), func(t *testing.T) {
		t.Parallel()
		b, sched := setupLaunchersDown(t, ok)
		gapEnd := time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC)
		b.clock.Set(gapEnd.Add(-2 * time.Hour))
		rec := hourly("s")
		rec.CronExpr, rec.Timezone = "30 2 * * *", "America/New_York"
		b.upsert(t, rec)
		b.clock.Set(time.Date(2026, 3, 9, 6, 30, 0, 0, time.UTC)) // 02:30 EDT the day after
		b.tick(t, sched)
		run, err := b.store.GetScheduleRun(ctx, "s", model.DSTSkippedKey("s", gapEnd))
		require.NoError(t, err)
		requireReason(t, b.store, run, model.ReasonDSTSkipped)
		require.Equal(t, gapEnd, run.RunAt.UTC())
		require.Contains(t, run.Error, "local time 2026-03-08T02:30:00 does not exist in America/New_York")
		require.Empty(t, queuetest.TaskQueues(t, b.rdb, queue.QueueNameDefault, run.IdempotencyKey), "a record, no task")
		next, err := b.store.GetScheduleRun(ctx, "s", model.IdempotencyKey("s", b.clock.Now()))
		require.NoError(t, err)
		require.Equal(t, model.RunEnqueued, next.Status, "the day after fires")
	})

	// A manual run was started with the key of the schedule's 01:00 run.
	t.Run(string(model.ReasonManualKeyTaken), func(t *testing.T) {
		t.Parallel()
		b, sched := setupLaunchersDown(t, ok)
		b.upsert(t, hourly("s"))
		key := model.IdempotencyKey("s", b.clock.Now().Add(time.Hour))
		_, started, err := b.store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
			ScheduledFor: b.clock.Now().Add(time.Hour), IdempotencyKey: key})
		require.NoError(t, err)
		require.True(t, started)
		b.clock.Advance(time.Hour)
		b.tick(t, sched)
		run, err := b.store.GetScheduleRun(ctx, "s", key)
		require.NoError(t, err)
		requireReason(t, b.store, run, model.ReasonManualKeyTaken)
	})

	// The executor answers 4xx.
	t.Run(string(model.ReasonExecutorRejected), func(t *testing.T) {
		t.Parallel()
		url, calls := failingExecutor(t, http.StatusUnprocessableEntity)
		b, _, key := enqueuedAt01(t, hourly("s"))
		b.startLauncher(t, NewHTTPExecutor(url, 5*time.Second, 4))
		requireReason(t, b.store, b.waitStatus(t, key, model.RunFailed), model.ReasonExecutorRejected)
		require.Equal(t, 1, calls())
	})

	// The executor answers 503 to every attempt.
	t.Run(string(model.ReasonRetriesExhausted), func(t *testing.T) {
		t.Parallel()
		url, calls := failingExecutor(t, http.StatusServiceUnavailable)
		b := setup(t, NewHTTPExecutor(url, 5*time.Second, 4), &queue.Config{TaskMaxRetry: 1})
		b.manual(t, "key-r", true)
		run := b.waitStatus(t, "key-r", model.RunFailed)
		requireReason(t, b.store, run, model.ReasonRetriesExhausted)
		require.Contains(t, run.Error, "after 2 attempts")
		require.Equal(t, 2, calls())
	})

	// The run stays in flight past RUN_TIMEOUT (every launcher down).
	t.Run(string(model.ReasonRunTimeout), func(t *testing.T) {
		t.Parallel()
		b, sched, key := enqueuedAt01(t, hourly("s"))
		b.clock.Advance(scheduler.RunTimeoutDefault + time.Minute)
		b.tick(t, sched)
		run, err := b.store.GetScheduleRun(ctx, "s", key)
		require.NoError(t, err)
		requireReason(t, b.store, run, model.ReasonRunTimeout)
	})

	// asynq archived the run's task before any launcher took it.
	t.Run(string(model.ReasonLaunchAbandoned), func(t *testing.T) {
		t.Parallel()
		b, _ := setupLaunchersDown(t, ok)
		later := time.Now().Add(24 * time.Hour).Truncate(time.Second) // asynq holds it, by the real clock
		_, _, err := b.store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u", ScheduledFor: later, IdempotencyKey: "key-a"})
		require.NoError(t, err)
		require.NoError(t, asynq.NewInspectorFromRedisClient(b.rdb).ArchiveTask(queuetest.TaskQueue(b.rdb, queue.QueueNameDefault, "key-a"), "key-a"))
		b.startLauncher(t, ok)
		requireReason(t, b.store, b.waitStatus(t, "key-a", model.RunFailed), model.ReasonLaunchAbandoned)
	})

	// The schedule names a workflow version nobody registered.
	t.Run(string(model.ReasonWorkflowMissing), func(t *testing.T) {
		t.Parallel()
		rec := hourly("s")
		rec.Version = "9"
		b, _, key := enqueuedAt01(t, rec)
		b.startLauncher(t, ok)
		requireReason(t, b.store, b.waitStatus(t, key, model.RunFailed), model.ReasonWorkflowMissing)
	})
}

// TestLedgerCountsEveryReason: every reason is exported from the start, at
// 0, so a dashboard's rate over it exists before its first run.
func TestLedgerCountsEveryReason(t *testing.T) {
	t.Parallel()
	b, _ := setupLaunchersDown(t, &recordingExecutor{})
	for _, r := range model.RunReasons() {
		require.Zero(t, ledgerCount(t, b.store, r), r)
	}
	require.NoError(t, b.store.RegisterMetrics(nil))
	reg := prometheus.NewRegistry()
	require.NoError(t, b.store.RegisterMetrics(reg))
	require.NoError(t, b.store.RegisterMetrics(reg), "registering the process's store again is a no-op")
}
