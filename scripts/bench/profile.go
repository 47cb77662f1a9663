package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/scheduler"
)

type profileResult struct {
	n        int
	due      time.Time
	enq      curve
	cpuPath  string
	heapPath string
	top      string
	cpu      time.Duration // process CPU during the profiled window
	redisCPU time.Duration // Redis CPU during the profiled window
	window   time.Duration
	cmdstats []cmdStat
	topCum   string
}

// profile runs one scheduler in this process (as `chronos scheduler`
// wires it: Redis clock, default config, LOOKAHEAD 0 for the burst) under
// the CPU profiler through an n-schedule burst.
func (b *bench) profile(ctx context.Context, n int) (*profileResult, error) {
	e := b.e
	res := &profileResult{n: n}
	if err := os.MkdirAll(b.cfg.profileDir, 0o755); err != nil {
		return nil, err
	}
	if err := e.flush(ctx); err != nil {
		return nil, err
	}
	if err := b.calibrate(ctx); err != nil {
		return nil, err
	}
	rdb := redis.NewClient(&redis.Options{Addr: e.redisAddr})
	defer rdb.Close()
	clock := queue.NewRedisClock(rdb)
	if err := clock.Sync(ctx); err != nil {
		return nil, err
	}
	store, err := queue.NewStore(ctx, rdb, clock, &queue.Config{Shards: e.shards})
	if err != nil {
		return nil, err
	}
	regStore, err := e.newStore(ctx, 0, 0)
	if err != nil {
		return nil, err
	}
	due := time.Now().Add(b.reg.estimate(n) + b.cfg.settle).Truncate(time.Second).Add(time.Second)
	res.due = due
	tmpl, err := cronRecord(dailyAt(due))
	if err != nil {
		return nil, err
	}
	e.logf("profile: registering %d schedules due at %s", n, due.Format("15:04:05"))
	reg, err := register(ctx, regStore, n, tmpl)
	if err != nil {
		return nil, err
	}
	b.reg.observe(n, reg)
	if time.Until(due) < 2*time.Second {
		return nil, errRegistrationSlow
	}
	promReg := prometheus.NewRegistry()
	sched, err := scheduler.New(store, &scheduler.Config{TickInterval: time.Duration(e.tickMS) * time.Millisecond}, nil, promReg)
	if err != nil {
		return nil, err
	}
	if err := sched.Start(ctx); err != nil {
		return nil, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = sched.Stop(sctx)
	}()
	if err := sleepUntil(ctx, due.Add(-time.Second)); err != nil {
		return nil, err
	}
	res.cpuPath = filepath.Join(b.cfg.profileDir, fmt.Sprintf("burst-%d-cpu.pprof", n))
	f, err := os.Create(res.cpuPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	runtime.GC()
	cpu0 := selfCPU()
	rm := startRedisMeter(ctx, e.rdb)
	t0 := time.Now()
	if err := pprof.StartCPUProfile(f); err != nil {
		return nil, err
	}
	samples := pollCount(ctx, func(ctx context.Context) (int64, error) {
		return e.pendingRuns(ctx)
	}, int64(n), 2*time.Millisecond, due.Add(20*time.Second+time.Duration(n/2000)*time.Second))
	pprof.StopCPUProfile()
	res.window = time.Since(t0)
	res.redisCPU, res.cmdstats = rm.since(ctx, e.rdb)
	res.cpu = selfCPU() - cpu0
	res.enq = arrival(samples, due, int64(n))
	res.heapPath = filepath.Join(b.cfg.profileDir, fmt.Sprintf("burst-%d-allocs.pprof", n))
	if hf, err := os.Create(res.heapPath); err == nil {
		_ = pprof.Lookup("allocs").WriteTo(hf, 0)
		hf.Close()
	}
	res.top = pprofTop(ctx, res.cpuPath, "-top", "-nodecount=25")
	res.topCum = pprofTop(ctx, res.cpuPath, "-top", "-cum", "-nodecount=40", "-focus=chronos")
	e.logf("profile: last enqueue at due%+.3fs; profile in %s", res.enq.last.Seconds(), res.cpuPath)
	return res, nil
}

func pprofTop(ctx context.Context, path string, args ...string) string {
	args = append(append([]string{"tool", "pprof"}, args...), path)
	out, err := exec.CommandContext(ctx, "go", args...).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("go tool pprof failed: %v\n%s", err, out)
	}
	// Drop the header lines up to the table.
	s := string(out)
	if i := strings.Index(s, "      flat"); i >= 0 {
		if j := strings.LastIndex(s[:i], "\n"); j >= 0 {
			return s[strings.Index(s, "Duration"):strings.Index(s[strings.Index(s, "Duration"):], "\n")+strings.Index(s, "Duration")+1] + s[j+1:]
		}
	}
	return s
}
