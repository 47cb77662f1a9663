package asynqwire_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/asynqwire"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// Every script of the package writes, so a full Redis refuses each one
// whole, before it runs: none writes part of its work past maxmemory.
func TestScriptsRefusedWholeWhenFull(t *testing.T) {
	t.Parallel()
	rdb := queuetest.StartRedis(t, "--maxmemory", "4mb", "--maxmemory-policy", "noeviction").Universal(t)
	ctx := context.Background()
	store, err := queue.NewStore(ctx, rdb, queue.NewSimClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), nil)
	require.NoError(t, err)
	require.True(t, store.ScriptFlags(), "Redis 7 understands script flags")
	// A task due, so that Forward has something to move: with nothing
	// due it reads and writes nothing.
	require.NoError(t, rdb.ZAdd(ctx, asynqwire.Keys{Queue: queue.ShardQueue(queue.QueueNameDefault, 0)}.Scheduled(),
		redis.Z{Member: "due", Score: 1}).Err())
	queuetest.Fill(t, rdb)
	for name, sc := range asynqwire.Scripts {
		keys := make([]string, 8)
		args := make([]any, 8)
		for i := range keys {
			keys[i] = "{x}:k" + string(rune('a'+i))
			args[i] = "1"
		}
		err := sc.Run(ctx, rdb, keys, args...).Err()
		require.True(t, queue.IsFull(err), "%s: want refused as full, got %v", name, err)
	}
	_, err = store.Tasks().Forward(ctx, time.Now())
	require.True(t, queue.IsFull(err), "Forward says why: %v", err)
}
