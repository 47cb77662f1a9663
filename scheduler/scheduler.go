package scheduler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
)

// Scheduler is one scheduler replica.
type Scheduler struct {
	store   *queue.Store
	clock   queue.Clock
	cfg     Config
	logger  *slog.Logger
	metrics *metrics
	leases  *queue.Leases
	planner planner

	// abandon makes Stop leave leases and heartbeat behind, as a crash
	// would; tests only.
	abandon bool

	mu      sync.Mutex
	held    map[int]*shardLoop
	cancel  context.CancelFunc
	done    chan struct{}
	started bool
}

type shardLoop struct {
	lease  *queue.Lease
	cancel context.CancelFunc
	done   chan struct{}
	// wake asks for a tick before the next boundary: a schedule of the
	// shard became due at once (released). One pending wake stands for
	// any number.
	wake chan struct{}
}

// New returns a scheduler replica working store. logger and reg may be nil.
func New(store *queue.Store, cfg *Config, logger *slog.Logger, reg prometheus.Registerer) (*Scheduler, error) {
	c := cfg.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	if c.ReplicaID == "" {
		b := make([]byte, 6)
		_, _ = rand.Read(b)
		c.ReplicaID = "scheduler-" + hex.EncodeToString(b)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := store.RegisterMetrics(reg); err != nil {
		return nil, err
	}
	return &Scheduler{
		store:   store,
		clock:   store.Clock(),
		cfg:     c,
		logger:  logger.With("replica", c.ReplicaID),
		metrics: newMetrics(reg),
		leases:  store.NewLeases(c.LeaseTTL),
		planner: planner{cfg: c, lead: store.ActLead},
		held:    map[int]*shardLoop{},
	}, nil
}

// Start begins taking shard leases and ticking; it returns at once. Stop
// ends it.
func (s *Scheduler) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("scheduler already started")
	}
	s.started = true
	ctx, s.cancel = context.WithCancel(ctx)
	done := make(chan struct{})
	s.done = done
	var wg sync.WaitGroup
	wg.Go(func() { s.ownershipLoop(ctx) })
	wg.Go(func() { s.forwardLoop(ctx) })
	wg.Go(func() { s.store.WatchReleased(ctx, s.released) })
	go func() {
		wg.Wait()
		close(done)
	}()
	return nil
}

// Stop stops ticking, waits for in-progress ticks to finish and releases
// the leases so another replica takes the shards over at once.
func (s *Scheduler) Stop(ctx context.Context) error {
	s.mu.Lock()
	if !s.started {
		s.mu.Unlock()
		return nil
	}
	s.cancel()
	done := s.done
	s.mu.Unlock()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Scheduler) renewInterval() time.Duration { return s.cfg.LeaseTTL / 3 }

// margin is how long before a lease's expiry the replica stops acting on it.
func (s *Scheduler) margin() time.Duration { return s.cfg.LeaseTTL / 5 }

func (s *Scheduler) ownershipLoop(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			s.releaseAll()
			return
		case <-t.C:
			s.rebalance(ctx)
			t.Reset(s.renewInterval())
		}
	}
}

