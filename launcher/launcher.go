package launcher

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
)

const (
	// ConcurrencyDefault is how many runs one launcher carries out at once.
	ConcurrencyDefault = 10
	// PollIntervalDefault is how often an idle launcher looks for tasks.
	PollIntervalDefault = 50 * time.Millisecond
	// ForwardIntervalDefault is how often a launcher makes the runs
	// enqueued ahead and the retries whose time has come runnable.
	ForwardIntervalDefault = 100 * time.Millisecond
	// ShutdownTimeoutDefault is how long Stop waits for runs in progress.
	ShutdownTimeoutDefault = 30 * time.Second
	// ArchiveSweepIntervalDefault is how often a launcher fails the runs
	// of tasks asynq archived before they launched (see archived.go).
	ArchiveSweepIntervalDefault = time.Minute
	// LaunchGraceDefault is how late a run may start before its schedule's
	// catch-up policy applies to it (see missedAtLaunch).
	LaunchGraceDefault = 10 * time.Minute
	// RecoverIntervalDefault is how often a launcher recovers the run
	// tasks of launchers that died holding them: asynq's recoverer's
	// interval (see recover.go).
	RecoverIntervalDefault = time.Minute
)

// Config configures a Launcher. The zero value of each field means its
// default.
type Config struct {
	// Concurrency is the number of runs carried out at once. Default
	// ConcurrencyDefault.
	Concurrency int
	// PollInterval is how often an idle launcher looks for tasks. Default
	// PollIntervalDefault.
	PollInterval time.Duration
	// ForwardInterval is how often due tasks enqueued ahead and due
	// retries become pending. Default ForwardIntervalDefault.
	ForwardInterval time.Duration
	// ShutdownTimeout bounds Stop's wait for runs in progress. Default
	// ShutdownTimeoutDefault.
	ShutdownTimeout time.Duration
	// ArchiveSweepInterval is how often runs whose tasks asynq archived
	// before they launched are marked FAILED. Default
	// ArchiveSweepIntervalDefault.
	ArchiveSweepInterval time.Duration
	// LaunchGrace is how late after it was due a scheduled run may
	// start before its schedule's catch-up policy applies to it. Default
	// LaunchGraceDefault.
	LaunchGrace time.Duration
	// RecoverInterval is how often the run tasks whose lease expired
	// (their launcher died or froze) are recovered. Default
	// RecoverIntervalDefault.
	RecoverInterval time.Duration
	// Executor starts runs. Required.
	Executor Executor
	// Waker delivers the wakes of alarms' runs (wake.go). nil: such a run
	// fails, saying to set WAKE_URL.
	Waker Waker
}

// Launcher is one launcher replica: its lane takes run tasks off asynq's
// queues in batches and starts them (lane.go); its loops do what asynq's
// servers do for a queue besides, each script with every key in KEYS:
// forward runs and retries that are due (forwardLoop), recover the tasks
// of launchers that died and delete expired completed tasks
// (recover.go), and list the launcher in asynqmon (servers.go).
type Launcher struct {
	store   *queue.Store
	cfg     Config
	logger  *slog.Logger
	lane    *lane
	metrics *metrics

	// id names this launcher in the skew heartbeat; fleetSkew is the
	// largest host clock skew of the live launchers, ns (see skew.go).
	id        string
	fleetSkew atomic.Int64

	stopLoops context.CancelFunc
	loops     sync.WaitGroup
}

// WithDefaults returns a copy with zero fields set to their defaults.
func (c *Config) WithDefaults() Config {
	var v Config
	if c != nil {
		v = *c
	}
	v.Concurrency = cmp.Or(v.Concurrency, ConcurrencyDefault)
	v.PollInterval = cmp.Or(v.PollInterval, PollIntervalDefault)
	v.ForwardInterval = cmp.Or(v.ForwardInterval, ForwardIntervalDefault)
	v.ShutdownTimeout = cmp.Or(v.ShutdownTimeout, ShutdownTimeoutDefault)
	v.ArchiveSweepInterval = cmp.Or(v.ArchiveSweepInterval, ArchiveSweepIntervalDefault)
	v.LaunchGrace = cmp.Or(v.LaunchGrace, LaunchGraceDefault)
	v.RecoverInterval = cmp.Or(v.RecoverInterval, RecoverIntervalDefault)
	return v
}

