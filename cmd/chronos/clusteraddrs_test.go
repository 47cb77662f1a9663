package main

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/alecthomas/kong"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/queue/queuetest"
)

// REDIS_CLUSTER_ADDRS names a cluster as REDIS_URL=redis-cluster://
// does; both set, or an entry that is not host:port, is an error.
func TestRedisClusterAddrsIsAClusterURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		c       Common
		want    string
		wantErr string
	}{
		{c: Common{RedisURL: "redis://h:1/0"}, want: "redis://h:1/0"},
		{c: Common{RedisClusterAddrs: []string{"h1:7000", " h2:7001", "[::1]:7002"}}, want: "redis-cluster://h1:7000,h2:7001,[::1]:7002"},
		{c: Common{RedisURL: "redis://h:1", RedisClusterAddrs: []string{"h1:7000"}}, wantErr: "REDIS_URL and REDIS_CLUSTER_ADDRS are both set"},
		{c: Common{RedisClusterAddrs: []string{"h1:7000", "h2"}}, wantErr: `want host:port[,host:port...], got "h2"`},
		{c: Common{RedisClusterAddrs: []string{"h1:port"}}, wantErr: `got "h1:port"`},
		{c: Common{RedisClusterAddrs: []string{":7000"}}, wantErr: `got ":7000"`},
		{c: Common{RedisClusterAddrs: []string{"h1:70000"}}, wantErr: `got "h1:70000"`},
	} {
		got, err := tc.c.redisURL()
		if tc.wantErr != "" {
			require.ErrorContains(t, err, tc.wantErr, "%+v", tc.c.RedisClusterAddrs)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, tc.want, got)
	}
}

// The variable and the flag reach the process the same way: a command
// that needs Redis accepts either, and chronos dev with one runs on that
// cluster rather than on an embedded Redis. (Not parallel: it sets the
// environment.)
func TestRedisClusterAddrsFromTheEnvironmentAndTheFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  string
		args []string
	}{
		{"environment", "h1:7000,h2:7001", []string{"scheduler"}},
		{"flag", "", []string{"scheduler", "--redis-cluster-addrs", "h1:7000,h2:7001"}},
		{"dev", "h1:7000,h2:7001", []string{"dev"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("REDIS_URL", "")
			t.Setenv("REDIS_CLUSTER_ADDRS", tc.env)
			var cli CLI
			var out bytes.Buffer
			parser, err := kong.New(&cli, kong.Writers(&out, &out))
			require.NoError(t, err)
			kctx, err := parser.Parse(tc.args)
			require.NoError(t, err)
			spec := kctx.Selected().Target.Addr().Interface().(interface{ spec() processSpec }).spec()
			require.NoError(t, spec.validate())
			require.False(t, spec.embedded)
			u, err := spec.common.redisURL()
			require.NoError(t, err)
			require.Equal(t, "redis-cluster://h1:7000,h2:7001", u)
		})
	}
}

// On a real cluster the list opens a cluster client that reaches every
// shard's slot, whichever master holds it.
func TestRedisClusterAddrsOpensTheCluster(t *testing.T) {
	t.Parallel()
	c := queuetest.StartCluster(t)
	var addrs []string
	for _, n := range c.Nodes[:2] { // a few seeds are enough
		addrs = append(addrs, n.Addr)
	}
	u, err := Common{RedisClusterAddrs: addrs}.redisURL()
	require.NoError(t, err)
	rdb, err := newRedis(u)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rdb.Close() })
	require.IsType(t, &redis.ClusterClient{}, rdb)
	ctx := context.Background()
	masters := map[string]bool{}
	for s := range 16 {
		key := fmt.Sprintf("chronos:{s%02d}:probe", s)
		require.NoError(t, rdb.Set(ctx, key, "1", 0).Err(), key)
		masters[c.MasterOf(t, key).Addr] = true
	}
	require.Greater(t, len(masters), 1, "the shards' slots span masters, and the client routed to each")
}
