package queue_test

import (
	"testing"

	"github.com/chronos-sched/chronos/queue/queuetest"
)

// TestStoreOnSentinelAndCluster runs this package's tests again on a
// Sentinel set and on a Redis Cluster, both at once, so that make test,
// which CI runs, holds the store to every Redis chronos supports. The
// store is where the topologies differ: how a client finds its primary,
// and which keys a script or a pipeline may touch together.
func TestStoreOnSentinelAndCluster(t *testing.T) {
	t.Parallel()
	queuetest.RunOnTopologies(t, queuetest.TopologySentinel, queuetest.TopologyCluster)
}
