package declarative

import (
	"cmp"
	"container/heap"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronos-sched/chronos/model"
)

// Registration declares one periodic task.
type Registration struct {
	// Name identifies the task; unique within one Initialize and across
	// restarts (it keys the persisted state).
	Name string
	// Cron is a strict POSIX 5-field expression, evaluated in the
	// scheduler's zone.
	Cron string
	// Callback is the task's work. Its context is cancelled only when a
	// Stop's context expires before the callback returns.
	Callback func(context.Context) error
	// RetryDelay is how long after a failure the task runs again, unless
	// an occurrence comes first. Non-negative.
	RetryDelay time.Duration
}

// Clock is the scheduler's source of time. The host's clock is the
// default; tests inject a fake one.
type Clock interface {
	Now() time.Time
	// After sends once d has passed on this clock.
	After(d time.Duration) <-chan time.Time
}

// hostClock is the host's wall clock.
type hostClock struct{}

func (hostClock) Now() time.Time                         { return time.Now() }
func (hostClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Defaults of Options.
const (
	NamespaceDefault = "chronos:declarative"
	LeaseTTLDefault  = 30 * time.Second
	LeaseTTLMin      = time.Second
)

// Options configure a Scheduler.
type Options struct {
	// Redis holds the tasks' state and leases. Required.
	Redis redis.UniversalClient
	// Namespace separates programs sharing one Redis: every process that
	// initializes the same namespace shares its tasks' state, and each
	// task runs serially across all of them. Default NamespaceDefault.
	Namespace string
	// Logger receives every event (task events at Debug, failures at
	// Warn, the rest at Info). Default slog.Default().
	Logger *slog.Logger
	// Clock is the source of "now". Default the host's clock.
	Clock Clock
	// Location is the zone cron expressions are evaluated in. Default
	// time.Local, the host's zone.
	Location *time.Location
	// OnEvent, when set, is called with every event, synchronously, from
	// the goroutine that caused it; keep it fast.
	OnEvent func(Event)
	// LeaseTTL is how long a task's lease outlives its holder's last
	// renewal: a run whose process died is restarted this long after.
	// Default LeaseTTLDefault, at least LeaseTTLMin.
	LeaseTTL time.Duration
}

// Lifecycle states of a Scheduler.
const (
	stateUninitialized = "uninitialized"
	stateInitializing  = "initializing"
	stateRunning       = "running"
	stateStopping      = "stopping"
	stateStopped       = "stopped"
)

// Scheduler runs declared periodic tasks. Make one with New; call
// Initialize once, then Stop.
type Scheduler struct {
	rdb      redis.UniversalClient
	ns       string
	log      *slog.Logger
	clock    Clock
	loc      *time.Location
	onEvent  func(Event)
	leaseTTL time.Duration
	instance string // this process's lease holder name

	life     sync.Mutex
	state    string
	initDone chan struct{} // closed when the running Initialize returns
	stopDone chan struct{} // closed when the running Stop has finished

	idMu sync.RWMutex
	id   string

	mu      sync.Mutex // guards the tasks' mutable fields and wakes
	tasks   []*task
	wakes   wakeHeap
	kick    chan struct{}
	polling bool
	batch   int // tasks per script call or pipeline; batchSize unless a test shrinks it

	// What the loop is doing, for tests that wait for it to settle.
	pending  bool      // poked since the loop last looked
	idle     bool      // waiting for its timer or a poke
	idleNow  time.Time // the clock when it went idle
	idleNext time.Time // its next wake then; zero when none
	active   int       // callbacks started whose end is not yet recorded and told

	quit       chan struct{} // closed to stop the loop
	loopDone   chan struct{}
	runCtx     context.Context
	cancelRuns context.CancelFunc
	runs       sync.WaitGroup
	finishes   chan finish
	aux        chan struct{} // closed to stop the finisher and the renewer
	auxDone    sync.WaitGroup
}

// New returns a Scheduler in the Uninitialized state. It errors when
// Options.Redis is nil or LeaseTTL is below LeaseTTLMin.
func New(opts Options) (*Scheduler, error) {
	if opts.Redis == nil {
		return nil, errors.New("declarative: Options.Redis is required")
	}
	if opts.LeaseTTL != 0 && opts.LeaseTTL < LeaseTTLMin {
		return nil, fmt.Errorf("declarative: Options.LeaseTTL %s is below %s", opts.LeaseTTL, LeaseTTLMin)
	}
	host, _ := os.Hostname()
	return &Scheduler{
		rdb:      opts.Redis,
		ns:       cmp.Or(opts.Namespace, NamespaceDefault),
		log:      cmp.Or(opts.Logger, slog.Default()),
		clock:    cmp.Or[Clock](opts.Clock, hostClock{}),
		loc:      cmp.Or(opts.Location, time.Local),
		onEvent:  opts.OnEvent,
		leaseTTL: cmp.Or(opts.LeaseTTL, LeaseTTLDefault),
		instance: fmt.Sprintf("%s:%d:%s", host, os.Getpid(), randomID(6)),
		state:    stateUninitialized,
		batch:    batchSize,
	}, nil
}

// randomID returns n random bytes in hex.
func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *Scheduler) schedulerID() string {
	s.idMu.RLock()
	defer s.idMu.RUnlock()
	return s.id
}

