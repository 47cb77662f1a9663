package queue

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronos-sched/chronos/model"
)

// PlanFunc turns a page of due schedules into their plans, one per
// schedule in the same order, and says the time to commit them at (the
// records' and tasks' "now"). An error ends the page without a commit.
type PlanFunc func(due []DueSchedule) (plans []Plan, at time.Time, err error)

// TickDue reads a page of up to limit schedules of shard due by until,
// has plan plan them, and commits the plans (Commit). It returns the page,
// the plans (with Commit's marks) and which applied; none when nothing is
// due. plan is called once per chunk of the page (fastChunk schedules).
//
// Most chunks take the fast path: their schedule hashes are read under
// WATCH and, when every plan is plain (the schedule neither paused nor
// held, nothing retired for a reason, no run's record, task or manual
// mark there yet), the plans are written by native commands in one
// MULTI/EXEC that Redis runs only if none of those keys (and the shard's
// runsMadeKey, for the runs' keys) changed since it was read. That is
// commit.lua's compare-and-set and its fresh-page check, made by WATCH:
// the plans apply as the script would apply them, without
// its Lua, which costs Redis more than the writes themselves
// (docs/perf/cold-burst.md). Any other chunk, a transaction that WATCH
// aborted, REDIS_WAIT_REPLICAS set, or a server whose WATCH misses writes
// (miniredis: watchprobe.go) goes through commit.lua, which checks each
// plan again and decides each one alone.
func (s *Store) TickDue(ctx context.Context, shard int, until time.Time, limit int, plan PlanFunc) ([]DueSchedule, []Plan, []bool, error) {
	ids, err := s.rdb.ZRangeByScore(ctx, dueKey(shard), &redis.ZRangeBy{
		Min: "-inf", Max: strconv.FormatInt(ms(until), 10), Count: int64(limit)}).Result()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read due schedules of shard %d: %w", shard, err)
	}
	if len(ids) == 0 {
		return nil, nil, nil, nil
	}
	if s.cfg.WaitReplicas > 0 || !s.watchSeesWrites {
		// A commit waits for replicas in the same round trip as commit.lua
		// (runCommit): that path alone. Without a WATCH to trust, the
		// script is the only compare-and-set.
		due, err := s.readDue(ctx, s.rdb, shard, until, ids, true)
		if err != nil {
			return nil, nil, nil, err
		}
		return s.planAndCommit(ctx, shard, due, plan)
	}
	// The page's slices are made at its size once, not grown chunk by
	// chunk: a Plan and a DueSchedule are a few hundred bytes each.
	var (
		due     = make([]DueSchedule, 0, len(ids))
		plans   = make([]Plan, 0, len(ids))
		applied = make([]bool, 0, len(ids))
	)
	for len(ids) > 0 {
		n := min(len(ids), fastChunk)
		d, p, a, err := s.tickChunk(ctx, shard, until, ids[:n], plan)
		due, plans, applied = append(due, d...), append(plans, p...), append(applied, a...)
		if err != nil {
			return due, plans, applied, err
		}
		ids = ids[n:]
	}
	return due, plans, applied, nil
}

// fastChunk is how many schedules one WATCH covers. Redis 7.0 looks
// through a connection's watched keys for each key it is asked to watch,
// so a WATCH of n keys costs it n²/2 comparisons: about 300k
// instructions per run with a chunk of 312 schedules and their runs'
// three keys each, 8k with 32 schedules and one key per run (callgrind,
// BenchmarkColdBurstRedisCost); the runs' keys are one key per shard
// (runsMadeKey). Smaller chunks cost round trips.
const fastChunk = 32

// tickChunk is TickDue for the schedules ids: read under WATCH, planned,
// committed by the fast path or commit.lua.
func (s *Store) tickChunk(ctx context.Context, shard int, until time.Time, ids []string, plan PlanFunc) ([]DueSchedule, []Plan, []bool, error) {
	var (
		due     []DueSchedule
		plans   []Plan
		applied []bool
		slow    bool // the fast path does not fit: commit.lua after the WATCH ends
		at      time.Time
	)
	// The read's pipeline WATCHes the hashes, one round trip fewer than
	// Watch's own; a cluster client needs them to pick the node.
	var keys []string
	if _, ok := s.rdb.(*redis.ClusterClient); ok {
		keys = make([]string, len(ids))
		for i, id := range ids {
			keys[i] = scheduleKey(shard, id)
		}
	}
	err := s.rdb.Watch(ctx, func(tx *redis.Tx) error {
		var err error
		if due, err = s.readDue(ctx, tx, shard, until, ids, false); err != nil || len(due) == 0 {
			return err
		}
		if plans, at, err = plan(due); err != nil {
			return err
		}
		if !s.fastFits(due, plans) {
			slow = true
			return nil
		}
		applied, slow, err = s.commitFast(ctx, tx, shard, at, due, plans)
		return err
	}, keys...)
	if err != nil || !slow {
		return due, plans, applied, err
	}
	applied, err = s.Commit(ctx, shard, at, plans)
	return due, plans, applied, err
}

