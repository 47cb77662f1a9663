package queuetest_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/queue/queuetest"
)

// Under a topology, StartRedis lends the next test the set the last one
// gave back, emptied; a set whose configuration a test changed, or whose
// node it killed, is not lent again.
func TestStartRedisLendsSetsAgainEmptied(t *testing.T) {
	for _, topo := range []string{queuetest.TopologyCluster, queuetest.TopologySentinel} {
		t.Run(topo, func(t *testing.T) {
			t.Setenv(queuetest.TopologyEnv, topo)
			ctx := context.Background()
			var first string
			t.Run("writes", func(t *testing.T) {
				r := queuetest.StartRedis(t)
				first = r.URL
				rdb := r.Universal(t)
				require.NoError(t, rdb.Set(ctx, "left-behind", "x", 0).Err())
				require.NoError(t, rdb.ScriptLoad(ctx, "return 1").Err())
			})
			t.Run("gets it again, empty", func(t *testing.T) {
				r := queuetest.StartRedis(t)
				require.Equal(t, first, r.URL)
				rdb := r.Universal(t)
				require.Empty(t, queuetest.Keys(t, rdb, "*"))
				exists, err := rdb.ScriptExists(ctx, "e0e1f9fabfc9d4800c877a703b823ac0578ff8db").Result()
				require.NoError(t, err)
				require.Equal(t, []bool{false}, exists, "the script cache is empty")
			})
			if topo == queuetest.TopologySentinel {
				return // the checks that follow are the same on both
			}
			var changed string
			t.Run("changes a setting", func(t *testing.T) {
				r := queuetest.StartRedis(t)
				require.Equal(t, first, r.URL)
				require.NoError(t, r.Universal(t).ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err())
			})
			t.Run("gets another, kills a node", func(t *testing.T) {
				r := queuetest.StartRedis(t)
				changed = r.URL
				require.NotEqual(t, first, changed)
				r.Cluster().Nodes[2].Kill()
			})
			t.Run("gets another", func(t *testing.T) {
				r := queuetest.StartRedis(t)
				require.NotEqual(t, changed, r.URL)
				require.NotEqual(t, first, r.URL)
			})
		})
	}
}
