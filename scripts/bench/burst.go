package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
)

// burstOpts configures one burst: n schedules due in the same second,
// fired by `replicas` chronos scheduler processes with LOOKAHEAD_MS=0 (the
// pure due → enqueue path) and no launcher.
type burstOpts struct {
	n        int
	replicas int
	// settle is the time between the end of registration and the due
	// second: the scheduler processes start and share the shards in it.
	settle time.Duration
	// verify reads every schedule's runs back (exactly once per schedule).
	verify bool
	// warm runs the schedulers with the default lookahead: the runs are
	// known ahead, in asynq's scheduled set before the due second.
	warm bool
}

type burstResult struct {
	n, replicas int
	reg         time.Duration // registration time
	due         time.Time
	settled     bool // shards were shared fairly before the due second
	// enq is the arrival curve of tasks in asynq's pending list, relative
	// to the due second: when each task became visible in Redis.
	enq curve
	// rec is enqueued_at - run_at from the run records.
	rec durStats
	// exactly-once accounting
	runsOK   int   // schedules whose only run is the one planned at due
	extra    int   // runs beyond one per schedule: duplicates
	runsBad  int   // schedules with no run, or more than one
	runs     int   // run records in total
	tasks    int64 // asynq tasks in the run queue
	matched  int   // runs whose idempotency key is an asynq task
	verified bool
	bytesRun float64       // Redis bytes per fired run (record + task)
	schedCPU time.Duration // CPU of all scheduler processes, due-1s .. done
	schedHWM int64         // peak RSS of the busiest scheduler, kB
	redisCPU time.Duration // Redis CPU over the same window
	attempts int           // 2 when the first registration overran the due second
	cmdstats []cmdStat     // Redis commands during the burst, by time spent
	ping     durStats      // Redis PING round trips, due-1s .. last enqueue
	warm     bool          // default lookahead: the runs were enqueued ahead
}

// firesPerSec is N over the time from the due second to the last enqueue:
// the rate a user sees when all N are due at once. Runs enqueued ahead
// are made runnable from the forward lead before their second, so the
// window then starts at the first: the rate of the forward itself.
func (r *burstResult) firesPerSec() float64 {
	window := r.enq.last - min(r.enq.first, 0)
	if !r.enq.complete || window <= 0 {
		return 0
	}
	return float64(r.n) / window.Seconds()
}

// exactlyOnce is the correctness column: every schedule fired once, with
// one task per run and no other task.
func (r *burstResult) exactlyOnce() bool {
	return r.verified && r.runsOK == r.n && r.runsBad == 0 && r.runs == r.n &&
		r.tasks == int64(r.n) && r.matched == r.n
}

func (b *bench) burst(ctx context.Context, o burstOpts) (*burstResult, error) {
	var lastErr error
	for attempt := 1; attempt <= 2; attempt++ {
		res, err := b.burstOnce(ctx, o, attempt)
		if err == nil {
			res.attempts = attempt
			return res, nil
		}
		if !errors.Is(err, errRegistrationSlow) {
			return nil, err
		}
		lastErr = err
		b.e.logf("burst %d×%d: %v; retrying with a later due second", o.n, o.replicas, err)
	}
	return nil, lastErr
}

var errRegistrationSlow = errors.New("registration ended too close to the due second")

