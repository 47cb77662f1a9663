package scheduler

import (
	"testing"

	"github.com/chronos-sched/chronos/queue/queuetest"
)

// TestSchedulerOnSentinelAndCluster runs this package's tests again on a
// Sentinel set and on a Redis Cluster, both at once, so that make test,
// which CI runs, holds the scheduler to every Redis chronos supports.
func TestSchedulerOnSentinelAndCluster(t *testing.T) {
	t.Parallel()
	queuetest.RunOnTopologies(t)
}
