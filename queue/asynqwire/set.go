package asynqwire

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Set is the run queues a launcher consumes together: one asynq queue per
// shard (each in its shard's hash slot, so a shard's scripts touch one
// slot on Redis Cluster) and the legacy single queue of deployments that
// predate them, drained until empty. Every call on a Set works on each
// queue with its own keys, so it works on a Redis Cluster too (a
// pipeline there is split by slot).
type Set struct {
	rdb       redis.UniversalClient
	queues    []*Queue // published ones first, then the legacy one
	published int      // how many of queues Publish lists
	next      atomic.Uint32
	listed    atomic.Pointer[time.Time] // when Publish last listed the queues

	// lens are the pending lengths Take last read, less what it took
	// since; read again when lensAt is zero or older than lensMaxAge.
	// ids are the ids read at the end of each pending list, in pop order,
	// less those taken since: what the next take names to the script.
	mu     sync.Mutex
	lens   []int64
	ids    [][]string
	lensAt time.Time
}

// lensMaxAge bounds how long Take plans from the pending lengths it read
// before: a queue that was empty then is looked at again this much later
// at most (or at once when a take comes back short).
const lensMaxAge = 100 * time.Millisecond

// minShare is the fewest tasks Take asks of a queue when it asks for as
// many: each share is one script call, and a take that spread 9 tasks
// over 16 shard queues made 9 calls of one task each, where asynq's own
// server makes one call per task too but the single run queue took 9 in
// one. The queues a take skips come first in later takes (each starts
// one queue further), so over as many takes as queues each is served
// alike.
const minShare = 8

// idsWindow is how many ids at a pending list's end Take reads for a
// take of n: as many as one share of n names (idsSlack), which also
// serve the next takes' smaller shares of that list. It was 4n, read
// from all 16 lists at each refresh of the lengths: with two launchers
// at concurrency 10 a launcher read some 16 ids per run it took, and
// used fewer than 3 (docs/perf/launchers.md, "Launch: the scripts' work
// per run").
func idsWindow(n int) int { return max(n+idsSlack(n), 16) }

// idsSlack is how many more ids than it wants a share names to the take
// script, for the ones another launcher took first.
func idsSlack(n int) int { return n + 2 }

// NewSet returns the set of queues; Publish lists the queues in publish,
// and legacy (which may be nil) is consumed with them but not listed.
func NewSet(rdb redis.UniversalClient, publish []*Queue, legacy *Queue) *Set {
	s := &Set{rdb: rdb, queues: publish, published: len(publish)}
	// Launchers start their takes at different queues, so that two do
	// not take from the same list's end at once.
	s.next.Store(rand.Uint32())
	if legacy != nil {
		s.queues = append(s.queues[:len(publish):len(publish)], legacy)
	}
	return s
}

// Queues returns the set's queues: the published ones, then the legacy
// one if any.
func (s *Set) Queues() []*Queue { return s.queues }

// Names returns the names of the set's queues, in Queues' order.
func (s *Set) Names() []string {
	out := make([]string, len(s.queues))
	for i, q := range s.queues {
		out[i] = q.keys.Queue
	}
	return out
}

// Publish lists the set's queues (not the legacy one) in AllQueues, where
// asynq's servers, Inspector and asynqmon find queues, in one command, at
// most once a second so a Redis restarted empty lists them again.
// AllQueues is in no queue's hash slot: no script writes it.
func (s *Set) Publish(ctx context.Context) error {
	if at := s.listed.Load(); at != nil && time.Since(*at) < time.Second {
		return nil
	}
	names := make([]any, s.published)
	for i, q := range s.queues[:s.published] {
		names[i] = q.keys.Queue
	}
	if len(names) > 0 {
		if err := s.rdb.SAdd(ctx, AllQueues, names...).Err(); err != nil {
			return fmt.Errorf("register %d asynq queues: %w", len(names), err)
		}
	}
	now := time.Now()
	s.listed.Store(&now)
	return nil
}

