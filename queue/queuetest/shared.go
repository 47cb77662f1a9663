package queuetest

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// StartRedis under CHRONOS_TEST_TOPOLOGY=sentinel or cluster lends each
// test a Sentinel set or a Cluster of its own, started on first need and
// lent again, emptied, to a later test of the same test binary. Starting
// one is most of what such a test costs: a cluster's nodes must meet and
// agree on the slots, three sentinels must find each other through
// hello messages sent every 2 s. A set is lent to one test at a time,
// never shared by two at once: chronos's keys, asynq's queues and the
// channels they publish on have fixed names, and a Redis Cluster has
// only database 0, so two tests on one set would see each other's runs.
//
// When its test ends, a set is lent again only when it is as it was
// lent: no node was killed, restarted or paused, every node has the
// configuration it started with (CONFIG GET *), the first primary is
// still the primary, replicas are in sync and the sentinels or cluster
// nodes agree; then FLUSHALL and SCRIPT FLUSH empty it. A set that is
// not so, or whose test failed, is killed. So a test that fails over,
// lowers maxmemory or kills a node may do so on a lent set, and the next
// test gets a fresh one. StartRedis with extra arguments starts a set of
// the test's own, as before.
var lender struct {
	mu    sync.Mutex
	idle  map[string][]*lentSet // by topology and replicas per master
	swept bool
}

// lentSet is one Sentinel set or Cluster that StartRedis lends.
type lentSet struct {
	key      string
	dir      string
	nodes    *nodeSet
	sentinel *Sentinel
	cluster  *Cluster
	config   map[string]map[string]string // CONFIG GET * of each data node, by address, once up
}

// lend returns a set of topology topo for the test, taken from the idle
// ones or started, and gives it back in t.Cleanup.
func lend(t testing.TB, topo string) *Redis {
	t.Helper()
	key, replicas := topo, 0
	if topo == TopologyCluster {
		replicas = clusterReplicas(t)
		key += "/" + strconv.Itoa(replicas)
	}
	lender.mu.Lock()
	var ls *lentSet
	if idle := lender.idle[key]; len(idle) > 0 {
		ls = idle[len(idle)-1]
		lender.idle[key] = idle[:len(idle)-1]
	}
	lender.mu.Unlock()
	if ls == nil {
		ls = newLentSet(t, key, topo, replicas)
	}
	t.Cleanup(func() { giveBack(t, ls) })
	if ls.sentinel != nil {
		return ls.sentinel.Server()
	}
	return &Redis{Addr: ls.cluster.Nodes[0].Addr, URL: ls.cluster.URL, cluster: ls.cluster}
}

