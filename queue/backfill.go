package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/chronos-sched/chronos/model"
)

// backfillPage bounds the runs one backfill script call writes (DESIGN:
// scripts are bounded in the runs they carry).
const backfillPage = 100

// BackfillRunTimeoutDefault is how long a skip or queue backfill's run
// may stay in flight without a final status before the scheduler fails
// it (run_timeout) and releases the schedule: RUN_TIMEOUT's default.
const BackfillRunTimeoutDefault = time.Hour

// backfillTries bounds a backfill's retries when upserts keep changing
// the schedule's definition under it.
const backfillTries = 5

// Backfill enqueues a schedule's planned runs of a past range: POST
// /schedules/:id/backfill, and a resume's replay of the paused time.
type Backfill struct {
	ScheduleID string
	// From and To bound the range: the fire times t with From <= t < To,
	// computed by the schedule's own timetable (model), as the scheduler
	// plans them.
	From, To time.Time
	// DryRun reports what would be created and writes nothing.
	DryRun bool
	// MaxRuns is the most planned times the range may hold; more is a
	// *model.FieldError that says so (BACKFILL_MAX_RUNS).
	MaxRuns int
	// Rate is how many of the created runs become runnable per second:
	// the i-th created run fires at now + i/Rate (BACKFILL_RATE).
	Rate int
	// OverlapPolicy is allow (or empty): every run of the range is
	// created, whatever runs beside it; skip: a run starts only while no
	// run of the schedule is in flight, and becomes its run in flight, so
	// at most one run of the range starts and the others are recorded
	// SKIPPED (model.ReasonOverlap); or queue: every run is created, and
	// they start one after another, each when the schedule has no run in
	// flight (the end of the one before starts it, in Redis).
	OverlapPolicy model.OverlapPolicy
	// RunTimeout bounds how long a skip or queue backfill's run stays in
	// flight without a final status; zero is BackfillRunTimeoutDefault.
	RunTimeout time.Duration
}

// BackfillOutcome is what a backfill did with one planned time.
type BackfillOutcome string

const (
	// BackfillCreated: its run was created and enqueued by this call.
	BackfillCreated BackfillOutcome = "created"
	// BackfillWouldCreate: a dry run would create its run.
	BackfillWouldCreate BackfillOutcome = "would_create"
	// BackfillExists: a run with its idempotency key exists (it ran, is
	// planned, or an earlier backfill made it): nothing is created.
	BackfillExists BackfillOutcome = "exists"
	// BackfillKeyTaken: a manual run holds its idempotency key.
	BackfillKeyTaken BackfillOutcome = "key_taken"
	// BackfillBeforeHistory: it is older than the oldest run record of a
	// full history (RUN_HISTORY): its run may have happened, its record
	// trimmed since, so it is not created.
	BackfillBeforeHistory BackfillOutcome = "before_history"
	// BackfillSkipped: under overlap_policy skip, another run of the
	// schedule was in flight: its run was recorded SKIPPED, reason
	// overlap, and not started.
	BackfillSkipped BackfillOutcome = "skipped"
	// BackfillWouldSkip: a dry run would record its run BackfillSkipped.
	BackfillWouldSkip BackfillOutcome = "would_skip"
	// BackfillQueued: under overlap_policy queue, its run was created and
	// waits for the schedule's run in flight, and the runs queued before
	// it, to end.
	BackfillQueued BackfillOutcome = "queued"
	// BackfillWouldQueue: a dry run would create its run BackfillQueued.
	BackfillWouldQueue BackfillOutcome = "would_queue"
)

// BackfillRun is one planned time of a backfill.
type BackfillRun struct {
	IdempotencyKey string          `json:"idempotency_key"`
	RunAt          time.Time       `json:"run_at"`
	Outcome        BackfillOutcome `json:"outcome"`
	// FireAt is when a created run becomes runnable (the rate spreads
	// them); for a queued one, the earliest it starts; nil for the others.
	FireAt *time.Time `json:"fire_at,omitempty"`
	// Status and Source are the existing run's, for BackfillExists.
	Status model.RunStatus `json:"status,omitempty"`
	Source model.RunSource `json:"source,omitempty"`
}

// BackfillResult is a backfill's answer: every planned time of the
// range, in order, and how many runs it created.
type BackfillResult struct {
	Runs    []BackfillRun
	Created int
}

// RunBackfill creates the runs of b's range that do not exist, each
// with its normal idempotency key and source backfill, or with DryRun
// says which it would create. A run whose record exists is never created
// again, whoever runs a backfill of the same range at the same time
// (backfill.lua decides, run by run). The schedule must not be paused
// (ErrConflict); an agent's alarm is ErrNotFound.
func (s *Store) RunBackfill(ctx context.Context, b Backfill) (*BackfillResult, error) {
	switch b.OverlapPolicy {
	case "", model.OverlapAllow, model.OverlapSkip, model.OverlapQueue:
	default:
		return nil, &model.FieldError{Field: "overlap_policy", Message: fmt.Sprintf("unknown overlap policy %q (want allow, skip or queue)", b.OverlapPolicy)}
	}
	for range backfillTries {
		res, err := s.backfill(ctx, b)
		if !errors.Is(err, errBackfillStale) {
			return res, err
		}
	}
	return nil, fmt.Errorf("schedule %s changed %d times during its backfill: %w", b.ScheduleID, backfillTries, ErrConflict)
}

