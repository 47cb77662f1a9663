package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronos-sched/chronos/model"
)

// A manual run lives in its key's shard: its record, its task (in the
// shard's queue) and the mark on its key, which the shard's commit
// script reads, so every script touches one hash slot. A schedule's run
// lives in its schedule's shard, which a key does not name. A Go caller
// that starts a schedule's run by hand names the schedule
// (ManualRun.ScheduleID): the manual run then lives in the schedule's
// shard, one script on one slot. Without it, a key that may be a
// schedule's run's (maybeScheduledKey: only the Go API takes one; the
// HTTP API refuses it) is marked in every other shard before the run is
// looked for and started: a commit after that finds the mark and records
// its run SKIPPED, and one before it left a record that StartManualRun
// finds. The marks this call set are removed when it does not start the
// run. That path spans slots and is not atomic (docs/operations.md).

// maybeScheduledKey says whether m's key has the form of a schedule's
// run's key (64 lowercase hex digits) and is not the key ManualRunKey
// gives m, which no schedule's key is.
func maybeScheduledKey(m ManualRun) bool {
	k := m.IdempotencyKey
	if len(k) != 64 {
		return false
	}
	for _, c := range []byte(k) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return k != model.ManualRunKey(m.WorkflowID, model.Version(m.Version), m.ScheduledFor)
}

// markEveryShard marks key taken in every shard but own (where the
// manual run script marks it) for ttl seconds, where no mark is, and
// increments those shards' runsMadeKey, in one pipeline. It returns the
// shards it marked and whether a live task (one asynq is not done with,
// as run_key_taken asks) holds the key in another shard's queue: a
// schedule's run whose record is gone.
func (s *Store) markEveryShard(ctx context.Context, key string, own int, ttl int64) (marked []int, held bool, err error) {
	marks := make([]*redis.BoolCmd, s.cfg.Shards)
	states := make([]*redis.StringCmd, s.cfg.Shards)
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for sh := range s.cfg.Shards {
			if sh != own {
				marks[sh] = p.SetNX(ctx, manualKeyPrefix(sh)+key, flagSet, time.Duration(ttl)*time.Second)
			}
		}
		// After each mark, before its shard's task is read: a scheduler's
		// fast path that checked the key absent before the mark and has
		// not committed by this INCR writes nothing (runsMadeKey); one
		// that committed before it left the task read below.
		for sh := range s.cfg.Shards {
			if sh != own {
				p.Incr(ctx, runsMadeKey(sh))
			}
		}
		// After the marks: a task committed later is not enqueued.
		for sh := range s.cfg.Shards {
			if sh != own {
				states[sh] = p.HGet(ctx, s.queue(sh).Keys().Task(key), "state")
			}
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return nil, false, fmt.Errorf("mark idempotency key %s taken: %w", key, err)
	}
	for sh := range s.cfg.Shards {
		if marks[sh] != nil && marks[sh].Val() {
			marked = append(marked, sh)
		}
		if st := states[sh]; st != nil && st.Err() == nil && st.Val() != "archived" && st.Val() != "completed" {
			held = true
		}
	}
	return marked, held, nil
}

// unmark removes the marks markEveryShard set for a run not started, best
// effort: a mark left behind expires with the TTL it was given.
func (s *Store) unmark(key string, shards []int) {
	if len(shards) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, sh := range shards {
			p.Del(ctx, manualKeyPrefix(sh)+key)
		}
		return nil
	})
}
