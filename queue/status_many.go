package queue

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue/asynqwire"
)

// maxEnds bounds the runs one status_done_many.lua call ends, as asynq
// bounds the tasks its scripts move.
const maxEnds = 50

// endsTimeout bounds a call of status_done_many.lua: it is sent for many
// callers, none of whose contexts may cut it short for the others.
const endsTimeout = 5 * time.Second

// launchEnd is one FinishLaunched call waiting for its run's end to be
// written with the others of its shard.
type launchEnd struct {
	ctx  context.Context
	sh   int
	key  string // the run's idempotency key
	u    StatusUpdate
	sid  string   // the run's schedule id as the task names it
	keys []string // finish_task.lua's KEYS (asynqwire.Task.FinishCall)
	args []any    // finish_task.lua's ARGV
	done chan struct{}

	// Set before done closes.
	sent     bool  // its end went out (its ctx had not ended)
	res      []any // status.lua's answer
	finished bool
	err      error
}

// endGatherer writes the ends of launched runs (FinishLaunched) that come
// together in one status_done_many.lua call per shard, as the batcher
// gathers commands: while one call is in flight the next ends gather, and
// an end that finds nothing in flight goes at once. A launcher's runs
// taken together end together: one call ends them all, where a call per
// run paid the script call's own cost for each (docs/perf/launchers.md,
// "Launch: round trips per run").
type endGatherer struct {
	s       *Store
	mu      sync.Mutex
	pending []*launchEnd
	running bool
}

// do queues e and waits until its end has been written, or e.ctx ends.
func (g *endGatherer) do(e *launchEnd) error {
	e.done = make(chan struct{})
	g.mu.Lock()
	g.pending = append(g.pending, e)
	if !g.running {
		g.running = true
		go g.flush()
	}
	g.mu.Unlock()
	select {
	case <-e.done:
		if !e.sent {
			return e.ctx.Err()
		}
		return e.err
	case <-e.ctx.Done():
		return e.ctx.Err()
	}
}

// flush writes what is pending, batch after batch, and exits when nothing
// is.
func (g *endGatherer) flush() {
	for {
		g.mu.Lock()
		batch := g.pending
		g.pending = nil
		if len(batch) == 0 {
			g.running = false
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		g.send(batch)
		for _, e := range batch {
			close(e.done)
		}
	}
}

// endCall is one status_done_many.lua call: runs of one shard whose
// tasks' ends share their keys and counters' expiry.
type endCall struct {
	ends  []*launchEnd
	keys  []string
	args  []any
	owner string // the shard's owner-less active set, which each run names
	cmd   *redis.Cmd
}

// send writes the ends of batch, one script call for each shard's up to
// maxEnds, all in one pipeline.
func (g *endGatherer) send(batch []*launchEnd) {
	s := g.s
	now := ms(s.clock.Now())
	var calls []*endCall
	// The ends of one call share the shard, the queue's keys (its active
	// list names them), the day's counters and their expiry: a key of
	// those, where one string of them all was four allocations per run.
	type group struct {
		sh                     int
		active, dest, counters string
		expiry                 any
	}
	open := map[group]*endCall{}
	for _, e := range batch {
		if e.sent = e.ctx.Err() == nil; !e.sent { // its caller has given up
			continue
		}
		sh := e.sh
		g := group{sh: sh, active: e.keys[0], dest: e.keys[3], counters: e.keys[4], expiry: e.args[4]}
		c := open[g]
		if c == nil || len(c.ends) == maxEnds {
			c = &endCall{
				keys:  append([]string{dueKey(sh), inflightKey(sh), autoPausedKey(sh), s.queue(sh).Keys().Scheduled()}, endSharedKeys(e.keys)...),
				args:  []any{releasedChannel(sh), now, e.args[4]},
				owner: alarmsActiveKey(sh, ""),
			}
			open[g] = c
			calls = append(calls, c)
		}
		c.ends = append(c.ends, e)
		u := e.u
		rkey := runKey(sh, e.key)
		skey, bfq := rkey, rkey // declared keys of the slot when there is no schedule
		if e.sid != "" {
			skey, bfq = scheduleKey(sh, e.sid), backfillQueueKey(sh, e.sid)
		}
		failed := ""
		if u.DeliveryFailed {
			failed = flagSet
		}
		c.keys = append(c.keys, rkey, skey, c.owner, bfq, e.keys[2])
		c.args = append(c.args, e.key, string(u.Status), u.RunID, u.Error, string(u.From), string(u.Release), failed,
			string(u.Reason), e.sid, "", e.args[0], e.args[2], e.args[3])
	}
	if len(calls) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), endsTimeout)
	defer cancel()
	err := s.batch.do(ctx, func(p redis.Pipeliner) {
		for _, c := range calls {
			c.cmd = statusDoneManyScript.EvalSha(ctx, p, c.keys, c.args...)
		}
	})
	for _, c := range calls {
		if err == nil && redis.HasErrorPrefix(c.cmd.Err(), "NOSCRIPT") {
			c.cmd = statusDoneManyScript.Run(ctx, s.rdb, c.keys, c.args...)
		}
		var res []any
		cerr := err
		if cerr == nil {
			res, cerr = c.cmd.Slice()
		}
		if cerr == nil && len(res) != len(c.ends) {
			cerr = fmt.Errorf("status_done_many answered %d runs for %d", len(res), len(c.ends))
		}
		for i, e := range c.ends {
			if cerr != nil {
				e.err = fmt.Errorf("update run %s: %w", e.key, cerr)
				continue
			}
			r, _ := res[i].([]any)
			if len(r) < 3 {
				e.err = fmt.Errorf("update run %s: status_done_many answered %v", e.key, res[i])
				continue
			}
			fin, _ := r[0].(int64)
			e.finished, e.res = fin == 1, r[1:]
		}
	}
}

// endSharedKeys are finish_task.lua's KEYS that every task of a queue
// finished as done at once shares: all but the task's hash (KEYS[3]).
func endSharedKeys(keys []string) []string {
	return append(append([]string{}, keys[:2]...), keys[3:]...)
}

// finishLaunchedTogether is FinishLaunched through the store's
// endGatherer: the status and the task's end of a launched run written
// with the other runs of its shard that end at the same time. A run
// whose schedule or owner the task did not name right (statusRetry) is
// reported again alone, with the ones the script answered.
func (s *Store) finishLaunchedTogether(ctx context.Context, t *asynqwire.Task, p *TaskPayload, u StatusUpdate) (bool, error) {
	keys, args, err := t.FinishCall(asynqwire.Done, time.Time{}, "", time.Now()) // asynq's servers count by their host clock
	if err != nil {
		return false, err
	}
	u.Error, u.RunID = cut(u.Error, model.MaxRunErrorLen), cut(u.RunID, model.MaxIDLen)
	e := &launchEnd{ctx: ctx, sh: s.taskShard(p), key: p.IdempotencyKey, u: u, sid: p.ScheduleID, keys: keys, args: args}
	if err := s.ends.do(e); err != nil {
		return false, err
	}
	if code, _ := e.res[0].(int64); code == statusRetry {
		sid, _ := e.res[1].(string)
		owner, _ := e.res[2].(string)
		d := &doneCall{keys: keys, args: args}
		err := s.reportStatusFrom(ctx, e.sh, e.key, sid, owner, u, d)
		return d.finished, err
	}
	return e.finished, s.statusAnswer(ctx, e.sh, e.key, u, e.res)
}
