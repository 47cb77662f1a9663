package queue_test

import (
	"context"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

func TestEvictionPolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("Noeviction", func(t *testing.T) {
		t.Parallel()
		rdb := queuetest.StartRedis(t, "--maxmemory-policy", "noeviction").Universal(t)
		require.NoError(t, queue.CheckEvictionPolicy(ctx, rdb))
	})
	t.Run("Evicting", func(t *testing.T) {
		t.Parallel()
		rdb := queuetest.StartRedis(t, "--maxmemory-policy", "allkeys-lru").Universal(t)
		err := queue.CheckEvictionPolicy(ctx, rdb)
		require.ErrorContains(t, err, "maxmemory-policy is allkeys-lru")
		require.ErrorContains(t, err, "noeviction")
	})
	t.Run("ConfigDisabled", func(t *testing.T) {
		t.Parallel()
		// Managed services rename CONFIG; INFO memory still tells.
		rdb := queuetest.StartRedis(t, "--maxmemory-policy", "volatile-lru", "--rename-command", "CONFIG", "").Universal(t)
		require.Error(t, rdb.ConfigGet(ctx, "maxmemory-policy").Err())
		p, err := queue.EvictionPolicy(ctx, rdb)
		require.NoError(t, err)
		require.Equal(t, "volatile-lru", p)
	})
	t.Run("Miniredis", func(t *testing.T) {
		t.Parallel()
		rdb := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
		t.Cleanup(func() { _ = rdb.Close() })
		require.ErrorIs(t, queue.CheckEvictionPolicy(ctx, rdb), queue.ErrPolicyUnknown)
	})
}
