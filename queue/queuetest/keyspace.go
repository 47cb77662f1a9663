package queuetest

import (
	"context"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// Keys returns every key matching pattern, whatever the topology: KEYS on
// one server, on every master of a cluster (a cluster client sends a
// keyless command to one node, which holds only its own slots' keys).
func Keys(t testing.TB, rdb redis.UniversalClient, pattern string) []string {
	t.Helper()
	keys, err := keysEverywhere(context.Background(), rdb, pattern)
	require.NoError(t, err)
	return keys
}

// FlushAll empties Redis, whatever the topology: FLUSHDB on one server,
// on every master of a cluster.
func FlushAll(t testing.TB, rdb redis.UniversalClient) {
	t.Helper()
	ctx := context.Background()
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		require.NoError(t, rdb.FlushDB(ctx).Err())
		return
	}
	require.NoError(t, cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		return m.FlushDB(ctx).Err()
	}))
}

// DelKeys deletes keys one command each: a cluster refuses one DEL of
// keys in several slots (CROSSSLOT).
func DelKeys(t testing.TB, rdb redis.UniversalClient, keys []string) {
	t.Helper()
	ctx := context.Background()
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.Del(ctx, k)
		}
		return nil
	})
	require.NoError(t, err)
}

// forEachServer calls f with a client of each server that takes writes:
// the one server, or every master of a cluster, one after another.
func forEachServer(ctx context.Context, rdb redis.UniversalClient, f func(context.Context, redis.UniversalClient) error) error {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return f(ctx, rdb)
	}
	var mu sync.Mutex
	return cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		return f(ctx, m)
	})
}

// FindKeys is Keys for code without a test at hand (an executor, a
// polling condition): it returns the error instead of failing.
func FindKeys(ctx context.Context, rdb redis.UniversalClient, pattern string) ([]string, error) {
	return keysEverywhere(ctx, rdb, pattern)
}
