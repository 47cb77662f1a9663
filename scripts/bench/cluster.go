package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// The cluster scenario (-cluster) is the scale figure of Redis Cluster:
// the same cold burst (LOOKAHEAD_MS=0, one scheduler) on one Redis and on
// a Redis Cluster of clusterMasters masters, in the same run, exactly once
// in both, with each master's Redis CPU per run. On a machine of 2 cores
// the masters, the scheduler and this harness share the cores, so the
// cluster cannot be faster; the per-master CPU is what scales: with each
// master on cores of its own, a burst's Redis work divides among them.
//
// The warm burst (the default lookahead: the runs wait in asynq's
// scheduled set and a forward moves them to the pending list at their
// second) runs the same way on both topologies after the cold one, its
// drift p50 / p99 measured as burst.go measures it: the arrival curve of
// the pending lists from the due second.

// clusterMasters is the cluster's size: no replicas, so each master's CPU
// is the burst's and nothing else's.
const clusterMasters = 3

// clusterResult is one burst, cold or warm, on one topology.
type clusterResult struct {
	topology string // "1 Redis" or "cluster of 3 masters"
	warm     bool   // the default lookahead: runs forwarded from the scheduled set
	n        int
	reg      time.Duration
	enq      curve         // runs pending, from the due second
	last     time.Duration // due second → last run pending
	complete bool
	// exactly once: schedules whose one run is the planned one, run
	// records, tasks in the run queues, runs whose task exists
	runsOK, runs int
	tasks        int64
	matched      int
	// masterCPU is each master's Redis CPU (user + sys) from a second
	// before the due second to the last run pending, per run.
	masterCPU []time.Duration
	schedCPU  time.Duration // the scheduler process's CPU, same window
	// shards is how many shards' hash slots each master serves.
	shards []int
}

// window is the time from the due second, or from the first run pending
// when the forward lead made it runnable before, to the last
// (burstResult.firesPerSec).
func (r *clusterResult) window() time.Duration { return r.last - min(r.enq.first, 0) }

func (r *clusterResult) exactlyOnce() bool {
	return r.complete && r.runsOK == r.n && r.runs == r.n && r.tasks == int64(r.n) && r.matched == r.n
}

// clusterBursts runs the cold then the warm burst of n on the bench's one
// Redis, then both on a cluster started for it (and stopped after),
// emptying every master between bursts.
func (b *bench) clusterBursts(ctx context.Context, n int) ([]*clusterResult, error) {
	e := b.e
	if err := b.calibrate(ctx); err != nil {
		return nil, err
	}
	var out []*clusterResult
	both := func(topology string, rdb redis.UniversalClient, url string, masters []*redis.Client) error {
		for _, warm := range []bool{false, true} {
			for _, m := range masters {
				if err := m.FlushAll(ctx).Err(); err != nil {
					return err
				}
			}
			r, err := b.clusterBurst(ctx, topology, n, warm, rdb, url, masters)
			if err != nil {
				return fmt.Errorf("%s, warm %v: %w", topology, warm, err)
			}
			out = append(out, r)
		}
		return nil
	}
	if err := both("1 Redis", e.rdb, e.url(), []*redis.Client{e.rdb}); err != nil {
		return out, err
	}
	url, masters, stop, err := b.startCluster(ctx)
	if err != nil {
		return out, fmt.Errorf("start a cluster: %w", err)
	}
	defer stop()
	crdb, err := queue.OpenRedis(url)
	if err != nil {
		return out, err
	}
	defer crdb.Close()
	return out, both(fmt.Sprintf("cluster of %d masters", clusterMasters), crdb, url, masters)
}

