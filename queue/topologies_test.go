package queue_test

import (
	"testing"

	"github.com/chronos-sched/chronos/queue/queuetest"
)

// TestStoreOnSentinelAndCluster runs this package's tests again on a
// Sentinel set and on a Redis Cluster, both at once, so that make test,
// which CI runs, holds the store to every Redis chronos supports.
func TestStoreOnSentinelAndCluster(t *testing.T) {
	t.Parallel()
	queuetest.RunOnTopologies(t)
}
