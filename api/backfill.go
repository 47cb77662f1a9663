package api

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
)

const (
	// BackfillMaxRunsDefault bounds the planned times one backfill (or a
	// resume's replay) may hold (BACKFILL_MAX_RUNS).
	BackfillMaxRunsDefault = 1000
	// BackfillRateDefault is how many of a backfill's runs become
	// runnable per second (BACKFILL_RATE).
	BackfillRateDefault = 10
)

// BackfillResponse is the body of POST /schedules/:id/backfill.
type BackfillResponse struct {
	ScheduleID string    `json:"schedule_id"`
	From       time.Time `json:"from"`
	To         time.Time `json:"to"`
	DryRun     bool      `json:"dry_run"`
	// Created counts the runs this call created (0 on a dry run).
	Created int `json:"created"`
	// Runs are the range's planned times in order, each with what the
	// backfill did or, on a dry run, would do.
	Runs []queue.BackfillRun `json:"runs"`
}

// backfillSchedule enqueues the planned runs of a past range:
// POST /schedules/:id/backfill {from, to, overlap_policy?, dry_run?}.
func (s *server) backfillSchedule(c echo.Context) error {
	id, err := pathID(c, "id", "schedule_id")
	if err != nil {
		return err
	}
	o, err := s.readObject(c)
	if err != nil {
		return err
	}
	var errs model.FieldErrors
	errs.Add(o.unknown("from", "to", "overlap_policy", "dry_run"))
	at := keep[*time.Time](&errs)
	from, to := at(o.timestamp("from")), at(o.timestamp("to"))
	dry := keep[*bool](&errs)(o.boolean("dry_run"))
	// allow (the default), skip or queue; queue.RunBackfill refuses any
	// other.
	policy := keep[string](&errs)(o.str("overlap_policy"))
	now := s.store.Clock().Now()
	for _, f := range []struct {
		name string
		v    *time.Time
	}{{"from", from}, {"to", to}} {
		if f.v == nil && !errs.Has(f.name) {
			errs.Add(fieldError(f.name, "is required (RFC 3339)"))
		}
	}
	if to != nil && to.After(now) {
		errs.Add(fieldError("to", "is in the future (now is %s): a backfill enqueues past runs only; the scheduler plans the rest",
			now.UTC().Format(time.RFC3339)))
	}
	if from != nil && to != nil && !from.Before(*to) {
		errs.Add(fieldError("from", "must be before to"))
	}
	if err := errs.Err(); err != nil {
		return err
	}
	b := queue.Backfill{ScheduleID: id, From: *from, To: *to, DryRun: dry != nil && *dry,
		MaxRuns: s.cfg.BackfillMaxRuns, Rate: s.cfg.BackfillRate, OverlapPolicy: model.OverlapPolicy(policy), RunTimeout: s.cfg.RunTimeout}
	ctx := c.Request().Context()
	res, err := s.store.RunBackfill(ctx, b)
	if err != nil {
		return err
	}
	if res.Created > 0 {
		s.log.InfoContext(ctx, "schedule backfilled", slog.String("schedule_id", id),
			slog.Time("from", b.From), slog.Time("to", b.To), slog.Int("created", res.Created), slog.Int("planned", len(res.Runs)))
	}
	return c.JSON(http.StatusOK, BackfillResponse{ScheduleID: id, From: b.From.UTC(), To: b.To.UTC(), DryRun: b.DryRun,
		Created: res.Created, Runs: append([]queue.BackfillRun{}, res.Runs...)})
}

// Resume choices of POST /schedules/pause's catchup.
const (
	// CatchupSkip resumes at the next fire time after now: the paused
	// time is not caught up.
	CatchupSkip = "skip"
	// CatchupReplay enqueues the runs planned while paused, as a backfill
	// of paused_at to now does, then resumes.
	CatchupReplay = "replay"
)

// PauseResponse is the body of POST /schedules/pause: the schedule, and
// after a resume with catchup replay how many runs it enqueued.
type PauseResponse struct {
	ScheduleView
	Replayed *int `json:"replayed,omitempty"`
}

// pauseChange reads POST /schedules/pause's note (a pause's) and catchup
// (a resume's: skip or replay).
func (s *server) pauseChange(o object, paused *bool) (queue.PauseChange, error) {
	var errs model.FieldErrors
	note := keep[string](&errs)(o.str("note"))
	errs.Add(model.ValidateText("note", note))
	catchup := keep[string](&errs)(o.str("catchup"))
	c := queue.PauseChange{Note: note}
	if paused == nil {
		return c, errs.Err()
	}
	c.Paused = *paused
	switch {
	case c.Paused && catchup != "":
		errs.Add(fieldError("catchup", "applies to a resume (paused false) only"))
	case !c.Paused && note != "":
		errs.Add(fieldError("note", "applies to a pause (paused true) only"))
	}
	switch catchup {
	case "", CatchupSkip:
	case CatchupReplay:
		if !c.Paused {
			c.Replay = &queue.Backfill{MaxRuns: s.cfg.BackfillMaxRuns, Rate: s.cfg.BackfillRate}
		}
	default:
		errs.Add(fieldError("catchup", "must be skip or replay, got %q", catchup))
	}
	return c, errs.Err()
}
