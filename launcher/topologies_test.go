package launcher

import (
	"testing"

	"github.com/chronos-sched/chronos/queue/queuetest"
)

// TestLauncherOnCluster runs this package's tests again on a Redis Cluster,
// so that make test, which CI runs, holds the launcher's commands to the
// cluster's rule that a script or a transaction touches one hash slot.
// Not on Sentinel: there the launcher reaches Redis only through the
// store, whose suite runs on Sentinel (TestStoreOnSentinelAndCluster),
// and a Sentinel primary takes the same commands as one redis-server;
// make test-topologies runs it on both.
func TestLauncherOnCluster(t *testing.T) {
	t.Parallel()
	queuetest.RunOnTopologies(t, queuetest.TopologyCluster)
}
