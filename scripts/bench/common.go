package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/asynqwire"
)

// Names shared with the chronos processes: their defaults.
const (
	runQueue   = queue.QueueNameDefault
	workflowID = "wf"
	version    = "1"
)

// runQueues are the asynq queues runs go to: each shard's
// (queue.ShardQueue) and the legacy single one, which launchers drain.
func (e *env) runQueues() []string {
	qs := make([]string, 0, e.shards+1)
	for sh := range e.shards {
		qs = append(qs, queue.ShardQueue(runQueue, sh))
	}
	return append(qs, runQueue)
}

// pendingRuns is how many run tasks wait in the run queues' pending lists.
func (e *env) pendingRuns(ctx context.Context) (int64, error) {
	qs := e.runQueues()
	cmds, err := e.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, q := range qs {
			p.LLen(ctx, asynqwire.Keys{Queue: q}.Pending())
		}
		return nil
	})
	var n int64
	for _, c := range cmds {
		n += c.(*redis.IntCmd).Val()
	}
	return n, err
}

// countRuns is countQueue summed over the run queues.
func (e *env) countRuns(ctx context.Context) (queueCounts, error) {
	var sum queueCounts
	for _, q := range e.runQueues() {
		c, err := countQueue(ctx, e.rdb, q)
		if err != nil {
			return sum, err
		}
		sum.pending += c.pending
		sum.active += c.active
		sum.scheduled += c.scheduled
		sum.retry += c.retry
		sum.archived += c.archived
		sum.completed += c.completed
	}
	return sum, nil
}

// newStore opens the schedule store the way the chronos processes do, with
// the lookahead they will run with (it decides the due score of "allow"
// schedules at registration).
func (e *env) newStore(ctx context.Context, lookahead time.Duration, runHistory int) (*queue.Store, error) {
	return queue.NewStore(ctx, e.rdb, queue.RealClock{}, &queue.Config{
		Shards: e.shards, Lookahead: lookahead, RunHistory: runHistory,
	})
}

// scheduleID is the i-th schedule's id, as long as the API's generated ids.
func scheduleID(i int) string { return fmt.Sprintf("sch_%032x", i) }

// cronRecord is a valid "allow" schedule on expr in UTC.
func cronRecord(expr string) (model.ScheduleRecord, error) {
	rec := model.ScheduleRecord{
		ID: scheduleID(0), Kind: model.KindCron, Target: model.TargetWorkflow,
		WorkflowID: workflowID, Version: version, UserID: "bench",
		CronExpr: expr, Timezone: "UTC",
		OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupFireImmediately,
	}
	return rec, rec.Validate()
}

// dailyAt is a 6-field cron expression that fires once a day at t's UTC
// wall clock second.
func dailyAt(t time.Time) string {
	t = t.UTC()
	return fmt.Sprintf("%d %d %d * * *", t.Second(), t.Minute(), t.Hour())
}

// registerWorkers is the concurrency of schedule registration.
const registerWorkers = 64

// register upserts n schedules (ids scheduleID(0..n-1)) through the store,
// from many goroutines: the fastest correct way to fill Redis, since each
// upsert is a compare-and-set script.
func register(ctx context.Context, store *queue.Store, n int, tmpl model.ScheduleRecord) (time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next  atomic.Int64
		once  sync.Once
		first error
		wg    sync.WaitGroup
	)
	for range min(registerWorkers, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				rec := tmpl
				rec.ID = scheduleID(i)
				if _, err := store.UpsertSchedule(ctx, &rec); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return 0, fmt.Errorf("register %d schedules: %w", n, first)
	}
	return time.Since(start), ctx.Err()
}

// regRate tracks the measured registration rate so a burst's due second can
// be chosen just after registration ends.
type regRate struct {
	mu   sync.Mutex
	rate float64 // schedules/s; 0 until measured
}

func (r *regRate) estimate(n int) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	rate := r.rate
	if rate == 0 {
		rate = 4000 // conservative first guess
	}
	return time.Duration(float64(n)/rate*1.4*float64(time.Second)) + time.Second
}

func (r *regRate) observe(n int, d time.Duration) {
	if n < 1000 || d <= 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	got := float64(n) / d.Seconds()
	if r.rate == 0 || got < r.rate {
		r.rate = got
	} else {
		r.rate = (r.rate + got) / 2
	}
}

