package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
)

const limitQueue = "limit"

type limitResult struct {
	n           int
	rates       map[int]float64 // enqueues/s by concurrent clients
	redisCPU    map[int]float64 // Redis CPU share of a core while enqueuing
	best        float64
	bestClients int
	drain       float64 // no-op tasks/s through one asynq server
	drainConc   int
	drained     int64
	// CPU per drained task: this process's (the asynq server's) and Redis's.
	drainCPU, drainRedisCPU time.Duration
}

// limitTask is a task like chronos's: the same payload type and options,
// TaskID = sha256 hex, due now.
func limitTask(i int, now time.Time) (*asynq.Task, []asynq.Option) {
	id := scheduleID(i)
	sum := sha256.Sum256([]byte(id + ":" + strconv.FormatInt(now.Unix(), 10)))
	key := hex.EncodeToString(sum[:])
	p := queue.TaskPayload{IdempotencyKey: key, ScheduleID: id, RunAt: now.UTC(), FireAt: now.UTC(),
		WorkflowID: workflowID, Version: version, UserID: "bench", Source: model.SourceSchedule}
	payload, _ := json.Marshal(p)
	return asynq.NewTask(queue.TaskTypeRun, payload), []asynq.Option{
		asynq.TaskID(key), asynq.Queue(limitQueue),
		asynq.Retention(queue.TaskRetentionDefault), asynq.MaxRetry(queue.TaskMaxRetryDefault),
		asynq.Timeout(5 * time.Minute),
	}
}

// limit measures raw asynq: the enqueue rate with 8/32/64 concurrent
// clients (best of), then the drain rate of one asynq server with a no-op
// handler over the tasks of the last enqueue run, and of as many servers
// as each launch scenario's launcher processes.
func (b *bench) limit(ctx context.Context) (*limitResult, error) {
	e := b.e
	n := b.cfg.limitN
	res := &limitResult{n: n, rates: map[int]float64{}, redisCPU: map[int]float64{}, drainConc: b.cfg.launchConc}
	now := time.Now()
	for _, c := range b.cfg.limitClients {
		if err := e.flush(ctx); err != nil {
			return nil, err
		}
		client := asynq.NewClient(asynq.RedisClientOpt{Addr: e.redisAddr, PoolSize: c})
		rc0 := redisCPU(ctx, e.rdb)
		start := time.Now()
		err := forEach(ctx, n, c, func(ctx context.Context, i int) error {
			t, opts := limitTask(i, now)
			_, err := client.EnqueueContext(ctx, t, opts...)
			return err
		})
		el := time.Since(start)
		res.redisCPU[c] = (redisCPU(ctx, e.rdb) - rc0).Seconds() / el.Seconds()
		client.Close()
		if err != nil {
			return nil, fmt.Errorf("raw enqueue with %d clients: %w", c, err)
		}
		res.rates[c] = float64(n) / el.Seconds()
		e.logf("limit: %d enqueues with %d clients: %.0f/s", n, c, res.rates[c])
		if res.rates[c] > res.best {
			res.best, res.bestClients = res.rates[c], c
		}
	}

	// Drain what the last run enqueued, with one server.
	d, err := b.drain(ctx, n, 1)
	if err != nil {
		return nil, err
	}
	res.drain, res.drained, res.drainCPU, res.drainRedisCPU = d.rate, d.drained, d.cpu, d.redisCPU
	return res, nil
}

// fillLimit enqueues n limit tasks again, after a drain.
func (b *bench) fillLimit(ctx context.Context, n, clients int) error {
	if err := b.e.flush(ctx); err != nil {
		return err
	}
	client := asynq.NewClient(asynq.RedisClientOpt{Addr: b.e.redisAddr, PoolSize: clients})
	defer client.Close()
	now := time.Now()
	return forEach(ctx, n, clients, func(ctx context.Context, i int) error {
		t, opts := limitTask(i, now)
		_, err := client.EnqueueContext(ctx, t, opts...)
		return err
	})
}

type drainResult struct {
	rate          float64
	drained       int64
	cpu, redisCPU time.Duration // per task: this process's (the servers') and Redis's
}

// drain runs `servers` asynq servers with a no-op handler, each with the
// launchers' concurrency, until the n pending limit tasks are done.
func (b *bench) drain(ctx context.Context, n, servers int) (*drainResult, error) {
	e := b.e
	var (
		count       atomic.Int64
		first, last atomic.Int64
	)
	mux := asynq.NewServeMux()
	mux.HandleFunc(queue.TaskTypeRun, func(context.Context, *asynq.Task) error {
		now := time.Now().UnixNano()
		first.CompareAndSwap(0, now)
		if count.Add(1) == int64(n) {
			last.Store(now)
		}
		return nil
	})
	cpu0, rm := selfCPU(), startRedisMeter(ctx, e.rdb)
	for range servers {
		srv := asynq.NewServer(asynq.RedisClientOpt{Addr: e.redisAddr}, asynq.Config{
			Concurrency: b.cfg.launchConc,
			Queues:      map[string]int{limitQueue: 1},
			LogLevel:    asynq.ErrorLevel,
		})
		if err := srv.Start(mux); err != nil {
			return nil, fmt.Errorf("start drain server: %w", err)
		}
		defer srv.Shutdown()
	}
	deadline := time.Now().Add(30*time.Second + time.Duration(n/1000)*time.Second)
	for count.Load() < int64(n) && time.Now().Before(deadline) {
		if err := sleepCtx(ctx, 10*time.Millisecond); err != nil {
			return nil, err
		}
	}
	res := &drainResult{drained: count.Load()}
	redisSpent, cmds := rm.since(ctx, e.rdb)
	res.cpu = (selfCPU() - cpu0) / time.Duration(max(res.drained, 1))
	res.redisCPU = redisSpent / time.Duration(max(res.drained, 1))
	if l := last.Load(); l > 0 {
		res.rate = float64(n-1) / time.Duration(l-first.Load()).Seconds()
	}
	e.logf("limit: %d servers drained %d no-op tasks at %.0f/s; redis: %s", servers, res.drained, res.rate, formatCmdStats(cmds, 10))
	return res, nil
}