// validate names the first field of c (after defaults) that is wrong.
func (c Config) validate() error {
	switch {
	case c.Executor == nil:
		return errors.New("launcher: Config.Executor is required")
	case c.Concurrency < 1:
		return fmt.Errorf("launcher: Config.Concurrency must be at least 1, got %d", c.Concurrency)
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{
		{"PollInterval", c.PollInterval}, {"ForwardInterval", c.ForwardInterval}, {"ShutdownTimeout", c.ShutdownTimeout},
		{"ArchiveSweepInterval", c.ArchiveSweepInterval}, {"LaunchGrace", c.LaunchGrace}, {"RecoverInterval", c.RecoverInterval},
	} {
		if d.v < 0 {
			return fmt.Errorf("launcher: Config.%s must not be negative, got %s", d.field, d.v)
		}
	}
	return nil
}

// New returns a launcher; logger and reg may be nil.
func New(store *queue.Store, cfg *Config, logger *slog.Logger, reg prometheus.Registerer) (*Launcher, error) {
	c := cfg.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := store.RegisterMetrics(reg); err != nil {
		return nil, err
	}
	l := &Launcher{store: store, cfg: c, logger: logger, metrics: newMetrics(reg), id: newReplicaID()}
	l.lane = newLane(l)
	return l, nil
}

// retryDelay backs off exponentially from 1s to 5 minutes, or longer
// when the executor said when to come back (RetryAfterError).
func retryDelay(n int, err error, _ *asynq.Task) time.Duration {
	d := min(time.Second<<min(n, 20), 5*time.Minute)
	if ra := (*RetryAfterError)(nil); errors.As(err, &ra) {
		d = max(d, ra.After)
	}
	return d
}

// Start starts processing tasks and returns. Call it once.
func (l *Launcher) Start(ctx context.Context) error {
	// The fleet's skew is known before the first run comes (a failure is
	// retried by the loop; meanwhile this host's own skew counts).
	reportCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	if err := l.reportSkew(reportCtx); err != nil {
		l.logger.WarnContext(ctx, "clock skew report failed; retrying", "err", err)
	}
	cancel()
	// The tasks of launchers that died are recovered before this one
	// takes any, so that its own are never among the leases it finds
	// expired (a failure is retried by the loop).
	recoverCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	l.recoverExpired(recoverCtx)
	cancel()
	l.lane.start(ctx)
	ctx, l.stopLoops = context.WithCancel(context.WithoutCancel(ctx))
	l.loops.Go(func() { l.archivedLoop(ctx) })
	l.loops.Go(func() { l.skewLoop(ctx) })
	l.loops.Go(func() { l.forwardLoop(ctx) })
	l.loops.Go(func() { l.recoverLoop(ctx) })
	l.loops.Go(func() { l.completedLoop(ctx) })
	l.loops.Go(func() { l.serversLoop(ctx) })
	return nil
}

// forwardLoop makes due runs enqueued ahead runnable by the shared clock,
// so no launcher is handed a run before its time however fast its host's
// clock is, and due retries by this host's clock, which scored them (their
// time is a backoff, not a fire time). Schedulers forward runs enqueued
// ahead too, on each tick boundary. It looks first (watch.go): every
// ForwardInterval while there is work, backing off to idleWatchMax while
// there is none, and it wakes the lane when tasks are pending.
func (l *Launcher) forwardLoop(ctx context.Context) {
	interval := l.cfg.ForwardInterval
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := l.store.Clock().Now()
		w, err := l.watch(ctx, now, time.Now())
		if err == nil && w.scheduled {
			_, err = l.store.Tasks().Forward(ctx, now)
		}
		if err == nil && w.retries {
			_, err = l.store.Tasks().ForwardRetries(ctx, time.Now())
		}
		if err != nil && ctx.Err() == nil {
			l.logger.WarnContext(ctx, "forwarding due run tasks failed; retrying", "err", err)
		}
		if w.any() {
			l.lane.wake()
		}
		if w.any() || err != nil || l.lane.warm() {
			interval = l.cfg.ForwardInterval
		} else {
			interval = min(2*interval, max(idleWatchMax, l.cfg.ForwardInterval))
		}
		t.Reset(interval)
	}
}