// calibrate measures the registration rate once, on a few thousand
// throwaway schedules, so the first burst's due second is not a guess.
// It leaves Redis empty.
func (b *bench) calibrate(ctx context.Context) error {
	b.reg.mu.Lock()
	known := b.reg.rate != 0
	b.reg.mu.Unlock()
	if known {
		return nil
	}
	store, err := b.e.newStore(ctx, 0, 0)
	if err != nil {
		return err
	}
	tmpl, err := cronRecord(dailyAt(time.Now().Add(2 * time.Hour)))
	if err != nil {
		return err
	}
	const n = 3000
	d, err := register(ctx, store, n, tmpl)
	if err != nil {
		return err
	}
	b.reg.observe(n, d)
	return b.e.flush(ctx)
}

// queueCounts is the number of tasks of an asynq queue in each state.
type queueCounts struct {
	pending, active, scheduled, retry, archived, completed int64
}

func (c queueCounts) total() int64 {
	return c.pending + c.active + c.scheduled + c.retry + c.archived + c.completed
}

func countQueue(ctx context.Context, rdb redis.Cmdable, q string) (queueCounts, error) {
	var c queueCounts
	cmds, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.LLen(ctx, asynqwire.Keys{Queue: q}.Pending())
		p.LLen(ctx, asynqwire.Keys{Queue: q}.Active())
		p.ZCard(ctx, asynqwire.Keys{Queue: q}.Scheduled())
		p.ZCard(ctx, asynqwire.Keys{Queue: q}.Retry())
		p.ZCard(ctx, asynqwire.Keys{Queue: q}.Archived())
		p.ZCard(ctx, asynqwire.Keys{Queue: q}.Completed())
		return nil
	})
	if err != nil {
		return c, err
	}
	v := make([]int64, len(cmds))
	for i, cmd := range cmds {
		v[i] = cmd.(*redis.IntCmd).Val()
	}
	c.pending, c.active, c.scheduled, c.retry, c.archived, c.completed = v[0], v[1], v[2], v[3], v[4], v[5]
	return c, nil
}

// sample is a count observed at a time.
type sample struct {
	t time.Time
	n int64
}

// pollCount samples count() every interval until it reaches target or the
// deadline passes. The samples trace the cumulative arrival curve of
// tasks: the time the i-th task became visible in Redis is within one
// interval (plus a round trip) before the first sample showing >= i.
func pollCount(ctx context.Context, count func(context.Context) (int64, error), target int64,
	interval time.Duration, deadline time.Time) []sample {
	var out []sample
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		n, err := count(ctx)
		now := time.Now()
		if err == nil {
			if len(out) == 0 || out[len(out)-1].n != n {
				out = append(out, sample{now, n})
			}
			if n >= target {
				return out
			}
		}
		if now.After(deadline) {
			return out
		}
		select {
		case <-ctx.Done():
			return out
		case <-t.C:
		}
	}
}

// curve summarises an arrival curve relative to origin for a total of n.
type curve struct {
	first, p50, p99, last time.Duration
	reached               int64 // highest count seen
	complete              bool  // reached n
}

func arrival(samples []sample, origin time.Time, n int64) curve {
	var c curve
	at := func(q float64) (time.Duration, bool) {
		want := max(int64(math.Ceil(q*float64(n))), 1)
		for _, s := range samples {
			if s.n >= want {
				return s.t.Sub(origin), true
			}
		}
		return 0, false
	}
	c.first, _ = at(0)
	c.p50, _ = at(0.50)
	c.p99, _ = at(0.99)
	c.last, c.complete = at(1)
	if len(samples) > 0 {
		c.reached = samples[len(samples)-1].n
	}
	return c
}

// durStats are percentiles of a set of durations.
type durStats struct {
	n                  int
	p50, p99, max, min time.Duration
}

func percentiles(ds []time.Duration) durStats {
	if len(ds) == 0 {
		return durStats{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	q := func(p float64) time.Duration {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return durStats{n: len(s), p50: q(0.5), p99: q(0.99), max: s[len(s)-1], min: s[0]}
}

// forEach runs fn(i) for i in [0, n) on workers goroutines, stopping at the
// first error.
func forEach(ctx context.Context, n, workers int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next  atomic.Int64
		once  sync.Once
		first error
		wg    sync.WaitGroup
	)
	for range min(workers, max(n, 1)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// tasksPresent checks in pipelined batches which of the asynq task keys
// exist, and returns how many do.
func tasksPresent(ctx context.Context, rdb *redis.Client, keys []string) (int, error) {
	found := 0
	for start := 0; start < len(keys); start += 2000 {
		end := min(start+2000, len(keys))
		cmds, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range keys[start:end] {
				p.Exists(ctx, k)
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
		for _, c := range cmds {
			found += int(c.(*redis.IntCmd).Val())
		}
	}
	return found, nil
}

// stopAll stops processes concurrently.
func stopAll(ps []*proc) {
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Go(func() { p.stop(10 * time.Second) })
	}
	wg.Wait()
}
