package launcher

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"

	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/asynqwire"
)

// A launcher starts most runs through its lane: it takes run tasks off
// asynq's queues (each shard's, and the legacy single queue while it
// holds tasks; asynqwire.Set.Take, fairly across them) as many at a time
// as it has free holds (its slots and takeAhead more), with their launch
// state in one more round trip (take), and its runs report
// their statuses and finish their tasks together through the store's
// batcher (queue.Store.Tasks). asynq's server takes and finishes one task at a time, two
// round trips per run: on a small machine that costs more than the run
// (README, "Where the time goes"). The lane takes and finishes tasks
// exactly as it would, and carries every one of the launcher's
// Concurrency slots: the launcher runs no asynq server (doc.go).

// taken is a run task the lane took, with its run's launch state.
type taken struct {
	*asynqwire.Task
	payload *queue.TaskPayload // nil when the task does not decode
	state   *queue.LaunchState // nil when err
	err     error              // why the payload or the state could not be read
	// launched is the status of the run the executor accepted, set by the
	// attempt for the lane to write with the task's end (finishLaunched).
	launched *queue.StatusUpdate
	// inSlot is when the run took its slot; freed says the slot and the
	// hold were freed (lane.free: once, by the run's own goroutine).
	inSlot time.Time
	freed  bool
}

// take takes up to n run tasks off the queue and reads their runs'
// launch state in one more round trip.
func (l *Launcher) take(ctx context.Context, n int) ([]*taken, error) {
	tasks, err := l.store.Tasks().Take(ctx, n)
	if err != nil {
		return nil, err
	}
	out := make([]*taken, len(tasks))
	var ps []*queue.TaskPayload
	for i, t := range tasks {
		tk := &taken{Task: t, err: t.Err}
		out[i] = tk
		if tk.err != nil {
			continue
		}
		if tk.payload, tk.err = queue.DecodeTaskPayload(t.Payload); tk.err == nil {
			ps = append(ps, tk.payload)
		}
	}
	if len(ps) == 0 {
		return out, nil
	}
	states, errs := l.store.LoadLaunches(ctx, ps)
	for _, tk := range out {
		if tk.err == nil {
			tk.state, tk.err = states[0], errs[0]
			states, errs = states[1:], errs[1:]
		}
	}
	return out, nil
}

// maxTake bounds the tasks taken in one round trip.
const maxTake = 100

// gatherWait bounds how long a busy lane waits for slots to take tasks
// together: at most this much later a run starts.
const gatherWait = 2 * time.Millisecond

// leaseExtendInterval is how often the lane extends the leases of the
// tasks it holds: asynq's server does it every 5 s, for 30 s leases.
const leaseExtendInterval = 5 * time.Second

// finishPatience is how long the lane retries finishing a task before it
// leaves the task to the launchers' recovery (its lease then expires).
const finishPatience = 20 * time.Second

// takeAhead is how many tasks beyond its Concurrency, in Concurrencies,
// a lane may hold taken, with their launch state read, for its slots to
// start as soon as they come free. A slot then waits for no round trip:
// with the take, the launch state's read and the gathering of free slots
// in each slot's time, a launcher at concurrency 10 kept its slots
// waiting on Redis as much as on its executor. The executor still gets
// at most Concurrency calls at once.
//
// A task taken ahead waits for a slot, leased to this launcher (another
// with free slots cannot start it) and with its launch state read that
// long before it starts. So the lane holds ahead only as many as its
// slots start within takeAheadMaxCall, by the moving average of the time
// a run holds its slot: a Concurrency ahead per takeAheadMaxCall ÷ that
// time, up to takeAhead, and none once its calls average more than
// takeAheadMaxCall (longer calls hide the round trips anyway).
//
// Under load the take is what bounds a lane with short calls: its two
// round trips (the take, the launch state's read) wait a millisecond or
// more each behind other clients' scripts, and each carries what its
// holds freed meanwhile, about half of them. More ahead makes those
// batches larger, with fewer script calls and round trips per run, which
// is what the harness found raising LAUNCHER_CONCURRENCY did
// (docs/perf/launchers.md, "Launch: round trips per run").
const takeAhead = 4

// takeAheadMaxCall: see takeAhead.
const takeAheadMaxCall = 5 * time.Millisecond