// planAndCommit plans due and commits the plans through commit.lua.
func (s *Store) planAndCommit(ctx context.Context, shard int, due []DueSchedule, plan PlanFunc) ([]DueSchedule, []Plan, []bool, error) {
	if len(due) == 0 {
		return nil, nil, nil, nil
	}
	plans, at, err := plan(due)
	if err != nil {
		return due, nil, nil, err
	}
	applied, err := s.Commit(ctx, shard, at, plans)
	return due, plans, applied, err
}

// fastFits says whether plans, made from due, may take the fast path:
// one transaction (CommitRunsMax runs at most), each plan of a schedule
// that exists and is neither paused nor held as read, none retiring for a
// reason (an alarm's lifecycle is commit.lua's), and none with runs
// that expects no next time: its commit would not rewrite the schedule's
// hash, which is what tells another commit of the same runs (commitFast).
func (s *Store) fastFits(due []DueSchedule, plans []Plan) bool {
	if len(plans) != len(due) || commitCallSize(plans) != len(plans) {
		return false
	}
	for i := range plans {
		d, p := &due[i], &plans[i]
		if p.ID != d.ID || d.expect.ver == "" || d.paused || d.held || p.RetireReason != "" {
			return false
		}
		if len(p.Runs) > 0 && d.expect.next == "" {
			return false
		}
	}
	return true
}