var errBackfillStale = errors.New("backfill: schedule changed")

// BackfillTimes returns the planned times t of rec with from <= t < to,
// at most max of them; more is a *model.FieldError naming the limit and
// the first time past it.
func BackfillTimes(rec *model.ScheduleRecord, from, to time.Time, max int) ([]time.Time, error) {
	sched, err := rec.Compile()
	if err != nil {
		return nil, fmt.Errorf("schedule %s does not compile: %w", rec.ID, err)
	}
	var out []time.Time
	for t := sched.Next(from.Add(-time.Nanosecond)); !t.IsZero() && t.Before(to); t = sched.Next(t) {
		if len(out) == max {
			return nil, &model.FieldError{Field: "to", Message: fmt.Sprintf(
				"the range plans more than %d runs, the most one backfill may enqueue (BACKFILL_MAX_RUNS): "+
					"narrow it, e.g. to %s, and backfill the rest in further calls",
				max, t.UTC().Format(time.RFC3339))}
		}
		out = append(out, t)
	}
	return out, nil
}

func (s *Store) backfill(ctx context.Context, b Backfill) (*BackfillResult, error) {
	sh := s.shard(b.ScheduleID)
	h, err := s.rdb.HGetAll(ctx, scheduleKey(sh, b.ScheduleID)).Result()
	if err != nil {
		return nil, fmt.Errorf("load schedule %s: %w", b.ScheduleID, err)
	}
	if h[sfTarget] == targetWake {
		return nil, fmt.Errorf("schedule %s: %w", b.ScheduleID, ErrNotFound)
	}
	rec, err := scheduleFromHash(b.ScheduleID, h)
	if err != nil {
		return nil, err
	}
	if rec.Paused {
		return nil, errBackfillPaused(b.ScheduleID)
	}
	times, err := BackfillTimes(rec, b.From, b.To, b.MaxRuns)
	if err != nil {
		return nil, err
	}
	res := &BackfillResult{Runs: make([]BackfillRun, len(times))}
	all := make([]int, len(times))
	for i, t := range times {
		res.Runs[i] = BackfillRun{IdempotencyKey: model.IdempotencyKey(b.ScheduleID, t), RunAt: t}
		all[i] = i
	}
	// backfill.lua decides each run, in a dry run without writing: the
	// runs a backfill would create are those it then writes (unless one
	// appeared in between: then it is exists).
	now := s.clock.Now()
	if err := s.backfillPages(ctx, sh, rec, h[sfVer], now, &b, res, all, true); err != nil {
		return nil, err
	}
	if b.DryRun {
		return res, nil
	}
	// The runs to create get their fire times in order, Rate a second.
	// Under skip at most one starts, now, and the others are recorded:
	// each is sent with a task, in case the run that would start exists
	// by now and the next one starts instead. Under queue the first starts
	// now if nothing is in flight, and each later one waits for the one
	// before it to end, and for its own time: Rate a second, sub-second
	// steps, so each has a time of its own and the chain keeps its order.
	var todo []int
	for i, r := range res.Runs {
		switch {
		case (r.Outcome == BackfillWouldCreate || r.Outcome == BackfillWouldQueue) && b.OverlapPolicy == model.OverlapQueue:
			fire := now.Add(time.Duration(len(todo)) * time.Second / time.Duration(max(b.Rate, 1)))
			res.Runs[i].FireAt = &fire
			todo = append(todo, i)
		case r.Outcome == BackfillWouldCreate && b.OverlapPolicy != model.OverlapSkip:
			fire := now.Add(time.Duration(len(todo)/max(b.Rate, 1)) * time.Second)
			res.Runs[i].FireAt = &fire
			todo = append(todo, i)
		case r.Outcome == BackfillWouldCreate || r.Outcome == BackfillWouldSkip:
			res.Runs[i].FireAt = &now
			todo = append(todo, i)
		}
	}
	if err := s.backfillPages(ctx, sh, rec, h[sfVer], now, &b, res, todo, false); err != nil {
		return nil, err
	}
	return res, nil
}

func errBackfillPaused(id string) error {
	return fmt.Errorf("schedule %s is paused: resume it first (resume with catchup replay enqueues the runs its pause missed): %w", id, ErrConflict)
}

// backfillPages runs backfill.lua on the runs of res at the indexes idx,
// backfillPage of them a call, in order.
func (s *Store) backfillPages(ctx context.Context, sh int, rec *model.ScheduleRecord, ver string, now time.Time, b *Backfill, res *BackfillResult, idx []int, dryRun bool) error {
	for len(idx) > 0 {
		page := idx[:min(len(idx), backfillPage)]
		idx = idx[len(page):]
		if err := s.backfillPage(ctx, sh, rec, ver, now, b, res, page, dryRun); err != nil {
			return err
		}
	}
	return nil
}