// task is one registration's runtime state. Fields below reg are guarded
// by Scheduler.mu.
type task struct {
	key  string
	reg  Registration
	cron *model.CronSchedule

	next     time.Time // the next occurrence to start; may be past (missed)
	retryAt  time.Time // the pending retry this process knows of
	orphan   bool      // another process held the lease at Initialize: restart its run if it dies
	orphanAt time.Time // when to look at that lease: when it lapses
	running  bool      // this process runs the callback now
	again    bool      // evaluate again when the local run ends
	queued   bool      // in the claim being built
}

// Initialize validates regs, reconciles them with the persisted state,
// and starts running them. Validation errors return before anything is
// written. It returns a *SchedulerAlreadyActiveError while another
// Initialize runs or the scheduler runs.
func (s *Scheduler) Initialize(ctx context.Context, regs []Registration) error {
	s.life.Lock()
	switch s.state {
	case stateInitializing, stateRunning, stateStopping:
		st := s.state
		s.life.Unlock()
		return &SchedulerAlreadyActiveError{CurrentState: st}
	}
	s.state = stateInitializing
	s.initDone = make(chan struct{})
	s.life.Unlock()

	s.emit(ctx, Event{Type: SchedulerInitializationStarted})
	err := s.initialize(ctx, regs)

	s.life.Lock()
	defer func() {
		close(s.initDone)
		s.life.Unlock()
	}()
	if err != nil {
		s.state = stateUninitialized
		s.emit(ctx, Event{Type: SchedulerInitializationFailed, Err: err})
		return err
	}
	s.state = stateRunning
	if s.polling {
		s.emit(ctx, Event{Type: PollingStarted})
	}
	s.emit(ctx, Event{Type: SchedulerInitializationCompleted})
	// The loop starts after the events that say it does, so a run's
	// events never come before them.
	go s.loop()
	return nil
}

// validate checks regs and parses their expressions.
func (s *Scheduler) validate(regs []Registration, now time.Time) ([]*model.CronSchedule, error) {
	if regs == nil {
		return nil, &RegistrationsNotArrayError{}
	}
	crons := make([]*model.CronSchedule, len(regs))
	seen := make(map[string]bool, len(regs))
	for i, r := range regs {
		if r.Callback == nil {
			return nil, &RegistrationShapeError{RegistrationIndex: i, Received: r}
		}
		if r.Name == "" {
			return nil, &InvalidRegistrationError{Field: "name", Value: r.Name, Reason: "must be a non-empty string"}
		}
		if seen[r.Name] {
			return nil, &ScheduleDuplicateTaskError{TaskName: r.Name}
		}
		seen[r.Name] = true
		if r.RetryDelay < 0 {
			return nil, &NegativeRetryDelayError{RetryDelayMs: r.RetryDelay.Milliseconds()}
		}
		c, err := parseCron(r.Cron, s.loc, now)
		if err != nil {
			var ice *InvalidCronExpressionError
			if errors.As(err, &ice) {
				return nil, &CronExpressionInvalidError{Expression: r.Cron, Field: ice.Field, Reason: ice.Reason, Cause: ice}
			}
			return nil, err
		}
		crons[i] = c
	}
	return crons, nil
}

