package asynqwire_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/queue/asynqwire"
)

// take_tasks.lua checks each task it pops after the first against the
// next id read, instead of reading the list's end before each pop: a task
// that is not that id goes back to the end of the pending list, as it
// was, and the take ends there. A list that runs out ends it too, and
// the tasks other launchers hold in the active list stay as they are.
func TestTakeChecksThePoppedTaskAndPutsBackAStrangerOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, q, _, c := casQueue(t, ":nothing", func(int) {})
	enqueue(t, c, nil, "k1", "k2", "k3")
	k := q.Keys()
	require.NoError(t, rdb.RPush(ctx, k.Active(), "held-by-another").Err())
	expiry := time.Now().Add(time.Minute).Unix()
	take := func(n int, ids ...string) []any {
		keys := []string{k.Pending(), k.Paused(), k.Active(), k.Lease()}
		args := []any{expiry, n}
		for _, id := range ids {
			keys, args = append(keys, k.Task(id)), append(args, id)
		}
		v, err := asynqwire.Scripts["take_tasks"].Run(ctx, rdb, keys, args...).Slice()
		require.NoError(t, err)
		return v
	}

	// k1 is the list's end; k2 comes next, not k3.
	v := take(3, "k1", "k3")
	require.Len(t, v, 3, "k1 alone: %v", v)
	require.Equal(t, "0", v[0])
	require.Equal(t, "k1", v[1])
	require.Equal(t, []string{"k3", "k2"}, rdb.LRange(ctx, k.Pending(), 0, -1).Val(), "k2 back at the end")
	require.Equal(t, []string{"k1", "held-by-another"}, rdb.LRange(ctx, k.Active(), 0, -1).Val())
	require.Equal(t, []string{"k1"}, rdb.ZRange(ctx, k.Lease(), 0, -1).Val())
	require.Equal(t, "pending", rdb.HGet(ctx, k.Task("k2"), "state").Val())

	// k2, k3, then the list is empty: a fourth id read takes nothing more.
	v = take(5, "k2", "k3", "k4")
	require.Equal(t, []any{"0", "k2", v[2], "k3", v[4]}, v)
	require.Zero(t, rdb.LLen(ctx, k.Pending()).Val())
	require.Equal(t, []string{"k3", "k2", "k1", "held-by-another"}, rdb.LRange(ctx, k.Active(), 0, -1).Val())
	lease := rdb.ZRangeWithScores(ctx, k.Lease(), 0, -1).Val()
	require.Len(t, lease, 3)
	for _, z := range lease {
		require.Equal(t, "active", rdb.HGet(ctx, k.Task(z.Member.(string)), "state").Val())
		require.Equal(t, float64(expiry), z.Score, "leased until the expiry given")
	}
}
