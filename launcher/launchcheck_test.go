package launcher

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// Runs are enqueued ahead of their time; one whose schedule was deleted,
// paused or changed before it started is SKIPPED, not executed. One whose
// schedule now names another workflow version runs that version.
func TestSkipsRunsNoLongerPlanned(t *testing.T) {
	t.Parallel()
	ex := &recordingExecutor{res: Result{Status: model.RunSuccess}}
	b, sched := setupLaunchersDown(t, ex) // until the schedules have changed
	ctx := context.Background()

	mk := func(id string) *model.ScheduleRecord {
		rec := &model.ScheduleRecord{ID: id, CronExpr: "0 * * * *", WorkflowID: "wf", Version: "1",
			OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupFireImmediately}
		b.upsert(t, rec)
		return rec
	}
	keep, del, pause, change, repoint := mk("keep"), mk("del"), mk("pause"), mk("change"), mk("repoint")
	b.clock.Advance(time.Hour)
	b.tick(t, sched)
	require.NoError(t, b.store.DeleteSchedule(ctx, del.ID))
	_, err := b.store.SetPaused(ctx, pause.ID, true)
	require.NoError(t, err)
	change.CronExpr = "30 * * * *"
	_, err = b.store.UpsertSchedule(ctx, change)
	require.NoError(t, err)
	require.NoError(t, b.store.PutWorkflow(ctx, "wf", "2", []byte(`{"v":2}`)))
	repoint.Version, repoint.UserID = "2", "someone-else"
	_, err = b.store.UpsertSchedule(ctx, repoint)
	require.NoError(t, err)

	l, err := New(b.store, &Config{Executor: ex, ShutdownTimeout: time.Second}, nil, nil)
	require.NoError(t, err)
	require.NoError(t, l.Start(ctx))
	stopAtCleanup(t, l)

	at := b.clock.Now()
	b.waitStatus(t, model.IdempotencyKey(keep.ID, at), model.RunSuccess)
	b.waitStatus(t, model.IdempotencyKey(repoint.ID, at), model.RunSuccess)
	for id, reason := range map[string]string{del.ID: "deleted", pause.ID: "paused", change.ID: "no longer one of its fire times"} {
		run := b.waitStatus(t, model.IdempotencyKey(id, at), model.RunSkipped)
		require.Contains(t, run.Error, reason)
	}
	ex.mu.Lock()
	defer ex.mu.Unlock()
	require.Len(t, ex.reqs, 2)
	byID := map[string]Request{}
	for _, r := range ex.reqs {
		byID[r.Meta.ScheduleID] = r
	}
	require.Equal(t, "1", byID[keep.ID].Meta.Version)
	require.Equal(t, "2", byID[repoint.ID].Meta.Version)
	require.Equal(t, "someone-else", byID[repoint.ID].Meta.UserID)
	require.JSONEq(t, `{"v":2}`, string(byID[repoint.ID].DAG))
}