// rebalance renews held leases, then moves towards this replica's fair
// share of the shards among the live replicas (those whose heartbeat is
// younger than a lease TTL):
//
//   - under its share, it takes free shards up to it;
//   - when every live replica has its share, it also adopts any free shard
//     (an orphan of a replica that died or froze but still looks live),
//     so no shard waits for the dead replica's heartbeat to age out;
//   - over its share while another live replica is under its share, it
//     gives the excess back for that replica to take.
func (s *Scheduler) rebalance(ctx context.Context) {
	shards := s.store.Config().Shards
	for sh, l := range s.snapshot() {
		ok, err := l.lease.Extend(ctx)
		switch {
		case err != nil && s.leaseValid(l.lease):
			// Redis did not answer: the lease is still ours until it
			// expires, and the shard loop stops acting on it before then.
			// Dropping it now would idle the shard for a whole TTL.
			s.logger.WarnContext(ctx, "could not renew shard lease; retrying next round", "shard", sh, "err", err)
		case err != nil || !ok:
			s.logger.WarnContext(ctx, "lost shard lease", "shard", sh, "err", err)
			s.stopShard(sh, false)
		}
	}
	held := s.snapshot()
	live, err := s.store.Heartbeat(ctx, s.cfg.ReplicaID, len(held), s.clock.Now(), s.cfg.LeaseTTL)
	if err != nil {
		s.logger.WarnContext(ctx, "heartbeat failed; keeping current shards", "err", err)
		return
	}
	share := (shards + len(live) - 1) / len(live)
	othersUnder := false
	for id, n := range live {
		if id != s.cfg.ReplicaID && n < share {
			othersUnder = true
		}
	}

	if len(held) > share && othersUnder {
		var released []int
		for sh := range held {
			if len(held) <= share {
				break
			}
			s.stopShard(sh, true)
			delete(held, sh)
			released = append(released, sh)
		}
		slices.Sort(released)
		s.logger.InfoContext(ctx, "shards released to rebalance", "shards", released, "held", len(held))
		return
	}
	want := share
	if !othersUnder {
		want = shards
	}
	// One line for the shards a round takes, not one per shard: a
	// replica starting alone takes them all at once.
	var acquired []int
	defer func() {
		if len(acquired) > 0 {
			slices.Sort(acquired)
			s.logger.InfoContext(ctx, "shards acquired", "shards", acquired, "held", len(held))
		}
	}()
	start := mrand.IntN(shards)
	for i := 0; i < shards && len(held) < want; i++ {
		sh := (start + i) % shards
		if _, ok := held[sh]; ok {
			continue
		}
		lease, err := s.leases.TryAcquire(ctx, sh)
		if err != nil {
			s.logger.WarnContext(ctx, "acquire shard lease", "shard", sh, "err", err)
			return
		}
		if lease == nil {
			continue
		}
		held[sh] = s.startShard(ctx, lease)
		acquired = append(acquired, sh)
	}
}

func (s *Scheduler) snapshot() map[int]*shardLoop {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[int]*shardLoop, len(s.held))
	for k, v := range s.held {
		m[k] = v
	}
	return m
}

func (s *Scheduler) startShard(ctx context.Context, lease *queue.Lease) *shardLoop {
	ctx, cancel := context.WithCancel(ctx)
	l := &shardLoop{lease: lease, cancel: cancel, done: make(chan struct{}), wake: make(chan struct{}, 1)}
	s.mu.Lock()
	s.held[lease.Shard] = l
	s.metrics.shards.Set(float64(len(s.held)))
	s.mu.Unlock()
	go s.shardLoop(ctx, l)
	return l
}

// stopShard stops a shard loop, waits for its tick, and releases the lease
// when asked (a lost lease is not ours to release).
func (s *Scheduler) stopShard(sh int, release bool) {
	s.mu.Lock()
	l := s.held[sh]
	delete(s.held, sh)
	s.metrics.shards.Set(float64(len(s.held)))
	s.mu.Unlock()
	if l == nil {
		return
	}
	l.cancel()
	<-l.done
	if release {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := l.lease.Release(ctx); err != nil {
			s.logger.Warn("release shard lease", "shard", sh, "err", err)
		}
	}
}

