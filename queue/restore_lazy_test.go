package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// NewStore does not probe RESTORE: only a scheduler's fast commits
// RESTORE records, so API and launcher processes never pay the probe.
// The first fast commit probes, and RESTOREs its records.
func TestRestoreIsProbedAtTheFirstFastCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n := queuetest.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: n.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	restores := func() float64 { return queuetest.ReadRedisStats(t, rdb).Cmds["restore"].Calls }

	clock := queue.NewSimClock(runsMadeT.Add(-time.Hour))
	store, err := queue.NewStore(ctx, rdb, clock, nil)
	require.NoError(t, err)
	other, err := queue.NewStore(ctx, rdb, clock, nil)
	require.NoError(t, err)
	require.Zero(t, restores(), "no probe in NewStore")

	id := "lazy"
	sh := runsMadeSchedule(t, other, clock, id)
	require.Zero(t, restores())
	_, plans, applied, err := store.TickDue(ctx, sh, runsMadeT.Add(time.Second), 100, planAt)
	require.NoError(t, err)
	require.Equal(t, []bool{true}, applied)
	require.True(t, plans[0].Runs[0].Written)
	require.EqualValues(t, 1, store.FastPages())
	// The probe's RESTORE and the run's.
	require.EqualValues(t, 2, restores())
	require.True(t, store.RestoresRecords())
	require.EqualValues(t, 2, restores(), "probed once")
}