type lane struct {
	l *Launcher
	// holds has one per run taken and not yet past its executor call,
	// up to (1+takeAhead)×Concurrency; slots one per run at its attempt
	// (prepare and the executor call), up to Concurrency.
	holds chan struct{}
	slots chan struct{}
	// finishing bounds the runs past their executor calls whose statuses
	// and task ends are being written: a run frees its slot for the next
	// task as soon as the executor answers, so that taking the next tasks
	// overlaps with those writes (two round trips fewer per slot). It has
	// a place per hold: the runs of a take end together and wait for one
	// write in flight, and with only Concurrency places the runs behind
	// them kept their slots for it. When Redis is slow this fills up and
	// the runs keep their slots.
	finishing chan struct{}

	mu   sync.Mutex
	held map[*asynqwire.Task]bool // the tasks taken and not yet finished

	// wakeUp is signalled by the watch (watch.go) when tasks are pending;
	// lastTook is when the lane last took a task (Unix ns).
	wakeUp   chan struct{}
	lastTook atomic.Int64
	// callTime is a moving average of how long a run holds its slot (Unix
	// ns: its prepare and executor call); freed is signalled when one is
	// freed (takeLoop waits on it when it may not take ahead).
	callTime atomic.Int64
	freed    chan struct{}

	// work hands the tasks taken to the lane's workers, goroutines that
	// carry out one run after another: one per hold and per finishing
	// place. A goroutine of its
	// own per run grew its stack from the smallest on every run (copying
	// it as the run's calls went deeper): a tenth of a launcher's CPU
	// under load. A run holds a hold or a finishing place while it is in
	// work or at a worker, so a worker is always free for the next.
	work      chan *taken
	closeWork sync.Once // a launcher may be stopped twice
	runners   sync.WaitGroup

	stopTaking context.CancelFunc
	taking     sync.WaitGroup
	// runCtx ends the runs in progress when the shutdown timeout passes.
	runCtx    context.Context
	cancelRun context.CancelFunc
	running   sync.WaitGroup
	stopLease context.CancelFunc
	leasing   sync.WaitGroup
}

// newLane returns the lane of a launcher, with Concurrency slots.
func newLane(l *Launcher) *lane {
	n := l.cfg.Concurrency
	holds := (1 + takeAhead) * n
	return &lane{l: l, holds: make(chan struct{}, holds), slots: make(chan struct{}, n), finishing: make(chan struct{}, holds),
		held: map[*asynqwire.Task]bool{}, wakeUp: make(chan struct{}, 1), work: make(chan *taken, 2*holds),
		freed: make(chan struct{}, 1)}
}

func (ln *lane) start(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	ln.runCtx, ln.cancelRun = context.WithCancel(ctx)
	var takeCtx, leaseCtx context.Context
	takeCtx, ln.stopTaking = context.WithCancel(ctx)
	leaseCtx, ln.stopLease = context.WithCancel(ctx)
	for range cap(ln.work) {
		ln.runners.Go(func() {
			for t := range ln.work {
				ln.run(t)
				ln.running.Done()
			}
		})
	}
	ln.taking.Go(func() { ln.takeLoop(takeCtx) })
	ln.leasing.Go(func() { ln.leaseLoop(leaseCtx) })
}

// stop stops taking tasks and waits up to the shutdown timeout for the
// runs in progress; then it cuts them short, and their tasks go back to
// the queue.
func (ln *lane) stop(ctx context.Context) {
	if ln.stopTaking == nil {
		return
	}
	ln.stopTaking()
	ln.taking.Wait()
	done := make(chan struct{})
	go func() { ln.running.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(ln.l.cfg.ShutdownTimeout):
		ln.cancelRun()
		<-done
	case <-ctx.Done():
		ln.cancelRun()
		<-done
	}
	ln.cancelRun()
	ln.closeWork.Do(func() { close(ln.work) })
	ln.runners.Wait()
	ln.stopLease()
	ln.leasing.Wait()
}

// wake makes an idle lane look for tasks now.
func (ln *lane) wake() {
	select {
	case ln.wakeUp <- struct{}{}:
	default:
	}
}

// warm says whether the lane took a task within laneWarm.
func (ln *lane) warm() bool {
	return time.Since(time.Unix(0, ln.lastTook.Load())) < laneWarm
}

// takeLoop takes tasks whenever holds are free. When the queues are
// empty it waits PollInterval for a second after its last task, then
// until the watch wakes it (watch.go), at most laneIdlePoll.
func (ln *lane) takeLoop(ctx context.Context) {
	backoff := ln.l.cfg.PollInterval
	for {
		for len(ln.holds) >= ln.holdLimit() {
			select {
			case <-ln.freed:
			case <-ctx.Done():
				return
			}
		}
		select {
		case ln.holds <- struct{}{}:
		case <-ctx.Done():
			return
		}
		n := 1 + ln.gather(ctx)
		// Not cut short by ctx: tasks taken are this launcher's to finish.
		takeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		tasks, err := ln.l.take(takeCtx, n)
		cancel()
		ln.release(n - len(tasks))
		switch {
		case queue.IsFull(err):
			ln.l.logger.ErrorContext(ctx, "taking run tasks failed: Redis is full (maxmemory reached); retrying", "err", err, "retry_in", backoff)
		case err != nil:
			ln.l.logger.WarnContext(ctx, "taking run tasks failed; retrying (is Redis reachable?)", "err", err, "retry_in", backoff)
		}
		if len(tasks) == 0 {
			wait := ln.l.cfg.PollInterval
			switch {
			case err != nil:
				wait, backoff = backoff, min(2*backoff, 5*time.Second)
			case !ln.warm():
				wait = max(laneIdlePoll, wait)
			}
			select {
			case <-time.After(wait):
			case <-ln.wakeUp:
			case <-ctx.Done():
				return
			}
			continue
		}
		ln.lastTook.Store(time.Now().UnixNano())
		backoff = ln.l.cfg.PollInterval
		ln.mu.Lock()
		for _, t := range tasks {
			ln.held[t.Task] = true
		}
		ln.mu.Unlock()
		ln.running.Add(len(tasks))
		for _, t := range tasks {
			ln.work <- t
		}
	}
}

