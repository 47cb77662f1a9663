package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
	"github.com/chronos-sched/chronos/scheduler"
)

// After an outage, catch-up none drops the missed runs and writes one
// record of them under a key of its own; a backfill of the outage
// replays every missed run, the last one included, keeps the record, and
// a second backfill creates nothing.
func TestBackfillReplaysTheRunsACatchupDropped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := bfSetup(t, nil)
	b.hourly(t, "outage")
	sched, err := scheduler.New(b.store, nil, nil, nil)
	require.NoError(t, err)
	shard := queue.ShardOf("outage", b.store.Config().Shards)
	b.clock.Set(bfT0.Add(5*time.Hour + 30*time.Minute)) // 11:00 .. 15:00 missed
	require.NoError(t, sched.TickShard(ctx, shard))
	runs, err := b.store.ListRuns(ctx, "outage", 100)
	require.NoError(t, err)
	require.Len(t, runs, 1, "one record of the runs dropped")
	require.Equal(t, model.ReasonCatchupDropped, runs[0].Reason)
	require.Equal(t, bfT0.Add(5*time.Hour), runs[0].RunAt)
	require.Equal(t, model.CatchupDroppedKey("outage", bfT0.Add(5*time.Hour)), runs[0].IdempotencyKey, "a key of its own")

	bf := queue.Backfill{ScheduleID: "outage", From: bfT0.Add(time.Hour), To: bfT0.Add(5*time.Hour + time.Minute)}
	dry := bf
	dry.DryRun = true
	require.Equal(t, map[queue.BackfillOutcome]int{queue.BackfillWouldCreate: 5}, outcomes(b.backfill(t, dry)))

	res := b.backfill(t, bf)
	require.Equal(t, 5, res.Created)
	all := queuetest.RequireRuns(t, b.store, "outage", "", append(hours(bfT0.Add(time.Hour), 5), hours(bfT0.Add(5*time.Hour), 1)...)...)
	for _, r := range all {
		if r.IdempotencyKey == runs[0].IdempotencyKey {
			require.Equal(t, model.ReasonCatchupDropped, r.Reason, "the record of the drop stays")
			continue
		}
		require.Equal(t, model.IdempotencyKey("outage", r.RunAt), r.IdempotencyKey)
		require.Equal(t, model.RunEnqueued, r.Status, "run at %s", r.RunAt)
		require.Equal(t, model.SourceBackfill, r.Source)
		require.Empty(t, r.Reason)
		require.Empty(t, r.Error)
	}
	again := b.backfill(t, bf)
	require.Equal(t, 0, again.Created)
	require.Equal(t, map[queue.BackfillOutcome]int{queue.BackfillExists: 5}, outcomes(again))
}
