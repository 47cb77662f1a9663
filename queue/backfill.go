package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronos-sched/chronos/model"
)

// backfillPage bounds the runs one backfill script call writes (DESIGN:
// scripts are bounded in the runs they carry).
const backfillPage = 100

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
)

// BackfillRun is one planned time of a backfill.
type BackfillRun struct {
	IdempotencyKey string          `json:"idempotency_key"`
	RunAt          time.Time       `json:"run_at"`
	Outcome        BackfillOutcome `json:"outcome"`
	// FireAt is when a created run becomes runnable (the rate spreads
	// them); nil for the others.
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
	for i, t := range times {
		res.Runs[i] = BackfillRun{IdempotencyKey: model.IdempotencyKey(b.ScheduleID, t), RunAt: t}
	}
	if err := s.readBackfillRuns(ctx, sh, b.ScheduleID, s.cfg.RunHistory, b.DryRun, res.Runs); err != nil {
		return nil, err
	}
	if b.DryRun {
		return res, nil
	}
	now := s.clock.Now()
	// The runs to create get their fire times in order, Rate a second.
	var todo []int
	for i, r := range res.Runs {
		if r.Outcome == "" {
			fire := now.Add(time.Duration(len(todo)/max(b.Rate, 1)) * time.Second)
			res.Runs[i].FireAt = &fire
			todo = append(todo, i)
		}
	}
	for len(todo) > 0 {
		page := todo[:min(len(todo), backfillPage)]
		todo = todo[len(page):]
		if err := s.backfillPage(ctx, sh, rec, h[sfVer], now, res, page); err != nil {
			return nil, err
		}
	}
	return res, nil
}

func errBackfillPaused(id string) error {
	return fmt.Errorf("schedule %s is paused: resume it first (resume with catchup replay enqueues the runs its pause missed): %w", id, ErrConflict)
}

// readBackfillRuns marks the runs whose records exist BackfillExists,
// with their status and source. With dryRun it marks the others as
// backfill.lua would decide now: BackfillKeyTaken, BackfillBeforeHistory
// or BackfillWouldCreate; else it leaves them to the script.
func (s *Store) readBackfillRuns(ctx context.Context, sh int, id string, keep int, dryRun bool, runs []BackfillRun) error {
	if len(runs) == 0 {
		return nil
	}
	q := s.queue(sh).Keys()
	recs := make([]*redis.SliceCmd, len(runs))
	marks := make([]*redis.IntCmd, len(runs))
	tasks := make([]*redis.StringCmd, len(runs))
	var card *redis.IntCmd
	var oldest *redis.ZSliceCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, r := range runs {
			recs[i] = p.HMGet(ctx, runKey(sh, r.IdempotencyKey), rfStatus, rfSource)
			if dryRun {
				marks[i] = p.Exists(ctx, manualKeyPrefix(sh)+r.IdempotencyKey)
				tasks[i] = p.HGet(ctx, q.TaskPrefix()+r.IdempotencyKey, taskState)
			}
		}
		card = p.ZCard(ctx, historyKey(sh, id))
		oldest = p.ZRangeWithScores(ctx, historyKey(sh, id), 0, 0)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("read the runs of the backfill of %s: %w", id, err)
	}
	horizon := int64(-1 << 63)
	if card.Val() >= int64(keep) && len(oldest.Val()) == 1 {
		horizon = int64(oldest.Val()[0].Score)
	}
	for i := range runs {
		r := &runs[i]
		if v := recs[i].Val(); len(v) == 2 {
			st, _ := v[0].(string)
			if st != "" {
				src, _ := v[1].(string)
				r.Outcome, r.Status, r.Source = BackfillExists, model.RunStatus(st), model.RunSource(src)
				continue
			}
		}
		if !dryRun {
			continue
		}
		state := tasks[i].Val()
		switch {
		case ms(r.RunAt) < horizon:
			r.Outcome = BackfillBeforeHistory
		case marks[i].Val() == 1 || (state != "" && state != "archived" && state != "completed"):
			r.Outcome = BackfillKeyTaken
		default:
			r.Outcome = BackfillWouldCreate
		}
	}
	return nil
}

// backfillPage runs backfill.lua on the runs of res at the indexes page
// and records its marks; a definition changed since h was read is
// errBackfillStale.
func (s *Store) backfillPage(ctx context.Context, sh int, rec *model.ScheduleRecord, ver string, now time.Time, res *BackfillResult, page []int) error {
	q := s.queue(sh).Keys()
	keys := []string{scheduleKey(sh, rec.ID), historyKey(sh, rec.ID), q.Pending(), q.Scheduled(), q.Archived(), q.Completed()}
	args := []any{rec.ID, ver, ms(now), now.UnixNano(), s.cfg.RunHistory}
	if len(keys) != backfillHeaderKeys || len(args) != backfillHeaderArgs {
		return fmt.Errorf("backfill %s: %d keys and %d arguments, not the %d and %d backfill.lua reads",
			rec.ID, len(keys), len(args), backfillHeaderKeys, backfillHeaderArgs)
	}
	for _, i := range page {
		r := res.Runs[i]
		p := TaskPayload{
			IdempotencyKey: r.IdempotencyKey, ScheduleID: rec.ID, RunAt: r.RunAt.UTC(), FireAt: r.FireAt.UTC(),
			WorkflowID: rec.WorkflowID, Version: string(rec.Version), UserID: rec.UserID, Source: model.SourceBackfill,
		}
		msg, processAt, err := s.asynqTask(sh, &p, now)
		if err != nil {
			return err
		}
		keys = append(keys, runKey(sh, r.IdempotencyKey), q.TaskPrefix()+r.IdempotencyKey, manualKeyPrefix(sh)+r.IdempotencyKey)
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
	case string:
		if len(v) != len(page) {
			return fmt.Errorf("backfill %s: %d marks for %d runs", rec.ID, len(v), len(page))
		}
		for j, i := range page {
			r := &res.Runs[i]
			switch v[j : j+1] {
			case runWritten:
				r.Outcome = BackfillCreated
				res.Created++
			case runKept:
				r.Outcome, r.FireAt = BackfillExists, nil
			case runTaken:
				r.Outcome, r.FireAt = BackfillKeyTaken, nil
			case runBeforeHistory:
				r.Outcome, r.FireAt = BackfillBeforeHistory, nil
			}
		}
		return nil
	}
	return fmt.Errorf("backfill %s: unexpected answer %v", rec.ID, out)
}