// Take takes up to n tasks, fairly across the queues: it reads which
// pending lists hold tasks, and the ids at their ends (one pipeline),
// gives each of those in turn its share of n, starting one queue further
// each call, so no queue waits behind another, and takes every share in
// one more pipeline. (Taking queue by queue cost a round trip per queue:
// with a burst spread over 16 shard queues, a lane taking 9 tasks made 10
// round trips.) The lengths and ids serve the next calls too, less what
// they took, for up to lensMaxAge and while every share comes back
// whole: under a burst a take is then one round trip. Every key the take
// script touches is in its KEYS: it is named the ids read at the list's
// end (take_tasks.lua), and a share whose ids others took first comes
// back short, which makes the next call read again.
func (s *Set) Take(ctx context.Context, n int) ([]*Task, error) {
	if len(s.queues) == 1 {
		return s.queues[0].Take(ctx, n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.readLens(ctx, n); err != nil {
		return nil, err
	}
	lens := s.lens
	full := 0
	for _, l := range lens {
		if l > 0 {
			full++
		}
	}
	type share struct {
		j   int // the queue's index
		q   *Queue
		n   int
		ids []string // named to the script
	}
	var shares []share
	var unread []int // shares whose queue has no ids left from the last read
	start, left := int(s.next.Add(1))%len(s.queues), n
	for i := range s.queues {
		j := (start + i) % len(s.queues)
		if left <= 0 || full == 0 {
			break
		}
		if lens[j] == 0 {
			continue
		}
		// Each queue that holds tasks gets its share of what is left, at
		// least minShare; what a short one leaves goes to the next.
		m := min(max((left+full-1)/full, minShare), left, int(lens[j]))
		full--
		if len(s.ids[j]) == 0 {
			unread = append(unread, len(shares))
		}
		shares = append(shares, share{j: j, q: s.queues[j], n: m})
		left -= m
	}
	if len(shares) == 0 {
		s.lensAt = time.Time{}
		return nil, nil
	}
	if len(unread) > 0 {
		// Lengths kept from before, ids all taken since: read this far
		// more of those lists.
		cmds := make([]*redis.StringSliceCmd, len(unread))
		if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, u := range unread {
				cmds[i] = p.LRange(ctx, shares[u].q.keys.Pending(), int64(-idsWindow(n)), -1)
			}
			return nil
		}); err != nil {
			s.lensAt = time.Time{}
			return nil, fmt.Errorf("read pending run tasks: %w", err)
		}
		for i, u := range unread {
			s.ids[shares[u].j] = popOrder(cmds[i].Val())
		}
	}
	live := shares[:0]
	for _, sh := range shares {
		ids := s.ids[sh.j]
		if len(ids) == 0 {
			s.lens[sh.j] = 0 // emptied since the lengths were read
			continue
		}
		sh.ids = ids[:min(len(ids), sh.n+idsSlack(sh.n))]
		live = append(live, sh)
	}
	shares = live
	// The lengths and ids stay for the next call less what this one
	// took, and what others took before it. A share that came back short
	// means that list's ids are out of date (another launcher took from
	// its end, or it emptied): they are read again when a take next gives
	// it a share, and the other lists' stay. Reading every list again
	// after each short share was most of a second launcher's reads.
	took := func(sh share, skipped, got int, err error) {
		s.lens[sh.j] = max(s.lens[sh.j]-int64(skipped+got), 0)
		s.ids[sh.j] = s.ids[sh.j][min(skipped+got, len(s.ids[sh.j])):]
		switch {
		case err != nil:
			s.ids[sh.j], s.lensAt = nil, time.Time{}
		case got < sh.n:
			s.ids[sh.j] = nil
		}
	}
	now := time.Now() // leases go by host clocks, as asynq's servers' do
	cmds := make([]*redis.Cmd, len(shares))
	_, _ = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, sh := range shares {
			cmds[i] = takeTasksScript.EvalSha(ctx, p, sh.q.takeKeys(sh.ids), takeArgs(sh.n, now, sh.ids)...)
		}
		return nil
	})
	var out []*Task
	var firstErr error
	for i, sh := range shares {
		v, err := cmds[i].StringSlice()
		if redis.HasErrorPrefix(err, "NOSCRIPT") {
			ts, err := sh.q.Take(ctx, sh.n) // loads the script
			took(sh, 0, len(ts), err)
			s.ids[sh.j], s.lensAt = nil, time.Time{} // read again: Take read its own
			if err != nil && firstErr == nil {
				firstErr = err
			}
			out = append(out, ts...)
			continue
		}
		if err != nil {
			took(sh, 0, 0, err)
			if firstErr == nil {
				firstErr = fmt.Errorf("take tasks of %s: %w", sh.q.keys.Queue, err)
			}
			continue
		}
		ts, skipped, _ := sh.q.taken(v, now)
		took(sh, skipped, len(ts), nil)
		if len(v) == 1 && v[0] == "0" {
			s.lens[sh.j] = 0 // empty (or paused) until the lengths are read again
		}
		out = append(out, ts...)
	}
	if len(out) > 0 {
		return out, nil // these are held: run them, the rest next call
	}
	return nil, firstErr
}

// readLens reads every pending list's length and the ids at its end
// (idsWindow(n) of them) in one pipeline, unless the lengths read before
// are recent and some queue still holds tasks by them. s.mu is held.
func (s *Set) readLens(ctx context.Context, n int) error {
	if !s.lensAt.IsZero() && time.Since(s.lensAt) < lensMaxAge && slices.ContainsFunc(s.lens, func(l int64) bool { return l > 0 }) {
		return nil
	}
	lens := make([]*redis.IntCmd, len(s.queues))
	ids := make([]*redis.StringSliceCmd, len(s.queues))
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, q := range s.queues {
			lens[i] = p.LLen(ctx, q.keys.Pending())
			ids[i] = p.LRange(ctx, q.keys.Pending(), int64(-idsWindow(n)), -1)
		}
		return nil
	}); err != nil {
		s.lensAt = time.Time{}
		return fmt.Errorf("read pending run tasks: %w", err)
	}
	s.lens = make([]int64, len(lens))
	s.ids = make([][]string, len(ids))
	for i := range lens {
		s.lens[i], s.ids[i] = lens[i].Val(), popOrder(ids[i].Val())
	}
	s.lensAt = time.Now()
	return nil
}

