package queuetest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/chronos-sched/chronos/queue/queuetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).reaper"))
}

func TestSlotMatchesCLUSTERKEYSLOT(t *testing.T) {
	t.Parallel()
	c := queuetest.StartClusterOf(t, 1, 0)
	rdb := c.Client(t)
	for _, key := range []string{"", "a", "chronos:{s00}:due", "asynq:{chronos}:t:x", "{}x", "a{b}c{d}", "{{x}}", "foo{}{bar}"} {
		want, err := rdb.ClusterKeySlot(context.Background(), key).Result()
		require.NoError(t, err)
		require.Equal(t, int(want), queuetest.Slot(key), "slot of %q", key)
	}
}

// The cluster serves keys on every master, survives a master's crash by
// promoting its replica (what was replicated before the kill is there),
// and a manual CLUSTER FAILOVER loses nothing.
func TestClusterFailover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := queuetest.StartCluster(t)
	require.Len(t, c.Masters(t), 3)
	rdb := c.Client(t)
	keys := map[*queuetest.Node]string{}
	for i := 0; len(keys) < 3; i++ {
		k := fmt.Sprintf("k%d", i)
		require.NoError(t, rdb.Set(ctx, k, "v", 0).Err())
		keys[c.MasterOf(t, k)] = k
	}
	for m := range keys {
		require.Len(t, c.ReplicasOf(t, m), 1, "replicas of %s", m.Addr)
	}

	victim := c.MasterOf(t, "k0")
	replica := c.ReplicasOf(t, victim)[0]
	// WAIT: the write is on the replica before the crash.
	require.NoError(t, rdb.Set(ctx, "k0", "before-kill", 0).Err())
	waitReplicated(t, rdb, "k0")
	promoted, window := c.KillMaster(t, victim)
	require.Equal(t, replica, promoted)
	t.Logf("master %s killed, replica %s promoted after %s", victim.Addr, promoted.Addr, window.Round(time.Millisecond))
	require.Equal(t, promoted, c.MasterOf(t, "k0"))
	require.Eventually(t, func() bool { return rdb.Get(ctx, "k0").Val() == "before-kill" }, 10*time.Second, 20*time.Millisecond)

	// The old master comes back as a replica of the promoted one; a
	// coordinated failover hands the slots back.
	victim.Restart(t)
	require.Eventually(t, func() bool {
		r := c.ReplicasOf(t, promoted)
		return len(r) == 1 && r[0] == victim
	}, 20*time.Second, 20*time.Millisecond)
	c.WaitOK(t, 20*time.Second)
	require.NoError(t, rdb.Set(ctx, "k0", "before-failover", 0).Err())
	c.Failover(t, victim)
	require.Equal(t, victim, c.MasterOf(t, "k0"))
	require.Eventually(t, func() bool { return rdb.Get(ctx, "k0").Val() == "before-failover" }, 10*time.Second, 20*time.Millisecond)
}

// waitReplicated sends WAIT 1 on the connection that serves key's slot.
func waitReplicated(t *testing.T, rdb *redis.ClusterClient, key string) {
	t.Helper()
	ctx := context.Background()
	m, err := rdb.MasterForKey(ctx, key)
	require.NoError(t, err)
	n, err := m.Wait(ctx, 1, 5*time.Second).Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "replicas that acknowledged the write")
}

// The sentinels fail a crashed primary over to its replica, the
// failover client follows, and SENTINEL FAILOVER hands it back.
func TestSentinelFailover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := queuetest.StartSentinel(t)
	rdb := s.Client(t)
	first := s.Primary(t)
	require.Equal(t, s.Redis[0], first)
	require.NoError(t, rdb.Set(ctx, "k", "before-kill", 0).Err())
	n, err := rdb.Wait(ctx, 1, 5*time.Second).Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, n)

	promoted, window := s.KillPrimary(t)
	require.Equal(t, s.Redis[1], promoted)
	t.Logf("primary %s killed, replica %s promoted after %s", first.Addr, promoted.Addr, window.Round(time.Millisecond))
	require.Eventually(t, func() bool { return rdb.Get(ctx, "k").Val() == "before-kill" }, 20*time.Second, 20*time.Millisecond)
	require.NoError(t, rdb.Set(ctx, "k", "after-kill", 0).Err())

	// The old primary comes back as a replica; a sentinel failover hands
	// the role back without losing the write.
	first.Restart(t)
	require.Eventually(t, func() bool {
		c := redis.NewClient(&redis.Options{Addr: first.Addr})
		defer c.Close()
		info, err := c.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "role:slave") && strings.Contains(info, "master_link_status:up")
	}, 30*time.Second, 50*time.Millisecond, "the old primary never became an in-sync replica")
	require.Equal(t, first, s.Failover(t))
	require.Eventually(t, func() bool { return rdb.Get(ctx, "k").Val() == "after-kill" }, 20*time.Second, 20*time.Millisecond)
}
