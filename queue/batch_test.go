package queue_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// Concurrent upserts share pipelines; each caller must get its own
// answer, and a script Redis has forgotten must be loaded again.
func TestConcurrentUpsertsEachGetTheirOwnResult(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := queuetest.StartRedis(t).Universal(t)
	store, err := queue.NewStore(ctx, rdb, queue.RealClock{}, nil)
	require.NoError(t, err)
	record := func(id, expr string) *model.ScheduleRecord {
		return &model.ScheduleRecord{ID: id, Kind: model.KindCron, Target: model.TargetWorkflow, WorkflowID: "wf", Version: "1",
			CronExpr: expr, Timezone: "Europe/Berlin", OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupNone}
	}
	upsert := func(ctx context.Context, id, expr string) (*queue.UpsertResult, error) {
		return store.UpsertSchedule(ctx, record(id, expr))
	}
	require.NoError(t, record("s", "0 9 * * *").Validate())

	const n = 400
	results := make([]*queue.UpsertResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { results[i], errs[i] = upsert(ctx, fmt.Sprintf("s%03d", i), fmt.Sprintf("%d * * * *", i%60)) })
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		require.True(t, results[i].Created, "s%03d", i)
		require.Equal(t, fmt.Sprintf("s%03d", i), results[i].Schedule.ID)
		require.Equal(t, fmt.Sprintf("%d * * * *", i%60), results[i].Schedule.CronExpr)
		got, err := store.GetSchedule(ctx, fmt.Sprintf("s%03d", i))
		require.NoError(t, err)
		require.Equal(t, results[i].Schedule.NextRunAt, got.NextRunAt)
	}

	require.NoError(t, rdb.ScriptFlush(ctx).Err())
	res, err := upsert(ctx, "after-flush", "0 9 * * *")
	require.NoError(t, err)
	require.True(t, res.Created)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = upsert(cancelled, "never", "0 9 * * *")
	require.ErrorIs(t, err, context.Canceled)

	// Callers giving up while their batch forms get their answer or their
	// context's error, never an empty answer.
	giveUp, cancel := context.WithCancel(ctx)
	defer cancel()
	for i := range n {
		wg.Go(func() { results[i], errs[i] = upsert(giveUp, fmt.Sprintf("g%03d", i), "0 9 * * *") })
		if i == n/2 {
			cancel()
		}
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			require.ErrorIs(t, errs[i], context.Canceled)
		} else {
			require.Equal(t, fmt.Sprintf("g%03d", i), results[i].Schedule.ID)
		}
	}
}
