package queue_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
	"github.com/chronos-sched/chronos/scheduler"
)

// BenchmarkLaunchedRunRedisCost measures what ending a launched run
// costs Redis (issue 28, the launcher target): launchCostN runs of
// "allow" schedules, planned by a tick as the harness's launch scenario
// plans them (scripts/bench, -only launch), taken by Store.Tasks().Take
// 9 at a time, as a launcher at LAUNCHER_CONCURRENCY 10 takes them, and
// ended as its lane ends them: their status SUCCESS and their task done
// (Store.FinishLaunched), the 9 at once. It reports per run
// the script calls, the commands they ran, the microseconds Redis
// counted inside EVALSHA (INFO commandstats) and Redis's CPU. Counts do
// not vary with the machine's load; microseconds do. With CALLGRIND=1
// and a redis-server on the PATH that runs the real one under valgrind
// --tool=callgrind, the ends' instructions are dumped (callgrind_control
// -z before, -d after).
//
//	go test ./queue -run '^$' -bench LaunchedRunRedisCost -benchtime 1x -count 3
func BenchmarkLaunchedRunRedisCost(b *testing.B) {
	n := launchCostN
	if v, err := strconv.Atoi(os.Getenv("LAUNCHCOST_N")); err == nil && v > 0 {
		n = v
	}
	for range b.N {
		c := measureLaunchEnds(b, n)
		b.ReportMetric(c.evalsha, "evalsha/run")
		b.ReportMetric(c.cmds, "cmds/run")
		b.ReportMetric(c.evalshaUS, "evalsha-µs/run")
		b.ReportMetric(c.cpuUS, "redis-µs/run")
		b.Logf("per run: %s", c.line)
	}
}

const launchCostN = 5000

type launchCost struct {
	evalsha, cmds, evalshaUS, cpuUS float64
	line                            string
}

func measureLaunchEnds(tb testing.TB, n int) launchCost {
	ctx := context.Background()
	r := queuetest.StartRedis(tb)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr, PoolSize: 64, ReadTimeout: time.Minute, WriteTimeout: time.Minute})
	tb.Cleanup(func() { _ = rdb.Close() })
	due := time.Now().Truncate(time.Second).Add(time.Hour)
	clock := queue.NewSimClock(due.Add(-time.Minute))
	store, err := queue.NewStore(ctx, rdb, clock, &queue.Config{Shards: queue.ShardsDefault})
	require.NoError(tb, err)
	s, err := scheduler.New(store, nil, nil, nil)
	require.NoError(tb, err)
	tmpl := model.ScheduleRecord{Kind: model.KindCron, Target: model.TargetWorkflow, WorkflowID: "wf", Version: "1",
		UserID: "bench", CronExpr: fmt.Sprintf("%d %d %d * * *", due.UTC().Second(), due.UTC().Minute(), due.UTC().Hour()),
		Timezone: "UTC", OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupFireImmediately}
	var wg sync.WaitGroup
	ids := make(chan int)
	for range 32 {
		wg.Go(func() {
			for i := range ids {
				rec := tmpl
				rec.ID = fmt.Sprintf("sched-%07d", i)
				_, err := store.UpsertSchedule(ctx, &rec)
				require.NoError(tb, err)
			}
		})
	}
	for i := range n {
		ids <- i
	}
	close(ids)
	wg.Wait()
	clock.Set(due)
	for sh := range queue.ShardsDefault {
		require.NoError(tb, s.TickShard(ctx, sh))
	}
	before := queuetest.ReadRedisStats(tb, rdb)
	queuetest.Callgrind(rdb, "-z")
	for ended := 0; ended < n; {
		batch, err := store.Tasks().Take(ctx, 9)
		require.NoError(tb, err)
		require.NotEmpty(tb, batch, "every run planned is a pending task")
		var ends sync.WaitGroup
		for _, t := range batch {
			ends.Go(func() {
				p, err := queue.DecodeTaskPayload(t.Payload)
				require.NoError(tb, err)
				fin, err := store.FinishLaunched(ctx, t, p, queue.StatusUpdate{Status: model.RunSuccess})
				require.NoError(tb, err)
				require.True(tb, fin)
			})
		}
		ends.Wait()
		ended += len(batch)
	}
	queuetest.Callgrind(rdb, "-d")
	after := queuetest.ReadRedisStats(tb, rdb)

	var c launchCost
	var parts []string
	for name, v := range after.Cmds {
		if name == "info" {
			continue
		}
		calls := (v.Calls - before.Cmds[name].Calls) / float64(n)
		if calls <= 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.2f", name, calls))
		switch name {
		case "evalsha", "eval":
			c.evalsha += calls
			c.evalshaUS += (v.Usec - before.Cmds[name].Usec) / float64(n)
		default:
			c.cmds += calls
		}
	}
	sort.Strings(parts)
	c.cpuUS = (after.CPU - before.CPU) * 1e6 / float64(n)
	c.line = fmt.Sprintf("EVALSHA %.2f (%.1f µs), %.2f commands inside (%s), Redis CPU %.1f µs",
		c.evalsha, c.evalshaUS, c.cmds, strings.Join(parts, ", "), c.cpuUS)
	return c
}