// backfillPage runs backfill.lua on the runs of res at the indexes page
// and records its marks; a definition changed since h was read is
// errBackfillStale. With dryRun the script decides and writes nothing:
// the runs it would create are BackfillWouldCreate.
func (s *Store) backfillPage(ctx context.Context, sh int, rec *model.ScheduleRecord, ver string, now time.Time, b *Backfill, res *BackfillResult, page []int, dryRun bool) error {
	q := s.queue(sh).Keys()
	keys := []string{scheduleKey(sh, rec.ID), historyKey(sh, rec.ID), q.Pending(), q.Scheduled(), q.Archived(), q.Completed(),
		inflightKey(sh), backfillQueueKey(sh, rec.ID), runsMadeKey(sh)}
	dry, skip, queue := "", "", ""
	if dryRun {
		dry = flagSet
	}
	switch b.OverlapPolicy {
	case model.OverlapSkip:
		skip = flagSet
	case model.OverlapQueue:
		queue = flagSet
	}
	timeout := cmp.Or(b.RunTimeout, BackfillRunTimeoutDefault)
	deadline := now.Add(timeout)
	args := []any{rec.ID, ver, ms(now), now.UnixNano(), s.cfg.RunHistory, dry, skip, ms(deadline), string(model.ReasonOverlap),
		queue, timeout.Milliseconds()}
	if len(keys) != backfillHeaderKeys || len(args) != backfillHeaderArgs {
		return fmt.Errorf("backfill %s: %d keys and %d arguments, not the %d and %d backfill.lua reads",
			rec.ID, len(keys), len(args), backfillHeaderKeys, backfillHeaderArgs)
	}
	for _, i := range page {
		r := res.Runs[i]
		keys = append(keys, runKey(sh, r.IdempotencyKey), q.TaskPrefix()+r.IdempotencyKey, manualKeyPrefix(sh)+r.IdempotencyKey)
		if dryRun {
			args = append(args, r.IdempotencyKey, ms(r.RunAt), 0, "", 0)
			continue
		}
		p := TaskPayload{
			IdempotencyKey: r.IdempotencyKey, ScheduleID: rec.ID, RunAt: r.RunAt.UTC(), FireAt: r.FireAt.UTC(),
			WorkflowID: rec.WorkflowID, Version: string(rec.Version), UserID: rec.UserID, Source: model.SourceBackfill,
		}
		msg, processAt, err := s.asynqTask(sh, &p, now)
		if err != nil {
			return err
		}
		args = append(args, r.IdempotencyKey, ms(r.RunAt), ms(*r.FireAt), msg, processAt)
	}
	out, err := backfillScript.Run(ctx, s.rdb, keys, args...).Result()
	if err != nil {
		return fmt.Errorf("backfill %s: %w", rec.ID, err)
	}
	switch v := out.(type) {
	case int64:
		switch v {
		case backfillNotFound:
			return fmt.Errorf("schedule %s: %w", rec.ID, ErrNotFound)
		case backfillStale:
			return errBackfillStale
		case backfillPaused:
			return errBackfillPaused(rec.ID)
		}
		return fmt.Errorf("backfill %s: unexpected answer %d", rec.ID, v)
	case []any:
		marks, _ := v[0].(string)
		if len(marks) != len(page) || len(v) != 1+2*len(page) {
			return fmt.Errorf("backfill %s: %d marks and %d fields for %d runs", rec.ID, len(marks), len(v)-1, len(page))
		}
		for j, i := range page {
			r := &res.Runs[i]
			switch marks[j : j+1] {
			case runWritten:
				if dryRun {
					r.Outcome = BackfillWouldCreate
				} else {
					r.Outcome = BackfillCreated
					res.Created++
				}
				continue
			case runQueued:
				if dryRun {
					r.Outcome = BackfillWouldQueue
				} else {
					r.Outcome = BackfillQueued
					res.Created++
				}
				continue
			case runKept:
				st, _ := v[1+2*j].(string)
				src, _ := v[2+2*j].(string)
				r.Outcome, r.Status, r.Source = BackfillExists, model.RunStatus(st), model.RunSource(src)
			case runTaken:
				r.Outcome = BackfillKeyTaken
			case runBeforeHistory:
				r.Outcome = BackfillBeforeHistory
			case runOverlapped:
				r.Outcome = BackfillSkipped
				if dryRun {
					r.Outcome = BackfillWouldSkip
				} else {
					s.ledger.count(model.ReasonOverlap, 1)
				}
			default:
				return fmt.Errorf("backfill %s: unexpected mark %q", rec.ID, marks[j:j+1])
			}
			r.FireAt = nil
		}
		return nil
	}
	return fmt.Errorf("backfill %s: unexpected answer %v", rec.ID, out)
}
