package queue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// An alarm's state follows its runs in the scripts that change them
// (alarm_lifecycle.lua): each case creates an alarm, commits one run of
// it, and ends or retries that run as a launcher would.

// alarmRecord is an alarm of kind once (at fireAt) or cron (every minute).
func alarmRecord(id string, kind model.Kind, fireAt time.Time) *model.ScheduleRecord {
	rec := &model.ScheduleRecord{ID: id, Owner: "did:matrix:u1:fp", UserID: "u1", Kind: kind, Target: model.TargetWake,
		OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupLatest,
		Alarm: &model.Alarm{Label: "l", Payload: json.RawMessage(`{}`), Status: model.AlarmActive, MaxFailures: 3}}
	if kind == model.KindOnce {
		rec.FireAt = &fireAt
	} else {
		rec.CronExpr = "* * * * *"
	}
	return rec
}

// alarmCase is an alarm with one committed run, on its own database.
type alarmCase struct {
	*methodBundle
	id   string
	task *queue.TaskPayload
}

func setupAlarm(t *testing.T, r *queuetest.Redis, db int, kind model.Kind) *alarmCase {
	t.Helper()
	b := setupMethod(t, r, db)
	at := methodNow.Add(time.Minute)
	rec := createAlarm(t, b.store, kind, at)
	return &alarmCase{methodBundle: b, id: rec.ID, task: commitOneRun(t, b.store, rec.ID, at)}
}

// createAlarm creates an alarm as the API does.
func createAlarm(t *testing.T, store *queue.Store, kind model.Kind, at time.Time) *model.ScheduleRecord {
	t.Helper()
	rec := alarmRecord(store.NewAlarmID("did:matrix:u1:fp"), kind, at)
	require.NoError(t, rec.Validate())
	got, _, err := store.CreateAlarm(context.Background(), rec)
	require.NoError(t, err)
	return got
}

// commitOneRun commits the run of schedule id at at, as a scheduler
// would, and returns its task.
func commitOneRun(t *testing.T, store *queue.Store, id string, at time.Time) *queue.TaskPayload {
	t.Helper()
	ctx := context.Background()
	sh := queue.ShardOf(id, store.Config().Shards)
	due, err := store.ReadDue(ctx, sh, at.Add(time.Hour), 100)
	require.NoError(t, err)
	require.Len(t, due, 1)
	d := due[0]
	require.NoError(t, d.Err)
	key := model.IdempotencyKey(id, at)
	task := queue.TaskPayload{IdempotencyKey: key, ScheduleID: id, RunAt: at, FireAt: at, UserID: "u1",
		Source: model.SourceSchedule, Target: model.TargetWake, MaxAttempts: 3}
	p := d.Plan()
	p.Runs = []queue.PlannedRun{{Key: key, RunAt: at, FireAt: at, Status: model.RunEnqueued, Task: task}}
	if p.NewNext = d.Compiled.Next(at); !p.NewNext.IsZero() {
		p.NewScore = float64(p.NewNext.UnixMilli())
	}
	applied, err := store.Commit(ctx, sh, methodNow, []queue.Plan{p})
	require.NoError(t, err)
	require.Equal(t, []bool{true}, applied)
	return &task
}

func (c *alarmCase) alarm(t *testing.T) *model.Alarm {
	t.Helper()
	rec, err := c.store.GetAlarm(context.Background(), "did:matrix:u1:fp", c.id)
	require.NoError(t, err)
	return rec.Alarm
}

// active says whether the alarm is in its owner's active set.
func (c *alarmCase) active(t *testing.T) bool {
	t.Helper()
	key := fmt.Sprintf("chronos:{s%02d}:alarmsactive:did:matrix:u1:fp", queue.ShardOf(c.id, queue.ShardsDefault))
	in, err := c.rdb.SIsMember(context.Background(), key, c.id).Result()
	require.NoError(t, err)
	return in
}

func (c *alarmCase) attemptFailed(t *testing.T, reason string) {
	t.Helper()
	require.NoError(t, c.store.RecordFailedAttempt(context.Background(), c.task, c.clock.Now().Add(time.Second), reason))
}

func (c *alarmCase) end(t *testing.T, u queue.StatusUpdate) {
	t.Helper()
	require.NoError(t, c.store.ReportTaskStatus(context.Background(), c.task, u))
}

