package queue_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// A manual run that names the schedule whose run's key it takes
// (ManualRun.ScheduleID) lives in that schedule's shard: record, task
// and mark in one hash slot, where the schedule's commit looks, and no
// mark in any other shard. Its status reports find it from the task.
func TestManualRunOfAScheduledKeyLivesInTheSchedulesShard(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupMethod(t, queuetest.StartRedis(t), 1)
	const id = "sched-manual"
	at := methodNow.Truncate(time.Minute).Add(2 * time.Minute)
	key := model.IdempotencyKey(id, at)
	sh, keySh := queue.ShardOf(id, queue.ShardsDefault), queue.ShardOf(key, queue.ShardsDefault)
	require.NotEqual(t, sh, keySh, "the case needs a key whose own shard is another")

	// A key that is not the schedule's run at that time is refused and
	// writes nothing.
	keysBefore := queuetest.Keys(t, b.rdb, "*")
	_, _, err := b.store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
		ScheduledFor: at.Add(time.Minute), IdempotencyKey: key, ScheduleID: id})
	require.ErrorIs(t, err, queue.ErrInvalidManualRun)
	require.ElementsMatch(t, keysBefore, queuetest.Keys(t, b.rdb, "*"))

	m := queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u", ScheduledFor: at, IdempotencyKey: key, ScheduleID: id}
	run, started, err := b.store.StartManualRun(ctx, m)
	require.NoError(t, err)
	require.True(t, started)
	require.Equal(t, model.SourceManual, run.Source)
	require.Equal(t, int64(1), b.rdb.Exists(ctx, queue.RunKey(sh, key)).Val(), "the record is in the schedule's shard")
	require.Equal(t, queue.FlagSet, b.rdb.Get(ctx, queue.ManualKeyPrefix(sh)+key).Val(),
		"the mark is where the schedule's commit looks")
	marks := queuetest.Keys(t, b.rdb, "chronos:*:manual:*")
	require.Equal(t, []string{queue.ManualKeyPrefix(sh) + key}, marks, "no other shard is marked")
	for _, k := range queuetest.Keys(t, b.rdb, "*") {
		if strings.Contains(k, key) {
			require.Equal(t, queuetest.Slot(queue.RunKey(sh, key)), queuetest.Slot(k), "%s is in the schedule's slot", k)
		}
	}

	// Asking again finds it and starts nothing.
	_, started, err = b.store.StartManualRun(ctx, m)
	require.NoError(t, err)
	require.False(t, started)

	// The task is in the schedule's shard queue and says so, so a
	// launcher reports to the right shard.
	_, err = b.store.Tasks().Forward(ctx, at.Add(time.Hour)) // due at its time
	require.NoError(t, err)
	tasks, err := b.store.RunQueue(sh).Take(ctx, 10)
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	p, err := queue.DecodeTaskPayload(tasks[0].Payload)
	require.NoError(t, err)
	require.Equal(t, id, p.ShardOf)
	require.Empty(t, p.ScheduleID, "a manual run, not the schedule's")
	require.NoError(t, b.store.ReportTaskStatus(ctx, p, queue.StatusUpdate{Status: model.RunStarted}))
	got, err := b.store.GetScheduleRun(ctx, id, key)
	require.NoError(t, err)
	require.Equal(t, model.RunStarted, got.Status)
}
