package asynqwire_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/asynqwire"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// BenchmarkForwardRedisCost measures what forwarding a warm burst costs
// Redis (issue 28): FORWARD_N runs (default 20,000) enqueued ahead for
// one second, spread over the default shards' queues, then made runnable
// by one Set.Forward at that second, as a scheduler does on the tick
// boundary. It reports per task Redis CPU (used_cpu_user+sys: varies with
// the machine's load) and the commands Redis ran (INFO commandstats, a
// count), and logs each command's calls and time per task and the
// longest average call, which is how long one call keeps Redis from
// answering anyone else; and the p99 and max of a PING sent every
// millisecond on a connection of its own during the forward, as the
// harness's probe does every 10 ms.
//
//	go test ./queue/asynqwire -run '^$' -bench ForwardRedisCost -benchtime 1x
//
// FORWARD_PATH=script measures forward.lua alone, the path a forward
// takes when its transaction aborts.
//
// With CALLGRIND=1 and a redis-server first on the PATH that runs
// `valgrind --tool=callgrind /usr/bin/redis-server "$@"`, the forward's
// own instructions are dumped (callgrind_control -z before, -d after).
func BenchmarkForwardRedisCost(b *testing.B) {
	n := 20000
	if v, err := strconv.Atoi(os.Getenv("FORWARD_N")); err == nil && v > 0 {
		n = v
	}
	for range b.N {
		c := measureForward(b, n)
		b.ReportMetric(c.cpuUS, "redis-µs/task")
		b.ReportMetric(c.cmds, "cmds/task")
		b.ReportMetric(c.longestMS, "longest-call-ms")
		b.ReportMetric(c.pingP99MS, "ping-p99-ms")
		b.ReportMetric(c.forwardMS, "forward-ms")
		b.ReportMetric(c.pingMaxMS, "ping-max-ms")
		b.Logf("per task: %s", c.line)
	}
}

type forwardCost struct {
	cpuUS, cmds, longestMS float64
	pingP99MS, pingMaxMS   float64
	forwardMS              float64
	line                   string
}

func measureForward(tb testing.TB, n int) forwardCost {
	ctx := context.Background()
	r := queuetest.StartRedis(tb)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr, PoolSize: 64, ReadTimeout: time.Minute, WriteTimeout: time.Minute})
	tb.Cleanup(func() { _ = rdb.Close() })
	due := time.Now().Truncate(time.Second).Add(time.Hour)
	store, err := queue.NewStore(ctx, rdb, queue.NewSimClock(due.Add(-time.Minute)), &queue.Config{Shards: queue.ShardsDefault})
	require.NoError(tb, err)
	var wg sync.WaitGroup
	next := make(chan int)
	for range 64 {
		wg.Go(func() {
			for i := range next {
				_, started, err := store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
					ScheduledFor: due, IdempotencyKey: fmt.Sprintf("run-%07d", i)})
				if err != nil || !started {
					tb.Errorf("start run %d: %v (started %v)", i, err, started)
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()

	a := queuetest.ReadRedisStats(tb, rdb)
	queuetest.Callgrind(rdb, "-z")
	stopPings := pingEvery(tb, r.Addr, time.Millisecond)
	var moved int
	began := time.Now()
	if os.Getenv("FORWARD_PATH") == "script" {
		moved = forwardByScript(tb, rdb, store, due)
	} else {
		moved, err = store.Tasks().Forward(ctx, due)
	}
	took := time.Since(began)
	pings := stopPings()
	queuetest.Callgrind(rdb, "-d")
	require.NoError(tb, err)
	z := queuetest.ReadRedisStats(tb, rdb)
	require.Equal(tb, n, moved)

	c := forwardCost{forwardMS: float64(took.Microseconds()) / 1000}
	slices.Sort(pings)
	if len(pings) > 0 {
		c.pingP99MS = float64(pings[len(pings)*99/100].Microseconds()) / 1000
		c.pingMaxMS = float64(pings[len(pings)-1].Microseconds()) / 1000
	}
	c.cpuUS = (z.CPU - a.CPU) * 1e6 / float64(n)
	var parts []string
	names := make([]string, 0, len(z.Cmds))
	for name := range z.Cmds {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		calls, usec := z.Cmds[name].Calls-a.Cmds[name].Calls, z.Cmds[name].Usec-a.Cmds[name].Usec
		if calls <= 0 || name == "info" {
			continue
		}
		if name != "evalsha" && name != "eval" && name != "exec" && name != "multi" && name != "watch" && !strings.HasPrefix(name, "script") {
			c.cmds += calls / float64(n)
		}
		c.longestMS = max(c.longestMS, usec/calls/1000)
		parts = append(parts, fmt.Sprintf("%s %.3f calls %.2fµs (%.0fµs a call)", name, calls/float64(n), usec/float64(n), usec/calls))
	}
	c.line = fmt.Sprintf("Redis CPU %.2fµs; %.2f commands (%s)", c.cpuUS, c.cmds, strings.Join(parts, ", "))
	return c
}

// forwardByScript forwards every shard's queue with forward.lua alone, a
// batch a call, as Queue.forwardBatch does after an aborted EXEC.
func forwardByScript(tb testing.TB, rdb *redis.Client, store *queue.Store, due time.Time) int {
	ctx := context.Background()
	moved := 0
	for sh := range queue.ShardsDefault {
		k := store.RunQueue(sh).Keys()
		for {
			ids, err := rdb.ZRangeByScore(ctx, k.Scheduled(), &redis.ZRangeBy{Min: "-inf",
				Max: strconv.FormatInt(due.Unix(), 10), Count: asynqwire.ForwardBatch}).Result()
			require.NoError(tb, err)
			if len(ids) == 0 {
				break
			}
			keys := []string{k.Scheduled(), k.Pending()}
			args := []any{due.Unix(), due.UnixNano()}
			for _, id := range ids {
				keys, args = append(keys, k.Task(id)), append(args, id)
			}
			n, err := asynqwire.Scripts["forward"].Run(ctx, rdb, keys, args...).Int()
			require.NoError(tb, err)
			moved += n
		}
	}
	return moved
}

// pingEvery sends PING to addr every interval on a connection of its own
// until the returned func is called, which returns each round trip.
func pingEvery(tb testing.TB, addr string, interval time.Duration) func() []time.Duration {
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1})
	tb.Cleanup(func() { _ = c.Close() })
	done := make(chan struct{})
	var out []time.Duration
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			began := time.Now()
			if c.Ping(context.Background()).Err() == nil {
				out = append(out, time.Since(began))
			}
		}
	})
	return func() []time.Duration {
		close(done)
		wg.Wait()
		return out
	}
}