// commitFast writes plans as commit.lua writes a fresh page, in one
// MULTI/EXEC on tx, which WATCHes the plans' schedule hashes since they
// were read. It first WATCHes the shard's runsMadeKey and checks that no
// run's record, task or manual mark exists; slow says the plans must go
// through commit.lua instead: one of those keys exists, or WATCH aborted
// the transaction (nothing was written then).
func (s *Store) commitFast(ctx context.Context, tx *redis.Tx, shard int, now time.Time, due []DueSchedule, plans []Plan) (applied []bool, slow bool, err error) {
	if err := s.tasks.Publish(ctx); err != nil {
		return nil, false, err
	}
	q := s.queue(shard).Keys()
	// WATCH the shard's runsMadeKey, and check that none of the runs'
	// records, tasks and manual marks exists. A run key is made in this
	// shard by a commit of its schedule, which rewrites the schedule's
	// hash (watched since the read: a plan with runs expects a next time,
	// and applying it moves or drops that field), or by a writer that
	// increments runsMadeKey in the same step (manual_run.lua,
	// backfill.lua, markEveryShard); so one key, not one per run (see
	// fastChunk), sees any of the three made between this check and the
	// EXEC.
	nruns := 0
	for i := range plans {
		nruns += len(plans[i].Runs)
	}
	// Each run's keys are made once, for the check and the writes.
	var (
		rkeys = make([]string, 0, nruns)
		tkeys = make([]string, 0, nruns)
	)
	if nruns > 0 {
		check := make([]string, 0, 3*nruns)
		mpfx := manualKeyPrefix(shard)
		for i := range plans {
			for j := range plans[i].Runs {
				k := plans[i].Runs[j].Key
				rk, tk := runKey(shard, k), q.Task(k)
				rkeys, tkeys = append(rkeys, rk), append(tkeys, tk)
				check = append(check, rk, tk, mpfx+k)
			}
		}
		var exists *redis.IntCmd
		if _, err := tx.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Do(ctx, "WATCH", runsMadeKey(shard))
			exists = p.Exists(ctx, check...)
			return nil
		}); err != nil {
			return nil, false, fmt.Errorf("commit %d plans of shard %d: %w", len(plans), shard, err)
		}
		if exists.Val() > 0 {
			return nil, true, nil // a run planned again or a key taken: commit.lua decides
		}
	}
	// The commands' arguments go in one slice, each command's a full
	// slice expression of it (Do keeps it as given), and values every run
	// shares are boxed once: a run's writes cost a few allocations, not
	// one per argument (BenchmarkColdBurstRedisCost's sched-allocs/run).
	var (
		nowMS     any = strconv.FormatInt(ms(now), 10)
		nowNS     any = now.UnixNano()
		args          = make([]any, 0, commitFastRunArgs*nruns+8*len(plans))
		pending       = make([]any, 2, 2+nruns)
		scheduled []redis.Z
		dueZ      = make([]any, 2, 2+2*len(plans))
		sizes     = make([]*redis.IntCmd, len(plans))
		restore   = s.restoresRecords(ctx)
		dumps     []byte // the runs' records as RESTORE takes them
		dump      hashDump
		restores  []restored
	)
	if restore {
		dumps = make([]byte, 0, runDumpSize*nruns)
		restores = make([]restored, 0, nruns)
	}
	pending[0], pending[1] = "LPUSH", q.Pending()
	dueZ[0], dueZ[1] = "ZADD", dueKey(shard)
	do := func(p redis.Pipeliner, from int) {
		p.Do(ctx, args[from:len(args):len(args)]...)
	}
	run := 0
	var dueCmd *redis.Cmd // the transaction's last command: it ran if this did
	_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for i := range plans {
			pl := &plans[i]
			skey, hkey := scheduleKey(shard, pl.ID), historyKey(shard, pl.ID)
			if due[i].Released {
				p.HDel(ctx, skey, sfReleased)
			}
			var id any = pl.ID
			for j := range pl.Runs {
				r := &pl.Runs[j]
				rk, tk := rkeys[run], tkeys[run]
				run++
				var at, key any = ms(r.RunAt), r.Key
				from := len(args)
				if restore && dumpFits(pl.ID, r.Error, string(r.Reason)) {
					start := len(dumps)
					dumps = appendRunDump(dumps, &dump, pl.ID, ms(r.RunAt), ms(r.FireAt), string(r.Status), ms(now), r.Error, string(r.Reason))
					args = append(args, "RESTORE", rk, 0, dumps[start:len(dumps):len(dumps)])
					restores = append(restores, restored{p.Do(ctx, args[from:len(args):len(args)]...), rk, id, r})
				} else {
					args = appendRunHSET(args, rk, id, r, nowMS)
					do(p, from)
				}
				if r.Status == model.RunEnqueued {
					msg, processAt, err := s.asynqTask(shard, &r.Task, now)
					if err != nil {
						return err
					}
					from = len(args)
					if processAt == 0 {
						args = append(args, "HSET", tk, "msg", msg, taskState, taskPending, "pending_since", nowNS)
						pending = append(pending, key)
					} else {
						args = append(args, "HSET", tk, "msg", msg, taskState, taskScheduled)
						scheduled = append(scheduled, redis.Z{Score: float64(processAt), Member: r.Key})
					}
					do(p, from)
				}
				from = len(args)
				args = append(args, "ZADD", hkey, at, key)
				do(p, from)
			}
			var fields []any
			if pl.Inflight != "" {
				fields = append(fields, sfInflight, pl.Inflight)
				p.ZAdd(ctx, inflightKey(shard), redis.Z{Score: float64(ms(pl.InflightDeadline)), Member: pl.ID})
			}
			if len(pl.Runs) > 0 {
				sizes[i] = p.ZCard(ctx, hkey)
			}
			if pl.NewNext.IsZero() {
				p.HDel(ctx, skey, sfNext)
			} else {
				fields = append(fields, sfNext, ms(pl.NewNext))
			}
			score := pl.NewScore
			if pl.Hold {
				fields = append(fields, sfHeld, flagSet)
				score = math.Inf(1)
			}
			dueZ = append(dueZ, score, id)
			if len(fields) > 0 {
				from := len(args)
				args = append(append(args, "HSET", skey), fields...)
				do(p, from)
			}
		}
		if len(pending) > 2 {
			p.Do(ctx, pending...)
		}
		if len(scheduled) > 0 {
			p.ZAdd(ctx, q.Scheduled(), scheduled...)
		}
		dueCmd = p.Do(ctx, dueZ...)
		return nil
	})
	if errors.Is(err, redis.TxFailedErr) {
		return nil, true, nil // a key changed since it was read: commit.lua decides
	}
	if err != nil && restoreRefused(restores) {
		// The server refused a RESTORE that NewStore's probe made (a
		// failover to an older Redis, an ACL changed since): records are
		// written by HSET from now on.
		s.restoreRecords.Store(false)
		if dueCmd.Val() == nil {
			return nil, true, nil // refused as queued: EXEC wrote nothing, commit.lua decides
		}
		// Refused as run: the transaction's other writes stand.
		err = s.restoreFailed(ctx, restores, nowMS)
	}
	if err != nil {
		return nil, false, fmt.Errorf("commit %d plans of shard %d: %w", len(plans), shard, err)
	}
	var trim map[string]int
	applied = make([]bool, len(plans))
	for i := range plans {
		applied[i] = true
		pl := &plans[i]
		for j := range pl.Runs {
			r := &pl.Runs[j]
			r.Written, r.Taken = true, false
			if r.Status == model.RunSkipped {
				s.ledger.count(r.Reason, 1)
			}
		}
		if sizes[i] != nil && sizes[i].Val() > int64(s.cfg.RunHistory) {
			if trim == nil {
				trim = map[string]int{}
			}
			trim[pl.ID] = len(pl.Runs)
		}
	}
	if len(trim) > 0 {
		// As after commit.lua: a failed trim leaves a history longer than
		// kept for a while, and the schedule's next commit asks again.
		_ = s.trimHistories(ctx, shard, trim)
	}
	s.fastPages.Add(1)
	return applied, false, nil
}

// commitFastRunArgs is about how many arguments commitFast sends for a
// run: its record's HSET, its task's and its history's ZADD.
const commitFastRunArgs = 32

// statusArg is a run status as a command argument: the two a plan makes
// are boxed once.
func statusArg(st model.RunStatus) any {
	switch st {
	case model.RunEnqueued:
		return statusEnqueuedArg
	case model.RunSkipped:
		return statusSkippedArg
	}
	return string(st)
}

var (
	statusEnqueuedArg any = string(model.RunEnqueued)
	statusSkippedArg  any = string(model.RunSkipped)
)