// initialize does Initialize's work between its events.
func (s *Scheduler) initialize(ctx context.Context, regs []Registration) error {
	now := s.clock.Now()
	crons, err := s.validate(regs, now)
	if err != nil {
		return err
	}
	minute := now.Truncate(time.Minute)

	// The scheduler identifier: made by the first initialization of the
	// namespace, kept by every later one.
	if err := s.rdb.HSetNX(ctx, metaKey(s.ns), "schedulerId", randomID(8)).Err(); err != nil {
		return fmt.Errorf("create the scheduler identifier: %w", err)
	}
	id, err := s.rdb.HGet(ctx, metaKey(s.ns), "schedulerId").Result()
	if err != nil {
		return fmt.Errorf("read the scheduler identifier: %w", err)
	}
	s.idMu.Lock()
	s.id = id
	s.idMu.Unlock()

	names := make([]string, len(regs))
	for i, r := range regs {
		names[i] = r.Name
	}
	states, err := s.loadStates(ctx, names)
	if err != nil {
		return err
	}

	tasks := make([]*task, len(regs))
	var ws []write
	for i, r := range regs {
		t := &task{key: taskKey(s.ns, r.Name), reg: r, cron: crons[i]}
		tasks[i] = t
		st := states[i]
		class, w := s.classify(t, st, now)
		if w != nil {
			ws = append(ws, *w)
		}
		s.log.DebugContext(ctx, "declarative: task reconciled", "task", r.Name, "class", class)
		if st == nil || st.ServedUntil.IsZero() {
			// First start: run now only if this very minute matches.
			if matches(t.cron, minute) {
				t.next = minute
			} else {
				t.next = t.cron.Next(minute)
			}
		} else {
			// Every occurrence after the last served minute is due,
			// once, however many were missed.
			t.next = t.cron.Next(st.ServedUntil)
		}
		if st != nil {
			t.retryAt = st.RetryUntil
		}
		if st != nil && st.LeaseHolder != "" {
			// A run was in flight (or orphaned, when its lease has
			// lapsed): look at the lease when it lapses, and restart the
			// run if its holder has not released it by then.
			t.orphan, t.orphanAt = true, st.LeaseUntil
		}
		if t.next.IsZero() {
			return &CronCalculationError{Expression: r.Cron, CurrentTime: now.Format(time.RFC3339), Cause: errors.New("no occurrence within the engine's horizon")}
		}
	}
	if err := s.applyWrites(ctx, ws); err != nil {
		return err
	}
	s.start(tasks)
	return nil
}

// Override classes of a task at Initialize.
const (
	classNew        = "new"
	classPreserved  = "preserved"
	classOverridden = "overridden"
	classOrphaned   = "orphaned"
)

// classify compares a registration with its persisted state and returns
// the class and the write it needs, if any.
func (s *Scheduler) classify(t *task, st *taskState, now time.Time) (string, *write) {
	cfg := map[string]any{
		fieldCron:         t.reg.Cron,
		fieldRetryDelay:   t.reg.RetryDelay.Milliseconds(),
		fieldConfiguredBy: s.schedulerID(),
	}
	if st == nil {
		cfg[fieldName] = t.reg.Name
		return classNew, &write{key: t.key, fields: cfg, isNew: true}
	}
	prev := map[string]string{fieldCron: st.Cron, fieldRetryDelay: fmt.Sprint(st.RetryDelay.Milliseconds())}
	if st.ConfiguredBy != "" {
		prev[fieldConfiguredBy] = st.ConfiguredBy
	}
	same := st.Cron == t.reg.Cron && st.RetryDelay.Milliseconds() == t.reg.RetryDelay.Milliseconds() // stored in ms
	switch {
	case st.LeaseHolder != "" && !st.LeaseUntil.After(now):
		if same {
			return classOrphaned, nil
		}
		return classOrphaned, &write{key: t.key, fields: cfg, prev: prev}
	case same:
		return classPreserved, nil
	default:
		return classOverridden, &write{key: t.key, fields: cfg, prev: prev}
	}
}

// start prepares the loop over tasks and launches the finisher and the
// renewer; Initialize launches the loop.
func (s *Scheduler) start(tasks []*task) {
	s.tasks = tasks
	s.wakes = make(wakeHeap, 0, len(tasks))
	for _, t := range tasks {
		s.wakes = append(s.wakes, wake{at: s.wakeAt(t), t: t})
	}
	heap.Init(&s.wakes)
	s.kick = make(chan struct{}, 1)
	s.quit = make(chan struct{})
	s.loopDone = make(chan struct{})
	s.aux = make(chan struct{})
	s.finishes = make(chan finish, 1024)
	s.runCtx, s.cancelRuns = context.WithCancel(context.Background())
	s.polling = len(tasks) > 0
	s.auxDone.Add(2)
	go s.finisher()
	go s.renewer()
}