// gather takes the other free holds, for one round trip to take as many
// tasks. Under load runs end a few at a time; then it waits up to
// gatherWait for the rest, so that a busy lane takes its tasks in
// batches rather than one by one (two round trips each).
func (ln *lane) gather(ctx context.Context) int {
	n, want := 0, min(ln.holdLimit()-len(ln.holds), maxTake-1)
	var timeout <-chan time.Time
	for n < want {
		select {
		case ln.holds <- struct{}{}:
			n++
			continue
		default:
		}
		if timeout == nil {
			timeout = time.After(gatherWait)
		}
		select {
		case ln.holds <- struct{}{}:
			n++
		case <-timeout:
			return n
		case <-ctx.Done():
			return n
		}
	}
	return n
}

// holdLimit is how many tasks the lane may hold: its slots and as many
// Concurrencies more as its slots start within takeAheadMaxCall, at most
// takeAhead (see takeAhead).
func (ln *lane) holdLimit() int {
	call := time.Duration(ln.callTime.Load())
	ahead := takeAhead
	if call > 0 {
		ahead = int(min(takeAheadMaxCall/call, takeAhead))
	}
	return (1 + ahead) * cap(ln.slots)
}

// called adds a run's time in its slot to the moving average.
func (ln *lane) called(d time.Duration) {
	for {
		old := ln.callTime.Load()
		if ln.callTime.CompareAndSwap(old, old+(int64(d)-old)/8) {
			break
		}
	}
	select {
	case ln.freed <- struct{}{}:
	default:
	}
}

func (ln *lane) release(n int) {
	for range n {
		<-ln.holds
	}
}

// run carries out a taken task, which holds a hold, in a slot, and
// finishes it. The slot and the hold are freed once the executor has
// answered (or the attempt ended without calling it).
func (ln *lane) run(t *taken) {
	ln.slots <- struct{}{}
	t.inSlot = time.Now()
	if t.payload != nil {
		// A run taken before its time (the schedulers' forward lead)
		// waits for it in its slot (waitForFireTime). That wait is not
		// the call time that sizes the take ahead: counted, one burst's
		// waits would stop the lane taking ahead for the runs after it.
		if early := t.payload.FireAt.Sub(ln.l.store.Clock().Now()); early > 0 {
			t.inSlot = t.inSlot.Add(early)
		}
	}
	defer func() { <-ln.finishing }()
	ctx, cancel := context.WithDeadline(ln.runCtx, t.Deadline)
	err := ln.attempt(ctx, t)
	cancel()
	ln.free(t)
	if err == nil && t.launched != nil {
		ln.finishLaunched(t)
		return
	}
	ln.finish(t, ln.endOf(t, err))
}

// free frees the slot and the hold of a run once the executor has
// answered (or its attempt ended without calling it), and takes a
// finishing place for its writes; a second call does nothing. The run's
// goroutine alone calls it: a sync.OnceFunc per run was three heap
// allocations.
func (ln *lane) free(t *taken) {
	if t.freed {
		return
	}
	t.freed = true
	ln.finishing <- struct{}{}
	<-ln.slots
	ln.release(1)
	ln.called(max(time.Since(t.inSlot), 0))
}

// taskEnd is how a taken task is finished.
type taskEnd struct {
	end     asynqwire.End
	retryAt time.Time
	msg     string
}

// endOf is how a task whose attempt answered err ends, as asynq's server
// would end it.
func (ln *lane) endOf(t *taken, err error) taskEnd {
	switch {
	case err == nil:
		return taskEnd{end: asynqwire.Done}
	case errors.Is(err, context.Canceled) && ln.runCtx.Err() != nil:
		return taskEnd{end: asynqwire.Requeue} // stopping: another launcher starts it
	case errors.Is(err, asynq.SkipRetry) || t.Retried >= t.MaxRetry:
		return taskEnd{end: asynqwire.Archive, msg: err.Error()}
	default:
		return taskEnd{end: asynqwire.Retry, msg: err.Error(), retryAt: time.Now().Add(retryDelay(t.Retried, err, nil))}
	}
}