// clusterBurst registers n schedules due in one second through rdb,
// starts one scheduler on url with LOOKAHEAD_MS=0 (cold) or the default
// lookahead (warm), times the due second to the last run pending, reads
// each master's CPU and checks every run once.
func (b *bench) clusterBurst(ctx context.Context, topology string, n int, warm bool, rdb redis.UniversalClient, url string, masters []*redis.Client) (*clusterResult, error) {
	e := b.e
	res := &clusterResult{topology: topology, warm: warm, n: n, shards: make([]int, len(masters))}
	lookahead, vars, settle := time.Duration(0), map[string]string{"LOOKAHEAD_MS": "0", "REDIS_URL": url}, b.cfg.settle
	if warm {
		lookahead, vars, settle = lookaheadDefault, map[string]string{"REDIS_URL": url}, warmSettle(settle, n)
	}
	store, err := queue.NewStore(ctx, rdb, queue.RealClock{}, &queue.Config{Shards: e.shards, Lookahead: lookahead})
	if err != nil {
		return nil, err
	}
	for sh := range e.shards {
		slot := int64(0)
		if len(masters) > 1 {
			// The masters hold even slot ranges in order (startCluster).
			if slot, err = rdb.ClusterKeySlot(ctx, store.RunQueue(sh).Keys().Pending()).Result(); err != nil {
				return nil, err
			}
		}
		res.shards[int(slot)*len(masters)/16384]++
	}
	// Twice the registration estimate: it was measured on one Redis.
	due := time.Now().Add(2*b.reg.estimate(n) + settle).Truncate(time.Second).Add(time.Second)
	tmpl, err := cronRecord(dailyAt(due))
	if err != nil {
		return nil, err
	}
	kind := "cold"
	if warm {
		kind = "warm"
	}
	e.logf("cluster %s burst on %s: registering %d schedules due at %s", kind, topology, n, due.UTC().Format("15:04:05"))
	if res.reg, err = register(ctx, store, n, tmpl); err != nil {
		return nil, err
	}
	if time.Until(due) < settle/2 {
		return nil, fmt.Errorf("%w (registration took %s)", errRegistrationSlow, res.reg.Round(time.Millisecond))
	}
	p, err := e.startChronos(ctx, "scheduler", vars)
	if err != nil {
		return nil, err
	}
	defer p.stop(10 * time.Second)
	if err := sleepUntil(ctx, due.Add(-time.Second)); err != nil {
		return nil, err
	}
	cpu0 := make([]time.Duration, len(masters))
	for i, m := range masters {
		cpu0[i] = redisCPU(ctx, m)
	}
	st0, _ := readProcStat(p.pid())
	samples := pollCount(ctx, func(ctx context.Context) (int64, error) {
		return pendingIn(ctx, rdb, store)
	}, int64(n), 5*time.Millisecond, due.Add(30*time.Second+time.Duration(n/1000)*time.Second))
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	res.enq = arrival(samples, due, int64(n))
	res.last, res.complete = res.enq.last, res.enq.complete
	for i, m := range masters {
		res.masterCPU = append(res.masterCPU, (redisCPU(ctx, m)-cpu0[i])/time.Duration(n))
	}
	st1, _ := readProcStat(p.pid())
	res.schedCPU = st1.cpu - st0.cpu
	// Another tick and a half for anything the scheduler should not do
	// (a second enqueue of a run) before counting.
	if err := sleepCtx(ctx, time.Duration(e.tickMS)*time.Millisecond*3/2); err != nil {
		return nil, err
	}
	p.stop(10 * time.Second)
	if err := verifyClusterBurst(ctx, rdb, store, due, res); err != nil {
		return nil, err
	}
	e.logf("cluster %s burst on %s: last pending at due%+.3fs (p99 %+.3fs); exactly once %v; Redis CPU per run by master %v", kind, topology,
		res.last.Seconds(), res.enq.p99.Seconds(), res.exactlyOnce(), res.masterCPU)
	return res, nil
}

