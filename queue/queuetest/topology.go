package queuetest

import (
	"os"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TopologyEnv is the environment variable that chooses what StartRedis
// starts, so the same integration suites run on each Redis chronos
// supports:
//
//   - "standalone" (or empty): one redis-server;
//   - "sentinel": StartSentinel, a primary, a replica and three sentinels;
//     Client follows the primary through the sentinels, URL is
//     redis-sentinel://…, Addr the first primary;
//   - "cluster": StartClusterOf 3 masters with ClusterReplicasEnv
//     replicas each (default 0: no failover, fewer processes); URL is
//     redis-cluster://…, Addr the first master, Universal a cluster
//     client, and Client skips the test, which needs one node.
//
// Under sentinel or cluster, StartRedis lends each test a set that later
// tests of the same binary get again, emptied (shared.go). make test runs
// the store suite with it set to sentinel and to cluster, and the
// scheduler and launcher suites with it set to cluster (RunOnTopologies);
// make test-topologies runs all three on both, one package at a time.
const TopologyEnv = "CHRONOS_TEST_TOPOLOGY"

// ClusterReplicasEnv is the number of replicas of each master (0 to 2,
// default 0) of the cluster StartRedis starts under
// CHRONOS_TEST_TOPOLOGY=cluster. A test that kills a master needs 1, so
// that its replica is promoted; make test-failover sets it.
const ClusterReplicasEnv = "CHRONOS_TEST_CLUSTER_REPLICAS"

// Topologies StartRedis can start.
const (
	TopologyStandalone = "standalone"
	TopologySentinel   = "sentinel"
	TopologyCluster    = "cluster"
)

// Topology returns the topology TopologyEnv names, failing the test on a
// value it does not know.
func Topology(t testing.TB) string {
	t.Helper()
	switch v := os.Getenv(TopologyEnv); v {
	case "", TopologyStandalone:
		return TopologyStandalone
	case TopologySentinel, TopologyCluster:
		return v
	default:
		t.Fatalf("%s=%q: want standalone, sentinel or cluster", TopologyEnv, v)
		return ""
	}
}

// startTopology returns the Sentinel set or Cluster TopologyEnv names, or
// nil for a standalone server: one lent to the test (shared.go), or,
// with extra redis-server arguments, one of its own.
func startTopology(t testing.TB, extra ...string) *Redis {
	t.Helper()
	topo := Topology(t)
	switch {
	case topo == TopologyStandalone:
		return nil
	case len(extra) == 0:
		return lend(t, topo)
	case topo == TopologySentinel:
		return StartSentinel(t, extra...).Server()
	default:
		c := StartClusterOf(t, 3, clusterReplicas(t), extra...)
		return &Redis{Addr: c.Nodes[0].Addr, URL: c.URL, cluster: c}
	}
}

// Universal returns a client for the server, whatever the topology: a
// *redis.Client on one server, one that follows the primary through the
// sentinels on Sentinel, a *redis.ClusterClient on Cluster. Closed in
// t.Cleanup.
func (r *Redis) Universal(t testing.TB) redis.UniversalClient {
	t.Helper()
	if r.cluster != nil {
		return r.cluster.Client(t)
	}
	return r.Client(t)
}

// Sentinel is the Sentinel set StartRedis started under
// CHRONOS_TEST_TOPOLOGY=sentinel, nil otherwise.
func (r *Redis) Sentinel() *Sentinel { return r.sentinel }

// Cluster is the Cluster StartRedis started under
// CHRONOS_TEST_TOPOLOGY=cluster, nil otherwise.
func (r *Redis) Cluster() *Cluster { return r.cluster }

// clusterReplicas returns the replicas per master ClusterReplicasEnv asks
// for, failing the test on a value out of range.
func clusterReplicas(t testing.TB) int {
	t.Helper()
	v := os.Getenv(ClusterReplicasEnv)
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > 2 {
		t.Fatalf("%s=%q: want 0, 1 or 2", ClusterReplicasEnv, v)
	}
	return n
}