func TestAlarmLifecycle(t *testing.T) {
	t.Parallel()
	r := queuetest.StartRedis(t)
	ctx := context.Background()

	t.Run("once delivered after failures: fired, failures kept", func(t *testing.T) {
		t.Parallel()
		c := setupAlarm(t, r, 1, model.KindOnce)
		require.True(t, c.active(t))
		c.attemptFailed(t, "wake answered 503")
		c.attemptFailed(t, "wake answered 502")
		require.True(t, c.active(t))
		require.Equal(t, 2, c.alarm(t).FailureCount)
		require.Equal(t, "wake answered 502", c.alarm(t).LastError)
		c.end(t, queue.StatusUpdate{Status: model.RunSuccess, From: model.RunEnqueued})
		a := c.alarm(t)
		require.Equal(t, model.AlarmFired, a.Status)
		require.Equal(t, 2, a.FailureCount)
		require.NotNil(t, a.LastFiredAt)
		require.True(t, a.LastFiredAt.Equal(c.clock.Now()))
		require.Equal(t, "wake answered 502", a.LastError, "the last failure stays on record")
		require.False(t, c.active(t), "out of its owner's active set")
	})

	t.Run("once whose last delivery fails: failed, every failure counted", func(t *testing.T) {
		t.Parallel()
		c := setupAlarm(t, r, 2, model.KindOnce)
		c.attemptFailed(t, "e1")
		c.attemptFailed(t, "e2")
		c.end(t, queue.StatusUpdate{Status: model.RunFailed, From: model.RunEnqueued, Error: "wake delivery failed after 3 attempts: e3", DeliveryFailed: true})
		a := c.alarm(t)
		require.Equal(t, model.AlarmFailed, a.Status)
		require.Equal(t, 3, a.FailureCount)
		require.Equal(t, "wake delivery failed after 3 attempts: e3", a.LastError)
		require.Nil(t, a.LastFiredAt)
		require.False(t, c.active(t), "out of its owner's active set")
		// A final run changes no more, and neither does its alarm.
		err := c.store.ReportTaskStatus(ctx, c.task, queue.StatusUpdate{Status: model.RunSuccess})
		require.ErrorIs(t, err, queue.ErrConflict)
		require.Equal(t, model.AlarmFailed, c.alarm(t).Status)
	})

	t.Run("once failed without a delivery (abandoned, no WAKE_URL): failed, not counted", func(t *testing.T) {
		t.Parallel()
		c := setupAlarm(t, r, 3, model.KindOnce)
		c.end(t, queue.StatusUpdate{Status: model.RunFailed, From: model.RunEnqueued, Error: "launch abandoned"})
		a := c.alarm(t)
		require.Equal(t, model.AlarmFailed, a.Status)
		require.Zero(t, a.FailureCount)
		require.Equal(t, "launch abandoned", a.LastError)
	})

	t.Run("once skipped: failed with why", func(t *testing.T) {
		t.Parallel()
		c := setupAlarm(t, r, 4, model.KindOnce)
		c.end(t, queue.StatusUpdate{Status: model.RunSkipped, From: model.RunEnqueued, Error: "missed: ..."})
		a := c.alarm(t)
		require.Equal(t, model.AlarmFailed, a.Status)
		require.Equal(t, "missed: ...", a.LastError)
	})

	t.Run("cancelled alarm is never changed", func(t *testing.T) {
		t.Parallel()
		c := setupAlarm(t, r, 5, model.KindOnce)
		// As the alarm store's cancel writes it.
		_, err := c.store.CancelAlarm(ctx, "did:matrix:u1:fp", c.id)
		require.NoError(t, err)
		c.attemptFailed(t, "e1")
		c.end(t, queue.StatusUpdate{Status: model.RunSkipped, From: model.RunEnqueued, Error: "schedule paused before the run started"})
		a := c.alarm(t)
		require.Equal(t, model.AlarmCancelled, a.Status)
		require.Zero(t, a.FailureCount)
		require.Empty(t, a.LastError)
	})

	t.Run("cron delivered: last_fired_at, stays active", func(t *testing.T) {
		t.Parallel()
		c := setupAlarm(t, r, 6, model.KindCron)
		c.end(t, queue.StatusUpdate{Status: model.RunSuccess, From: model.RunEnqueued})
		a := c.alarm(t)
		require.Equal(t, model.AlarmActive, a.Status)
		require.NotNil(t, a.LastFiredAt)
		require.True(t, c.active(t))
	})

	t.Run("cron whose fire time fails: counted, stays active, next time planned", func(t *testing.T) {
		t.Parallel()
		c := setupAlarm(t, r, 7, model.KindCron)
		c.attemptFailed(t, "e1")
		c.end(t, queue.StatusUpdate{Status: model.RunFailed, From: model.RunEnqueued, Error: "wake delivery failed after 2 attempts: e2", DeliveryFailed: true})
		rec, err := c.store.GetAlarm(ctx, "did:matrix:u1:fp", c.id)
		require.NoError(t, err)
		require.Equal(t, model.AlarmActive, rec.Alarm.Status)
		require.Equal(t, 2, rec.Alarm.FailureCount)
		require.Equal(t, "wake delivery failed after 2 attempts: e2", rec.Alarm.LastError)
		require.NotNil(t, rec.NextRunAt, "skip-and-advance: the next fire time stands")
	})

	t.Run("cron skipped: unchanged", func(t *testing.T) {
		t.Parallel()
		c := setupAlarm(t, r, 8, model.KindCron)
		c.end(t, queue.StatusUpdate{Status: model.RunSkipped, From: model.RunEnqueued, Error: "missed"})
		a := c.alarm(t)
		require.Equal(t, model.AlarmActive, a.Status)
		require.Empty(t, a.LastError)
	})

	t.Run("retired with a reason: failed with it", func(t *testing.T) {
		t.Parallel()
		b := setupMethod(t, r, 9)
		rec := createAlarm(t, b.store, model.KindCron, time.Time{})
		sh := queue.ShardOf(rec.ID, queue.ShardsDefault)
		due, err := b.store.ReadDue(ctx, sh, methodNow.Add(time.Hour), 100)
		require.NoError(t, err)
		require.Len(t, due, 1)
		p := due[0].Plan()
		p.RetireReason = "retired: its schedule yields no fire time after 2026-01-01T12:01:00Z"
		applied, err := b.store.Commit(ctx, sh, methodNow, []queue.Plan{p})
		require.NoError(t, err)
		require.Equal(t, []bool{true}, applied)
		got, err := b.store.GetAlarm(ctx, rec.Owner, rec.ID)
		require.NoError(t, err)
		require.Equal(t, model.AlarmFailed, got.Alarm.Status)
		require.Equal(t, p.RetireReason, got.Alarm.LastError)
		require.Nil(t, got.NextRunAt)
		require.False(t, (&alarmCase{methodBundle: b, id: rec.ID}).active(t), "out of its owner's active set")
	})

	t.Run("a registrar's schedule has no alarm state", func(t *testing.T) {
		t.Parallel()
		b := setupMethod(t, r, 10)
		rec := &model.ScheduleRecord{ID: "s1", CronExpr: "* * * * *", WorkflowID: "wf", Version: "1",
			OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupLatest}
		require.NoError(t, rec.Validate())
		_, err := b.store.UpsertSchedule(ctx, rec)
		require.NoError(t, err)
		task := commitOneRun(t, b.store, rec.ID, methodNow.Add(time.Minute))
		require.NoError(t, b.store.RecordFailedAttempt(ctx, task, methodNow, "e1"))
		require.NoError(t, b.store.ReportTaskStatus(ctx, task, queue.StatusUpdate{Status: model.RunFailed, Error: "e2", DeliveryFailed: true}))
		h, err := b.rdb.HGetAll(ctx, queue.ScheduleKey(queue.ShardOf(rec.ID, queue.ShardsDefault), rec.ID)).Result()
		require.NoError(t, err)
		for _, f := range []string{queue.AfStatus, queue.AfFailures, queue.AfLastErr, queue.AfLastFired} {
			require.NotContains(t, h, f)
		}
	})
}

