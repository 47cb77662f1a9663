package launcher

import (
	"testing"

	"github.com/chronos-sched/chronos/queue/queuetest"
)

// TestLauncherOnSentinelAndCluster runs this package's tests again on a
// Sentinel set and on a Redis Cluster, both at once, so that make test,
// which CI runs, holds the launcher to every Redis chronos supports.
func TestLauncherOnSentinelAndCluster(t *testing.T) {
	t.Parallel()
	queuetest.RunOnTopologies(t)
}
