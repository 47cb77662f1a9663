package queue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// A launcher reads, with a run's status, when it was enqueued and how many
// executor calls failed before; failed calls are counted only while the
// run has not started, and a run gone stays gone.
func TestLoadLaunchReadsEnqueueTimeAndFailedAttempts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := queuetest.StartRedis(t).Universal(t)
	clock := queue.NewSimClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	store, err := queue.NewStore(ctx, rdb, clock, nil)
	require.NoError(t, err)
	require.NoError(t, store.PutWorkflow(ctx, "wf", "1", []byte(`{}`)))
	_, _, err = store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
		ScheduledFor: clock.Now(), IdempotencyKey: "k"})
	require.NoError(t, err)
	p := &queue.TaskPayload{IdempotencyKey: "k", WorkflowID: "wf", Version: "1", Source: model.SourceManual}

	st, err := store.LoadLaunch(ctx, p)
	require.NoError(t, err)
	require.Equal(t, model.RunEnqueued, st.Status)
	require.True(t, st.EnqueuedAt.Equal(clock.Now()), "enqueued at %v", st.EnqueuedAt)
	require.Zero(t, st.FailedAttempts)
	require.JSONEq(t, `{}`, string(st.DAG))

	for i := range 2 {
		require.NoError(t, store.RecordFailedAttempt(ctx, p, clock.Now().Add(time.Duration(i+1)*time.Second), fmt.Sprintf("boom %d", i+1)))
	}
	st, err = store.LoadLaunch(ctx, p)
	require.NoError(t, err)
	require.Equal(t, 2, st.FailedAttempts)
	require.True(t, st.RetryAt.Equal(clock.Now().Add(2*time.Second)), "retry at %v", st.RetryAt)
	// The run shows the retry at once: how many attempts failed, why the
	// last did, when the next is.
	run, _, err := store.GetRun(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, model.RunEnqueued, run.Status)
	require.Equal(t, 2, run.Attempts)
	require.Equal(t, "boom 2", run.LastError)
	require.NotNil(t, run.NextAttemptAt)
	require.True(t, run.NextAttemptAt.Equal(clock.Now().Add(2*time.Second)), "next attempt at %v", run.NextAttemptAt)

	_, err = store.UpdateRunStatus(ctx, "k", queue.StatusUpdate{Status: model.RunStarted})
	require.NoError(t, err)
	require.NoError(t, store.RecordFailedAttempt(ctx, p, clock.Now(), "boom"))
	st, err = store.LoadLaunch(ctx, p)
	require.NoError(t, err)
	require.Equal(t, model.RunStarted, st.Status)
	require.Equal(t, 2, st.FailedAttempts)
	run, _, err = store.GetRun(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, 2, run.Attempts, "a started run keeps its failed attempts")
	require.Equal(t, "boom 2", run.LastError)
	require.Nil(t, run.NextAttemptAt, "no next attempt once started")

	gone := &queue.TaskPayload{IdempotencyKey: "gone", WorkflowID: "wf", Version: "1", Source: model.SourceManual}
	require.NoError(t, store.RecordFailedAttempt(ctx, gone, clock.Now(), "boom"))
	st, err = store.LoadLaunch(ctx, gone)
	require.NoError(t, err)
	require.Equal(t, model.RunStatus(""), st.Status)
	require.Empty(t, queuetest.Keys(t, rdb, "*run:gone"), "a failed attempt of a run gone made a record")
}

// A manual run's record lives RUN_RETENTION past its scheduled time, not
// past its creation: one due in 10 days is readable until it runs.
func TestManualRunRecordOutlivesItsWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := queuetest.StartRedis(t).Universal(t)
	clock := queue.NewSimClock(time.Now())
	store, err := queue.NewStore(ctx, rdb, clock, nil)
	require.NoError(t, err)
	at := clock.Now().Add(10 * 24 * time.Hour)
	_, started, err := store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
		ScheduledFor: at, IdempotencyKey: "later"})
	require.NoError(t, err)
	require.True(t, started)
	keys := queuetest.Keys(t, rdb, "chronos:*:run:later")
	require.Len(t, keys, 1)
	ttl := rdb.TTL(ctx, keys[0]).Val()
	require.InDelta(t, (10*24*time.Hour + queue.RunRetentionDefault).Seconds(), ttl.Seconds(), 5)
}

// Runs read together are read in one pipeline, but one run whose state
// does not read (here its workflow's key holds the wrong type) fails
// only its own launch.
func TestOneUnreadableRunDoesNotFailTheOthersLoadedWithIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := queuetest.StartRedis(t).Universal(t)
	store, err := queue.NewStore(ctx, rdb, queue.RealClock{}, nil)
	require.NoError(t, err)
	require.NoError(t, store.PutWorkflow(ctx, "good", "1", []byte(`{}`)))
	require.NoError(t, rdb.HSet(ctx, "chronos:wf:{bad}:1", "not", "a dag").Err())
	var ps []*queue.TaskPayload
	for _, wf := range []string{"good", "bad"} {
		for i := range 3 {
			key := fmt.Sprintf("%s-%d", wf, i)
			_, _, err := store.StartManualRun(ctx, queue.ManualRun{WorkflowID: wf, Version: "1", UserID: "u",
				ScheduledFor: time.Now().Add(-time.Second), IdempotencyKey: key})
			require.NoError(t, err)
			ps = append(ps, &queue.TaskPayload{IdempotencyKey: key, WorkflowID: wf, Version: "1", Source: model.SourceManual})
		}
	}
	states, errs := store.LoadLaunches(ctx, ps)
	require.Len(t, states, len(ps))
	require.Len(t, errs, len(ps))
	for i, p := range ps {
		if p.WorkflowID == "bad" {
			require.ErrorContains(t, errs[i], "WRONGTYPE", p.IdempotencyKey)
			require.Nil(t, states[i])
			continue
		}
		require.NoError(t, errs[i], p.IdempotencyKey)
		require.Equal(t, model.RunEnqueued, states[i].Status)
		require.JSONEq(t, `{}`, string(states[i].DAG))
	}
}
