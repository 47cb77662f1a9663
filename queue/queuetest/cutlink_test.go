package queuetest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/queue/queuetest"
)

// A replica whose replication link was cut misses what the primary
// acknowledged after the cut, and a failover to it loses exactly that:
// what asynchronous replication costs, and what WAIT reports.
func TestSentinelCutLinkLosesTheWritesAfterIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, link := queuetest.StartSentinelLinked(t)
	rdb := s.Client(t)
	require.NoError(t, rdb.Set(ctx, "before", "1", 0).Err())
	n, err := rdb.Wait(ctx, 1, 5*time.Second).Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "replicated through the link")

	// Past the sentinels' failover-timeout of a plain set (10 s), when
	// they would point the replica around the proxy.
	<-time.After(11 * time.Second)
	replica := redis.NewClient(&redis.Options{Addr: s.Redis[1].Addr})
	defer replica.Close()
	info, err := replica.Info(ctx, "replication").Result()
	require.NoError(t, err)
	_, port, _ := strings.Cut(link.Addr, ":")
	require.Contains(t, info, "master_port:"+port+"\r\n", "the replica still replicates through the link")

	link.Cut(true)
	require.NoError(t, rdb.Set(ctx, "after", "1", 0).Err(), "the primary acknowledges")
	n, err = rdb.Wait(ctx, 1, 200*time.Millisecond).Result()
	require.NoError(t, err)
	require.Zero(t, n, "WAIT says no replica has it")

	promoted, window := s.KillPrimary(t)
	require.Equal(t, s.Redis[1], promoted)
	t.Logf("replica promoted %s after the kill", window.Round(time.Millisecond))
	require.Eventually(t, func() bool { return rdb.Get(ctx, "before").Val() == "1" }, 20*time.Second, 20*time.Millisecond)
	require.Zero(t, rdb.Exists(ctx, "after").Val(), "the write after the cut is lost")
}