// wakeAt returns when t next needs the loop's attention.
func (s *Scheduler) wakeAt(t *task) time.Time {
	at := t.next
	if !t.retryAt.IsZero() && (at.IsZero() || t.retryAt.Before(at)) {
		at = t.retryAt
	}
	if t.orphan && (at.IsZero() || t.orphanAt.Before(at)) {
		at = t.orphanAt
	}
	return at
}

// push schedules a wake for t at at. Callers hold s.mu.
func (s *Scheduler) push(t *task, at time.Time) {
	heap.Push(&s.wakes, wake{at: at, t: t})
}

// poke wakes the loop. Callers hold s.mu.
func (s *Scheduler) poke() {
	s.pending = true
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// loop wakes at the earliest due wake, claims every task due then in
// batches, and starts the claimed callbacks.
func (s *Scheduler) loop() {
	defer close(s.loopDone)
	for {
		now := s.clock.Now()
		reqs := s.due(now)
		if len(reqs) > 0 {
			s.claimAll(reqs, now)
			continue
		}
		s.mu.Lock()
		if s.pending {
			s.pending = false
			s.mu.Unlock()
			continue
		}
		var wait <-chan time.Time
		s.idle, s.idleNow, s.idleNext = true, now, time.Time{}
		if len(s.wakes) > 0 {
			s.idleNext = s.wakes[0].at
			wait = s.clock.After(max(s.wakes[0].at.Sub(now), 0))
		}
		s.mu.Unlock()
		select {
		case <-s.quit:
			return
		case <-s.kick:
		case <-wait:
		}
		s.mu.Lock()
		s.idle = false
		s.mu.Unlock()
	}
}

// due pops the wakes due at now and returns the claims they call for.
func (s *Scheduler) due(now time.Time) []claimReq {
	s.mu.Lock()
	defer s.mu.Unlock()
	var reqs []claimReq
	for len(s.wakes) > 0 && !s.wakes[0].at.After(now) {
		t := heap.Pop(&s.wakes).(wake).t
		if t.queued {
			continue
		}
		if t.running {
			t.again = true
			continue
		}
		var r claimReq
		switch {
		case !t.next.IsZero() && !t.next.After(now):
			r = claimReq{t: t, kind: kindCron, val: t.next.UnixMilli()}
		case !t.retryAt.IsZero() && !t.retryAt.After(now):
			r = claimReq{t: t, kind: kindRetry, val: t.retryAt.UnixMilli()}
		case t.orphan && !t.orphanAt.After(now):
			r = claimReq{t: t, kind: kindOrphan}
		default:
			continue // a stale wake
		}
		t.queued = true
		reqs = append(reqs, r)
	}
	return reqs
}

// claimAll claims reqs in batches. Batches start at a random one so that
// processes sharing the namespace contend less over the same tasks.
func (s *Scheduler) claimAll(reqs []claimReq, now time.Time) {
	minute := now.Truncate(time.Minute)
	n := (len(reqs) + s.batch - 1) / s.batch
	first := mrand.IntN(n)
	for k := range n {
		lo := ((first + k) % n) * s.batch
		batch := reqs[lo:min(lo+s.batch, len(reqs))]
		res, err := s.claim(s.runCtx, batch, now, minute)
		if err != nil {
			s.log.Warn("declarative: claim failed; retrying in a second", "tasks", len(batch), "error", err.Error())
			s.mu.Lock()
			for _, r := range batch {
				r.t.queued = false
				s.push(r.t, now.Add(time.Second))
			}
			s.mu.Unlock()
			continue
		}
		s.applyClaims(batch, res, now)
	}
}

// applyClaims updates tasks from claim results and starts the won runs.
func (s *Scheduler) applyClaims(batch []claimReq, res []int64, now time.Time) {
	type start struct {
		t    *task
		code int64
	}
	starts := make([]start, 0, len(batch))
	s.mu.Lock()
	for i, r := range batch {
		t := r.t
		t.queued = false
		code, val := res[2*i], res[2*i+1]
		switch code {
		case claimRun, claimPreempt, claimOrphan:
			t.next = t.cron.Next(time.UnixMilli(val))
			t.retryAt, t.orphan, t.running = time.Time{}, false, true
			s.push(t, t.next)
			starts = append(starts, start{t, code})
		case claimRetry:
			t.retryAt, t.running = time.Time{}, true
			starts = append(starts, start{t, code})
		case claimBusy:
			// Another process runs it: look again when its lease would
			// lapse, which restarts the run if that process died.
			s.push(t, time.UnixMilli(val+1))
			if r.kind == kindOrphan {
				t.orphanAt = time.UnixMilli(val + 1)
			}
			s.log.Debug("declarative: task runs elsewhere; looking again when its lease lapses", "task", t.reg.Name, "lease_until", time.UnixMilli(val))
		case claimCovered:
			switch r.kind {
			case kindCron:
				if val >= 0 {
					t.next = t.cron.Next(time.UnixMilli(val))
				}
				s.push(t, t.next)
			case kindRetry:
				t.retryAt = time.Time{}
			case kindOrphan:
				t.orphan = false
			}
		case claimMissing:
			s.log.Warn("declarative: task state vanished from Redis; it will not run until the next Initialize", "task", t.reg.Name)
		}
	}
	s.active += len(starts)
	s.mu.Unlock()
	for _, st := range starts {
		s.runs.Add(1)
		go s.run(st.t, st.code)
	}
}

// finish is one callback's end, on its way to Redis.
type finish struct {
	t   *task
	err error
	at  time.Time
}

// run calls t's callback and hands its outcome to the finisher.
func (s *Scheduler) run(t *task, code int64) {
	ctx := s.runCtx
	switch code {
	case claimPreempt:
		s.emit(ctx, Event{Type: TaskRetryPreempted, Task: t.reg.Name})
		s.emit(ctx, Event{Type: TaskRunStarted, Task: t.reg.Name})
	case claimRetry:
		s.emit(ctx, Event{Type: TaskRetryStarted, Task: t.reg.Name})
	default:
		s.emit(ctx, Event{Type: TaskRunStarted, Task: t.reg.Name, Orphan: code == claimOrphan})
	}
	err := call(ctx, t.reg.Callback)
	s.finishes <- finish{t: t, err: err, at: s.clock.Now()}
}

// PanicError is a callback's panic, reported as its failure.
type PanicError struct {
	Value any
}

func (e *PanicError) Error() string { return fmt.Sprintf("callback panicked: %v", e.Value) }

// call runs cb, turning a panic into a *PanicError so that one task's
// panic never reaches another.
func call(ctx context.Context, cb func(context.Context) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r}
		}
	}()
	return cb(ctx)
}

