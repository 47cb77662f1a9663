// Package queuetest holds test helpers shared by chronos's packages: a real
// redis-server on a free port, and assertions on run records.
package queuetest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// Redis is a redis-server process owned by one test.
type Redis struct {
	Addr string
	URL  string

	sentinel *Sentinel // CHRONOS_TEST_TOPOLOGY=sentinel (topology.go)
	cluster  *Cluster  // CHRONOS_TEST_TOPOLOGY=cluster
}

// StartRedis starts a real redis-server on a free loopback port with
// persistence off, and stops it in t.Cleanup. A missing redis-server fails
// the test: integration tests never skip. extra are more redis-server
// arguments, e.g. "--maxmemory", "4mb". CHRONOS_TEST_TOPOLOGY=sentinel or
// cluster lends the test a Sentinel set or a Cluster instead (topology.go,
// shared.go).
func StartRedis(t testing.TB, extra ...string) *Redis {
	t.Helper()
	if r := startTopology(t, extra...); r != nil {
		return r
	}
	// startNode retries on another port when the one FreePort chose was
	// taken before the server bound it, and checks that the server
	// answering is this one, not another test's that took the port.
	n := startNode(t, t.TempDir(), "redis", func() int { return FreePort(t) }, func(port int, dir string) []string {
		return append(RedisArgs(port, dir), extra...)
	})
	return &Redis{Addr: n.Addr, URL: "redis://" + n.Addr}
}

// StartServer starts a standalone redis-server, whatever
// CHRONOS_TEST_TOPOLOGY, that the test may kill, pause and restart on
// its port (Node), with persistence off: a restart loses the data. It is
// killed in t.Cleanup. extra are more redis-server arguments.
func StartServer(t testing.TB, extra ...string) *Node {
	t.Helper()
	return startNode(t, t.TempDir(), "redis", func() int { return FreePort(t) }, func(port int, dir string) []string {
		return append(RedisArgs(port, dir), extra...)
	})
}

// Client returns a go-redis client for the server, closed in t.Cleanup.
// On Sentinel it follows the primary; on Cluster, where one node is not
// the whole keyspace, it skips the test (Universal works everywhere).
func (r *Redis) Client(t testing.TB) *redis.Client {
	t.Helper()
	switch {
	case r.sentinel != nil:
		return r.sentinel.Client(t)
	case r.cluster != nil:
		t.Skipf("%s=cluster: this test needs one Redis node (*redis.Client); Universal runs on Cluster", TopologyEnv)
	}
	c := redis.NewClient(&redis.Options{Addr: r.Addr})
	c.AddHook(NewKeyGuard())
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// FreePort returns a TCP port free on 127.0.0.1 now.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := Port()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// Port returns a TCP port free on 127.0.0.1 now. FreePort is the test
// form; programs (the benchmark) call this one.
func Port() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// RedisArgs are redis-server's arguments for a throwaway server on a
// loopback port: no persistence, in the foreground, warnings only.
func RedisArgs(port int, dir string) []string {
	return []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir, "--daemonize", "no", "--loglevel", "warning"}
}

// WaitRedis pings addr until it answers, timeout passes or ctx ends;
// exited (may be nil) reports that the server process is gone, which
// stops the wait early.
func WaitRedis(ctx context.Context, addr string, timeout time.Duration, exited func() bool) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(timeout)
	for {
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		err := c.Ping(pctx).Err()
		cancel()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case exited != nil && exited():
			return fmt.Errorf("redis-server on %s exited", addr)
		case time.Now().After(deadline):
			return fmt.Errorf("redis-server on %s did not answer within %s: %w", addr, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Fill makes Redis full: it writes 2 MiB of filler keys (fewer if Redis
// refuses them first), then lowers maxmemory to 1 MiB under the memory
// used, so Redis stays over it whatever its buffers do, and refuses
// writes under noeviction. On a cluster it does so on every master (each
// has its own maxmemory), so every slot refuses writes. Deleting the
// returned keys (DelKeys) gets it back under.
func Fill(t testing.TB, rdb redis.UniversalClient) []string {
	t.Helper()
	ctx := context.Background()
	value := strings.Repeat("x", 64<<10)
	const perServer = 32
	// serverOf names the server a key lives on.
	serverOf := func(string) string { return "" }
	servers := 1
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		servers = 0
		require.NoError(t, forEachServer(ctx, rdb, func(context.Context, redis.UniversalClient) error { servers++; return nil }))
		serverOf = func(k string) string {
			m, err := cc.MasterForKey(ctx, k)
			if err != nil {
				t.Fatalf("fill Redis: the master of %s: %v", k, err)
			}
			return m.Options().Addr
		}
	}
	var keys []string
	written := map[string]int{}
	for i := 0; i < 4*perServer*servers && len(keys) < perServer*servers; i++ {
		k := fmt.Sprintf("queuetest:filler:%d", i)
		srv := serverOf(k)
		if written[srv] >= perServer {
			continue
		}
		if err := rdb.Set(ctx, k, value, 0).Err(); err != nil {
			if !strings.HasPrefix(err.Error(), "OOM ") {
				t.Fatalf("fill Redis: %v", err)
			}
			written[srv] = perServer // this one is full already
			continue
		}
		keys = append(keys, k)
		written[srv]++
	}
	err := forEachServer(ctx, rdb, func(ctx context.Context, srv redis.UniversalClient) error {
		info, err := srv.Info(ctx, "memory").Result()
		if err != nil {
			return err
		}
		var used int64
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
				used, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		if used < 2<<20 {
			return fmt.Errorf("used_memory %d of %d filler keys: start it with --maxmemory of 4mb or more", used, len(keys))
		}
		return srv.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used-1<<20, 10)).Err()
	})
	if err != nil {
		t.Fatalf("fill Redis: %v", err)
	}
	return keys
}

func lastLines(s string, n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// BeforeScriptHook is a go-redis hook that calls Fn (once) just before the
// client's next script is sent: for tests that make another process act
// between a caller's read and its script.
type BeforeScriptHook struct{ Fn func() }

func (h *BeforeScriptHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *BeforeScriptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *BeforeScriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); (n == "evalsha" || n == "eval") && h.Fn != nil {
			f := h.Fn
			h.Fn = nil
			f()
		}
		return next(ctx, cmd)
	}
}