func (b *bench) burstOnce(ctx context.Context, o burstOpts, attempt int) (*burstResult, error) {
	e := b.e
	res := &burstResult{n: o.n, replicas: o.replicas, warm: o.warm}
	lookahead, vars := time.Duration(0), map[string]string{"LOOKAHEAD_MS": "0"}
	if o.warm {
		lookahead, vars = lookaheadDefault, nil
	}
	if err := e.flush(ctx); err != nil {
		return nil, err
	}
	if err := b.calibrate(ctx); err != nil {
		return nil, err
	}
	store, err := e.newStore(ctx, lookahead, 0)
	if err != nil {
		return nil, err
	}
	est := b.reg.estimate(o.n) * time.Duration(attempt*attempt)
	due := time.Now().Add(est + o.settle).Truncate(time.Second).Add(time.Second)
	res.due = due
	tmpl, err := cronRecord(dailyAt(due))
	if err != nil {
		return nil, err
	}
	e.logf("burst %d×%d: registering %d schedules due at %s", o.n, o.replicas, o.n, due.UTC().Format("15:04:05"))
	if res.reg, err = register(ctx, store, o.n, tmpl); err != nil {
		return nil, err
	}
	b.reg.observe(o.n, res.reg)
	if left := time.Until(due); left < o.settle/2 {
		return nil, fmt.Errorf("%w (%s left, registration took %s)", errRegistrationSlow, left.Round(time.Millisecond), res.reg.Round(time.Millisecond))
	}
	mem0 := usedMemory(ctx, e.rdb)

	scheds := make([]*proc, o.replicas)
	defer func() { stopAll(scheds) }()
	var wg sync.WaitGroup
	errs := make([]error, o.replicas)
	for i := range scheds {
		wg.Go(func() {
			scheds[i], errs[i] = e.startChronos(ctx, "scheduler", vars)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	res.settled = e.waitShards(ctx, scheds, due.Add(-300*time.Millisecond))
	if time.Now().After(due) {
		return nil, fmt.Errorf("%w: the schedulers were not up before the due second", errRegistrationSlow)
	}

	if err := sleepUntil(ctx, due.Add(-time.Second)); err != nil {
		return nil, err
	}
	cpu0 := make([]procStat, len(scheds))
	for i, p := range scheds {
		cpu0[i], _ = readProcStat(p.pid())
	}
	rm := startRedisMeter(ctx, e.rdb)
	probe := startPingProbe(ctx, e.redisAddr)
	deadline := due.Add(20*time.Second + time.Duration(o.n/2000)*time.Second)
	samples := pollCount(ctx, func(ctx context.Context) (int64, error) {
		return e.pendingRuns(ctx)
	}, int64(o.n), 2*time.Millisecond, deadline)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	res.ping = probe.stop()
	res.enq = arrival(samples, due, int64(o.n))
	res.redisCPU, res.cmdstats = rm.since(ctx, e.rdb)
	for i, p := range scheds {
		st, _ := readProcStat(p.pid())
		res.schedCPU += st.cpu - cpu0[i].cpu
		res.schedHWM = max(res.schedHWM, st.hwmKB)
	}
	// Give the schedulers another tick to do anything they should not
	// (a second enqueue of a run), then stop them.
	if err := sleepCtx(ctx, time.Duration(e.tickMS)*time.Millisecond*3/2); err != nil {
		return nil, err
	}
	stopAll(scheds)
	c, err := e.countRuns(ctx)
	if err != nil {
		return nil, err
	}
	res.tasks = c.total()
	res.bytesRun = float64(usedMemory(ctx, e.rdb)-mem0) / float64(o.n)
	e.logf("burst %d×%d: last enqueue at due%+.3fs (%d tasks); redis: %s", o.n, o.replicas, res.enq.last.Seconds(), res.tasks, formatCmdStats(res.cmdstats, 8))

	if o.verify {
		if err := verifyBurst(ctx, e, store, res); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// verifyBurst reads back every schedule's runs: exactly one, planned at the
// due second, with its idempotency key as an asynq task.
func verifyBurst(ctx context.Context, e *env, store *queue.Store, res *burstResult) error {
	keys := make([]string, res.n)
	drift := make([]time.Duration, res.n)
	var ok, bad, runs, extra atomic.Int64
	err := forEach(ctx, res.n, 64, func(ctx context.Context, i int) error {
		id := scheduleID(i)
		rs, err := store.ListRuns(ctx, id, 10)
		if err != nil {
			return err
		}
		runs.Add(int64(len(rs)))
		extra.Add(int64(max(len(rs)-1, 0)))
		want := model.IdempotencyKey(id, res.due)
		if len(rs) != 1 || rs[0].IdempotencyKey != want || !rs[0].RunAt.Equal(res.due) || rs[0].EnqueuedAt == nil {
			bad.Add(1)
			drift[i] = -1
			return nil
		}
		ok.Add(1)
		keys[i] = want
		drift[i] = rs[0].EnqueuedAt.Sub(rs[0].RunAt)
		return nil
	})
	if err != nil {
		return fmt.Errorf("verify burst runs: %w", err)
	}
	var present []string
	var ds []time.Duration
	for i, k := range keys {
		if k != "" {
			present = append(present, store.RunQueue(queue.ShardOf(scheduleID(i), store.Config().Shards)).Keys().Task(k))
			ds = append(ds, drift[i])
		}
	}
	res.runsOK, res.runsBad, res.runs, res.extra = int(ok.Load()), int(bad.Load()), int(runs.Load()), int(extra.Load())
	res.rec = percentiles(ds)
	res.matched, err = tasksPresent(ctx, e.rdb, present)
	res.verified = err == nil
	return err
}

// cmdStat is one Redis command's share of a window.
type cmdStat struct {
	name  string
	calls int64
	usec  int64
}

// redisMeter is Redis's CPU time and command stats at a moment; since
// returns what Redis spent after it.
type redisMeter struct {
	cpu  time.Duration
	cmds map[string]cmdStat
}

func startRedisMeter(ctx context.Context, rdb *redis.Client) redisMeter {
	return redisMeter{cpu: redisCPU(ctx, rdb), cmds: commandStats(ctx, rdb)}
}

func (m redisMeter) since(ctx context.Context, rdb *redis.Client) (time.Duration, []cmdStat) {
	return redisCPU(ctx, rdb) - m.cpu, diffCommandStats(m.cmds, commandStats(ctx, rdb))
}

// commandStats reads INFO commandstats: calls and usec per command.
func commandStats(ctx context.Context, rdb *redis.Client) map[string]cmdStat {
	out := map[string]cmdStat{}
	s, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return out
	}
	for _, line := range strings.Split(s, "\r\n") {
		rest, ok := strings.CutPrefix(line, "cmdstat_")
		if !ok {
			continue
		}
		name, fields, _ := strings.Cut(rest, ":")
		c := cmdStat{name: name}
		for _, f := range strings.Split(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				c.calls = n
			case "usec":
				c.usec = n
			}
		}
		out[name] = c
	}
	return out
}

func diffCommandStats(a, b map[string]cmdStat) []cmdStat {
	var out []cmdStat
	for k, v := range b {
		d := cmdStat{name: k, calls: v.calls - a[k].calls, usec: v.usec - a[k].usec}
		if d.calls > 0 {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(x, y cmdStat) int { return cmp.Compare(y.usec, x.usec) })
	return out
}

func formatCmdStats(cs []cmdStat, n int) string {
	s := ""
	for i, c := range cs {
		if i == n {
			break
		}
		if s != "" {
			s += ", "
		}
		s += c.name + " " + strconv.FormatInt(c.calls, 10) + "× " +
			strconv.FormatFloat(float64(c.usec)/1e6, 'f', 2, 64) + "s"
	}
	return s
}