// Forward makes the tasks scheduled at or before now runnable in every
// queue (Queue.Forward) and says how many it moved. It counts what is
// due in every queue in one pipeline, then forwards the queues that have
// some, forwardWorkers at a time.
func (s *Set) Forward(ctx context.Context, now time.Time) (int, error) {
	return s.forward(ctx, now, now, Keys.Scheduled)
}

// ForwardAhead is Forward for the tasks scheduled at or before now+lead:
// they become pending up to lead before their time, stamped pending
// since now. Their takers wait for their time (chronos's launchers do:
// a run starts at its fire time on the shared clock), so a burst moved
// ahead is runnable at its second instead of as the forward reaches it.
func (s *Set) ForwardAhead(ctx context.Context, now time.Time, lead time.Duration) (int, error) {
	return s.forward(ctx, now.Add(lead), now, Keys.Scheduled)
}

// ForwardRetries is Forward for the retries due (Queue.ForwardRetries).
func (s *Set) ForwardRetries(ctx context.Context, now time.Time) (int, error) {
	return s.forward(ctx, now, now, Keys.Retry)
}

// forwardWorkers is how many queues one Forward moves tasks of at once,
// each on a connection of its own (a WATCH holds one). One at a time,
// Redis idles while the forwarder reads each batch's ids and builds its
// transaction; with a few, one's EXEC runs while the next is sent. Each
// EXEC that Redis runs in the same turn of its loop delays a PING, so
// more are no faster and hold a PING longer (BenchmarkForwardRedisCost
// at 100k, batches of 500: 3 forwarded in 444-466 ms with PING p99 4.0-
// 4.2 ms; 2 in 523-536 ms; 4 in 440-456 ms with PING p99 5.0-5.4 ms).
const forwardWorkers = 3

// forward moves the tasks of every queue's from scored at or before due,
// stamping them pending since now.
func (s *Set) forward(ctx context.Context, due, now time.Time, from func(Keys) string) (int, error) {
	// ZCOUNT is a lookup in the set's index: an idle forward costs Redis
	// one cheap command per queue.
	counts := make([]*redis.IntCmd, len(s.queues))
	until := strconv.FormatInt(due.Unix(), 10)
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, q := range s.queues {
			counts[i] = p.ZCount(ctx, from(q.keys), "-inf", until)
		}
		return nil
	}); err != nil {
		return 0, fmt.Errorf("count due tasks: %w", err)
	}
	var some []*Queue // the queues with tasks due
	for i, q := range s.queues {
		if counts[i].Val() > 0 {
			some = append(some, q)
		}
	}
	var (
		mu    sync.Mutex
		total int
		errs  []error
		wg    sync.WaitGroup
		next  atomic.Int32
	)
	for range min(forwardWorkers, len(some)) {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < len(some); i = int(next.Add(1)) - 1 {
				q := some[i]
				n, err := q.forward(ctx, from(q.keys), due, now)
				mu.Lock()
				total += n
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return total, errors.Join(errs...)
}

// ExtendLeases extends the leases of the taken tasks still held
// (Queue.ExtendLeases), each in its own queue, in one pipeline.
func (s *Set) ExtendLeases(ctx context.Context, tasks []*Task) error {
	if len(tasks) == 0 {
		return nil
	}
	exp := float64(time.Now().Add(LeaseDuration).Unix())
	by := map[*Queue][]redis.Z{}
	for _, t := range tasks {
		by[t.queue] = append(by[t.queue], redis.Z{Member: t.ID, Score: exp})
	}
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for q, zs := range by {
			p.ZAddXX(ctx, q.keys.Lease(), zs...)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("extend leases of %d tasks: %w", len(tasks), err)
	}
	return nil
}

// Finish finishes a taken task in the queue it was taken from
// (Queue.Finish).
func (s *Set) Finish(ctx context.Context, t *Task, end End, retryAt time.Time, errMsg string) (bool, error) {
	return t.queue.Finish(ctx, t, end, retryAt, errMsg)
}

// Archived returns the tasks of every queue archived at or after since
// (Queue.Archived), and the since to pass next time: the latest archive
// time read in any queue, as for one queue whose tasks many launchers
// archive.
func (s *Set) Archived(ctx context.Context, since time.Time) ([]ArchivedTask, time.Time, error) {
	var out []ArchivedTask
	next := since
	for _, q := range s.queues {
		ts, n, err := q.Archived(ctx, since)
		if err != nil {
			return nil, since, err
		}
		out = append(out, ts...)
		if n.After(next) {
			next = n
		}
	}
	return out, next, nil
}
