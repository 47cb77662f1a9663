package main

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/asynqwire"
)

type footprintResult struct {
	n            int
	reg          time.Duration
	perSched     float64       // Redis bytes per registered schedule, no runs
	runs         int           // runs kept per schedule in the second measurement
	perSchedRuns float64       // ... with `runs` run records each
	perRun       float64       // Redis bytes per run record (hash + history entry)
	perTask      float64       // Redis bytes per asynq task the commit wrote
	written      int64         // run records written
	idle         time.Duration // idle measurement window
	idleCPU      float64       // scheduler CPU, share of one core, none due
	idleRedisCPU float64       // Redis CPU share over the same window
	rssKB, hwmKB int64         // scheduler
}

// footprint registers n schedules none of which is due for hours, measures
// Redis memory, the idle scheduler's CPU and RSS, then writes `runs` run
// records per schedule through the scheduler's own commit script (as
// RUN_HISTORY=runs would keep after that many fires) and measures again.
func (b *bench) footprint(ctx context.Context, n int) (*footprintResult, error) {
	e := b.e
	res := &footprintResult{n: n, runs: b.cfg.footprintRuns, idle: b.cfg.idle}
	if err := e.flush(ctx); err != nil {
		return nil, err
	}
	m0 := usedMemory(ctx, e.rdb)
	store, err := e.newStore(ctx, lookaheadDefault, res.runs)
	if err != nil {
		return nil, err
	}
	tmpl, err := cronRecord(dailyAt(time.Now().Add(2 * time.Hour)))
	if err != nil {
		return nil, err
	}
	e.logf("footprint %d: registering", n)
	if res.reg, err = register(ctx, store, n, tmpl); err != nil {
		return nil, err
	}
	b.reg.observe(n, res.reg)
	m1 := usedMemory(ctx, e.rdb)
	res.perSched = float64(m1-m0) / float64(n)

	// Idle scheduler: all schedules registered, none due.
	sched, err := e.startChronos(ctx, "scheduler", nil)
	if err != nil {
		return nil, err
	}
	defer sched.stop(10 * time.Second)
	e.waitShards(ctx, []*proc{sched}, time.Now().Add(15*time.Second))
	if err := sleepCtx(ctx, 3*time.Second); err != nil { // past start-up work
		return nil, err
	}
	s0, _ := readProcStat(sched.pid())
	r0 := redisCPU(ctx, e.rdb)
	t0 := time.Now()
	if err := sleepCtx(ctx, res.idle); err != nil {
		return nil, err
	}
	s1, _ := readProcStat(sched.pid())
	el := time.Since(t0)
	res.idleRedisCPU = (redisCPU(ctx, e.rdb) - r0).Seconds() / el.Seconds()
	res.idleCPU = (s1.cpu - s0.cpu).Seconds() / el.Seconds()
	res.rssKB, res.hwmKB = s1.rssKB, s1.hwmKB
	sched.stop(10 * time.Second)
	e.logf("footprint %d: idle scheduler %.2f%% CPU, %d MB RSS; writing %d runs per schedule",
		n, 100*res.idleCPU, res.rssKB/1024, res.runs)

	written, perTask, err := writeRuns(ctx, e, store, res.runs)
	if err != nil {
		return nil, err
	}
	res.written, res.perTask = written, perTask
	if written != int64(n*res.runs) {
		return nil, fmt.Errorf("footprint: wrote %d run records, want %d", written, n*res.runs)
	}
	m2 := usedMemory(ctx, e.rdb)
	res.perSchedRuns = float64(m2-m0) / float64(n)
	res.perRun = float64(m2-m1) / float64(written)
	return res, nil
}

// writeRuns gives every schedule `runs` past runs through store.Commit, the
// script a scheduler tick uses (run hashes, history and the runs' asynq
// tasks), a page at a time. The asynq tasks each page wrote are deleted
// right away, so that a million schedules' history fits in memory; the
// bytes per task are measured on the first page. Each committed schedule's
// due score becomes +inf, so the next ReadDue page moves on; its record is
// otherwise unchanged.
func writeRuns(ctx context.Context, e *env, store *queue.Store, runs int) (written int64, perTask float64, err error) {
	far := time.Now().Add(48 * time.Hour)
	first := true
	for sh := range e.shards {
		for {
			due, err := store.ReadDue(ctx, sh, far, 200)
			if err != nil {
				return 0, 0, err
			}
			if len(due) == 0 {
				break
			}
			plans := make([]queue.Plan, 0, len(due))
			var keys []string
			for _, d := range due {
				p := d.Plan()
				p.NewNext = d.Next
				for j := 1; j <= runs; j++ {
					at := d.Next.Add(-time.Duration(j) * 24 * time.Hour)
					key := model.IdempotencyKey(d.ID, at)
					task := queue.TaskPayload{IdempotencyKey: key, ScheduleID: d.ID, RunAt: at, FireAt: at,
						WorkflowID: workflowID, Version: version, UserID: "bench", Source: model.SourceSchedule}
					p.Runs = append(p.Runs, queue.PlannedRun{Key: key, RunAt: at, FireAt: at,
						Status: model.RunEnqueued, Task: task})
					keys = append(keys, key)
				}
				plans = append(plans, p)
			}
			applied, err := store.Commit(ctx, sh, time.Now(), plans)
			if err != nil {
				return 0, 0, err
			}
			for i, ok := range applied {
				if !ok {
					return 0, 0, fmt.Errorf("commit of schedule %s not applied", plans[i].ID)
				}
			}
			withTasks := usedMemory(ctx, e.rdb)
			if err := deleteTasks(ctx, e, queue.ShardQueue(runQueue, sh), keys); err != nil {
				return 0, 0, err
			}
			if first {
				perTask = float64(withTasks-usedMemory(ctx, e.rdb)) / float64(len(keys))
				first = false
			}
			written += int64(len(keys))
		}
	}
	return written, perTask, nil
}

// deleteTasks removes the given tasks of an asynq queue (asynq v0.26
// layout) and the queue's state lists and sets.
func deleteTasks(ctx context.Context, e *env, q string, ids []string) error {
	_, err := e.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, id := range ids {
			p.Del(ctx, asynqwire.Keys{Queue: q}.Task(id))
		}
		k := asynqwire.Keys{Queue: q}
		p.Del(ctx, k.Pending(), k.Scheduled(), k.Active(), k.Completed(), k.Retry(), k.Archived())
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete asynq tasks: %w", err)
	}
	return nil
}
