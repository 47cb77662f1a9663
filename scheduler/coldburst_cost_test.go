package scheduler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// BenchmarkColdBurstRedisCost measures what a cold burst's run costs Redis
// (issue 28): coldBurstN schedules due in one second, planned and
// committed by TickShard on all shards at once, as a scheduler with
// LOOKAHEAD_MS=0 does at the due second; then, on the same redis-server,
// as many raw asynq enqueues (a sha256 TaskID, 64 clients), the peer the
// harness compares with. It reports per run: commands Redis ran inside
// the scripts (INFO commandstats, a count: the same on every machine),
// bytes Redis read, and Redis CPU (used_cpu_user+sys), each beside the raw
// enqueue's. CPU varies with the machine's load; counts and bytes do not.
//
//	go test ./scheduler -run '^$' -bench ColdBurstRedisCost -benchtime 1x -count 3
func BenchmarkColdBurstRedisCost(b *testing.B) {
	n := coldBurstN
	if v, err := strconv.Atoi(os.Getenv("COLDBURST_N")); err == nil && v > 0 {
		n = v
	}
	for range b.N {
		c := measureColdBurst(b, n)
		b.ReportMetric(c.chronos.cmds, "cmds/run")
		b.ReportMetric(c.chronos.bytesIn, "B-in/run")
		b.ReportMetric(c.chronos.cpuUS, "redis-µs/run")
		b.ReportMetric(c.readDue.cpuUS, "read-due-redis-µs/run")
		b.ReportMetric(c.sched.allocs, "sched-allocs/run")
		b.ReportMetric(c.sched.bytes, "sched-B/run")
		b.ReportMetric(c.sched.gcs, "sched-gc/krun")
		b.ReportMetric(c.sched.cpuUS, "sched-µs/run")
		b.ReportMetric(c.raw.cmds, "raw-cmds/task")
		b.ReportMetric(c.raw.bytesIn, "raw-B-in/task")
		b.ReportMetric(c.raw.cpuUS, "raw-redis-µs/task")
		b.ReportMetric(c.raw.cpuUS/c.chronos.cpuUS, "cpu-ratio-raw/chronos")
		b.Logf("chronos per run: %s", c.chronos.cmdLine)
		b.Logf("raw asynq per task: %s", c.raw.cmdLine)
	}
}

const coldBurstN = 10000

type redisCost struct {
	cmds, bytesIn, cpuUS float64
	cmdLine              string
}

type coldBurstCost struct {
	readDue, chronos, raw redisCost
	sched                 schedCost
}

// schedCost is what the scheduler's side of the ticks allocated per run:
// counts, which noise does not move (the benchmark's own goroutines
// allocate next to nothing while the ticks run).
// gcs is garbage collections per 1,000 runs; cpuUS the process's CPU
// per run (getrusage: the benchmark's process is the scheduler's), which
// the machine's load moves.
type schedCost struct{ allocs, bytes, gcs, cpuUS float64 }

