package queue_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/queue"
)

// REDIS_URL picks the client: one Redis, Sentinel's master or a Redis
// Cluster; a malformed cluster URL says what is wanted without its
// password.
func TestOpenRedisPicksTheClient(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]any{
		"redis://127.0.0.1:6379/0":                          &redis.Client{},
		"redis-sentinel://:pw@h1:26379,h2:26379/mymaster/1": &redis.Client{},
		"redis-cluster://h1:7000,h2:7001,h3:7002":           &redis.ClusterClient{},
		"redis-cluster://user:pw@h1:7000/":                  &redis.ClusterClient{},
	} {
		c, err := queue.OpenRedis(url)
		require.NoError(t, err, url)
		require.IsType(t, want, c, url)
		require.NoError(t, c.Close())
	}
	cc, err := queue.OpenRedis("redis-cluster://user:pw@h1:7000,h2:7001")
	require.NoError(t, err)
	opts := cc.(*redis.ClusterClient).Options()
	require.Equal(t, []string{"h1:7000", "h2:7001"}, opts.Addrs)
	require.Equal(t, "user", opts.Username)
	require.Equal(t, "pw", opts.Password)
	require.Equal(t, queue.ClusterStateReload, opts.ClusterStateReloadInterval)
	require.NoError(t, cc.Close())
	for _, bad := range []string{"redis-cluster://", "redis-cluster://:s3cret@h1", "redis-cluster://h1:7000/0", "redis-cluster://h1:7000?x=1"} {
		_, err := queue.OpenRedis(bad)
		require.Error(t, err, bad)
		require.NotContains(t, err.Error(), "s3cret")
		require.Contains(t, err.Error(), "redis-cluster://")
	}
}