// finisher records ended runs in Redis in batches, then moves the tasks
// on: a failure waits for its retry, a missed occurrence runs now.
func (s *Scheduler) finisher() {
	defer s.auxDone.Done()
	for {
		var batch []finish
		select {
		case f := <-s.finishes:
			batch = append(batch, f)
		case <-s.aux:
			return
		}
	drain:
		for len(batch) < s.batch {
			select {
			case f := <-s.finishes:
				batch = append(batch, f)
			default:
				break drain
			}
		}
		s.finishBatch(batch)
	}
}

// finishBatch records batch and releases its leases, retrying while Redis
// fails (if it never answers, the leases lapse and the runs count as
// orphaned).
func (s *Scheduler) finishBatch(batch []finish) {
	ctx := context.Background()
	keys := make([]string, len(batch))
	args := make([]any, 0, 2+len(batch))
	now := s.clock.Now()
	args = append(args, s.instance, now.UnixMilli())
	retryAt := make([]time.Time, len(batch))
	for i, f := range batch {
		keys[i] = f.t.key
		if f.err == nil {
			args = append(args, "")
			continue
		}
		retryAt[i] = f.at.Add(f.t.reg.RetryDelay)
		args = append(args, retryAt[i].UnixMilli())
	}
	var res []int64
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if res, err = finishScript.Run(ctx, s.rdb, keys, args...).Int64Slice(); err == nil {
			break
		}
		s.log.Warn("declarative: recording finished runs failed", "runs", len(batch), "attempt", attempt+1, "error", err.Error())
		select {
		case <-s.clock.After(time.Duration(attempt+1) * 200 * time.Millisecond):
		case <-s.aux:
		}
	}
	s.mu.Lock()
	for i, f := range batch {
		t := f.t
		t.running = false
		if err == nil && res[i] == 1 && f.err != nil {
			t.retryAt = retryAt[i]
			s.push(t, t.retryAt)
		}
		if err == nil && res[i] == 0 {
			s.log.Warn("declarative: lease lost during the run; its outcome was not recorded", "task", t.reg.Name)
		}
		if t.again || !t.next.After(now) {
			t.again = false
			s.push(t, now)
		}
	}
	s.poke()
	s.mu.Unlock()
	for i, f := range batch {
		if f.err != nil {
			s.emit(context.Background(), Event{Type: TaskRunFailed, Task: f.t.reg.Name, Err: f.err, RetryAt: retryAt[i]})
		} else {
			s.emit(context.Background(), Event{Type: TaskRunCompleted, Task: f.t.reg.Name})
		}
		s.runs.Done()
	}
	// Only now are the runs over for a test waiting to settle: their
	// events are out.
	s.mu.Lock()
	s.active -= len(batch)
	s.mu.Unlock()
}

