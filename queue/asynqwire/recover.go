package asynqwire

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// What asynq's server did for a queue besides running tasks, done here
// with every key in KEYS: recover the tasks whose taker died (its
// recoverer) and delete the completed tasks past their retention (its
// janitor). asynq's scripts for both build each task's key inside Lua
// from the ids they read.

var (
	// recoverTasksScript moves tasks through finish_task.lua, put before
	// it as a function, rather than a copy of its moves.
	recoverTasksScript = redis.NewScript(shebang + ScriptPrelude +
		"local function finish_task(KEYS, ARGV)\n" + FinishLua + "\nend\n" + luaSource("recover_tasks"))
	deleteCompletedScript = newScript("delete_completed")
)

// LeaseExpired is the error a recovered task records: asynq's
// ErrLeaseExpired, which its recoverer records, word for word.
const LeaseExpired = "asynq: task lease expired"

// LeaseSlack is how long after its lease ended a task is recovered: as
// asynq's recoverer, which lists only leases that ended 30 s ago or
// earlier, so that a taker whose host clock is behind the recoverer's
// keeps its tasks.
const LeaseSlack = 30 * time.Second

// RecoverBatch bounds the tasks of one queue a Recover call reads and
// moves: one script call's worth.
const RecoverBatch = 100

// RetryDelay says how long a recovered task waits before it is tried
// again, given the attempts that failed before (asynq's RetryDelayFunc,
// with LeaseExpired as the error).
type RetryDelay func(retried int) time.Duration

// Recovered counts what a Recover call did.
type Recovered struct {
	// Retried went to the retry set; Archived had spent their retries.
	Retried, Archived int
	// Full says that some queue had RecoverBatch expired leases or more:
	// call again for the rest.
	Full bool
}

func (r *Recovered) add(o Recovered) {
	r.Retried, r.Archived, r.Full = r.Retried+o.Retried, r.Archived+o.Archived, r.Full || o.Full
}

// Recover recovers the tasks whose lease ended LeaseSlack or more before
// now (the host's clock, as the leases are scored), up to RecoverBatch,
// as asynq's recoverer does: each goes to the retry set at now plus
// delay, with Retried + 1 and LeaseExpired as its error, or to the
// archive when its retries are spent; both count as processed and
// failed. It reads the expired ids and their messages first, then
// moves them in one script call that checks each still holds
// (recover_tasks.lua): a taker that extended a lease meanwhile keeps its
// task.
func (q *Queue) Recover(ctx context.Context, now time.Time, delay RetryDelay) (Recovered, error) {
	ids, err := q.rdb.ZRangeByScore(ctx, q.keys.Lease(), leaseExpiredRange(now)).Result()
	if err != nil {
		return Recovered{}, fmt.Errorf("read expired leases of %s: %w", q.keys.Queue, err)
	}
	return q.recoverIDs(ctx, ids, now, delay)
}

func leaseExpiredRange(now time.Time) *redis.ZRangeBy {
	return &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(now.Add(-LeaseSlack).Unix(), 10), Count: RecoverBatch}
}

// recoverIDs is Recover for the ids read in the lease set.
func (q *Queue) recoverIDs(ctx context.Context, ids []string, now time.Time, delay RetryDelay) (Recovered, error) {
	if len(ids) == 0 {
		return Recovered{}, nil
	}
	msgs := make([]*redis.StringCmd, len(ids))
	if _, err := q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			msgs[i] = p.HGet(ctx, q.keys.Task(id), "msg")
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return Recovered{}, fmt.Errorf("read lease-expired tasks of %s: %w", q.keys.Queue, err)
	}
	keys := make([]string, 0, 8*len(ids))
	args := make([]any, 0, 1+6*len(ids))
	args = append(args, now.Add(-LeaseSlack).Unix())
	var ends []End
	for i, id := range ids {
		raw, err := msgs[i].Bytes()
		if err != nil {
			continue // no message: asynq's recoverer leaves such a task too
		}
		m, err := DecodeMessage(raw)
		if err != nil {
			continue
		}
		t := &Task{ID: id, Retried: int(m.Retried), MaxRetry: int(m.Retry), msg: raw, retention: m.Retention, queue: q}
		end, retryAt := Retry, time.Time{}
		if t.Retried >= t.MaxRetry {
			end = Archive
		} else {
			retryAt = now.Add(delay(t.Retried))
		}
		k, a, err := t.FinishCall(end, retryAt, LeaseExpired, now)
		if err != nil {
			return Recovered{}, err
		}
		keys = append(keys, k...)
		args = append(append(args, raw), a...)
		ends = append(ends, end)
	}
	full := len(ids) == RecoverBatch
	if len(ends) == 0 {
		return Recovered{}, nil // none readable: reading again finds the same
	}
	done, err := q.finish(ctx, recoverTasksScript, keys, args...).Int64Slice()
	if err != nil {
		return Recovered{}, fmt.Errorf("recover lease-expired tasks of %s: %w", q.keys.Queue, err)
	}
	var r Recovered
	for i, d := range done {
		switch {
		case d != 1:
		case ends[i] == Archive:
			r.Archived++
		default:
			r.Retried++
		}
	}
	r.Full = full && r.Retried+r.Archived > 0
	if r.Archived > 0 {
		if err := q.trimArchive(ctx, now); err != nil {
			return r, err
		}
	}
	return r, nil
}

