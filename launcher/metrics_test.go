package launcher

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// TestMetrics checks that the launcher's metrics count what their help
// text says: start delay only of runs started, from when they were asked
// for; launches the executor accepted.
func TestMetrics(t *testing.T) {
	t.Parallel()

	// chronos_run_start_delay_seconds is "Time from a run's fire time to a
	// launcher starting it." A run the launcher SKIPPED (late after a
	// launcher outage, or its schedule paused) never started: it must not be
	// observed, or one outage puts runs that never ran into the p99.
	t.Run("StartDelayObservesOnlyStartedRuns", func(t *testing.T) {
		t.Parallel()
		ex := &recordingExecutor{res: Result{Status: model.RunSuccess}}
		b, sched := setupLaunchersDown(t, ex)
		ctx := context.Background()
		for _, id := range []string{"late", "paused"} {
			rec := &model.ScheduleRecord{ID: id, CronExpr: "0 * * * *", WorkflowID: "wf", Version: "1",
				OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupNone}
			b.upsert(t, rec)
		}
		b.clock.Advance(time.Hour)
		b.tick(t, sched)
		at := b.clock.Now()
		_, err := b.store.SetPaused(ctx, "paused", true)
		require.NoError(t, err)
		b.clock.Advance(30 * time.Minute) // every launcher was down for half an hour

		l, err := New(b.store, &Config{Executor: ex, ShutdownTimeout: time.Second, LaunchGrace: time.Minute}, nil, prometheus.NewRegistry())
		require.NoError(t, err)
		require.NoError(t, l.Start(ctx))
		stopAtCleanup(t, l)
		b.waitStatus(t, model.IdempotencyKey("late", at), model.RunSkipped)
		b.waitStatus(t, model.IdempotencyKey("paused", at), model.RunSkipped)
		requireCount(t, l.metrics.skippedLate, 1.0)
		ex.mu.Lock()
		require.Empty(t, ex.reqs, "nothing was started")
		ex.mu.Unlock()
		require.Zero(t, histogramCount(t, l.metrics.startDelay), "start delay observed for runs that never started")
	})

	// A manual run backfilling a past time (POST /run-launcher/start with
	// scheduled_for a month ago) is due when it is asked for, as
	// missedAtLaunch already reckons: started within milliseconds, it must not
	// add a month to chronos_run_start_delay_seconds.
	t.Run("StartDelayOfABackfillIsFromItsRequest", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := setup(t, &recordingExecutor{res: Result{Status: model.RunSuccess}}, nil)
		require.NoError(t, b.store.PutWorkflow(ctx, "wf", "1", []byte(`{}`)))
		_, _, err := b.store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
			ScheduledFor: b.clock.Now().Add(-30 * 24 * time.Hour), IdempotencyKey: "backfill"})
		require.NoError(t, err)
		b.waitStatus(t, "backfill", model.RunSuccess)
		var m dto.Metric
		require.NoError(t, b.launcher.metrics.startDelay.Write(&m))
		require.Less(t, m.GetHistogram().GetSampleSum(), 60.0, "seconds of start delay for a run started at once")
	})

	// chronos_runs_launched_total is "Runs the executor accepted". A run the
	// executor accepted and whose workflow ended before the answer arrived
	// was accepted all the same.
	t.Run("LaunchedCountsRunsThatEndedBeforeTheAnswer", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &recordingExecutor{}, nil)
		require.NoError(t, b.launcher.Stop(context.Background()))
		l, err := New(b.store, &Config{Executor: endsBeforeAnswering{b.store}, ShutdownTimeout: time.Second}, nil, prometheus.NewRegistry())
		require.NoError(t, err)
		b.manual(t, "quick", true)
		require.NoError(t, l.Start(context.Background()))
		stopAtCleanup(t, l)
		b.waitStatus(t, "quick", model.RunSuccess)
		require.Eventually(t, func() bool {
			info, err := asynq.NewInspectorFromRedisClient(b.rdb).GetTaskInfo(queuetest.TaskQueue(b.rdb, queue.QueueNameDefault, "quick"), "quick")
			return err == nil && info.State == asynq.TaskStateCompleted
		}, 20*time.Second, 20*time.Millisecond)
		require.Equal(t, 1, testutil.CollectAndCount(l.metrics.launched), "the accepted run is not counted")
	})
}

// endsBeforeAnswering is an executor whose workflow is quick: it reports
// its own end to the run record (POST /runs/:key/status) before the
// executor's 202 answer reaches the launcher.
type endsBeforeAnswering struct{ store *queue.Store }

func (e endsBeforeAnswering) Execute(ctx context.Context, r Request) (Result, error) {
	if _, err := e.store.UpdateRunStatus(ctx, r.Meta.IdempotencyKey, queue.StatusUpdate{Status: model.RunSuccess}); err != nil {
		return Result{}, err
	}
	return Result{RunID: "wf-run-1"}, nil // 202, started
}
