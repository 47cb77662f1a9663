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
)

// BenchmarkUpsertRedisCost measures what upserting a new schedule costs
// Redis (issue 28): upsertCostN new schedules, each the body the API
// scenario of scripts/bench sends, upserted by 32 goroutines as the API's
// clients do. It reports per upsert the commands Redis ran inside the
// script (INFO commandstats, a count: the same on every machine), the
// microseconds Redis counts per EVALSHA, and Redis CPU
// (used_cpu_user+sys). Microseconds vary with the machine's load; counts
// do not.
//
//	go test ./queue -run '^$' -bench UpsertRedisCost -benchtime 1x -count 3
func BenchmarkUpsertRedisCost(b *testing.B) {
	n := upsertCostN
	if v, err := strconv.Atoi(os.Getenv("UPSERT_COST_N")); err == nil && v > 0 {
		n = v
	}
	for range b.N {
		c := measureUpserts(b, n, 32)
		b.ReportMetric(c.inner, "cmds/upsert")
		b.ReportMetric(c.evalshaUS, "evalsha-µs/call")
		b.ReportMetric(c.cpuUS, "redis-µs/upsert")
		b.Logf("per upsert: %s", c.line)
	}
}

// TestUpsertNewScheduleRedisCommands pins the commands upsert.lua runs for
// a new schedule with no history left by a deleted one of its id: the
// common case, which the API's rate rests on. A count, not a time: it is
// the same on every machine.
func TestUpsertNewScheduleRedisCommands(t *testing.T) {
	c := measureUpserts(t, 50, 1)
	require.Equal(t, map[string]float64{"exists": 1, "incr": 1, "hset": 1, "zadd": 1}, c.calls,
		"commands inside upsert.lua per new schedule (%s)", c.line)
}

const upsertCostN = 5000

type upsertCost struct {
	inner, evalshaUS, cpuUS float64
	calls                   map[string]float64 // inner commands per upsert, by name
	line                    string
}

// measureUpserts upserts n new schedules with the given number of
// goroutines on a redis-server of its own and returns what Redis spent
// per upsert. The schedules target a workflow, so each upsert also sends
// one EXISTS of the workflow version beside the script (store.go): that
// one is not counted as the script's.
func measureUpserts(tb testing.TB, n, workers int) upsertCost {
	ctx := context.Background()
	r := queuetest.StartRedis(tb)
	if r.Cluster() != nil {
		// INFO commandstats of one node is not the keyspace's.
		tb.Skipf("%s=cluster: this test needs one Redis node (*redis.Client); Universal runs on Cluster", queuetest.TopologyEnv)
	}
	// No key guard: it rewrites the scripts, which would be measured too.
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr, PoolSize: 64, ReadTimeout: time.Minute, WriteTimeout: time.Minute})
	tb.Cleanup(func() { _ = rdb.Close() })
	store, err := queue.NewStore(ctx, rdb, queue.NewSimClock(time.Now()), &queue.Config{})
	require.NoError(tb, err)
	tmpl := model.ScheduleRecord{Target: model.TargetWorkflow, WorkflowID: "wf", Version: "1", UserID: "bench",
		Kind: model.KindCron, CronExpr: "*/5 * * * *", Timezone: "Europe/Berlin",
		OverlapPolicy: model.OverlapSkip, CatchupPolicy: model.CatchupNone} // the API's defaults
	upsert := func(id string) {
		rec := tmpl
		rec.ID = id
		require.NoError(tb, rec.Validate())
		res, err := store.UpsertSchedule(ctx, &rec)
		require.NoError(tb, err)
		require.True(tb, res.Created && res.Changed, "%s is new", id)
		require.NotNil(tb, res.Schedule.NextRunAt, "%s has a next run", id)
	}
	upsert("warm-up") // loads the script: the EVAL and SCRIPT LOAD are not measured

	a := queuetest.ReadRedisStats(tb, rdb)
	var wg sync.WaitGroup
	ids := make(chan int)
	for range min(workers, n) {
		wg.Go(func() {
			for i := range ids {
				upsert(fmt.Sprintf("cost-%07d", i))
			}
		})
	}
	for i := range n {
		ids <- i
	}
	close(ids)
	wg.Wait()
	z := queuetest.ReadRedisStats(tb, rdb)

	per := func(d float64) float64 { return d / float64(n) }
	c := upsertCost{calls: map[string]float64{}}
	var parts []string
	for name, s := range z.Cmds {
		d := s.Calls - a.Cmds[name].Calls
		switch {
		case d <= 0 || name == "info":
			continue
		case name == "replconf" || name == "ping" || name == "publish":
			// Not the store's: on Sentinel (make test's topology run) the
			// replica acknowledges every second and the sentinels ping
			// and publish hellos on the primary.
			continue
		case name == "exists":
			d -= float64(n) // the workflow version's, beside the script
		case name == "evalsha":
			c.evalshaUS = (s.Usec - a.Cmds[name].Usec) / d
			parts = append(parts, fmt.Sprintf("evalsha %.3f calls, %.1f µs/call", per(d), c.evalshaUS))
			continue
		}
		if d > 0 {
			c.calls[name] = per(d)
			c.inner += per(d)
			parts = append(parts, fmt.Sprintf("%s %.3f", name, per(d)))
		}
	}
	sort.Strings(parts)
	c.cpuUS = (z.CPU - a.CPU) * 1e6 / float64(n)
	c.line = fmt.Sprintf("%.2f commands in the script (%s), Redis CPU %.1f µs", c.inner, strings.Join(parts, ", "), c.cpuUS)
	return c
}