// An alarm's run task is tried max_failures times: asynq's retry count
// is one less. Other runs keep the store's.
func TestAlarmTaskRetriesFollowMaxFailures(t *testing.T) {
	t.Parallel()
	r := queuetest.StartRedis(t)
	b := setupMethod(t, r, 1)
	ctx := context.Background()
	rec := createAlarm(t, b.store, model.KindOnce, methodNow.Add(time.Minute))
	task := commitOneRun(t, b.store, rec.ID, methodNow.Add(time.Minute))
	insp := asynq.NewInspectorFromRedisClient(b.rdb)
	info, err := insp.GetTaskInfo(b.store.RunQueue(queue.ShardOf(rec.ID, queue.ShardsDefault)).Name(), task.IdempotencyKey)
	require.NoError(t, err)
	require.Equal(t, 2, info.MaxRetry, "max_failures 3: three attempts")

	wf := &model.ScheduleRecord{ID: "s1", CronExpr: "* * * * *", WorkflowID: "wf", Version: "1",
		OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupLatest}
	require.NoError(t, wf.Validate())
	_, err = b.store.UpsertSchedule(ctx, wf)
	require.NoError(t, err)
	sh := queue.ShardOf(wf.ID, queue.ShardsDefault)
	due, err := b.store.ReadDue(ctx, sh, methodNow.Add(time.Hour), 100)
	require.NoError(t, err)
	require.Len(t, due, 1)
	at := methodNow.Add(time.Minute)
	key := model.IdempotencyKey(wf.ID, at)
	p := due[0].Plan()
	p.Runs = []queue.PlannedRun{{Key: key, RunAt: at, FireAt: at, Status: model.RunEnqueued,
		Task: queue.TaskPayload{IdempotencyKey: key, ScheduleID: wf.ID, RunAt: at, FireAt: at, WorkflowID: "wf", Version: "1", Source: model.SourceSchedule}}}
	_, err = b.store.Commit(ctx, sh, methodNow, []queue.Plan{p})
	require.NoError(t, err)
	info, err = insp.GetTaskInfo(b.store.RunQueue(sh).Name(), key)
	require.NoError(t, err)
	require.Equal(t, queue.TaskMaxRetryDefault, info.MaxRetry)
}
