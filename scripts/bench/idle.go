package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
)

// idleResult is the cost of launchers with nothing to do: what they cost
// Redis and themselves while every run queue is empty, and how late the
// first run after such a wait starts (a launcher that looks less often
// when idle must still start work soon after it arrives).
type idleResult struct {
	launchers int
	window    time.Duration
	redisCPU  float64 // of a core, over the window
	cmdsPerS  float64 // Redis commands per second, scripts' inner commands included
	top       []cmdStat
	procCPU   float64 // the launchers' CPU, of a core
	// wake is the time from enqueuing one run (a manual run, pending at
	// once) after a random idle wait to its record saying SUCCESS; none
	// without launchers.
	wake durStats
}

// idleWakes is how many first runs after an idle wait are timed.
const idleWakes = 8

// idle measures `launchers` idle launcher processes (0: Redis alone, the
// floor) at the default configuration: Redis's CPU and commands over
// the window, then the start latency of single runs each after an idle
// wait of 1 to 3 s.
func (b *bench) idle(ctx context.Context, launchers int, window time.Duration) (*idleResult, error) {
	e := b.e
	res := &idleResult{launchers: launchers, window: window}
	if err := e.flush(ctx); err != nil {
		return nil, err
	}
	store, err := e.newStore(ctx, 0, 0)
	if err != nil {
		return nil, err
	}
	if err := store.PutWorkflow(ctx, workflowID, version, []byte(`{"steps":[]}`)); err != nil {
		return nil, err
	}
	ps := make([]*proc, launchers)
	defer func() { stopAll(ps) }()
	errs := make([]error, launchers)
	var wg sync.WaitGroup
	for i := range ps {
		wg.Go(func() {
			ps[i], errs[i] = e.startChronos(ctx, "launcher", map[string]string{"EXECUTOR": "log"})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	// Past start-up (queue registration, the first heartbeats) and past
	// any back-off's ramp, so the window sees the steady idle state.
	if err := sleepCtx(ctx, 5*time.Second); err != nil {
		return nil, err
	}
	cpu0, rm, t0 := cpuOf(ps), startRedisMeter(ctx, e.rdb), time.Now()
	if err := sleepCtx(ctx, window); err != nil {
		return nil, err
	}
	redisSpent, cmds := rm.since(ctx, e.rdb)
	took := time.Since(t0)
	res.procCPU = (cpuOf(ps) - cpu0).Seconds() / took.Seconds()
	res.redisCPU = redisSpent.Seconds() / took.Seconds()
	var calls int64
	for _, c := range cmds {
		if c.name != "info" {
			calls += c.calls
		}
	}
	res.cmdsPerS = float64(calls) / took.Seconds()
	res.top = cmds
	e.logf("idle ×%d: Redis %.2f%% of a core, %.0f commands/s (%s); launchers %.2f%% of a core", launchers,
		100*res.redisCPU, res.cmdsPerS, formatCmdStats(cmds, 6), 100*res.procCPU)
	if launchers == 0 {
		return res, nil
	}

	var lats []time.Duration
	for i := range idleWakes {
		if err := sleepCtx(ctx, time.Second+rand.N(2*time.Second)); err != nil {
			return nil, err
		}
		key := fmt.Sprintf("idle-wake-%d-%d", launchers, i)
		t := time.Now()
		if _, _, err := store.StartManualRun(ctx, queue.ManualRun{WorkflowID: workflowID, Version: version, UserID: "bench",
			ScheduledFor: t, IdempotencyKey: key}); err != nil {
			return nil, fmt.Errorf("enqueue a run after idling: %w", err)
		}
		for {
			r, _, err := store.GetRun(ctx, key)
			if err == nil && r.Status == model.RunSuccess {
				break
			}
			if time.Since(t) > 30*time.Second {
				return nil, fmt.Errorf("the run %s enqueued after idling did not succeed within 30 s", key)
			}
			if err := sleepCtx(ctx, time.Millisecond); err != nil {
				return nil, err
			}
		}
		lats = append(lats, time.Since(t))
	}
	res.wake = percentiles(lats)
	e.logf("idle ×%d: first run after an idle wait succeeded after p50 %s, max %s", launchers, ms(res.wake.p50), ms(res.wake.max))
	return res, nil
}

// idleRows are the idle scenario's rows of the table.
func (b *bench) idleRows() []row {
	var rows []row
	for _, r := range b.res.idles {
		name := fmt.Sprintf("6 idle launchers ×%d", r.launchers)
		var top []string
		for i, c := range r.top {
			if i == 4 {
				break
			}
			top = append(top, fmt.Sprintf("%s %.0f/s", c.name, float64(c.calls)/r.window.Seconds()))
		}
		rows = append(rows, row{scenario: name, figure: fmt.Sprintf("Redis CPU and commands, every run queue empty (%s window)", r.window),
			value: fmt.Sprintf("%.2f%% of a core · %.0f commands/s", 100*r.redisCPU, r.cmdsPerS),
			vs:    fmt.Sprintf("launchers %.2f%% of a core · %s", 100*r.procCPU, strings.Join(top, ", "))})
		if r.launchers > 0 {
			rows = append(rows, row{scenario: name, figure: "enqueue → SUCCESS of a run after 1–3 s idle, p50 / max of " + strconv.Itoa(r.wake.n),
				value: ms(r.wake.p50) + " / " + ms(r.wake.max), target: "max ≤ 300 ms (the 250 ms idle watch, a take, the run)", ok: check(r.wake.max <= 300*time.Millisecond, "")})
		}
	}
	return rows
}