// TestUpsertNewScheduleWritesWhatItReturns checks upsert.lua's path for a
// new schedule, which writes the hash whole and answers with what it
// wrote instead of reading it back: the answer is the stored schedule,
// and the due score is its next fire time less its act lead, with and
// without jitter and lookahead.
func TestUpsertNewScheduleWritesWhatItReturns(t *testing.T) {
	ctx := context.Background()
	r := queuetest.StartRedis(t)
	rdb := r.Universal(t) // with the key guard: every key the script touches is in KEYS
	store, err := queue.NewStore(ctx, rdb, queue.NewSimClock(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)), &queue.Config{})
	require.NoError(t, err)
	for _, rec := range []model.ScheduleRecord{
		{ID: "plain", Kind: model.KindCron, CronExpr: "*/5 * * * *", Timezone: "Europe/Berlin",
			OverlapPolicy: model.OverlapSkip, CatchupPolicy: model.CatchupNone},
		{ID: "jittered", Kind: model.KindCron, CronExpr: "0 * * * *", Timezone: "UTC", JitterMs: 5000,
			OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupLatest},
	} {
		rec.WorkflowID, rec.Version, rec.UserID = "wf", "1", "u"
		require.NoError(t, rec.Validate())
		res, err := store.UpsertSchedule(ctx, &rec)
		require.NoError(t, err)
		require.True(t, res.Created && res.Changed, rec.ID)
		got, err := store.GetSchedule(ctx, rec.ID)
		require.NoError(t, err)
		require.Equal(t, got, res.Schedule, "%s: the answer is the stored schedule", rec.ID)
		require.Equal(t, rec.CronExpr, got.CronExpr)
		require.Equal(t, rec.JitterMs, got.JitterMs)
		require.NotNil(t, got.NextRunAt, rec.ID)
		sh := queue.ShardOf(rec.ID, queue.ShardsDefault)
		score, err := rdb.ZScore(ctx, queue.DueKey(sh), rec.ID).Result()
		require.NoError(t, err)
		require.Equal(t, float64(got.NextRunAt.Add(-store.ActLead(got)).UnixMilli()), score, rec.ID)
		again, err := store.UpsertSchedule(ctx, &rec)
		require.NoError(t, err)
		require.False(t, again.Created || again.Changed, "%s: the same body again changes nothing", rec.ID)
		require.Equal(t, got, again.Schedule, rec.ID)
	}
}
