package launcher

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
	"github.com/chronos-sched/chronos/scheduler"
)

// TestRunKey checks a run key claimed by a manual run and a scheduled run
// both, or outliving its run's record: one run under the key runs, once,
// and no record waits for a task that is not its own.
func TestRunKey(t *testing.T) {
	t.Parallel()

	// A manual run given the idempotency key of a scheduled run not planned
	// yet (to start it early, deduplicated with the schedule) claims the key's
	// task; when the scheduler then plans the run, its record must not be left
	// ENQUEUED for ever with no task to carry it out.
	t.Run("ManualRunWithAScheduledRunsKeyLeavesNoOrphanRecord", func(t *testing.T) {
		t.Parallel()
		for _, sameShard := range []bool{false, true} {
			t.Run(fmt.Sprintf("same shard %v", sameShard), func(t *testing.T) {
				t.Parallel()
				ex := &recordingExecutor{res: Result{Status: model.RunSuccess}}
				b, sched := setupLaunchersDown(t, ex)
				ctx := context.Background()
				start := b.clock.Now()
				var id, key string
				for i := 0; ; i++ { // the schedule's shard and the run key's: the same or not
					id, key = fmt.Sprintf("s%d", i), model.IdempotencyKey(fmt.Sprintf("s%d", i), start.Add(time.Hour))
					if (queue.ShardOf(id, 16) == queue.ShardOf(key, 16)) == sameShard {
						break
					}
				}
				b.upsert(t, &model.ScheduleRecord{ID: id, CronExpr: "0 * * * *", WorkflowID: "wf", Version: "1",
					OverlapPolicy: model.OverlapSkip, CatchupPolicy: model.CatchupFireImmediately})
				_, started, err := b.store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
					ScheduledFor: start.Add(time.Hour), IdempotencyKey: key})
				require.NoError(t, err)
				require.True(t, started)

				b.clock.Advance(time.Hour)
				b.tick(t, sched)
				l, err := New(b.store, &Config{Executor: ex, ShutdownTimeout: time.Second}, nil, nil)
				require.NoError(t, err)
				require.NoError(t, l.Start(ctx))
				stopAtCleanup(t, l)
				manual := b.waitStatus(t, key, model.RunSuccess) // GET /runs/:key: the manual run, which ran
				require.Equal(t, model.SourceManual, manual.Source)
				run, err := b.store.GetScheduleRun(ctx, id, key)
				require.NoError(t, err)
				require.NotEqual(t, model.RunEnqueued, run.Status, "the schedule's run record waits for a task that is not its own")
				// 02:00: the schedule (overlap skip) must not see 01:00 in flight.
				b.clock.Advance(time.Hour)
				b.tick(t, sched)
				run, err = b.store.GetScheduleRun(ctx, id, model.IdempotencyKey(id, start.Add(2*time.Hour)))
				require.NoError(t, err)
				require.NotEqual(t, model.RunSkipped, run.Status, run.Error)
				require.Eventually(t, func() bool {
					ex.mu.Lock()
					defer ex.mu.Unlock()
					return len(ex.reqs) == 2 // the manual run, then 02:00
				}, 10*time.Second, 20*time.Millisecond)
			})
		}
	})

	// A manual run started with a schedule's future run's key ("run the 01:00
	// run now") that has already finished when the scheduler plans 01:00: the
	// scheduled run is recorded SKIPPED, not executed again.
	t.Run("AScheduledRunWhoseKeyAFinishedManualRunTookIsNotRunAgain", func(t *testing.T) {
		ex := &recordingExecutor{res: Result{Status: model.RunSuccess}}
		b := setup(t, ex, nil)
		ctx := context.Background()
		require.NoError(t, b.store.PutWorkflow(ctx, "wf", "1", []byte(`{}`)))
		sched, err := scheduler.New(b.store, nil, nil, prometheus.NewRegistry())
		require.NoError(t, err)
		start := b.clock.Now()
		var id, key string
		for i := 0; ; i++ {
			id, key = fmt.Sprintf("s%d", i), model.IdempotencyKey(fmt.Sprintf("s%d", i), start.Add(time.Hour))
			if queue.ShardOf(id, 16) != queue.ShardOf(key, 16) {
				break
			}
		}
		b.upsert(t, &model.ScheduleRecord{ID: id, CronExpr: "0 * * * *", WorkflowID: "wf", Version: "1",
			OverlapPolicy: model.OverlapSkip, CatchupPolicy: model.CatchupFireImmediately})
		// "run the 01:00 run now"
		_, started, err := b.store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
			ScheduledFor: start, IdempotencyKey: key})
		require.NoError(t, err)
		require.True(t, started)
		b.waitStatus(t, key, model.RunSuccess)

		b.clock.Advance(time.Hour)
		b.tick(t, sched)
		// Real time must pass: the subject is a second executor call that must
		// not happen, so the launcher gets 2 s after the tick in which to make it.
		const quiet = 2 * time.Second
		<-time.After(quiet)
		run, err := b.store.GetScheduleRun(ctx, id, key)
		require.NoError(t, err)
		ex.mu.Lock()
		defer ex.mu.Unlock()
		require.Len(t, ex.reqs, 1, "executor called again with key %s; schedule's record: %s %s", key, run.Status, run.Error)
		require.Equal(t, model.RunSkipped, run.Status)
	})

	// A manual run started (through the Go API) with a schedule's run's key
	// that a scheduler commits between the store's look-up and its script:
	// the store marked the key in every shard first, so the commit records
	// its run SKIPPED, and the manual run is created and runs: one task
	// under the key, and no record left ENQUEUED.
	t.Run("AManualRunRacingTheScheduledRunWithItsKeyTakesIt", func(t *testing.T) {
		ctx := context.Background()
		r := queuetest.StartRedis(t)
		clock := queue.NewSimClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
		hooked, hook := r.Universal(t), &queuetest.BeforeScriptHook{}
		hooked.AddHook(hook)
		api, err := queue.NewStore(ctx, hooked, clock, nil)
		require.NoError(t, err)
		store, err := queue.NewStore(ctx, r.Universal(t), clock, nil)
		require.NoError(t, err)
		require.NoError(t, store.PutWorkflow(ctx, "wf", "1", []byte(`{}`)))
		ex := &recordingExecutor{res: Result{Status: model.RunSuccess}}
		sched, err := scheduler.New(store, nil, nil, prometheus.NewRegistry())
		require.NoError(t, err)
		b := &testBundle{rdb: r.Universal(t), store: store, clock: clock}

		start := clock.Now()
		var id, key string
		for i := 0; ; i++ {
			id, key = fmt.Sprintf("s%d", i), model.IdempotencyKey(fmt.Sprintf("s%d", i), start.Add(time.Hour))
			if queue.ShardOf(id, 16) != queue.ShardOf(key, 16) {
				break
			}
		}
		b.upsert(t, &model.ScheduleRecord{ID: id, CronExpr: "0 * * * *", WorkflowID: "wf", Version: "1",
			OverlapPolicy: model.OverlapSkip, CatchupPolicy: model.CatchupFireImmediately})
		clock.Advance(time.Hour)
		hook.Fn = func() { b.tick(t, sched) } // the scheduler commits 01:00 meanwhile
		run, started, err := api.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
			ScheduledFor: clock.Now(), IdempotencyKey: key})
		require.NoError(t, err)
		require.True(t, started, "the key was marked before the scheduler committed")
		require.Equal(t, model.SourceManual, run.Source)
		sr, err := store.GetScheduleRun(ctx, id, key)
		require.NoError(t, err, "the scheduler committed meanwhile")
		require.Equal(t, model.RunSkipped, sr.Status)
		require.Contains(t, sr.Error, "taken by a manual run")

		l, err := New(store, &Config{Executor: ex, ShutdownTimeout: time.Second}, nil, prometheus.NewRegistry())
		require.NoError(t, err)
		require.NoError(t, l.Start(ctx))
		stopAtCleanup(t, l)
		require.Eventually(t, func() bool {
			r, _, err := store.GetRun(ctx, key)
			return err == nil && r.Status == model.RunSuccess
		}, 10*time.Second, 20*time.Millisecond)
		// Real time must pass: a run left ENQUEUED is an absence of change, so
		// the launcher gets a second after the scheduled run's end to settle it.
		const quiet = time.Second
		<-time.After(quiet)
		got, _, err := store.GetRun(ctx, key)
		require.NoError(t, err)
		require.NotEqual(t, model.RunEnqueued, got.Status,
			"GET /runs/%s: %s run stuck ENQUEUED (started=%v) though the only task under the key ran", key, got.Source, started)
	})

	// A manual run asked for with the key of a schedule's run whose record was
	// trimmed while its task waits (FAILED by RUN_TIMEOUT while no launcher
	// ran) is refused as a conflict, not answered "not found" nor recorded
	// without a task of its own.
	t.Run("AManualRunOnAKeyWhoseTaskOutlivedItsRecordIsAConflict", func(t *testing.T) {
		t.Parallel()
		b, first := trimmedRunWithItsTaskPending(t, &recordingExecutor{})
		ctx := context.Background()
		_, _, err := b.store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
			ScheduledFor: b.clock.Now(), IdempotencyKey: first.key})
		require.ErrorIs(t, err, queue.ErrConflict)
		_, _, err = b.store.GetRun(ctx, first.key)
		require.ErrorIs(t, err, queue.ErrNotFound, "nothing recorded")
	})

	// A "skip" schedule's run that RUN_TIMEOUT marked FAILED while every
	// launcher was down, and whose record the history trim then deleted, must
	// not be executed when a launcher comes back: its task is still pending.
	t.Run("ATimedOutRunTrimmedFromHistoryIsNotExecuted", func(t *testing.T) {
		t.Parallel()
		ex := &recordingExecutor{res: Result{Status: model.RunSuccess}}
		b, first := trimmedRunWithItsTaskPending(t, ex)
		ctx := context.Background()
		start := first.runAt.Add(-time.Minute)

		l, err := New(b.store, &Config{Executor: ex, ShutdownTimeout: time.Second}, nil, nil)
		require.NoError(t, err)
		require.NoError(t, l.Start(ctx))
		stopAtCleanup(t, l)
		latest := model.IdempotencyKey("skip", start.Add(2*time.Hour+time.Minute))
		b.waitStatus(t, latest, model.RunSuccess)
		// Real time must pass: the subject is a call that must not happen, so
		// the launcher gets a second after the latest run in which to make it.
		const quiet = time.Second
		<-time.After(quiet)
		ex.mu.Lock()
		defer ex.mu.Unlock()
		for _, r := range ex.reqs {
			require.NotEqual(t, first.key, r.Meta.IdempotencyKey, "the 00:01 run, marked FAILED by RUN_TIMEOUT an hour ago, was executed")
		}
	})
}