// Stop stops taking tasks and waits for the runs in progress, up to
// Config.ShutdownTimeout or until ctx ends; the runs still in progress
// then are cut short and go back to the queue. It returns ctx's error if
// ctx ended first.
func (l *Launcher) Stop(ctx context.Context) error {
	if l.stopLoops != nil {
		l.stopLoops()
		l.loops.Wait()
		l.lane.stop(ctx)
	}
	return ctx.Err()
}

// attempt is one try at starting a run: its task's payload, asynq's
// counts of the task's attempts, and the run's launch state when it was
// read with the task (else prepare reads it).
type attempt struct {
	p                 *queue.TaskPayload
	retried, maxRetry int
	state             *queue.LaunchState
	// launched, when not nil, takes the status of a run the executor
	// accepted instead of recordLaunch: the lane writes it with the
	// task's end, in one script call (lane.finishLaunched).
	launched **queue.StatusUpdate
}

// launch carries out one attempt of a run task: prepare, the executor
// call, then recordOutcome. Its error means what a handler's error means
// to asynq: retry the task (archive it with asynq.SkipRetry or when its
// retries are spent).
func (l *Launcher) launch(ctx context.Context, a attempt) error {
	req, err := l.prepare(ctx, a)
	if req == nil {
		return err
	}
	res, err := l.execute(ctx, *req)
	return l.recordOutcome(ctx, a, res, err)
}

// execute starts the run of req: a workflow run through the Executor, or
// an alarm's wake through the Waker, whose delivery is the run's SUCCESS.
func (l *Launcher) execute(ctx context.Context, req Request) (Result, error) {
	if req.Wake == nil {
		return l.cfg.Executor.Execute(ctx, req)
	}
	if err := l.cfg.Waker.Wake(ctx, *req.Wake); err != nil {
		return Result{}, err
	}
	return Result{Status: model.RunSuccess}, nil
}

// prepare is an attempt's half before the executor: it waits for the
// run's fire time, reads the run's state, and judges whether the run
// starts (still planned, not missed at launch, its workflow known). It
// returns the executor's request, or nil and the attempt's error (nil
// when there is nothing to start).
func (l *Launcher) prepare(ctx context.Context, a attempt) (*Request, error) {
	p, st := a.p, a.state
	if p.FireAt.After(l.store.Clock().Now()) {
		st = nil // read after the wait: the run's schedule may change meanwhile
	}
	if err := l.waitForFireTime(ctx, p); err != nil {
		return nil, err
	}
	started := l.store.Clock().Now()

	if st == nil {
		var err error
		if st, err = l.store.LoadLaunch(ctx, p); err != nil {
			return nil, err
		}
	}
	if st.Status == "" {
		// Records are written with their tasks, so the run ended and its
		// record was trimmed from the history (e.g. FAILED by RUN_TIMEOUT
		// while no launcher ran), or it expired: nothing to start it for.
		l.logger.WarnContext(ctx, "run record gone (trimmed or expired); not starting the run",
			"idempotency_key", p.IdempotencyKey, "schedule_id", p.ScheduleID)
		return nil, nil
	}
	if st.Status.Terminal() || st.Status == model.RunStarted {
		// STARTED: the executor has it (it reported so itself, or this
		// task is delivered again after a launcher reported it).
		l.logger.InfoContext(ctx, "run already launched; not starting it again",
			"idempotency_key", p.IdempotencyKey, "schedule_id", p.ScheduleID, "status", st.Status)
		return nil, nil
	}
	// A retry after an executor error is late by its backoff, not
	// missed: it is judged from when the retry was due (asynq's retry
	// count cannot tell, see RecordFailedAttempt).
	firstAttempt := st.FailedAttempts == 0
	due := dueAt(p, st.EnqueuedAt)
	if !firstAttempt {
		due = st.RetryAt
	}

	target, dag := runTarget{p.WorkflowID, p.Version, p.UserID}, st.DAG
	if p.Source == model.SourceSchedule || p.Source == model.SourceBackfill {
		if skip, err := l.skipUnstartable(ctx, p, st, due, started, firstAttempt); skip || err != nil {
			return nil, err
		}
		if rec := st.Schedule; rec.Target == model.TargetWake {
			return l.prepareWake(ctx, a, rec, due, started, firstAttempt)
		}
		// A run enqueued ahead carries the workflow version its schedule
		// named then; an upsert since then that points the schedule at
		// another version (or user) applies to this run too.
		if now := (runTarget{st.Schedule.WorkflowID, string(st.Schedule.Version), st.Schedule.UserID}); now != target {
			target = now
			var err error
			if dag, err = l.store.GetWorkflow(ctx, target.workflowID, target.version); errors.Is(err, queue.ErrNotFound) {
				dag = nil
			} else if err != nil {
				return nil, err
			}
		}
	}
	if dag == nil {
		return nil, l.fail(ctx, p, model.ReasonWorkflowMissing, fmt.Sprintf("workflow %s version %s not found: register it with PUT /workflows/%s/versions/%s",
			target.workflowID, target.version, target.workflowID, target.version))
	}
	if firstAttempt && a.retried == 0 {
		l.metrics.startDelay.Observe(max(started.Sub(due), 0).Seconds())
	}
	return &Request{DAG: dag, Meta: Meta{
		Source: p.Source, ScheduleID: p.ScheduleID, WorkflowID: target.workflowID, Version: target.version,
		UserID: target.userID, ScheduledFor: p.RunAt, IdempotencyKey: p.IdempotencyKey,
	}}, nil
}