// newLentSet starts a set to lend, killing what it started when it fails.
func newLentSet(t testing.TB, key, topo string, replicas int) *lentSet {
	t.Helper()
	sweepLentDirs()
	dir, err := os.MkdirTemp("", fmt.Sprintf("chronos-queuetest-%d-", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	ls := &lentSet{key: key, dir: dir, nodes: &nodeSet{}}
	up := false
	defer func() { // also when a start fails the test (runtime.Goexit)
		if !up {
			ls.close()
		}
	}()
	switch topo {
	case TopologySentinel:
		ls.sentinel, _ = startSentinelIn(t, dir, ls.nodes, false)
	default:
		ls.cluster = startClusterIn(t, dir, ls.nodes, 3, replicas)
	}
	ls.config = map[string]map[string]string{}
	for _, n := range ls.dataNodes() {
		cfg, err := configOf(n)
		if err != nil {
			t.Fatalf("CONFIG GET * on %s: %v", n.Addr, err)
		}
		ls.config[n.Addr] = cfg
	}
	up = true
	return ls
}

// giveBack empties ls and makes it idle, or kills it when it is not as
// it was lent (or its test failed).
func giveBack(t testing.TB, ls *lentSet) {
	err := ls.reset(t.Failed())
	if err != nil {
		t.Logf("queuetest: the %s set lent to this test is not lent again (killed): %v", ls.key, err)
		ls.close()
		return
	}
	lender.mu.Lock()
	if lender.idle == nil {
		lender.idle = map[string][]*lentSet{}
	}
	lender.idle[ls.key] = append(lender.idle[ls.key], ls)
	lender.mu.Unlock()
}

// close kills the set's nodes and removes its files.
func (ls *lentSet) close() {
	ls.nodes.kill()
	_ = os.RemoveAll(ls.dir)
}

// dataNodes are the set's redis-servers that hold data (not sentinels).
func (ls *lentSet) dataNodes() []*Node {
	if ls.sentinel != nil {
		return ls.sentinel.Redis
	}
	return ls.cluster.Nodes
}

// lentSettle bounds the wait, when a set comes back, for its sentinels
// or nodes to agree again (a test may end while a sentinel is still
// noticing a replica reconnect, for one).
const lentSettle = 5 * time.Second

// reset checks that ls is as it was lent and empties it.
func (ls *lentSet) reset(failed bool) error {
	if failed {
		return fmt.Errorf("the test failed")
	}
	if ls.nodes.disturbed() {
		return fmt.Errorf("the test killed, restarted or paused a node")
	}
	healthy := func() (bool, string) {
		if ls.sentinel != nil {
			return ls.sentinel.ready(ls.sentinel.Redis[0])
		}
		return ls.cluster.ok()
	}
	if err := settle(lentSettle, healthy); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, n := range ls.dataNodes() {
		cfg, err := configOf(n)
		if err != nil {
			return fmt.Errorf("CONFIG GET * on %s: %w", n.Addr, err)
		}
		if !maps.Equal(cfg, ls.config[n.Addr]) {
			return fmt.Errorf("the configuration of %s changed: %s", n.Addr, configDiff(ls.config[n.Addr], cfg))
		}
		rdb := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1, DialTimeout: time.Second})
		err = emptyNode(ctx, rdb)
		rdb.Close()
		if err != nil {
			return fmt.Errorf("empty %s: %w", n.Addr, err)
		}
	}
	// FLUSHALL reaches the replicas after the masters answered: healthy
	// again means every replica's link is up, and WAIT above had them
	// take it.
	return settle(lentSettle, healthy)
}

// emptyNode flushes a master's data and waits until its replicas have
// the flush too; on every node it empties the script cache, as a new
// server's is.
func emptyNode(ctx context.Context, rdb *redis.Client) error {
	role, err := rdb.Do(ctx, "role").Slice()
	if err != nil {
		return err
	}
	if len(role) > 0 && role[0] == "master" {
		if err := rdb.FlushAll(ctx).Err(); err != nil {
			return err
		}
		if replicas, _ := role[2].([]any); len(replicas) > 0 {
			n, err := rdb.Wait(ctx, len(replicas), 5*time.Second).Result()
			if err != nil {
				return err
			}
			if int(n) < len(replicas) {
				return fmt.Errorf("FLUSHALL reached %d of %d replicas", n, len(replicas))
			}
		}
	}
	return rdb.ScriptFlush(ctx).Err()
}

// configOf reads CONFIG GET * from n.
func configOf(n *Node) (map[string]string, error) {
	rdb := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1, DialTimeout: time.Second})
	defer rdb.Close()
	return rdb.ConfigGet(context.Background(), "*").Result()
}

// configDiff names the settings that differ between a and b.
func configDiff(a, b map[string]string) string {
	var d []string
	for k, v := range b {
		if a[k] != v {
			d = append(d, fmt.Sprintf("%s %q -> %q", k, a[k], v))
		}
	}
	return strings.Join(d, ", ")
}

// settle calls f every 20 ms until it returns true or timeout passes:
// poll, for a caller that must not fail the test.
func settle(timeout time.Duration, f func() (bool, string)) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, msg := f()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not settled within %s: %s", timeout, msg)
		}
		<-tick.C
	}
}

// sweepLentDirs removes, once per test binary, the directories of lent
// sets of test binaries that have exited: a lent set's files outlive its
// binary, whose exit kills the nodes (Pdeathsig) but removes nothing.
func sweepLentDirs() {
	lender.mu.Lock()
	defer lender.mu.Unlock()
	if lender.swept {
		return
	}
	lender.swept = true
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "chronos-queuetest-*-*"))
	for _, d := range dirs {
		pidText, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(d), "chronos-queuetest-"), "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			_ = os.RemoveAll(d)
		}
	}
}
