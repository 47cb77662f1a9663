package scheduler

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

const alarmOwner = "did:matrix:u1:fp"

// createAlarm creates a cron alarm (every minute) and returns its id.
func (b *testBundle) createAlarm(t *testing.T, maxFailures int, endAt *time.Time) string {
	t.Helper()
	rec := &model.ScheduleRecord{ID: b.store.NewAlarmID(alarmOwner), Owner: alarmOwner, UserID: "u1", Kind: model.KindCron,
		CronExpr: "* * * * *", Target: model.TargetWake, OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupLatest,
		EndAt: endAt, Alarm: &model.Alarm{Payload: json.RawMessage(`{}`), MaxFailures: maxFailures}}
	require.NoError(t, rec.Validate())
	got, _, err := b.store.CreateAlarm(context.Background(), rec)
	require.NoError(t, err)
	return got.ID
}

func (b *testBundle) alarm(t *testing.T, id string) *model.Alarm {
	t.Helper()
	rec, err := b.store.GetAlarm(context.Background(), alarmOwner, id)
	require.NoError(t, err)
	return rec.Alarm
}

// An alarm's runs are tried max_failures times: their tasks carry
// max_failures-1 retries, whatever TASK_MAX_RETRY says.
func TestAlarmRunsAreTriedMaxFailuresTimes(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	id := b.createAlarm(t, 4, nil)
	b.runUntil(t, start.Add(time.Minute), time.Minute)
	key := model.IdempotencyKey(id, start.Add(time.Minute))
	info, err := asynq.NewInspectorFromRedisClient(b.rdb).GetTaskInfo(queuetest.TaskQueue(b.rdb, queue.QueueNameDefault, key), key)
	require.NoError(t, err)
	require.Equal(t, 3, info.MaxRetry)
	p, err := queue.DecodeTaskPayload(info.Payload)
	require.NoError(t, err)
	require.Equal(t, model.TargetWake, p.Target)
}

// A cron alarm whose timetable runs out is retired failed, saying why,
// rather than left active with nothing to fire.
func TestAlarmWithNoFireTimeLeftIsFailed(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	end := start.Add(2 * time.Minute)
	id := b.createAlarm(t, 3, &end)
	b.runUntil(t, start.Add(5*time.Minute), time.Minute)
	a := b.alarm(t, id)
	require.Equal(t, model.AlarmFailed, a.Status)
	require.Equal(t, "retired: its schedule yields no fire time after "+end.Format(time.RFC3339), a.LastError)
}

// An alarm whose stored definition no longer compiles is retired failed
// with the error, not retried on every tick.
func TestAlarmThatNoLongerCompilesIsFailed(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	id := b.createAlarm(t, 3, nil)
	sh := queue.ShardOf(id, b.store.Config().Shards)
	// The zone database of a newer release no longer knows the zone, say.
	require.NoError(t, b.rdb.HSet(context.Background(), fmt.Sprintf("chronos:{s%02d}:sched:%s", sh, id), "z", "Nowhere/Gone").Err())
	b.runUntil(t, start.Add(2*time.Minute), time.Minute)
	a := b.alarm(t, id)
	require.Equal(t, model.AlarmFailed, a.Status)
	require.Contains(t, a.LastError, "retired: it cannot be planned any more")
	require.Contains(t, a.LastError, "Nowhere/Gone")
}