// prepareWake is prepare's end for an alarm's run (schedule rec): the
// wake to deliver, or nil when the run failed for want of a Waker.
func (l *Launcher) prepareWake(ctx context.Context, a attempt, rec *model.ScheduleRecord, due, started time.Time, firstAttempt bool) (*Request, error) {
	p := a.p
	if l.cfg.Waker == nil {
		return nil, l.fail(ctx, p, model.ReasonLaunchAbandoned, "alarm wake not delivered: this launcher has no WAKE_URL: set WAKE_URL and WAKE_SECRET on the launchers (see docs/wake.md)")
	}
	if firstAttempt && a.retried == 0 {
		l.metrics.startDelay.Observe(max(started.Sub(due), 0).Seconds())
	}
	al := rec.Alarm
	if al == nil {
		al = &model.Alarm{}
	}
	return &Request{Wake: &Wake{
		AlarmID: p.ScheduleID, OwnerDID: rec.Owner, UserID: rec.UserID, Label: al.Label, ConversationID: al.ConversationID,
		WakeMessage: al.WakeMessage, Payload: al.Payload, ScheduledFor: p.RunAt, FiredAt: started, IdempotencyKey: p.IdempotencyKey,
	}}, nil
}

// skipUnstartable records SKIPPED a scheduled run that must not start:
// its schedule no longer plans it, or it was missed at launch
// (missedAtLaunch). It says whether it skipped the run.
func (l *Launcher) skipUnstartable(ctx context.Context, p *queue.TaskPayload, st *queue.LaunchState, due, started time.Time, firstAttempt bool) (bool, error) {
	sched, reason, rsn := stillPlanned(st.Schedule, p)
	late := false
	// A backfill run is late on purpose: the catch-up policy is not
	// its schedule's to apply.
	if reason == "" && p.Source != model.SourceBackfill {
		reason = missedAtLaunch(st.Schedule, sched, p, due, started, l.cfg.LaunchGrace)
		late, rsn = reason != "", model.ReasonLateAtLaunch
	}
	if reason == "" {
		return false, nil
	}
	l.logger.InfoContext(ctx, "run skipped",
		"idempotency_key", p.IdempotencyKey, "schedule_id", p.ScheduleID, "reason", rsn, "why", reason)
	// A run held behind one no longer planned waited for it, and starts
	// however late; unless this one had waited past LAUNCH_GRACE itself
	// with no launcher trying it: then the held run was missed too, and
	// its catch-up policy applies (model.EndedRun, as for RUN_TIMEOUT).
	release := queue.ReleaseByStatus
	if !late && (!firstAttempt || started.Sub(due) <= l.cfg.LaunchGrace) {
		release = queue.ReleaseUnplanned
	}
	applied, err := l.report(ctx, p, queue.StatusUpdate{Status: model.RunSkipped, Error: reason, Reason: rsn, From: model.RunEnqueued, Release: release})
	if err != nil {
		return true, err
	}
	if late && applied {
		l.metrics.skippedLate.Inc()
	}
	return true, nil
}

