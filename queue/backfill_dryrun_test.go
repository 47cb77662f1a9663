package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
)

// A dry run's answer is backfill.lua's own, in its read-only mode: over a
// range that holds every outcome (before_history, exists, key_taken,
// would_create), the backfill that follows does for each time what the
// dry run said, creating exactly the would_create ones.
func TestBackfillDryRunAgreesWithTheBackfill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := bfSetup(t, &queue.Config{RunHistory: 4})
	b.hourly(t, "agree")
	at := func(h int) time.Time { return time.Date(2026, 3, 2, h, 0, 0, 0, time.UTC) }
	// Records at 03:00, 04:00, 07:00 and 09:00: a full history whose
	// oldest is 03:00.
	for _, r := range [][2]int{{3, 5}, {7, 8}, {9, 10}} {
		b.backfill(t, queue.Backfill{ScheduleID: "agree", From: at(r[0]), To: at(r[1])})
	}
	// A manual run took the key of the 05:00 run.
	key5 := model.IdempotencyKey("agree", at(5))
	_, started, err := b.store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
		ScheduledFor: at(5), IdempotencyKey: key5})
	require.NoError(t, err)
	require.True(t, started)
	taken := queue.BackfillKeyTaken
	if shards := b.store.Config().Shards; queue.ShardOf(key5, shards) == queue.ShardOf("agree", shards) {
		taken = queue.BackfillExists // the manual run's record is in the schedule's shard
	}
	want := []queue.BackfillOutcome{
		queue.BackfillBeforeHistory, queue.BackfillBeforeHistory, // 01:00, 02:00
		queue.BackfillExists, queue.BackfillExists, // 03:00, 04:00
		taken,                     // 05:00
		queue.BackfillWouldCreate, // 06:00
		queue.BackfillExists,      // 07:00
		queue.BackfillWouldCreate, // 08:00
		queue.BackfillExists,      // 09:00
	}
	bf := queue.Backfill{ScheduleID: "agree", From: at(1), To: at(10)}
	dry := bf
	dry.DryRun = true
	planned := b.backfill(t, dry)
	got := make([]queue.BackfillOutcome, len(planned.Runs))
	for i, r := range planned.Runs {
		got[i] = r.Outcome
		require.Equal(t, at(i+1), r.RunAt.UTC())
	}
	require.Equal(t, want, got, "the dry run")
	require.Equal(t, model.SourceBackfill, planned.Runs[2].Source, "an existing run's source")
	require.Equal(t, model.RunEnqueued, planned.Runs[2].Status, "an existing run's status")

	done := b.backfill(t, bf)
	require.Equal(t, 2, done.Created)
	for i, r := range done.Runs {
		w := planned.Runs[i]
		if w.Outcome == queue.BackfillWouldCreate {
			require.Equal(t, queue.BackfillCreated, r.Outcome, "run at %s", r.RunAt)
			require.NotNil(t, r.FireAt)
			continue
		}
		require.Equal(t, w, r, "run at %s: the backfill did not do what its dry run said", r.RunAt)
	}
	for _, h := range []int{6, 8} {
		run, _, err := b.store.GetRun(ctx, model.IdempotencyKey("agree", at(h)))
		require.NoError(t, err)
		require.Equal(t, model.SourceBackfill, run.Source)
		require.Equal(t, model.RunEnqueued, run.Status)
	}
}
