package queuetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the master name the test sentinels monitor.
const SentinelMaster = "chronos"

// SentinelDownAfter is down-after-milliseconds of the test sentinels: a
// primary unreachable this long is failed over. Short for quick
// failovers, long enough that a busy 2-core machine does not fail a
// healthy primary.
const SentinelDownAfter = 2 * time.Second

// Sentinel is a primary, its replica and three sentinels owned by one
// test, each a redis-server on a loopback port with persistence off.
type Sentinel struct {
	// Redis are the data nodes in start order: the first primary, then
	// the replica. Roles change on failover: Primary asks the sentinels.
	Redis []*Node
	// Sentinels are the three sentinels (quorum 2).
	Sentinels []*Node
	// URL is REDIS_URL for chronos:
	// redis-sentinel://host:port,host:port,host:port/chronos
	URL string
}

// StartSentinel starts a primary, one replica and three sentinels
// monitoring them as SentinelMaster with quorum 2, waits until the
// replica is in sync and every sentinel knows the replica and the other
// sentinels, and kills them all in t.Cleanup. extra are more
// redis-server arguments for the primary and the replica.
func StartSentinel(t testing.TB, extra ...string) *Sentinel {
	t.Helper()
	s, _ := startSentinel(t, false, extra...)
	return s
}

// StartSentinelLinked is StartSentinel with the replica replicating
// through a Proxy: Cut on it is a replication link that went down, so a
// failover after it loses the writes the primary took meanwhile.
func StartSentinelLinked(t testing.TB, extra ...string) (*Sentinel, *Proxy) {
	t.Helper()
	return startSentinel(t, true, extra...)
}

func startSentinel(t testing.TB, linked bool, extra ...string) (*Sentinel, *Proxy) {
	t.Helper()
	return startSentinelIn(t, t.TempDir(), nil, linked, extra...)
}

// startSentinelIn is startSentinel in dir; with lent set, the nodes are
// lent ones (shared.go), added to lent as they start and left running at
// the end of the test.
func startSentinelIn(t testing.TB, dir string, lent *nodeSet, linked bool, extra ...string) (*Sentinel, *Proxy) {
	t.Helper()
	s := &Sentinel{}
	port := func() int { return sentinelPort(t) }
	startNode := func(t testing.TB, parent, name string, port func() int, argsFor func(int, string) []string) *Node {
		t.Helper()
		return startNodeOf(t, lent, parent, name, port, argsFor)
	}
	primary := startNode(t, dir, "primary", port, func(p int, d string) []string {
		return append(RedisArgs(p, d), extra...)
	})
	var link *Proxy
	upstream := primary.Port
	if linked {
		link = StartProxy(t, primary.Addr)
		_, ps, _ := strings.Cut(link.Addr, ":")
		upstream, _ = strconv.Atoi(ps)
	}
	replica := startNode(t, dir, "replica", port, func(p int, d string) []string {
		return append(RedisArgs(p, d), append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(upstream)}, extra...)...)
	})
	s.Redis = []*Node{primary, replica}
	failoverTimeout := 5 * SentinelDownAfter
	if linked {
		// Sentinels point a replica that names another master address
		// (the proxy) back at the primary's own once failover-timeout has
		// passed; this keeps the link through the proxy for the test.
		failoverTimeout = time.Hour
	}
	addrs := make([]string, 3)
	for i := range 3 {
		n := startNode(t, dir, fmt.Sprintf("sentinel%d", i), port, func(p int, d string) []string {
			conf := filepath.Join(d, "sentinel.conf")
			text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndaemonize no\ndir %s\nloglevel warning\n"+
				"sentinel monitor %s 127.0.0.1 %d 2\n"+
				"sentinel down-after-milliseconds %[3]s %[5]d\n"+
				"sentinel failover-timeout %[3]s %[6]d\n"+
				"sentinel parallel-syncs %[3]s 1\n",
				p, d, SentinelMaster, primary.Port, SentinelDownAfter.Milliseconds(), failoverTimeout.Milliseconds())
			if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			return []string{conf, "--sentinel"}
		})
		s.Sentinels = append(s.Sentinels, n)
		addrs[i] = n.Addr
	}
	s.URL = "redis-sentinel://" + strings.Join(addrs, ",") + "/" + SentinelMaster
	poll(t, 30*time.Second, "replica in sync, sentinels know it and each other", func() (bool, string) {
		return s.ready(primary)
	})
	return s, link
}

// Server is the set as StartRedis returns it under
// CHRONOS_TEST_TOPOLOGY=sentinel, for a test that started it itself.
func (s *Sentinel) Server() *Redis {
	return &Redis{Addr: s.Redis[0].Addr, URL: s.URL, sentinel: s}
}