func (s *Scheduler) releaseAll() {
	for sh := range s.snapshot() {
		s.stopShard(sh, !s.abandon)
	}
	if s.abandon {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = s.store.Leave(ctx, s.cfg.ReplicaID)
}

// leaseValid: act only while the lease has more than the margin left.
func (s *Scheduler) leaseValid(l *queue.Lease) bool {
	return time.Now().Before(l.Until().Add(-s.margin()))
}

// released wakes the loop of shard, if this replica holds it: schedule
// id became due at once, its run in flight ended with the next run
// waiting behind it (queue.Store.WatchReleased). Planned at the next tick
// instead, a "queue" schedule's backlog would drain one run per tick.
func (s *Scheduler) released(shard int, id string) {
	s.mu.Lock()
	l := s.held[shard]
	s.mu.Unlock()
	if l == nil {
		return
	}
	select {
	case l.wake <- struct{}{}:
		s.metrics.wakes.Inc()
	default: // a wake is pending: its tick reads this schedule too
	}
}

func (s *Scheduler) shardLoop(ctx context.Context, l *shardLoop) {
	defer close(l.done)
	s.onTicksAndWakes(ctx, l.wake, func() {
		began := time.Now()
		switch err := s.tickShard(ctx, l.lease); {
		case errors.Is(err, errLeaseLost):
			// Renewal is late (rebalance logs why); not an error of the tick.
			s.logger.DebugContext(ctx, "not ticking: shard lease about to expire", "shard", l.lease.Shard)
		case queue.IsFull(err):
			s.logger.ErrorContext(ctx, "tick failed: Redis is full (maxmemory reached), no run can be recorded; retrying next tick",
				"shard", l.lease.Shard, "err", err)
		case err != nil:
			s.logger.ErrorContext(ctx, "tick failed; retrying next tick", "shard", l.lease.Shard, "err", err)
		}
		s.metrics.tick.Observe(time.Since(began).Seconds())
	})
}

// forwardLoop makes the runs enqueued ahead runnable Config.ForwardLead
// before each tick boundary, for the second that boundary begins
// (asynqwire.Set.ForwardAhead): a burst due in one second is moved before
// it, and launchers hold each run until its time. The launchers' own
// forwarding, at the second, comes up to ForwardInterval later.
func (s *Scheduler) forwardLoop(ctx context.Context) {
	lead := s.cfg.ForwardLead
	s.onTicksAhead(ctx, nil, lead, func() {
		if _, err := s.store.Tasks().ForwardAhead(ctx, s.store.Clock().Now(), lead); err != nil && ctx.Err() == nil {
			s.logger.WarnContext(ctx, "forwarding due run tasks failed; launchers forward them too", "err", err)
		}
	})
}

// onTicks calls tick at once and then on each tick boundary (see
// untilNextTick) until ctx ends.
func (s *Scheduler) onTicks(ctx context.Context, tick func()) { s.onTicksAhead(ctx, nil, 0, tick) }

// onTicksAndWakes is onTicks that also calls tick on each wake, between
// boundaries; the wait for the next boundary goes on.
func (s *Scheduler) onTicksAndWakes(ctx context.Context, wake <-chan struct{}, tick func()) {
	s.onTicksAhead(ctx, wake, 0, tick)
}

// onTicksAhead is onTicksAndWakes calling tick lead before each boundary.
func (s *Scheduler) onTicksAhead(ctx context.Context, wake <-chan struct{}, lead time.Duration, tick func()) {
	t := time.NewTimer(0)
	defer t.Stop()
	var boundary time.Time // the tick boundary last waited for
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
			tick()
			continue
		case <-t.C:
		}
		tick()
		var wait time.Duration
		wait, boundary = s.untilNextTick(boundary, lead)
		t.Reset(wait)
	}
}

// tickPhase is how long after a tick boundary ticks run, so that a run
// due on the boundary is due by then even with a little clock jitter.
const tickPhase = 2 * time.Millisecond

// untilNextTick returns the time to lead before the next multiple of the
// tick interval on the shared clock (plus tickPhase) after the boundary
// last waited for, and that boundary. Fire times fall on whole seconds,
// so with the default 1 s tick a run is picked up milliseconds after it
// is due instead of anywhere up to a tick later. While the shared clock
// holds still (queue.RedisClock never runs backwards) the loop ticks once
// a tick of real time and keeps waiting for the same boundary: the short
// wait to it, read again and again, would spin against Redis, and moving
// the boundary on would leave the loop asleep long after the clock moves.
func (s *Scheduler) untilNextTick(last time.Time, lead time.Duration) (time.Duration, time.Time) {
	tick := s.cfg.TickInterval
	ahead := s.clock.Now().Add(lead)
	next := ahead.Add(tick - time.Duration(ahead.UnixNano()%int64(tick)))
	if !next.After(last) {
		return tick, last
	}
	return next.Sub(ahead) + tickPhase, next
}

var errLeaseLost = errors.New("shard lease is about to expire; not acting on it")

// TickShard works one shard once, as its lease holder would but without a
// lease. Exposed for tests that drive ticks with a simulated clock.
func (s *Scheduler) TickShard(ctx context.Context, shard int) error {
	return s.tick(ctx, shard, func() bool { return true })
}

func (s *Scheduler) tickShard(ctx context.Context, l *queue.Lease) error {
	return s.tick(ctx, l.Shard, func() bool { return s.leaseValid(l) })
}