// pendingIn is how many run tasks wait in the store's queues' pending
// lists (one pipeline, split by node on a cluster).
func pendingIn(ctx context.Context, rdb redis.UniversalClient, store *queue.Store) (int64, error) {
	qs := store.Tasks().Queues()
	cmds := make([]*redis.IntCmd, len(qs))
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, q := range qs {
			cmds[i] = p.LLen(ctx, q.Keys().Pending())
		}
		return nil
	})
	var n int64
	for _, c := range cmds {
		n += c.Val()
	}
	return n, err
}

// verifyClusterBurst reads every schedule's runs back (one, the planned
// one), counts the tasks of every run queue and checks each run's task
// exists.
func verifyClusterBurst(ctx context.Context, rdb redis.UniversalClient, store *queue.Store, due time.Time, res *clusterResult) error {
	taskKeys := make([]string, res.n)
	var ok, runs atomic.Int64
	err := forEach(ctx, res.n, 64, func(ctx context.Context, i int) error {
		id := scheduleID(i)
		rs, err := store.ListRuns(ctx, id, 10)
		if err != nil {
			return err
		}
		runs.Add(int64(len(rs)))
		want := model.IdempotencyKey(id, due)
		if len(rs) == 1 && rs[0].IdempotencyKey == want && rs[0].RunAt.Equal(due) {
			ok.Add(1)
			taskKeys[i] = store.RunQueue(queue.ShardOf(id, store.Config().Shards)).Keys().Task(want)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("verify runs: %w", err)
	}
	res.runsOK, res.runs = int(ok.Load()), int(runs.Load())
	for _, q := range store.Tasks().Queues() {
		c, err := countQueue(ctx, rdb, q.Keys().Queue)
		if err != nil {
			return err
		}
		res.tasks += c.total()
	}
	for lo := 0; lo < len(taskKeys); lo += 1000 {
		chunk := taskKeys[lo:min(lo+1000, len(taskKeys))]
		cmds := make([]*redis.IntCmd, 0, len(chunk))
		if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range chunk {
				if k != "" {
					cmds = append(cmds, p.Exists(ctx, k))
				}
			}
			return nil
		}); err != nil {
			return fmt.Errorf("look up run tasks: %w", err)
		}
		for _, c := range cmds {
			res.matched += int(c.Val())
		}
	}
	return nil
}

// startCluster starts clusterMasters redis-servers in cluster mode on
// free ports, gives each an even share of the slots and waits until every
// node says cluster_state:ok. It returns the redis-cluster:// URL, a
// client per master and what stops them.
func (b *bench) startCluster(ctx context.Context) (string, []*redis.Client, func(), error) {
	e := b.e
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", nil, nil, err
	}
	var (
		procs   []*proc
		clients []*redis.Client
		addrs   []string
	)
	stop := func() {
		for _, c := range clients {
			c.Close()
		}
		stopAll(procs)
	}
	for i := range clusterMasters {
		port, err := queuetest.Port()
		if err != nil {
			stop()
			return "", nil, nil, err
		}
		dir := filepath.Join(e.dir, "cluster-"+strconv.Itoa(i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			stop()
			return "", nil, nil, err
		}
		args := append(queuetest.RedisArgs(port, dir), "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "5000")
		p, err := e.spawn("redis-master-"+strconv.Itoa(i), bin, args, nil, false)
		if err != nil {
			stop()
			return "", nil, nil, err
		}
		procs = append(procs, p)
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		err = queuetest.WaitRedis(ctx, addr, 10*time.Second, p.exited)
		if err == nil {
			err = queuetest.AnswersAs(ctx, addr, p.cmd.Process.Pid)
		}
		if err != nil {
			stop()
			return "", nil, nil, err
		}
		addrs = append(addrs, addr)
		clients = append(clients, redis.NewClient(&redis.Options{Addr: addr}))
	}
	for i, c := range clients {
		lo, hi := i*16384/clusterMasters, (i+1)*16384/clusterMasters
		if err := c.Do(ctx, "cluster", "addslotsrange", lo, hi-1).Err(); err != nil {
			stop()
			return "", nil, nil, fmt.Errorf("assign slots %d-%d: %w", lo, hi-1, err)
		}
	}
	for _, c := range clients[1:] {
		host, port, _ := strings.Cut(addrs[0], ":")
		if err := c.Do(ctx, "cluster", "meet", host, port).Err(); err != nil {
			stop()
			return "", nil, nil, err
		}
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		ready := true
		for _, c := range clients {
			info, err := c.ClusterInfo(ctx).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(clusterMasters)) {
				ready = false
			}
		}
		if ready {
			break
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, nil, errors.New("the cluster did not reach cluster_state:ok within 30 s")
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			stop()
			return "", nil, nil, err
		}
	}
	e.logf("cluster of %d masters on %s", clusterMasters, strings.Join(addrs, ","))
	return "redis-cluster://" + strings.Join(addrs, ","), clients, stop, nil
}

