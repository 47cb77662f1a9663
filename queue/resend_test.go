package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// lostReplyStore is a store whose next script's reply is lost on the way
// back (a network blip, a proxy restart, a failover) once arm is called:
// the script ran, and go-redis sends it again on a new connection.
func lostReplyStore(t *testing.T) (store *queue.Store, arm func()) {
	t.Helper()
	proxy := queuetest.StartProxy(t, queuetest.StartRedis(t).Addr)
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr, MinRetryBackoff: time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	hook := &queuetest.BeforeScriptHook{}
	rdb.AddHook(hook)
	store, err := queue.NewStore(context.Background(), rdb, queue.NewSimClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)), nil)
	require.NoError(t, err)
	return store, func() { hook.Fn = proxy.DropNextReply }
}

// The call that deleted a schedule says so, though its script ran twice.
func TestDeleteSentAgainAfterALostReplyReportsTheDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, arm := lostReplyStore(t)
	rec := &model.ScheduleRecord{ID: "d", CronExpr: "0 * * * *", Target: model.TargetWorkflow,
		WorkflowID: "wf", Version: "1", UserID: "u", OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupNone}
	require.NoError(t, rec.Validate())
	_, err := store.UpsertSchedule(ctx, rec)
	require.NoError(t, err)
	require.ErrorIs(t, store.DeleteSchedule(ctx, "other"), queue.ErrNotFound) // the script is loaded

	arm()
	require.NoError(t, store.DeleteSchedule(ctx, "d"))
	_, err = store.GetSchedule(ctx, "d")
	require.ErrorIs(t, err, queue.ErrNotFound)
	require.ErrorIs(t, store.DeleteSchedule(ctx, "d"), queue.ErrNotFound, "a later delete finds nothing")
}

// The call that started a manual run says it started it, though its
// script ran twice; another call with the key did not.
func TestManualRunSentAgainAfterALostReplyReportsTheStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, arm := lostReplyStore(t)
	m := queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u", ScheduledFor: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), IdempotencyKey: "first"}
	_, started, err := store.StartManualRun(ctx, m) // the script is loaded
	require.NoError(t, err)
	require.True(t, started)

	arm()
	m.IdempotencyKey = "second"
	run, started, err := store.StartManualRun(ctx, m)
	require.NoError(t, err)
	require.Equal(t, model.RunEnqueued, run.Status)
	require.True(t, started, "this call created the run and its task")
	_, started, err = store.StartManualRun(ctx, m)
	require.NoError(t, err)
	require.False(t, started, "a later call with the key")
}