// tick works a shard's due schedules page by page. Each page's Redis work
// runs to completion even when ctx ends (Stop, a shard given away): a
// commit is short and atomic. Between pages, an ended ctx ends the tick,
// so a backlog of many pages does not hold up Stop or the lease renewals
// that wait for it; the next holder carries on from the stored state.
func (s *Scheduler) tick(ctx context.Context, shard int, valid func() bool) error {
	stop := ctx
	ctx = context.WithoutCancel(ctx)
	if !valid() {
		return errLeaseLost
	}
	now := s.clock.Now()
	failed, err := s.store.ExpireInflight(ctx, shard, now, 1000,
		"no final status within RUN_TIMEOUT; marked FAILED to release the schedule")
	if err != nil {
		return err
	}
	for _, k := range failed {
		s.logger.WarnContext(ctx, "run timed out in flight", "shard", shard, "idempotency_key", k)
	}
	for {
		var (
			missed []int
			at     time.Time
		)
		due, plans, applied, err := s.store.TickDue(ctx, shard, now, s.cfg.PageSize, func(due []queue.DueSchedule) ([]queue.Plan, time.Time, error) {
			// Called once per chunk of the page: missed follows the plans.
			plans := make([]queue.Plan, 0, len(due))
			for _, d := range due {
				p, m, err := s.planOne(d, now)
				if err != nil {
					s.logger.ErrorContext(ctx, "cannot plan schedule; retiring it: pause and resume it (or delete and re-create it) to schedule it again", "schedule_id", d.ID, "err", err)
				}
				plans = append(plans, p)
				missed = append(missed, m)
			}
			if !valid() {
				return nil, time.Time{}, errLeaseLost
			}
			// Records and tasks carry the time they were written, which in
			// a long tick is later than the now the plans were made at.
			at = s.clock.Now()
			return plans, at, nil
		})
		if err != nil {
			return err
		}
		if len(due) == 0 {
			return nil
		}
		appliedAny := false
		for i, ok := range applied {
			if !ok {
				s.metrics.stale.Inc()
				continue
			}
			appliedAny = true
			s.metrics.missed.Add(float64(missed[i]))
			for _, r := range plans[i].Runs {
				if !r.Written {
					continue // planned before (counted then) or not yet
				}
				switch r.Status {
				case model.RunEnqueued:
					s.metrics.emitted.Inc()
					if r.CaughtUp {
						s.metrics.catchupLateness.Observe(at.Sub(r.RunAt).Seconds())
					} else {
						s.metrics.drift.Observe(max(at.Sub(r.FireAt), 0).Seconds())
					}
				case model.RunSkipped:
					if r.Reason == model.ReasonOverlap {
						s.metrics.skipped.Inc()
					}
				}
			}
		}
		s.metrics.due.Add(float64(len(due)))
		// A short page is the last one; a page of only stale plans means
		// others are changing these schedules: leave them to the next tick
		// rather than spin on them.
		if len(due) < s.cfg.PageSize || !appliedAny || stop.Err() != nil {
			return nil
		}
	}
}

// planOne plans one due schedule. A schedule that cannot be planned
// from any more (stored by an older version, say) is retired rather than
// retried forever.
func (s *Scheduler) planOne(d queue.DueSchedule, now time.Time) (queue.Plan, int, error) {
	if d.Err != nil {
		p := d.Plan()
		p.RetireReason = fmt.Sprintf("retired: it cannot be planned any more: %v", d.Err)
		return p, 0, d.Err
	}
	if d.Schedule == nil {
		return d.Plan(), 0, nil // deleted: Commit drops the member
	}
	p, missed := s.planner.plan(d, d.Schedule, d.Compiled, now)
	if rec := d.Schedule; p.NewNext.IsZero() && !d.Next.IsZero() && rec.Target == model.TargetWake && rec.Kind != model.KindOnce {
		// A once alarm ends with its run; a cron or every alarm whose
		// timetable has run out would otherwise stay active for ever.
		last := d.Next
		if n := len(p.Runs); n > 0 {
			last = p.Runs[n-1].RunAt
		}
		p.RetireReason = fmt.Sprintf("retired: its schedule yields no fire time after %s", last.UTC().Format(time.RFC3339))
	}
	return p, missed, nil
}