// clusterRows are the cluster scenario's rows of the table.
func (b *bench) clusterRows() []row {
	var rows []row
	rs := b.res.clusters
	for _, r := range rs {
		kind := "cold"
		if r.warm {
			kind = "warm"
		}
		name := fmt.Sprintf("8 cluster %s burst %s, %s", kind, count(r.n), r.topology)
		vs := ""
		// The same burst on one Redis.
		i := slices.IndexFunc(rs, func(o *clusterResult) bool { return o.warm == r.warm && len(o.masterCPU) == 1 })
		if one := rs[max(i, 0)]; i >= 0 && one != r && one.complete && r.complete && r.window() > 0 {
			vs = fmt.Sprintf("%.2f× the rate on 1 Redis (same cores)", one.window().Seconds()/r.window().Seconds())
		}
		fires := 0.0
		if r.complete && r.window() > 0 {
			fires = float64(r.n) / r.window().Seconds()
		}
		rows = append(rows, row{scenario: name, figure: "fires/s (N ÷ due→last pending; first→last if earlier)", value: rate(fires),
			vs: vs + fmt.Sprintf(" · due→last %s · registration %s", secs(r.last), r.reg.Round(time.Millisecond))})
		if r.warm {
			t, ok := "", ""
			if len(r.masterCPU) > 1 {
				t, ok = "p99 ≤ 0.25 s", check(r.complete && r.enq.p99 <= 250*time.Millisecond, "")
			}
			rows = append(rows, row{scenario: name, figure: "drift p50 / p99: runnable in asynq (pending list) − due",
				value: secs(r.enq.p50) + " / " + secs(r.enq.p99), vs: "first at " + secs(r.enq.first), target: t, ok: ok})
		}
		rows = append(rows, row{scenario: name, figure: "exactly once: schedules with their one run; runs; tasks; runs with a task",
			value:  fmt.Sprintf("%d/%d; %d; %d; %d", r.runsOK, r.n, r.runs, r.tasks, r.matched),
			target: "all equal N", ok: check(r.exactlyOnce(), "")})
		var per []string
		var sum, top time.Duration
		for i, c := range r.masterCPU {
			per = append(per, fmt.Sprintf("master %d: %s", i+1, c.Round(100*time.Nanosecond)))
			sum += c
			top = max(top, c)
		}
		vs = fmt.Sprintf("scheduler %s per run", (r.schedCPU / time.Duration(max(r.n, 1))).Round(100*time.Nanosecond))
		if len(r.masterCPU) > 1 && top > 0 {
			vs += fmt.Sprintf(" · total %s; the busiest master does %.0f%% of it", sum.Round(100*time.Nanosecond), 100*float64(top)/float64(sum))
		}
		shards := make([]string, len(r.shards))
		for i, n := range r.shards {
			shards[i] = strconv.Itoa(n)
		}
		vs += " · shards per master " + strings.Join(shards, ", ")
		rows = append(rows, row{scenario: name, figure: "Redis CPU per run, each master (user + sys, due−1 s → last pending)",
			value: strings.Join(per, " · "), vs: vs})
	}
	return rows
}