func measureColdBurst(tb testing.TB, n int) coldBurstCost {
	ctx := context.Background()
	r := queuetest.StartRedis(tb)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr, PoolSize: 128, ReadTimeout: time.Minute, WriteTimeout: time.Minute})
	tb.Cleanup(func() { _ = rdb.Close() })
	due := time.Now().Truncate(time.Second).Add(time.Hour)
	clock := queue.NewSimClock(due.Add(-time.Minute))
	store, err := queue.NewStore(ctx, rdb, clock, &queue.Config{Shards: queue.ShardsDefault})
	require.NoError(tb, err)
	s, err := New(store, nil, nil, nil)
	require.NoError(tb, err)
	tmpl := model.ScheduleRecord{Kind: model.KindCron, Target: model.TargetWorkflow, WorkflowID: "wf", Version: "1",
		UserID: "bench", CronExpr: fmt.Sprintf("%d %d %d * * *", due.UTC().Second(), due.UTC().Minute(), due.UTC().Hour()),
		Timezone: "UTC", OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupFireImmediately}
	parallel(n, 64, func(i int) {
		rec := tmpl
		rec.ID = fmt.Sprintf("sched-%07d", i)
		_, err := store.UpsertSchedule(ctx, &rec)
		require.NoError(tb, err)
	})
	clock.Set(due)

	var out coldBurstCost
	out.readDue = meterRedis(tb, rdb, n, func() {
		queuetest.Callgrind(rdb, "-z")
		defer queuetest.Callgrind(rdb, "-d")
		parallel(queue.ShardsDefault, queue.ShardsDefault, func(sh int) {
			_, err := store.ReadDue(ctx, sh, due, 1000)
			require.NoError(tb, err)
		})
	})
	out.chronos = meterRedis(tb, rdb, n, func() {
		queuetest.Callgrind(rdb, "-z") // CALLGRIND=1 runs redis-server under valgrind (see queuetest.Callgrind)
		defer queuetest.Callgrind(rdb, "-d")
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		cpu0 := selfCPU()
		if f := os.Getenv("COLDBURST_CPUPROFILE"); f != "" {
			// The ticks alone, not the registration or the raw enqueue.
			w, err := os.Create(f)
			require.NoError(tb, err)
			require.NoError(tb, pprof.StartCPUProfile(w))
			defer func() { pprof.StopCPUProfile(); _ = w.Close() }()
		}
		parallel(queue.ShardsDefault, queue.ShardsDefault, func(sh int) {
			require.NoError(tb, s.TickShard(ctx, sh))
		})
		cpu := selfCPU() - cpu0
		runtime.ReadMemStats(&m1)
		out.sched = schedCost{allocs: float64(m1.Mallocs-m0.Mallocs) / float64(n), bytes: float64(m1.TotalAlloc-m0.TotalAlloc) / float64(n),
			gcs: float64(m1.NumGC-m0.NumGC) * 1000 / float64(n), cpuUS: cpu.Seconds() * 1e6 / float64(n)}
	})
	var pending int64
	for sh := range queue.ShardsDefault {
		d, err := store.RunQueue(sh).Depth(ctx)
		require.NoError(tb, err)
		pending += d["pending"]
	}
	require.EqualValues(tb, n, pending, "every schedule's run is a pending task")

	client := asynq.NewClient(asynq.RedisClientOpt{Addr: r.Addr, PoolSize: 64, ReadTimeout: time.Minute, WriteTimeout: time.Minute})
	tb.Cleanup(func() { _ = client.Close() })
	out.raw = meterRedis(tb, rdb, n, func() {
		parallel(n, 64, func(i int) {
			id := fmt.Sprintf("sched-%07d", i)
			sum := sha256.Sum256([]byte(id + ":" + strconv.FormatInt(due.Unix(), 10)))
			key := hex.EncodeToString(sum[:])
			payload, _ := json.Marshal(queue.TaskPayload{IdempotencyKey: key, ScheduleID: id, RunAt: due, FireAt: due,
				WorkflowID: "wf", Version: "1", UserID: "bench", Source: model.SourceSchedule})
			_, err := client.EnqueueContext(ctx, asynq.NewTask(queue.TaskTypeRun, payload), asynq.TaskID(key),
				asynq.Queue("raw"), asynq.Retention(queue.TaskRetentionDefault), asynq.MaxRetry(queue.TaskMaxRetryDefault),
				asynq.Timeout(5*time.Minute))
			require.NoError(tb, err)
		})
	})
	return out
}

// meterRedis runs f and returns what Redis spent on it per unit of n.
func meterRedis(tb testing.TB, rdb *redis.Client, n int, f func()) redisCost {
	a := queuetest.ReadRedisStats(tb, rdb)
	f()
	z := queuetest.ReadRedisStats(tb, rdb)
	var c redisCost
	var parts []string
	for name, v := range z.Cmds {
		d := v.Calls - a.Cmds[name].Calls
		if d <= 0 || name == "info" || name == "evalsha" || name == "eval" || name == "script|load" {
			if d > 0 && name != "info" {
				parts = append(parts, fmt.Sprintf("%s %.3f", name, d/float64(n)))
			}
			continue
		}
		c.cmds += d / float64(n)
		parts = append(parts, fmt.Sprintf("%s %.3f", name, d/float64(n)))
	}
	c.cpuUS = (z.CPU - a.CPU) * 1e6 / float64(n)
	c.bytesIn = (z.NetInputBytes - a.NetInputBytes) / float64(n)
	c.cmdLine = fmt.Sprintf("%.2f commands in scripts (%s)", c.cmds, strings.Join(sortedStrings(parts), ", "))
	return c
}

// selfCPU is the process's user and system CPU so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func parallel(n, workers int, f func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(workers, n) {
		wg.Go(func() {
			for i := range next {
				f(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

func sortedStrings(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}