// recordOutcome is an attempt's half after the executor: it records what
// the executor answered (res, or its error err), or leaves the task to
// asynq's retry.
func (l *Launcher) recordOutcome(ctx context.Context, a attempt, res Result, err error) error {
	p := a.p
	if err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			// The launcher is stopping: the lane puts the task back in
			// the queue, and the run is started again, with the same
			// idempotency key. Not a failed attempt of the executor.
			l.logger.InfoContext(ctx, "executor call cut short (launcher stopping); the run will be started again",
				"idempotency_key", p.IdempotencyKey, "schedule_id", p.ScheduleID)
			return err
		}
		retried := a.retried
		if permanent := isPermanent(err); permanent || retried >= a.maxRetry {
			what := "executor"
			if p.Target == model.TargetWake {
				what = "wake delivery"
			}
			rsn := model.ReasonRetriesExhausted
			if permanent {
				rsn = model.ReasonExecutorRejected
			}
			// An alarm counts the last failed delivery as the ones before.
			return l.failWith(ctx, p, queue.StatusUpdate{Status: model.RunFailed, From: model.RunEnqueued, DeliveryFailed: true,
				Reason: rsn, Error: fmt.Sprintf("%s failed after %d attempts: %v", what, retried+1, err)})
		}
		l.logger.WarnContext(ctx, "executor failed; asynq will retry",
			"idempotency_key", p.IdempotencyKey, "schedule_id", p.ScheduleID, "attempt", retried+1, "err", err)
		if err := l.recordFailedAttempt(ctx, p, l.store.Clock().Now().Add(retryDelay(retried, err, nil)), err.Error()); err != nil {
			l.logger.WarnContext(ctx, "failed attempt not recorded; the retry will be judged late or not from the run's due time",
				"idempotency_key", p.IdempotencyKey, "err", err)
		}
		return err
	}
	// The run goes on elsewhere unless the executor says it ended.
	if res.Status != model.RunSuccess && res.Status != model.RunFailed {
		res.Status = model.RunStarted
	}
	l.metrics.launched.WithLabelValues(string(res.Status)).Inc()
	u := queue.StatusUpdate{Status: res.Status, RunID: res.RunID, Error: res.Error}
	if res.Status == model.RunFailed {
		u.Reason = model.ReasonExecutorRejected // it answered that the run failed
	}
	if a.launched != nil {
		*a.launched = &u
		return nil
	}
	return l.recordLaunch(ctx, p, u)
}

// recordLaunch records the status of a run the executor accepted. The
// write is retried with backoff for as long as the task may run: were the
// handler to return its error on the task's last attempt, asynq would
// archive the task and the sweep would mark FAILED a run the executor has.
// (On an earlier attempt the retry would call the executor again, with the
// same key: harmless, but a wasted call.)
func (l *Launcher) recordLaunch(ctx context.Context, p *queue.TaskPayload, u queue.StatusUpdate) error {
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		_, err := l.report(ctx, p, u)
		if err == nil {
			return nil
		}
		l.logger.WarnContext(ctx, "the executor accepted the run but its status was not recorded; retrying",
			"idempotency_key", p.IdempotencyKey, "status", u.Status, "err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return fmt.Errorf("record status %s of run %s: %w", u.Status, p.IdempotencyKey, err)
		case <-time.After(wait):
		}
	}
}

// earlyMargin is how much earlier than the launchers' clock skew and the
// schedulers' forward lead explain a run may come and still be waited for
// (asynq rounds a run's time up to the second; the skew is read a moment
// apart from the forwarding).
const earlyMargin = time.Second

