package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"

	"github.com/chronos-sched/chronos/model"
)

// launchSeries is the launch scenario with a number of launcher
// processes: rounds of a raw drain by as many asynq servers, then the
// launchers, one after the other. The machine's speed drifts by tens of
// percent within minutes (other tenants share its cores), so each launch
// is held against the drain measured just before it, and the round with
// the median ratio is reported.
type launchSeries struct {
	rounds []*launchResult
}

// median returns the round with the median ratio to its drain (the lower
// of the middle two).
func (s *launchSeries) median() *launchResult {
	rs := slices.Clone(s.rounds)
	slices.SortFunc(rs, func(a, b *launchResult) int { return cmp.Compare(a.ratio(), b.ratio()) })
	return rs[(len(rs)-1)/2]
}

type launchResult struct {
	n, launchers, conc int
	drain              float64 // no-op tasks/s by as many asynq servers, just before
	filled             int64   // tasks pending before the launchers started
	rate               float64 // runs/s from the first to the last finished
	finished           int64   // tasks finished (completed, retry or archived)
	success            int     // runs whose record says SUCCESS
	cpuPerRun          time.Duration
	redisCPUPerRun     time.Duration
	allocsPerRun       float64 // the launchers' heap allocations (go_memstats_mallocs_total) per run
}

func (l *launchResult) ratio() float64 {
	if l.drain <= 0 {
		return 0
	}
	return l.rate / l.drain
}

// launchRounds runs `rounds` rounds of a raw drain of n no-op tasks by
// `launchers` asynq servers followed by a launch of n runs through as
// many launcher processes.
func (b *bench) launchRounds(ctx context.Context, n, launchers, rounds, clients int) (*launchSeries, error) {
	s := &launchSeries{}
	for range rounds {
		if err := b.fillLimit(ctx, n, clients); err != nil {
			return nil, err
		}
		d, err := b.drain(ctx, n, launchers)
		if err != nil {
			return nil, err
		}
		l, err := b.launch(ctx, n, launchers)
		if err != nil {
			return nil, err
		}
		l.drain = d.rate
		s.rounds = append(s.rounds, l)
	}
	return s, nil
}

// launch pre-fills n scheduled runs with a burst (one scheduler, no
// launcher), then starts `launchers` launcher processes with the log
// executor at LOG_LEVEL=warn (a no-op that reports SUCCESS) and times the
// drain.
func (b *bench) launch(ctx context.Context, n, launchers int) (*launchResult, error) {
	e := b.e
	res := &launchResult{n: n, launchers: launchers, conc: b.cfg.launchConc}
	fill, err := b.burst(ctx, burstOpts{n: n, replicas: 1, settle: b.cfg.settle})
	if err != nil {
		return nil, fmt.Errorf("pre-fill: %w", err)
	}
	c, err := e.countRuns(ctx)
	if err != nil {
		return nil, err
	}
	res.filled = c.pending
	if res.filled != int64(n) {
		return nil, fmt.Errorf("pre-fill left %d pending runs, want %d", res.filled, n)
	}
	store, err := e.newStore(ctx, 0, 0)
	if err != nil {
		return nil, err
	}
	if err := store.PutWorkflow(ctx, workflowID, version, []byte(`{"steps":[]}`)); err != nil {
		return nil, err
	}

	// The queue is paused while the launchers start, so that none drains
	// runs before the others are up and the meters run.
	insp := asynq.NewInspectorFromRedisClient(e.rdb)
	for _, q := range e.runQueues() {
		if err := insp.PauseQueue(q); err != nil {
			return nil, fmt.Errorf("pause the run queue %s: %w", q, err)
		}
	}
	ps := make([]*proc, launchers)
	defer func() { stopAll(ps) }()
	errs := make([]error, launchers)
	var wg sync.WaitGroup
	for i := range ps {
		wg.Go(func() {
			vars := map[string]string{"EXECUTOR": "log", "LAUNCHER_CONCURRENCY": strconv.Itoa(res.conc)}
			if b.cfg.launchProfile != "" {
				vars["PPROF"] = "true"
			}
			ps[i], errs[i] = e.startChronos(ctx, "launcher", vars)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	cpu0, rm, mallocs0 := cpuOf(ps), startRedisMeter(ctx, e.rdb), mallocsOf(ps)
	var prof *launchProfile
	if b.cfg.launchProfile != "" {
		prof = startLaunchProfile(ctx, ps[0], b.cfg.launchProfile, n, launchers)
	}
	for _, q := range e.runQueues() {
		if err := insp.UnpauseQueue(q); err != nil {
			return nil, fmt.Errorf("unpause the run queue %s: %w", q, err)
		}
	}
	samples := pollCount(ctx, func(ctx context.Context) (int64, error) {
		c, err := e.countRuns(ctx)
		return c.completed + c.retry + c.archived, err
	}, int64(n), 20*time.Millisecond, time.Now().Add(30*time.Second+time.Duration(n/200)*time.Second))
	redisSpent, cmds := rm.since(ctx, e.rdb)
	res.cpuPerRun = (cpuOf(ps) - cpu0) / time.Duration(max(n, 1))
	res.redisCPUPerRun = redisSpent / time.Duration(max(n, 1))
	res.allocsPerRun = (mallocsOf(ps) - mallocs0) / float64(max(n, 1))
	if prof != nil {
		prof.finish(ctx, e)
	}
	stopAll(ps)
	if len(samples) > 0 {
		res.finished = samples[len(samples)-1].n
	}
	// Rate between the first and the last observation of finished runs:
	// process start-up is not counted.
	var first *sample
	for i := range samples {
		if samples[i].n > 0 {
			first = &samples[i]
			break
		}
	}
	if first != nil && res.finished == int64(n) {
		last := samples[len(samples)-1]
		if d := last.t.Sub(first.t); d > 0 {
			res.rate = float64(last.n-first.n) / d.Seconds()
		}
	}
	e.logf("launch %d×%d: %d finished at %.0f runs/s, %.0f allocations per run in the launchers; redis: %s", n, launchers, res.finished, res.rate, res.allocsPerRun, formatCmdStats(cmds, 10))

	var ok atomic.Int64
	err = forEach(ctx, n, 64, func(ctx context.Context, i int) error {
		id := scheduleID(i)
		r, err := store.GetScheduleRun(ctx, id, model.IdempotencyKey(id, fill.due))
		if err != nil {
			return nil // counted as not SUCCESS
		}
		if r.Status == model.RunSuccess {
			ok.Add(1)
		}
		return nil
	})
	res.success = int(ok.Load())
	return res, err
}