// finishLaunched writes the status of a run the executor accepted and
// finishes its task as done, in one script call (queue.Store.FinishLaunched,
// with the other runs of its shard that end at the same time):
// a launched run's two writes were two script calls, one after the
// other. When that call fails, the two are made one by one as an asynq
// handler would make them: the status retried while the attempt may run
// (recordLaunch), then the task's end.
func (ln *lane) finishLaunched(t *taken) {
	l, p, u := ln.l, t.payload, *t.launched
	ctx, cancel := context.WithTimeout(context.Background(), reportTimeout)
	mine, err := l.store.FinishLaunched(ctx, t.Task, p, u)
	cancel()
	if errors.Is(err, queue.ErrConflict) || errors.Is(err, queue.ErrNotFound) {
		l.logger.Info("status not recorded", "idempotency_key", p.IdempotencyKey, "status", u.Status, "err", err)
		err = nil
	}
	if err == nil {
		if !mine {
			l.logger.Warn("run task recovered by another launcher before this one finished it (its lease expired)", "task_id", t.ID, "end", asynqwire.Done)
		}
		ln.mu.Lock()
		delete(ln.held, t.Task)
		ln.mu.Unlock()
		return
	}
	l.logger.Warn("recording a launched run and finishing its task failed; writing them one by one", "idempotency_key", p.IdempotencyKey, "err", err)
	ctx, cancel = context.WithDeadline(ln.runCtx, t.Deadline)
	err = l.recordLaunch(ctx, p, u)
	cancel()
	ln.finish(t, ln.endOf(t, err))
}

// attempt is what asynq's server would call the handler for (launch),
// freeing the run's slot once the executor has answered; a panic is the
// attempt's error, as asynq's server makes it.
func (ln *lane) attempt(ctx context.Context, t *taken) (err error) {
	l := ln.l
	defer func() {
		if r := recover(); r != nil {
			l.logger.ErrorContext(ctx, "run task panicked", "task_id", t.ID, "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	switch {
	case t.payload == nil:
		l.logger.ErrorContext(ctx, "dropping malformed run task", "task_id", t.ID, "err", t.err)
		return fmt.Errorf("%w: %w", t.err, asynq.SkipRetry)
	case t.err != nil:
		return t.err
	}
	a := attempt{p: t.payload, retried: t.Retried, maxRetry: t.MaxRetry, state: t.state, launched: &t.launched}
	req, err := l.prepare(ctx, a)
	if req == nil {
		return err
	}
	res, err := l.execute(ctx, *req)
	ln.free(t)
	return l.recordOutcome(ctx, a, res, err)
}

// finish records how the task ended, retrying while its lease holds; if
// Redis stays out of reach the lease lapses and a launcher's recovery
// (recover.go) retries the task (its run's status, recorded before,
// keeps it from starting twice).
func (ln *lane) finish(t *taken, e taskEnd) {
	end, retryAt, msg := e.end, e.retryAt, e.msg
	defer func() {
		ln.mu.Lock()
		delete(ln.held, t.Task)
		ln.mu.Unlock()
	}()
	giveUp := time.Now().Add(finishPatience)
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		ctx, cancel := context.WithTimeout(context.Background(), reportTimeout)
		mine, err := ln.l.store.Tasks().Finish(ctx, t.Task, end, retryAt, msg)
		cancel()
		switch {
		case err == nil && !mine:
			ln.l.logger.Warn("run task recovered by another launcher before this one finished it (its lease expired)", "task_id", t.ID, "end", end)
			return
		case err == nil:
			return
		case time.Now().Add(wait).After(giveUp):
			ln.l.logger.Error("run task not finished; a launcher will recover it when its lease expires", "task_id", t.ID, "end", end, "err", err)
			return
		}
		ln.l.logger.Warn("finishing a run task failed; retrying", "task_id", t.ID, "end", end, "err", err, "retry_in", wait)
		time.Sleep(wait)
	}
}

// leaseLoop extends the leases of the tasks the lane holds.
func (ln *lane) leaseLoop(ctx context.Context) {
	tick := time.NewTicker(leaseExtendInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		ln.mu.Lock()
		held := make([]*asynqwire.Task, 0, len(ln.held))
		for t := range ln.held {
			held = append(held, t)
		}
		ln.mu.Unlock()
		if err := ln.l.store.Tasks().ExtendLeases(ctx, held); err != nil {
			ln.l.logger.WarnContext(ctx, "extending run task leases failed; retrying", "err", err)
		}
	}
}