// Recover recovers the lease-expired tasks of every queue
// (Queue.Recover): one pipeline reads the expired leases of all, then
// each queue with some is recovered on its own.
func (s *Set) Recover(ctx context.Context, now time.Time, delay RetryDelay) (Recovered, error) {
	ids, err := s.readIDs(ctx, Keys.Lease, leaseExpiredRange(now))
	if err != nil {
		return Recovered{}, fmt.Errorf("read expired leases: %w", err)
	}
	var total Recovered
	var errs []error
	for i, q := range s.queues {
		r, err := q.recoverIDs(ctx, ids[i], now, delay)
		total.add(r)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return total, errors.Join(errs...)
}

// readIDs reads the ids in rng of one sorted set of every queue, the
// set each queue's keys name, in one pipeline: the ids of queue i are
// the i-th answer.
func (s *Set) readIDs(ctx context.Context, set func(Keys) string, rng *redis.ZRangeBy) ([][]string, error) {
	cmds := make([]*redis.StringSliceCmd, len(s.queues))
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, q := range s.queues {
			cmds[i] = p.ZRangeByScore(ctx, set(q.keys), rng)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	ids := make([][]string, len(cmds))
	for i, c := range cmds {
		ids[i] = c.Val()
	}
	return ids, nil
}

// DeleteCompletedBatch bounds the completed tasks of one queue a
// DeleteExpiredCompleted call deletes: asynq's janitor's batch.
const DeleteCompletedBatch = 100

// DeleteExpiredCompleted deletes the completed tasks whose retention ended
// at or before now (the host's clock, which scored them), up to
// DeleteCompletedBatch, as asynq's janitor does, and says how many it
// deleted. It reads their ids first and deletes them in one script call
// that checks each is still completed and expired (delete_completed.lua).
func (q *Queue) DeleteExpiredCompleted(ctx context.Context, now time.Time) (int, error) {
	ids, err := q.rdb.ZRangeByScore(ctx, q.keys.Completed(), completedExpiredRange(now)).Result()
	if err != nil {
		return 0, fmt.Errorf("read expired completed tasks of %s: %w", q.keys.Queue, err)
	}
	return q.deleteCompleted(ctx, ids, now)
}

func completedExpiredRange(now time.Time) *redis.ZRangeBy {
	return &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(now.Unix(), 10), Count: DeleteCompletedBatch}
}

func (q *Queue) deleteCompleted(ctx context.Context, ids []string, now time.Time) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	keys := make([]string, 0, 1+len(ids))
	args := make([]any, 0, 1+len(ids))
	keys, args = append(keys, q.keys.Completed()), append(args, now.Unix())
	for _, id := range ids {
		keys, args = append(keys, q.keys.Task(id)), append(args, id)
	}
	n, err := q.finish(ctx, deleteCompletedScript, keys, args...).Int()
	if err != nil {
		return 0, fmt.Errorf("delete expired completed tasks of %s: %w", q.keys.Queue, err)
	}
	return n, nil
}

// DeleteExpiredCompleted deletes the expired completed tasks of every
// queue (Queue.DeleteExpiredCompleted), reading the ids of all in one
// pipeline, and says how many it deleted and whether some queue had a
// full batch (call again for the rest).
func (s *Set) DeleteExpiredCompleted(ctx context.Context, now time.Time) (deleted int, full bool, err error) {
	ids, err := s.readIDs(ctx, Keys.Completed, completedExpiredRange(now))
	if err != nil {
		return 0, false, fmt.Errorf("read expired completed tasks: %w", err)
	}
	var errs []error
	for i, q := range s.queues {
		n, err := q.deleteCompleted(ctx, ids[i], now)
		deleted += n
		full = full || (len(ids[i]) == DeleteCompletedBatch && n > 0)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return deleted, full, errors.Join(errs...)
}