// renewer extends the leases of the running callbacks every third of
// LeaseTTL.
func (s *Scheduler) renewer() {
	defer s.auxDone.Done()
	for {
		select {
		case <-s.aux:
			return
		case <-s.clock.After(s.leaseTTL / 3):
		}
		s.mu.Lock()
		var keys []string
		for _, t := range s.tasks {
			if t.running {
				keys = append(keys, t.key)
			}
		}
		s.mu.Unlock()
		end := s.clock.Now().Add(s.leaseTTL).UnixMilli()
		for lo := 0; lo < len(keys); lo += s.batch {
			batch := keys[lo:min(lo+s.batch, len(keys))]
			lost, err := renewScript.Run(context.Background(), s.rdb, batch, s.instance, end).Int64()
			if err != nil {
				s.log.Warn("declarative: renewing leases failed", "leases", len(batch), "error", err.Error())
			} else if lost > 0 {
				s.log.Warn("declarative: leases lost while their callbacks ran", "lost", lost)
			}
		}
	}
}

// Stop stops scheduling and returns once every running callback has
// returned. It may be called concurrently and during Initialize (it waits
// for Initialize first). If ctx ends first, the callbacks' context is
// cancelled and Stop returns ctx's error; the scheduler still reaches
// Stopped once they return.
func (s *Scheduler) Stop(ctx context.Context) error {
	for {
		s.life.Lock()
		switch s.state {
		case stateInitializing:
			done := s.initDone
			s.life.Unlock()
			select {
			case <-done:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		case stateStopping:
			done := s.stopDone
			s.life.Unlock()
			select {
			case <-done:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		case stateRunning:
			s.state = stateStopping
			s.stopDone = make(chan struct{})
			s.life.Unlock()
			return s.stop(ctx)
		default: // uninitialized or stopped: nothing runs
			s.life.Unlock()
			return nil
		}
	}
}

// stop does Stop's work once the scheduler is Stopping.
func (s *Scheduler) stop(ctx context.Context) error {
	bg := context.WithoutCancel(ctx)
	s.emit(bg, Event{Type: SchedulerStopRequested})
	if s.polling {
		s.emit(bg, Event{Type: PollingStopRequested})
	}
	close(s.quit)
	<-s.loopDone
	ran := make(chan struct{})
	go func() {
		s.runs.Wait()
		close(s.aux)
		s.auxDone.Wait()
		s.cancelRuns()
		if s.polling {
			s.emit(bg, Event{Type: PollingStopped})
		}
		s.emit(bg, Event{Type: SchedulerStopped})
		s.life.Lock()
		s.state = stateStopped
		s.polling = false
		close(s.stopDone)
		s.life.Unlock()
		close(ran)
	}()
	select {
	case <-ran:
		return nil
	case <-ctx.Done():
		s.cancelRuns()
		return ctx.Err()
	}
}

// wake is an entry of the loop's timer heap: look at t at at.
type wake struct {
	at time.Time
	t  *task
}

// wakeHeap is a min-heap of wakes by time: one timer serves every task.
type wakeHeap []wake

func (h wakeHeap) Len() int           { return len(h) }
func (h wakeHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h wakeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *wakeHeap) Push(x any)        { *h = append(*h, x.(wake)) }
func (h *wakeHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	*h = old[:len(old)-1]
	return w
}