// waitForFireTime holds a run taken before its time on the shared clock
// until then, holding its worker slot. Schedulers make the runs enqueued
// ahead runnable up to their forward lead before their time (at most
// queue.ForwardLeadMax), so that a burst is runnable by its second.
// An asynq server moves them to the pending list by its own host's clock
// instead (the launchers of versions that ran one, during a rolling
// upgrade), so when such a host's clock is ahead of Redis's, runs reach
// every launcher that much early: they wait too (a warning says so past
// the lead and a second: fix that host's NTP). A run further ahead than
// the lead and any live launcher's skew explain was moved to pending on
// purpose (the dashboard's "Run") and starts at once.
func (l *Launcher) waitForFireTime(ctx context.Context, p *queue.TaskPayload) error {
	early := p.FireAt.Sub(l.store.Clock().Now())
	if early <= 0 {
		return nil
	}
	skew := max(l.hostSkew(), time.Duration(l.fleetSkew.Load()))
	if early > skew+queue.ForwardLeadMax+earlyMargin {
		l.logger.InfoContext(ctx, "starting a run before its time: it was moved to pending (the dashboard's Run)",
			"idempotency_key", p.IdempotencyKey, "early", early)
		return nil
	}
	if early > queue.ForwardLeadMax+time.Second {
		l.logger.WarnContext(ctx, "run taken before its time: a launcher host's clock is ahead of Redis's (check NTP on the launchers' hosts); waiting for it",
			"idempotency_key", p.IdempotencyKey, "early", early, "skew", skew)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(early):
		return nil
	}
}

// runTarget is what a run executes: a workflow version, for a user.
type runTarget struct{ workflowID, version, userID string }

// stillPlanned returns the compiled schedule of a scheduled run, or why
// the run should not start, in words and as a reason: its schedule (rec,
// nil when deleted) was deleted (an alarm: cancelled), paused, or changed
// so that the run's time is no longer one of its fire times: outside its
// new start_at/end_at window, or not one of its new timing's. Runs are
// enqueued ahead of time, so this is checked when they start.
func stillPlanned(rec *model.ScheduleRecord, p *queue.TaskPayload) (model.Schedule, string, model.RunReason) {
	if rec == nil {
		return nil, "schedule deleted before the run started", model.ReasonDeleted
	}
	if rec.Alarm != nil && rec.Alarm.Status == model.AlarmCancelled {
		return nil, "alarm cancelled before its wake was delivered", model.ReasonDeleted
	}
	if rec.Alarm != nil && rec.Paused {
		return nil, "alarm paused before its wake was delivered", model.ReasonPaused
	}
	if rec.Paused {
		return nil, "schedule paused before the run started", model.ReasonPaused
	}
	sched, err := rec.Compile()
	if err != nil {
		return nil, "schedule no longer compiles: " + err.Error(), model.ReasonScheduleChanged
	}
	if !sched.Next(p.RunAt.Add(-time.Second)).Equal(p.RunAt) {
		if (rec.StartAt != nil && p.RunAt.Before(*rec.StartAt)) || (rec.EndAt != nil && p.RunAt.After(*rec.EndAt)) {
			return nil, fmt.Sprintf("schedule changed; this time is outside its window (start_at %s, end_at %s)",
				timeOrNone(rec.StartAt), timeOrNone(rec.EndAt)), model.ReasonOutsideWindow
		}
		return nil, "schedule changed; this time is no longer one of its fire times", model.ReasonScheduleChanged
	}
	return sched, "", ""
}

// timeOrNone formats an optional time for a message.
func timeOrNone(t *time.Time) string {
	if t == nil {
		return "none"
	}
	return t.UTC().Format(time.RFC3339)
}

