package queuetest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterNodeTimeout is cluster-node-timeout of a test cluster: a master
// unreachable this long is failed and its replica promoted. Short for
// quick failovers, long enough that a busy 2-core machine does not fail a
// healthy master.
const ClusterNodeTimeout = 2 * time.Second

// clusterReady bounds the wait for a new cluster's cluster_state:ok.
const clusterReady = 30 * time.Second

// Cluster is a Redis Cluster owned by one test: masters and their
// replicas, each a redis-server on a loopback port with persistence off.
type Cluster struct {
	// Nodes are every node in start order: the masters, then the
	// replicas. Roles change on failover: Masters asks the cluster.
	Nodes []*Node
	// URL is REDIS_URL for chronos: redis-cluster://host:port,...
	URL string
}

// StartCluster starts a Redis Cluster of 3 masters, each with one replica,
// waits until every node reports cluster_state:ok, every replica is in
// sync and every node sees the same slots, and kills it in t.Cleanup.
// extra are more redis-server arguments for every node.
func StartCluster(t testing.TB, extra ...string) *Cluster {
	t.Helper()
	return StartClusterOf(t, 3, 1, extra...)
}

// StartClusterOf is StartCluster with masters masters and
// replicasPerMaster replicas of each (0 for a cluster without failover).
// The slots are split evenly over the masters, in start order.
func StartClusterOf(t testing.TB, masters, replicasPerMaster int, extra ...string) *Cluster {
	t.Helper()
	if masters < 1 || replicasPerMaster < 0 {
		t.Fatalf("StartClusterOf(%d, %d): want 1 master or more", masters, replicasPerMaster)
	}
	return startClusterIn(t, t.TempDir(), nil, masters, replicasPerMaster, extra...)
}

// startClusterIn is StartClusterOf in dir; with lent set, the nodes are
// lent ones (shared.go), added to lent as they start and left running at
// the end of the test.
func startClusterIn(t testing.TB, dir string, lent *nodeSet, masters, replicasPerMaster int, extra ...string) *Cluster {
	t.Helper()
	c := &Cluster{}
	total := masters * (1 + replicasPerMaster)
	for i := range total {
		n := startNodeOf(t, lent, dir, fmt.Sprintf("node%d", i), func() int { return clusterPort(t) }, func(port int, d string) []string {
			return append(RedisArgs(port, d),
				append([]string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
					"--cluster-node-timeout", strconv.Itoa(int(ClusterNodeTimeout / time.Millisecond)),
					// A replica may always be promoted, however long it was
					// cut off: a test kills masters on purpose.
					"--cluster-replica-validity-factor", "0",
					"--appendfsync", "no"}, extra...)...)
		})
		c.Nodes = append(c.Nodes, n)
	}
	addrs := make([]string, total)
	for i, n := range c.Nodes {
		addrs[i] = n.Addr
	}
	c.URL = "redis-cluster://" + strings.Join(addrs, ",")

	// Slots: an even split, in ADDSLOTS (Redis 6 has no ADDSLOTSRANGE).
	for i := range masters {
		lo, hi := i*16384/masters, (i+1)*16384/masters
		args := []any{"cluster", "addslots"}
		for s := lo; s < hi; s++ {
			args = append(args, s)
		}
		c.do(t, c.Nodes[i], args...)
	}
	// Every node meets the first; gossip introduces the rest.
	for _, n := range c.Nodes[1:] {
		c.do(t, n, "cluster", "meet", "127.0.0.1", c.Nodes[0].Port)
	}
	poll(t, clusterReady, "every node knows every node", func() (bool, string) {
		for _, n := range c.Nodes {
			if nodes, err := c.clusterNodes(n); err != nil || len(nodes) != total {
				return false, fmt.Sprintf("%s knows %d nodes (%v)", n.Addr, len(nodes), err)
			}
		}
		return true, ""
	})
	for r := range replicasPerMaster {
		for i := range masters {
			replica, master := c.Nodes[masters*(1+r)+i], c.Nodes[i]
			id := c.do(t, master, "cluster", "myid").(string)
			c.do(t, replica, "cluster", "replicate", id)
		}
	}
	c.WaitOK(t, clusterReady)
	return c
}

