package queue_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/queue/asynqwire"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// TestKeyGuardRefusesAKeyNotInKEYS holds the guard that every queue,
// scheduler and launcher suite runs its scripts under (queuetest.KeyGuard)
// to what it promises: a chronos script that reads or writes a key it
// was not given in KEYS fails (asynqwire's run queue scripts too), even one in the same hash slot, which
// Redis Cluster itself lets through; declared keys, commands without
// keys and other programs' scripts pass.
func TestKeyGuardRefusesAKeyNotInKEYS(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := queuetest.StartRedis(t).Universal(t)
	const prelude = "-- Generated from queue/schema.go by loadScript.\n"
	declared := []string{"chronos:{s01}:due"}

	// A key built from a prefix in ARGV, in the slot of KEYS[1].
	built := prelude + "return redis.call('HGET', ARGV[1] .. 'sched:x', 'next')"
	err := rdb.Eval(ctx, built, declared, "chronos:{s01}:").Err()
	require.ErrorContains(t, err, "chronos keyguard: HGET of key chronos:{s01}:sched:x, which is not in KEYS")

	// The run queue's scripts (asynqwire's) are checked too: asynq's own
	// dequeue builds a task's key from the id it pops; asynqwire's must not.
	popped := "#!lua\n" + asynqwire.ScriptPrelude + "local id = redis.call('RPOPLPUSH', KEYS[1], KEYS[2]) " +
		"return redis.call('HGET', 'asynq:{q}:t:' .. id, 'msg')"
	require.NoError(t, rdb.LPush(ctx, "asynq:{q}:pending", "1").Err())
	err = redis.NewScript(popped).Run(ctx, rdb, []string{"asynq:{q}:pending", "asynq:{q}:active"}).Err()
	require.ErrorContains(t, err, "chronos keyguard: HGET of key asynq:{q}:t:1, which is not in KEYS")

	// Every key of a multi-key command is checked, and pcall too.
	multi := prelude + "return redis.pcall('DEL', KEYS[1], 'chronos:{s01}:other')"
	require.ErrorContains(t, rdb.Eval(ctx, multi, declared).Err(), "DEL of key chronos:{s01}:other")

	// A command the guard does not know fails rather than passing unchecked.
	unknown := prelude + "return redis.call('GETDEL', KEYS[1])"
	require.ErrorContains(t, rdb.Eval(ctx, unknown, declared).Err(), "GETDEL is unknown to the guard")

	// Declared keys and a channel pass, through EVALSHA as well (the
	// client sends the script again after NOSCRIPT).
	ok := "#!lua\n" + prelude + "redis.call('ZADD', KEYS[1], 1, 'a') redis.call('PUBLISH', 'c', 'a') return redis.call('ZCARD', KEYS[1])"
	for range 2 {
		n, err := redis.NewScript(ok).Run(ctx, rdb, declared).Int()
		require.NoError(t, err)
		require.Equal(t, 1, n)
	}

	// A script without the chronos prelude (asynq's) is not checked. Its
	// key shares KEYS[1]'s slot, which a cluster itself requires.
	require.NoError(t, rdb.Eval(ctx, "return redis.call('EXISTS', 'asynq:{s01}chronos}:t:1')", declared).Err())
}
