package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
)

// catchupResult is one catch-up: n per-second schedules, fire_immediately,
// whose scheduler was down for `missed` seconds, caught up by one
// scheduler process while a probe PINGs Redis every 10 ms.
type catchupResult struct {
	n, missed int
	took      time.Duration // scheduler start → n×missed tasks in asynq
	complete  bool
	ping      durStats
	redisCPU  time.Duration
	cmdstats  []cmdStat
	calls     int64 // commit script calls (EVALSHA + EVAL) in the window
	// exactly once: schedules whose runs are consecutive seconds with no
	// gap and none twice; run records and asynq tasks in total.
	runsOK      int
	runs, tasks int64
}

func (r *catchupResult) exactlyOnce() bool {
	return r.runsOK == r.n && r.runs == r.tasks && r.runs >= int64(r.n*r.missed)
}

// shiftedClock is the real clock moved by d.
type shiftedClock struct{ d time.Duration }

func (c shiftedClock) Now() time.Time { return time.Now().Add(c.d) }

func (b *bench) catchup(ctx context.Context, n, missed int) (*catchupResult, error) {
	e := b.e
	res := &catchupResult{n: n, missed: missed}
	if err := e.flush(ctx); err != nil {
		return nil, err
	}
	// Registered missed+1 seconds ago, as far as the schedules know: each
	// has missed runs due from its first second on.
	store, err := queue.NewStore(ctx, e.rdb, shiftedClock{-time.Duration(missed+1) * time.Second},
		&queue.Config{Shards: e.shards})
	if err != nil {
		return nil, err
	}
	tmpl, err := cronRecord("* * * * * *")
	if err != nil {
		return nil, err
	}
	if _, err := register(ctx, store, n, tmpl); err != nil {
		return nil, err
	}
	want := int64(n * missed)
	e.logf("catchup %d×%d: starting a scheduler", n, missed)
	rm := startRedisMeter(ctx, e.rdb)
	probe := startPingProbe(ctx, e.redisAddr)
	began := time.Now()
	sched, err := e.startChronos(ctx, "scheduler", map[string]string{"LOOKAHEAD_MS": "0"})
	if err != nil {
		probe.stop()
		return nil, err
	}
	defer sched.stop(10 * time.Second)
	samples := pollCount(ctx, func(ctx context.Context) (int64, error) {
		return e.pendingRuns(ctx)
	}, want, 2*time.Millisecond, time.Now().Add(2*time.Minute))
	res.ping = probe.stop()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	res.redisCPU, res.cmdstats = rm.since(ctx, e.rdb)
	for _, c := range res.cmdstats {
		if c.name == "evalsha" || c.name == "eval" {
			res.calls += c.calls
		}
	}
	if len(samples) > 0 {
		last := samples[len(samples)-1]
		res.complete = last.n >= want
		res.took = last.t.Sub(began)
	}
	sched.stop(10 * time.Second)
	e.logf("catchup %d×%d: %d tasks after %s; PING p99 %s max %s; redis: %s", n, missed, want, res.took.Round(time.Millisecond),
		ms(res.ping.p99), ms(res.ping.max), formatCmdStats(res.cmdstats, 6))

	// A commit the scheduler sent just before it stopped can still run
	// after a first count (Redis serves waiting clients in any order):
	// count until two counts a moment apart agree.
	for prev := int64(-1); ; {
		c, err := e.countRuns(ctx)
		if err != nil {
			return nil, err
		}
		if res.tasks = c.total(); res.tasks == prev {
			break
		}
		prev = res.tasks
		if err := sleepCtx(ctx, 500*time.Millisecond); err != nil {
			return nil, err
		}
	}
	var ok, runs atomic.Int64
	err = forEach(ctx, n, 64, func(ctx context.Context, i int) error {
		rs, err := store.ListRuns(ctx, scheduleID(i), 10*missed)
		if err != nil {
			return err
		}
		runs.Add(int64(len(rs)))
		seen := map[time.Time]bool{}
		first, last := time.Time{}, time.Time{}
		for _, r := range rs {
			if seen[r.RunAt] || r.Status != model.RunEnqueued {
				return nil
			}
			seen[r.RunAt] = true
			if first.IsZero() || r.RunAt.Before(first) {
				first = r.RunAt
			}
			last = maxTime(last, r.RunAt)
		}
		if len(rs) >= missed && int(last.Sub(first)/time.Second)+1 == len(rs) {
			ok.Add(1)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("verify catch-up runs: %w", err)
	}
	res.runsOK, res.runs = int(ok.Load()), runs.Load()
	return res, nil
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