// do runs one command on a node, failing the test on an error.
func (c *Cluster) do(t testing.TB, n *Node, args ...any) any {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
	defer rdb.Close()
	v, err := rdb.Do(context.Background(), args...).Result()
	if err != nil {
		t.Fatalf("%s on %s: %v", args[:min(len(args), 3)], n.Addr, err)
	}
	return v
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, addr, master string // master: the master's id, "-" for a master
	flags            []string
	slots            []string
}

func (cn clusterNode) is(flag string) bool { return slices.Contains(cn.flags, flag) }

// clusterNodes reads CLUSTER NODES from n.
func (c *Cluster) clusterNodes(n *Node) ([]clusterNode, error) {
	rdb := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1, DialTimeout: 500 * time.Millisecond,
		ReadTimeout: time.Second})
	defer rdb.Close()
	text, err := rdb.ClusterNodes(context.Background()).Result()
	if err != nil {
		return nil, err
	}
	var out []clusterNode
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		out = append(out, clusterNode{id: f[0], addr: addr, flags: strings.Split(f[2], ","), master: f[3], slots: f[8:]})
	}
	return out, nil
}

// node returns the Node at addr.
func (c *Cluster) node(addr string) *Node {
	for _, n := range c.Nodes {
		if n.Addr == addr {
			return n
		}
	}
	return nil
}

// view reads CLUSTER NODES from the first live node that answers.
func (c *Cluster) view() ([]clusterNode, error) {
	var lastErr error
	for _, n := range c.Nodes {
		if !n.Alive() {
			continue
		}
		nodes, err := c.clusterNodes(n)
		if err == nil {
			return nodes, nil
		}
		lastErr = err
	}
	return nil, fmt.Errorf("no cluster node answers: %v", lastErr)
}

// WaitOK waits until every live node reports cluster_state:ok with all
// 16384 slots served, agrees on which nodes serve which slots, and every
// live replica's link to its master is up.
func (c *Cluster) WaitOK(t testing.TB, timeout time.Duration) {
	t.Helper()
	poll(t, timeout, "cluster_state:ok on every node", func() (bool, string) { return c.ok() })
}

func (c *Cluster) ok() (bool, string) {
	ctx := context.Background()
	var want string
	for _, n := range c.Nodes {
		if !n.Alive() {
			continue
		}
		rdb := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1, DialTimeout: 500 * time.Millisecond, ReadTimeout: time.Second})
		info, err := rdb.ClusterInfo(ctx).Result()
		var repl string
		if err == nil {
			repl, err = rdb.Info(ctx, "replication").Result()
		}
		rdb.Close()
		if err != nil {
			return false, fmt.Sprintf("%s: %v", n.Addr, err)
		}
		if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_ok:16384") {
			return false, fmt.Sprintf("%s: %s", n.Addr, strings.Join(strings.Fields(info)[:3], " "))
		}
		if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
			return false, fmt.Sprintf("%s: replica not in sync", n.Addr)
		}
		nodes, err := c.clusterNodes(n)
		if err != nil {
			return false, fmt.Sprintf("%s: %v", n.Addr, err)
		}
		var slots []string
		for _, cn := range nodes {
			if cn.is("master") && !cn.is("fail") && len(cn.slots) > 0 {
				slots = append(slots, cn.addr+"="+strings.Join(cn.slots, " "))
			}
		}
		slices.Sort(slots)
		got := strings.Join(slots, "; ")
		if want == "" {
			want = got
		} else if got != want {
			return false, fmt.Sprintf("nodes disagree on the slots: %q vs %q", want, got)
		}
	}
	return true, ""
}

// Masters returns the nodes serving slots now, as the cluster sees them.
func (c *Cluster) Masters(t testing.TB) []*Node {
	t.Helper()
	nodes, err := c.view()
	if err != nil {
		t.Fatal(err)
	}
	var out []*Node
	for _, cn := range nodes {
		if cn.is("master") && !cn.is("fail") && len(cn.slots) > 0 {
			out = append(out, c.node(cn.addr))
		}
	}
	return out
}

// ReplicasOf returns the live replicas of master m, as the cluster sees
// them.
func (c *Cluster) ReplicasOf(t testing.TB, m *Node) []*Node {
	t.Helper()
	nodes, err := c.view()
	if err != nil {
		t.Fatal(err)
	}
	var id string
	for _, cn := range nodes {
		if cn.addr == m.Addr {
			id = cn.id
		}
	}
	var out []*Node
	for _, cn := range nodes {
		if id != "" && cn.master == id && !cn.is("fail") {
			out = append(out, c.node(cn.addr))
		}
	}
	return out
}