// missedAtLaunch returns why a run of schedule rec (compiled: sched) that
// would start now, more than grace after it was due, should not start
// ("" if it should): its catch-up policy decides (model.AtLaunch). A
// scheduler that enqueued it late did so within MISFIRE_GRACE_MS (e.g.
// after a shard takeover): that wait is the scheduler's, already judged.
func missedAtLaunch(rec *model.ScheduleRecord, sched model.Schedule, p *queue.TaskPayload, due, now time.Time, grace time.Duration) string {
	late := now.Sub(due)
	if late <= grace {
		return ""
	}
	later := sched.Next(p.RunAt)
	s := model.LaunchSituation{Late: true, LaterDue: !later.IsZero() && !later.After(now)}
	if model.AtLaunch(rec.OverlapPolicy, rec.CatchupPolicy, s) != model.OutcomeSkip {
		return ""
	}
	if rec.CatchupPolicy == model.CatchupLatest {
		return fmt.Sprintf("missed: it would start %s after it was due, more than LAUNCH_GRACE %s, and its schedule's later run at %s is due too (catchup_policy latest)",
			late.Round(time.Second), grace, later.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("missed: it would start %s after it was due, more than LAUNCH_GRACE %s (catchup_policy %s)",
		late.Round(time.Second), grace, rec.CatchupPolicy)
}

// dueAt is when a run was due to start: its fire time, or when it was
// enqueued if that was later (a scheduler's catch-up, a manual run for a
// past time): that wait is not the launchers'.
func dueAt(p *queue.TaskPayload, enqueuedAt time.Time) time.Time {
	if enqueuedAt.After(p.FireAt) {
		return enqueuedAt
	}
	return p.FireAt
}

// recordFailedAttempt counts a failed executor call, even when the task's
// context has ended, so the retry is not judged late.
func (l *Launcher) recordFailedAttempt(ctx context.Context, p *queue.TaskPayload, retryAt time.Time, reason string) error {
	ctx, cancel := detached(ctx)
	defer cancel()
	return l.store.RecordFailedAttempt(ctx, p, retryAt, reason)
}

// fail records the run FAILED for reason rsn (why: reason), unless it has moved on meanwhile (the
// executor reported it STARTED or ended itself, its answer to this call
// being lost), and stops asynq from retrying it.
func (l *Launcher) fail(ctx context.Context, p *queue.TaskPayload, rsn model.RunReason, reason string) error {
	return l.failWith(ctx, p, queue.StatusUpdate{Status: model.RunFailed, Error: reason, Reason: rsn, From: model.RunEnqueued})
}

// failWith is fail with the FAILED update u.
func (l *Launcher) failWith(ctx context.Context, p *queue.TaskPayload, u queue.StatusUpdate) error {
	l.logger.WarnContext(ctx, "run failed to launch", "idempotency_key", p.IdempotencyKey, "schedule_id", p.ScheduleID, "reason", u.Error)
	applied, err := l.report(ctx, p, u)
	if err != nil {
		return err
	}
	if applied {
		l.metrics.failedLaunch.Inc()
	}
	return fmt.Errorf("%s: %w", u.Error, asynq.SkipRetry)
}

// reportTimeout bounds a status report, which runs even when the task's
// context has ended (shutdown, task timeout): the executor has already
// acted, and a lost report would make asynq start the run again.
const reportTimeout = 5 * time.Second

// detached is ctx without its cancellation, bounded by reportTimeout: for
// the writes that record what the executor did.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), reportTimeout)
}

// report records a status and says whether it did; a run that has moved
// on (timed out, reported by the executor itself) or is gone is left as
// it is.
func (l *Launcher) report(ctx context.Context, p *queue.TaskPayload, u queue.StatusUpdate) (applied bool, err error) {
	ctx, cancel := detached(ctx)
	defer cancel()
	err = l.store.ReportTaskStatus(ctx, p, u)
	if errors.Is(err, queue.ErrConflict) || errors.Is(err, queue.ErrNotFound) {
		l.logger.InfoContext(ctx, "status not recorded", "idempotency_key", p.IdempotencyKey, "status", u.Status, "err", err)
		return false, nil
	}
	return err == nil, err
}

type metrics struct {
	launched     *prometheus.CounterVec
	failedLaunch prometheus.Counter
	skippedLate  prometheus.Counter
	startDelay   prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		launched: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chronos_runs_launched_total",
			Help: "Executor calls that accepted a run, by the status it answered (STARTED unless SUCCESS or FAILED)."}, []string{"status"}),
		failedLaunch: prometheus.NewCounter(prometheus.CounterOpts{Name: "chronos_runs_failed_launch_total",
			Help: "Runs marked FAILED by a launcher: executor errors after retries, missing workflows, tasks asynq archived before they launched."}),
		skippedLate: prometheus.NewCounter(prometheus.CounterOpts{Name: "chronos_runs_skipped_late_total",
			Help: "Runs a launcher recorded SKIPPED instead of starting them more than LAUNCH_GRACE late (catchup_policy none or latest)."}),
		startDelay: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "chronos_run_start_delay_seconds",
			Help:    "Time from a run's fire time (or its enqueue, if later: a catch-up, a backfill) to a launcher calling the executor, on the run's first attempt.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}}),
	}
	if reg != nil {
		reg.MustRegister(m.launched, m.failedLaunch, m.skippedLate, m.startDelay)
	}
	return m
}