// TestLaunchGrace checks how a launcher judges a run it takes late: more
// than LAUNCH_GRACE after it was due, by its schedule's catch-up policy;
// a retry after the executor failed is late by its backoff only.
func TestLaunchGrace(t *testing.T) {
	t.Parallel()

	// Runs enqueued on time that wait while every launcher is down follow
	// their schedule's catch-up policy when a launcher comes back more than
	// LAUNCH_GRACE later: none skips them all, latest runs only the latest
	// due one, fire_immediately runs them all.
	t.Run("RunsLateFromALauncherOutageFollowTheCatchupPolicy", func(t *testing.T) {
		t.Parallel()
		ex := &recordingExecutor{res: Result{Status: model.RunSuccess}}
		b, sched := setupLaunchersDown(t, ex) // from 00:00
		ctx := context.Background()

		start := b.clock.Now()
		policies := map[string]struct {
			catchup model.CatchupPolicy
			overlap model.OverlapPolicy
		}{
			"none":             {model.CatchupNone, model.OverlapAllow},
			"latest":           {model.CatchupLatest, model.OverlapAllow},
			"fire_immediately": {model.CatchupFireImmediately, model.OverlapAllow},
			// The scheduler records 00:20 to 00:50 SKIPPED while 00:10 is in
			// flight: 00:10 is the latest run left, so it starts.
			"latest-skip": {model.CatchupLatest, model.OverlapSkip},
			// The schedule waits for 00:10, SKIPPED late; then its scheduler
			// applies the policy to the runs missed meanwhile: 00:50 fires.
			"latest-queue": {model.CatchupLatest, model.OverlapQueue},
		}
		for id, p := range policies {
			rec := &model.ScheduleRecord{ID: id, CronExpr: "*/10 * * * *", WorkflowID: "wf", Version: "1",
				OverlapPolicy: p.overlap, CatchupPolicy: p.catchup}
			b.upsert(t, rec)
		}
		// The schedulers stay up: every run from 00:10 to 00:50 is enqueued on time.
		for b.clock.Now().Before(start.Add(52 * time.Minute)) {
			b.clock.Advance(time.Minute)
			b.tick(t, sched)
		}

		l, err := New(b.store, &Config{Executor: ex, ShutdownTimeout: time.Second, LaunchGrace: time.Minute}, nil, prometheus.NewRegistry())
		require.NoError(t, err)
		require.NoError(t, l.Start(ctx)) // at 00:52: 00:50 is 2 minutes late, 00:10 42
		stopAtCleanup(t, l)

		S, K := model.RunSuccess, model.RunSkipped
		want := map[string][]model.RunStatus{
			"none":             {K, K, K, K, K},
			"latest":           {K, K, K, K, S},
			"fire_immediately": {S, S, S, S, S},
			"latest-skip":      {S, K, K, K, K},
		}
		for id, statuses := range want {
			for i, st := range statuses {
				run := b.waitStatus(t, model.IdempotencyKey(id, start.Add(time.Duration(i+1)*10*time.Minute)), st)
				switch {
				case st == K && id == "latest-skip":
					require.Contains(t, run.Error, "(overlap_policy skip)")
				case st == K:
					require.Contains(t, run.Error, "more than LAUNCH_GRACE 1m0s")
					require.Contains(t, run.Error, "(catchup_policy "+string(policies[id].catchup)+")")
				}
			}
		}
		b.waitStatus(t, model.IdempotencyKey("latest-queue", start.Add(10*time.Minute)), K)
		b.tick(t, sched)
		b.waitStatus(t, model.IdempotencyKey("latest-queue", start.Add(50*time.Minute)), S)
		// The runs it dropped have one record, at the last one's time
		// under a key of its own (docs/ledger.md), and no task.
		for _, m := range []time.Duration{20, 30} {
			_, _, err := b.store.GetRun(ctx, model.IdempotencyKey("latest-queue", start.Add(m*time.Minute)))
			require.ErrorIs(t, err, queue.ErrNotFound, "00:%d", m)
		}
		dropped := b.waitStatus(t, model.CatchupDroppedKey("latest-queue", start.Add(40*time.Minute)), K)
		require.Equal(t, model.ReasonCatchupDropped, dropped.Reason)
		requireCount(t, l.metrics.skippedLate, 10.0)
		ex.mu.Lock()
		defer ex.mu.Unlock()
		require.Len(t, ex.reqs, 8)
	})

	// A run a scheduler enqueued late, within MISFIRE_GRACE_MS (here 8 s after
	// its fire time, as after a shard takeover), is due from when it was
	// enqueued: that wait is not held against LAUNCH_GRACE.
	t.Run("CountsFromALateEnqueue", func(t *testing.T) {
		t.Parallel()
		ex := &recordingExecutor{res: Result{Status: model.RunSuccess}}
		b, sched := setupLaunchersDown(t, ex)
		ctx := context.Background()
		rec := &model.ScheduleRecord{ID: "s", CronExpr: "0 * * * *", WorkflowID: "wf", Version: "1",
			OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupNone}
		b.upsert(t, rec)

		b.clock.Advance(time.Hour + 8*time.Second) // the first tick since 00:00
		b.tick(t, sched)
		l, err := New(b.store, &Config{Executor: ex, ShutdownTimeout: time.Second, LaunchGrace: 5 * time.Second}, nil, prometheus.NewRegistry())
		require.NoError(t, err)
		require.NoError(t, l.Start(ctx))
		stopAtCleanup(t, l)
		b.waitStatus(t, model.IdempotencyKey("s", b.clock.Now().Truncate(time.Hour)), model.RunSuccess)
		require.Zero(t, testutil.ToFloat64(l.metrics.skippedLate))
	})

	// A retry after the executor failed is late by its backoff, not missed: it
	// starts however long the backoff. A task asynq retries for another reason
	// (here a failed read; also a failed status report, or a task recovered
	// from a launcher that died) has not reached the executor, and its
	// lateness is judged again.
	t.Run("OnlyExecutorRetriesEscapeLaunchGrace", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b, sched := setupLaunchersDown(t, &recordingExecutor{})
		for _, id := range []string{"executor-error", "read-error"} {
			rec := &model.ScheduleRecord{ID: id, CronExpr: "0 * * * *", WorkflowID: "wf-" + id, Version: "1",
				OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupNone}
			b.upsert(t, rec)
		}
		require.NoError(t, b.store.PutWorkflow(ctx, "wf-executor-error", "1", []byte(`{}`)))
		// Not a string: reading it fails until the test registers the workflow.
		badKey := "chronos:wf:{wf-read-error}:1"
		require.NoError(t, b.rdb.HSet(ctx, badKey, "not", "a dag").Err())

		b.clock.Advance(time.Hour)
		b.tick(t, sched)
		at := b.clock.Now()
		ex := &flakyExecutor{fail: 1, onFail: func() { b.clock.Advance(10 * time.Minute) }}
		l, err := New(b.store, &Config{Executor: ex, ShutdownTimeout: time.Second, LaunchGrace: time.Minute}, nil, prometheus.NewRegistry())
		require.NoError(t, err)
		require.NoError(t, l.Start(ctx))
		stopAtCleanup(t, l)

		b.waitStatus(t, model.IdempotencyKey("executor-error", at), model.RunSuccess)
		inspector := asynq.NewInspectorFromRedisClient(b.rdb)
		require.Eventually(t, func() bool {
			info, err := inspector.GetTaskInfo(queuetest.TaskQueue(b.rdb, queue.QueueNameDefault, model.IdempotencyKey("read-error", at)), model.IdempotencyKey("read-error", at))
			return err == nil && info.Retried > 0
		}, 20*time.Second, 20*time.Millisecond)
		require.NoError(t, b.rdb.Del(ctx, badKey).Err())
		require.NoError(t, b.store.PutWorkflow(ctx, "wf-read-error", "1", []byte(`{}`)))
		run := b.waitStatus(t, model.IdempotencyKey("read-error", at), model.RunSkipped)
		require.Contains(t, run.Error, "more than LAUNCH_GRACE 1m0s")
		requireCount(t, l.metrics.skippedLate, 1)
		require.Equal(t, int32(2), ex.calls.Load())
	})

	// A retry is late by its backoff, not missed; but one that comes more than
	// LAUNCH_GRACE after its backoff ended (every launcher was down meanwhile)
	// is judged as a first attempt would be.
	t.Run("RetryLateAfterItsBackoffIsMissed", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b, sched := setupLaunchersDown(t, &recordingExecutor{})
		b.upsert(t, &model.ScheduleRecord{ID: "s", CronExpr: "0 * * * *", WorkflowID: "wf", Version: "1",
			OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupNone})
		b.clock.Advance(time.Hour)
		b.tick(t, sched)
		key := model.IdempotencyKey("s", b.clock.Now())
		ex := &flakyExecutor{fail: 1, onFail: func() {}}
		cfg := &Config{Executor: ex, ShutdownTimeout: time.Second, LaunchGrace: time.Minute}
		l, err := New(b.store, cfg, nil, prometheus.NewRegistry())
		require.NoError(t, err)
		require.NoError(t, l.Start(ctx))
		require.Eventually(t, func() bool {
			st, err := b.store.LoadLaunch(ctx, &queue.TaskPayload{IdempotencyKey: key, ScheduleID: "s", WorkflowID: "wf", Version: "1"})
			return err == nil && st.FailedAttempts == 1
		}, 20*time.Second, 5*time.Millisecond)
		require.NoError(t, l.Stop(context.Background()))

		b.clock.Advance(time.Hour)
		l, err = New(b.store, cfg, nil, prometheus.NewRegistry())
		require.NoError(t, err)
		require.NoError(t, l.Start(ctx))
		stopAtCleanup(t, l)
		run := b.waitStatus(t, key, model.RunSkipped)
		require.Contains(t, run.Error, "more than LAUNCH_GRACE 1m0s")
		require.Equal(t, int32(1), ex.calls.Load())
	})
}