// MasterOf returns the master serving key's slot.
func (c *Cluster) MasterOf(t testing.TB, key string) *Node {
	t.Helper()
	slot := Slot(key)
	nodes, err := c.view()
	if err != nil {
		t.Fatal(err)
	}
	for _, cn := range nodes {
		if !cn.is("master") || cn.is("fail") {
			continue
		}
		for _, r := range cn.slots {
			lo, hi, isRange := strings.Cut(r, "-")
			if !isRange {
				hi = lo
			}
			l, err1 := strconv.Atoi(lo)
			h, err2 := strconv.Atoi(hi)
			if err1 == nil && err2 == nil && l <= slot && slot <= h {
				return c.node(cn.addr)
			}
		}
	}
	t.Fatalf("no master serves slot %d (key %q)", slot, key)
	return nil
}

// KillMaster kills master m (SIGKILL, as a crash), waits until one of its
// replicas is promoted and the cluster is ok again, and returns the new
// master and how long the slots had no master (from the kill to the
// cluster's ok). m stays down; m.Restart brings it back as a replica.
func (c *Cluster) KillMaster(t testing.TB, m *Node) (*Node, time.Duration) {
	t.Helper()
	replicas := c.ReplicasOf(t, m)
	if len(replicas) == 0 {
		t.Fatalf("kill master %s: it has no replica to promote", m.Addr)
	}
	killed := time.Now()
	m.Kill()
	promoted := c.WaitPromoted(t, m, replicas, 5*ClusterNodeTimeout+10*time.Second)
	return promoted, time.Since(killed)
}

// WaitPromoted waits until one of replicas (of old, a master) is a
// master serving slots, old is no longer one, and every live node is ok.
func (c *Cluster) WaitPromoted(t testing.TB, old *Node, replicas []*Node, timeout time.Duration) *Node {
	t.Helper()
	var promoted *Node
	poll(t, timeout, "a replica of "+old.Addr+" promoted", func() (bool, string) {
		nodes, err := c.view()
		if err != nil {
			return false, err.Error()
		}
		promoted = nil
		for _, cn := range nodes {
			if !cn.is("master") || cn.is("fail") || len(cn.slots) == 0 {
				continue
			}
			if cn.addr == old.Addr {
				return false, old.Addr + " still serves slots"
			}
			for _, r := range replicas {
				if r.Addr == cn.addr {
					promoted = r
				}
			}
		}
		if promoted == nil {
			return false, "no replica of " + old.Addr + " is a master yet"
		}
		return c.ok()
	})
	return promoted
}

// Failover makes replica its master's master with CLUSTER FAILOVER (the
// coordinated manual failover: the master stops taking writes until the
// replica has them all, so nothing acknowledged is lost), and waits until
// the cluster is ok with it serving the slots.
func (c *Cluster) Failover(t testing.TB, replica *Node) {
	t.Helper()
	nodes, err := c.clusterNodes(replica)
	if err != nil {
		t.Fatal(err)
	}
	var old *Node
	for _, cn := range nodes {
		if cn.is("myself") {
			for _, m := range nodes {
				if m.id == cn.master {
					old = c.node(m.addr)
				}
			}
		}
	}
	if old == nil {
		t.Fatalf("failover to %s: it is not a replica", replica.Addr)
	}
	c.do(t, replica, "cluster", "failover")
	if got := c.WaitPromoted(t, old, []*Node{replica}, 30*time.Second); got != replica {
		t.Fatalf("failover to %s: %s was promoted", replica.Addr, got.Addr)
	}
}

// ClusterStateReload is the ClusterStateReloadInterval of Client. go-redis
// reloads the slot map on MOVED, but not when a master stops answering:
// with its default of 60 s a client keeps dialling a dead master for up
// to a minute after its replica took over.
const ClusterStateReload = time.Second

// Client returns a cluster client seeded with every node that reloads the
// slot map every ClusterStateReload, closed in t.Cleanup.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ClusterStateReloadInterval: ClusterStateReload})
	rdb.AddHook(NewKeyGuard())
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// Slot is the Redis Cluster hash slot of key: CRC16 of its hash tag (the
// text between the first { and the next }, when not empty) or of the
// whole key, mod 16384.
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % 16384)
}

// crc16 is CRC-16/XMODEM, the cluster's key hash.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
