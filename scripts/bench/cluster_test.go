package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/queue/queuetest"
)

// TestClusterBursts runs the cluster scenario at a tiny size: the cold and
// the warm burst on one Redis and on a 3-master cluster, every run once in
// each, the warm runs forwarded to the pending lists and each master's CPU
// read. It builds its own binary: TestScenarios removes the shared one.
func TestClusterBursts(t *testing.T) {
	ctx := context.Background()
	bin, err := queuetest.BuildChronos(ctx, t.TempDir())
	require.NoError(t, err)
	b := setupWith(t, bin)

	const n = 400
	rs, err := b.clusterBursts(ctx, n)
	require.NoError(t, err)
	require.Len(t, rs, 4)
	for i, r := range rs {
		require.Equal(t, i%2 == 1, r.warm, "cold then warm on each topology")
		require.Len(t, r.masterCPU, []int{1, clusterMasters}[i/2], r.topology)
		require.True(t, r.exactlyOnce(), "%s warm %v: %d/%d runs, %d tasks, %d matched", r.topology, r.warm, r.runsOK, r.n, r.tasks, r.matched)
		require.LessOrEqual(t, r.enq.p50, r.enq.p99)
		require.Equal(t, b.e.shards, sum(r.shards), "every shard on a master")
	}
	b.res.clusters = rs
	rows := b.clusterRows()
	var targets int
	for _, row := range rows {
		if row.target == "p99 ≤ 0.25 s" {
			targets++
		}
	}
	require.Equal(t, 1, targets, "the 0.25 s target beside the cluster's warm p99 only")
}

func sum(xs []int) (s int) {
	for _, x := range xs {
		s += x
	}
	return s
}