// ready reports whether primary's replicas are in sync and every live
// sentinel names primary, knows a replica and the two other sentinels.
func (s *Sentinel) ready(primary *Node) (bool, string) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: primary.Addr, MaxRetries: -1, DialTimeout: 500 * time.Millisecond})
	repl, err := rdb.Info(ctx, "replication").Result()
	rdb.Close()
	if err != nil {
		return false, fmt.Sprintf("primary %s: %v", primary.Addr, err)
	}
	if !strings.Contains(repl, "role:master") || !strings.Contains(repl, "state=online") {
		return false, "primary " + primary.Addr + " has no replica online"
	}
	for _, n := range s.Sentinels {
		if !n.Alive() {
			continue
		}
		sc := redis.NewSentinelClient(&redis.Options{Addr: n.Addr, MaxRetries: -1, DialTimeout: 500 * time.Millisecond})
		m, err := sc.Master(ctx, SentinelMaster).Result()
		sc.Close()
		if err != nil {
			return false, fmt.Sprintf("sentinel %s: %v", n.Addr, err)
		}
		if addr := m["ip"] + ":" + m["port"]; addr != primary.Addr {
			return false, fmt.Sprintf("sentinel %s names %s, not %s", n.Addr, addr, primary.Addr)
		}
		if strings.Contains(m["flags"], "down") || m["num-slaves"] == "0" || m["num-other-sentinels"] != "2" {
			return false, fmt.Sprintf("sentinel %s: flags %s, %s replicas, %s other sentinels",
				n.Addr, m["flags"], m["num-slaves"], m["num-other-sentinels"])
		}
	}
	return true, ""
}

// Primary returns the primary the sentinels name now.
func (s *Sentinel) Primary(t testing.TB) *Node {
	t.Helper()
	ctx := context.Background()
	var lastErr error
	for _, n := range s.Sentinels {
		if !n.Alive() {
			continue
		}
		sc := redis.NewSentinelClient(&redis.Options{Addr: n.Addr, MaxRetries: -1, DialTimeout: 500 * time.Millisecond})
		addr, err := sc.GetMasterAddrByName(ctx, SentinelMaster).Result()
		sc.Close()
		if err == nil && len(addr) == 2 {
			for _, r := range s.Redis {
				if r.Addr == addr[0]+":"+addr[1] {
					return r
				}
			}
			t.Fatalf("sentinel %s names %v, which is none of ours", n.Addr, addr)
		}
		lastErr = err
	}
	t.Fatalf("no sentinel names the primary: %v", lastErr)
	return nil
}

// KillPrimary kills the primary (SIGKILL, as a crash), waits until the
// sentinels have promoted the replica and it takes writes, and returns
// the new primary and how long writes had nowhere to go (from the kill to
// the new primary's role:master as the sentinels name it). The old
// primary stays down; Restart brings it back, and the sentinels make it
// a replica.
func (s *Sentinel) KillPrimary(t testing.TB) (*Node, time.Duration) {
	t.Helper()
	old := s.Primary(t)
	killed := time.Now()
	old.Kill()
	promoted := s.WaitFailover(t, old, 5*SentinelDownAfter+20*time.Second)
	return promoted, time.Since(killed)
}

// Failover asks the sentinels for a failover (SENTINEL FAILOVER: no
// agreement needed, the primary stays up and becomes a replica) and
// waits until the replica is the primary.
func (s *Sentinel) Failover(t testing.TB) *Node {
	t.Helper()
	old := s.Primary(t)
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.Sentinels[0].Addr, MaxRetries: -1})
	defer sc.Close()
	if err := sc.Failover(context.Background(), SentinelMaster).Err(); err != nil {
		t.Fatalf("SENTINEL FAILOVER: %v", err)
	}
	return s.WaitFailover(t, old, 30*time.Second)
}

// WaitFailover waits until every live sentinel names a primary other
// than old, and that primary answers ROLE as a master; it returns it.
func (s *Sentinel) WaitFailover(t testing.TB, old *Node, timeout time.Duration) *Node {
	t.Helper()
	var promoted *Node
	ctx := context.Background()
	poll(t, timeout, "failover away from "+old.Addr, func() (bool, string) {
		promoted = nil
		for _, n := range s.Sentinels {
			if !n.Alive() {
				continue
			}
			sc := redis.NewSentinelClient(&redis.Options{Addr: n.Addr, MaxRetries: -1, DialTimeout: 500 * time.Millisecond})
			addr, err := sc.GetMasterAddrByName(ctx, SentinelMaster).Result()
			sc.Close()
			if err != nil || len(addr) != 2 {
				return false, fmt.Sprintf("sentinel %s: %v", n.Addr, err)
			}
			a := addr[0] + ":" + addr[1]
			if a == old.Addr {
				return false, fmt.Sprintf("sentinel %s still names %s", n.Addr, a)
			}
			for _, r := range s.Redis {
				if r.Addr == a {
					promoted = r
				}
			}
		}
		if promoted == nil {
			return false, "no sentinel names one of our nodes"
		}
		rdb := redis.NewClient(&redis.Options{Addr: promoted.Addr, MaxRetries: -1, DialTimeout: 500 * time.Millisecond})
		role, err := rdb.Do(ctx, "role").Slice()
		rdb.Close()
		if err != nil || len(role) == 0 || role[0] != "master" {
			return false, fmt.Sprintf("%s: role %v (%v)", promoted.Addr, role, err)
		}
		return true, ""
	})
	return promoted
}

// Client returns a go-redis failover client for the set (it follows the
// primary the sentinels name), closed in t.Cleanup.
func (s *Sentinel) Client(t testing.TB) *redis.Client {
	t.Helper()
	addrs := make([]string, len(s.Sentinels))
	for i, n := range s.Sentinels {
		addrs[i] = n.Addr
	}
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: SentinelMaster, SentinelAddrs: addrs})
	rdb.AddHook(NewKeyGuard())
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}
