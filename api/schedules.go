package api

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
)

const (
	// ListLimitDefault is the page size of GET /schedules.
	ListLimitDefault = 50
	// ListLimitMax bounds GET /schedules?limit=.
	ListLimitMax = 500
	// RecentRunsDefault is how many runs GET /schedules/:id shows.
	RecentRunsDefault = 10
	// RecentRunsMax bounds GET /schedules/:id?runs=.
	RecentRunsMax = 100
	// RunsLimitDefault is the page size of GET /schedules/:id/runs.
	RunsLimitDefault = 20
	// RunsLimitMax bounds GET /schedules/:id/runs?limit=.
	RunsLimitMax = 1000
	// SchedulePreviewCount is how many fire times GET /schedules/:id previews.
	SchedulePreviewCount = 5
)

// Schedule states.
const (
	StateActive    = "active"
	StatePaused    = "paused"
	StateCompleted = "completed"
)

// ScheduleView is a schedule as the API shows it: the stored record plus
// its state. NextRunAt is nil unless the state is active. DSTPolicy is
// the record's policy with its defaults spelt out, on a cron expression
// of the wall clock only (nil on @every, every and once schedules).
type ScheduleView struct {
	*model.ScheduleRecord
	DSTPolicy *model.DSTPolicy `json:"dst_policy,omitempty"`
	State     string           `json:"state"`
}

// ScheduleDetail is the body of GET /schedules/:id.
type ScheduleDetail struct {
	ScheduleView
	// Preview is the next fire times after now; empty unless active.
	Preview []time.Time `json:"preview"`
	// Explain is the schedule's timing in words; empty when the stored
	// record does not compile.
	Explain string `json:"explain"`
	// PreviewTimes are Preview again, each with its wall clock in the
	// schedule's zone and a DST note, as /v1/preview's "times".
	PreviewTimes []PreviewTime `json:"preview_times"`
	// PreviewSkipped are the local times clocks skipped among Preview,
	// as /v1/preview's "skipped".
	PreviewSkipped []PreviewSkipped `json:"preview_skipped"`
	// RecentRuns are the newest runs, newest first.
	// LastRun is the newest run whose time has come; nil before the first.
	LastRun *LastRun `json:"last_run"`
	// RecentRuns are the newest runs whose time has come, newest first.
	RecentRuns []*model.Run `json:"recent_runs"`
}

// LastRun is what GET /schedules/:id says of the newest run whose time has
// come, beside next_run_at: when it was due, its status and its error.
type LastRun struct {
	IdempotencyKey string          `json:"idempotency_key"`
	RunAt          time.Time       `json:"run_at"`
	Status         model.RunStatus `json:"status"`
	Error          string          `json:"error"`
	// Reason says why a SKIPPED or FAILED run did not start or failed.
	Reason model.RunReason `json:"reason,omitempty"`
	// Attempts and LastError tell of failed executor calls while the
	// run is retried (see model.Run).
	Attempts  int    `json:"attempts"`
	LastError string `json:"last_error,omitempty"`
}

// UpsertResponse is the body of POST /schedules/upsert.
type UpsertResponse struct {
	ScheduleID string     `json:"schedule_id"`
	NextRunAt  *time.Time `json:"next_run_at"`
	Created    bool       `json:"created"`
	// Changed is false when the stored schedule already had this body.
	Changed bool   `json:"changed"`
	State   string `json:"state"`
	// Warnings say what will go wrong with the accepted schedule, such as
	// a workflow version not registered yet.
	Warnings []string `json:"warnings,omitempty"`
}

// ScheduleList is the body of GET /schedules.
type ScheduleList struct {
	Schedules []ScheduleView `json:"schedules"`
	// NextCursor fetches the next page; "" on the last.
	NextCursor string `json:"next_cursor"`
}

// RunList is the body of GET /schedules/:id/runs.
type RunList struct {
	Runs []*model.Run `json:"runs"`
}

// view shows rec with its state, hiding the stored next fire time of a
// paused schedule (resuming recomputes it from now).
func view(rec *model.ScheduleRecord) ScheduleView {
	r := *rec
	var state string
	state, r.NextRunAt = shownState(rec)
	return ScheduleView{ScheduleRecord: &r, DSTPolicy: shownDSTPolicy(&r), State: state}
}

// shownState is a view's state and next fire time (see view), without
// the copy of the record a whole view makes: an upsert answers with no
// more.
func shownState(rec *model.ScheduleRecord) (state string, next *time.Time) {
	switch {
	case rec.Paused:
		return StatePaused, nil
	case rec.NextRunAt == nil:
		return StateCompleted, nil
	}
	return StateActive, rec.NextRunAt
}

// newScheduleID returns "sch_" and 32 random hex digits.
func newScheduleID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return "sch_" + hex.EncodeToString(b[:])
}

// upsertFields are the fields POST /schedules/upsert takes.
var upsertFields = []string{"schedule_id", "workflow_id", "version", "user_id", "kind", "cron_expr", "timezone",
	"dialect", "delay_seconds", "fire_at", "every_seconds", "start_at", "end_at", "jitter_ms", "overlap_policy",
	"catchup_policy", "dst_policy", "paused", "pause_after_failures"}

// scheduleFromBody builds and validates the record an upsert asks for,
// applying the configured defaults, and the paused state it sets (nil:
// keep the stored one). Its error names every field at fault, unless
// reading the stored schedule failed (a once schedule's, see onceTime).
func (s *server) scheduleFromBody(ctx context.Context, o object) (*model.ScheduleRecord, *bool, error) {
	var errs model.FieldErrors
	errs.Add(o.unknown(upsertFields...))
	str := keep[string](&errs)
	at := keep[*time.Time](&errs)
	rec := &model.ScheduleRecord{Kind: model.KindCron, Target: model.TargetWorkflow}
	rec.ID = str(optionalID(o, "schedule_id"))
	idGiven := rec.ID != ""
	if rec.ID == "" && !errs.Has("schedule_id") {
		rec.ID = newScheduleID()
	}
	rec.WorkflowID, rec.Version, rec.UserID = workflowTarget(o, &errs)
	kind, err := parseKind(o)
	errs.Add(err)
	if kind != "" {
		rec.Kind = kind
	}
	if err == nil {
		errs.Add(foreignTimingFields(o, kind))
	}
	if rec.Kind == model.KindCron {
		rec.CronExpr = str(o.str("cron_expr"))
		if strings.TrimSpace(rec.CronExpr) == "" && !errs.Has("cron_expr") {
			errs.Add(fieldError("cron_expr", "is required"))
		}
		rec.Timezone = cmp.Or(str(o.str("timezone")), "UTC")
		rec.Dialect = keep[model.Dialect](&errs)(parseDialect(str(o.str("dialect"))))
	} else if err := s.kindTiming(ctx, o, rec, idGiven, &errs); err != nil {
		return nil, nil, err
	}
	if rec.Kind != model.KindOnce {
		rec.StartAt = at(o.timestamp("start_at"))
		rec.EndAt = at(o.timestamp("end_at"))
	}
	rec.JitterMs = s.cfg.DefaultJitterMs
	if j := keep[*int64](&errs)(o.integer("jitter_ms")); j != nil {
		rec.JitterMs = *j
	}
	rec.OverlapPolicy = cmp.Or(model.OverlapPolicy(str(o.str("overlap_policy"))), s.cfg.DefaultOverlapPolicy)
	rec.CatchupPolicy = cmp.Or(model.CatchupPolicy(str(o.str("catchup_policy"))), s.kindDefaultCatchup(rec.Kind))
	rec.DSTPolicy = keep[model.DSTPolicy](&errs)(o.dstPolicy())
	paused := keep[*bool](&errs)(o.boolean("paused"))
	if n := keep[*int64](&errs)(o.integer("pause_after_failures")); n != nil {
		if *n < 0 || *n > model.MaxPauseAfterFailures {
			errs.Add(fieldError("pause_after_failures", "must be between 0 (never) and %d", model.MaxPauseAfterFailures))
		} else {
			rec.PauseAfterFailures = int(*n)
		}
	}
	if verr := rec.Validate(); rec.Kind == model.KindOnce && rec.FireAt == nil {
		errs.Add(withoutField(verr, "fire_at"))
	} else {
		errs.Add(verr)
	}
	if err := errs.Err(); err != nil {
		return nil, nil, err
	}
	return rec, paused, nil
}

// upsertSchedule creates or updates a schedule: POST /schedules/upsert.
func (s *server) upsertSchedule(c echo.Context) error {
	o, err := s.readObject(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	rec, paused, err := s.scheduleFromBody(ctx, o)
	if err != nil {
		return err
	}
	res, err := s.store.UpsertSchedule(ctx, rec)
	if err != nil {
		return err
	}
	// An upsert without "paused" keeps the stored state, unlike the
	// specification's pseudo-code that resets it: an operator's pause
	// must survive the next deploy of the same schedule.
	if paused != nil && *paused != res.Schedule.Paused {
		if res.Schedule, err = s.store.SetPaused(ctx, rec.ID, *paused); err != nil {
			return err
		}
		res.Changed = true
	}
	state, next := shownState(res.Schedule)
	if res.Changed {
		// LogAttrs: InfoContext's ...any boxed each attribute, three
		// allocations an upsert even with Info off.
		s.log.LogAttrs(ctx, slog.LevelInfo, "schedule upserted",
			slog.String("schedule_id", res.Schedule.ID), slog.Bool("created", res.Created), slog.String("state", state))
	}
	return writeUpsertResponse(c, &UpsertResponse{
		ScheduleID: res.Schedule.ID, NextRunAt: next, Created: res.Created, Changed: res.Changed, State: state,
		Warnings: upsertWarnings(rec, res),
	})
}

// upsertWarnings says what will go wrong with an accepted schedule: a
// workflow version not registered yet is accepted, since deploy order
// varies, but its runs fail until it is. The store looked the version up
// with the upsert, in the same round trip.
func upsertWarnings(rec *model.ScheduleRecord, res *queue.UpsertResult) []string {
	if res.WorkflowMissing {
		// Joined, not fmt.Sprintf'd: the scenario of scripts/bench upserts
		// schedules of a workflow never registered, each with this warning.
		id, v := rec.WorkflowID, string(rec.Version)
		return []string{"workflow " + id + " version " + v + " is not registered: its runs will fail until it is (PUT /workflows/" +
			id + "/versions/" + v + ")"}
	}
	return nil
}

// pauseSchedule pauses or resumes a schedule: POST /schedules/pause.
func (s *server) pauseSchedule(c echo.Context) error {
	o, err := s.readObject(c)
	if err != nil {
		return err
	}
	var errs model.FieldErrors
	errs.Add(o.unknown("schedule_id", "paused", "note", "catchup"))
	id := keep[string](&errs)(requireID(o, "schedule_id"))
	paused := keep[*bool](&errs)(o.boolean("paused"))
	if paused == nil && !errs.Has("paused") {
		errs.Add(fieldError("paused", "is required"))
	}
	change, err := s.pauseChange(o, paused)
	errs.Add(err)
	if err := errs.Err(); err != nil {
		return err
	}
	ctx := c.Request().Context()
	rec, replayed, err := s.store.ChangePause(ctx, id, change)
	if err != nil {
		return err
	}
	res := PauseResponse{ScheduleView: view(rec)}
	if replayed != nil {
		res.Replayed = &replayed.Created
		if replayed.Created > 0 {
			s.log.InfoContext(ctx, "schedule resumed with its paused time replayed",
				slog.String("schedule_id", id), slog.Int("created", replayed.Created))
		}
	}
	return c.JSON(http.StatusOK, res)
}

// deleteSchedule removes a schedule: DELETE /schedules/:id.
func (s *server) deleteSchedule(c echo.Context) error {
	id, err := pathID(c, "id", "schedule_id")
	if err != nil {
		return err
	}
	if err := s.store.DeleteSchedule(c.Request().Context(), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// getSchedule shows one schedule with its preview and recent runs:
// GET /schedules/:id?runs=N.
func (s *server) getSchedule(c echo.Context) error {
	id, err := pathID(c, "id", "schedule_id")
	if err != nil {
		return err
	}
	n, err := queryInt(c, "runs", RecentRunsDefault, 0, RecentRunsMax)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	rec, err := s.store.GetSchedule(ctx, id)
	if err != nil {
		return err
	}
	d := ScheduleDetail{ScheduleView: view(rec), Preview: []time.Time{}, RecentRuns: []*model.Run{},
		PreviewTimes: []PreviewTime{}, PreviewSkipped: []PreviewSkipped{}}
	if sched, err := rec.Compile(); err != nil {
		if d.State == StateActive {
			s.log.WarnContext(ctx, "stored schedule does not compile", slog.String("schedule_id", id), slog.String("error", err.Error()))
		}
	} else {
		d.Explain = model.Explain(sched)
		if d.State == StateActive {
			now := s.store.Clock().Now()
			loc, err := model.LoadZone(rec.Timezone)
			if err != nil {
				loc = time.UTC // an every or once schedule's zone only labels local times
			}
			p := model.PreviewDST(sched, loc, now, SchedulePreviewCount)
			for _, t := range p.Times {
				d.Preview = append(d.Preview, t.At)
			}
			d.PreviewTimes, d.PreviewSkipped = previewNotes(p)
		}
	}
	runs, err := s.store.QueryRuns(ctx, id, queue.RunQuery{Now: s.store.Clock().Now(), Limit: max(n, 1)})
	if err != nil {
		return err
	}
	if len(runs) > 0 {
		r := runs[0]
		d.LastRun = &LastRun{IdempotencyKey: r.IdempotencyKey, RunAt: r.RunAt, Status: r.Status, Error: r.Error, Reason: r.Reason,
			Attempts: r.Attempts, LastError: r.LastError}
	}
	if n > 0 {
		d.RecentRuns = runs
	}
	return c.JSON(http.StatusOK, d)
}

// listSchedules pages through all schedules: GET /schedules?cursor=&limit=.
func (s *server) listSchedules(c echo.Context) error {
	limit, err := queryInt(c, "limit", ListLimitDefault, 1, ListLimitMax)
	if err != nil {
		return err
	}
	recs, next, err := s.store.ListSchedules(c.Request().Context(), c.QueryParam("cursor"), limit)
	if errors.Is(err, queue.ErrInvalidCursor) {
		return fieldError("cursor", "%v", err)
	}
	if err != nil {
		return err
	}
	out := ScheduleList{Schedules: make([]ScheduleView, len(recs)), NextCursor: next}
	for i, r := range recs {
		out.Schedules[i] = view(r)
	}
	return c.JSON(http.StatusOK, out)
}

// listRuns lists a schedule's runs: GET /schedules/:id/runs?limit=&status=&upcoming=.
// By default the runs whose time has come, newest first: runs are queued
// ahead of their time, and a list led by them would hide the ones that
// fired. upcoming=true lists those queued ahead, soonest first.
func (s *server) listRuns(c echo.Context) error {
	id, err := pathID(c, "id", "schedule_id")
	if err != nil {
		return err
	}
	q, err := runQuery(c)
	if err != nil {
		return err
	}
	q.Now = s.store.Clock().Now()
	ctx := c.Request().Context()
	if _, err := s.store.GetSchedule(ctx, id); err != nil {
		return err
	}
	runs, err := s.store.QueryRuns(ctx, id, q)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, RunList{Runs: runs})
}

// runQuery reads GET /schedules/:id/runs' query parameters, reporting
// every invalid one at once.
func runQuery(c echo.Context) (queue.RunQuery, error) {
	var errs model.FieldErrors
	q := queue.RunQuery{Limit: keep[int](&errs)(queryInt(c, "limit", RunsLimitDefault, 1, RunsLimitMax))}
	if st := c.QueryParam("status"); st != "" {
		switch rs := model.RunStatus(strings.ToUpper(st)); rs {
		case model.RunEnqueued, model.RunStarted, model.RunSuccess, model.RunFailed, model.RunSkipped:
			q.Status = rs
		default:
			errs.Add(fieldError("status", "must be ENQUEUED, STARTED, SUCCESS, FAILED or SKIPPED, got %q", st))
		}
	}
	if v := c.QueryParam("reason"); v != "" {
		switch rsn, err := model.ParseRunReason(v); {
		case err != nil:
			errs.Add(fieldError("reason", "%s", err.Error()))
		case q.Status != "" && rsn.Status() != q.Status:
			errs.Add(fieldError("reason", "%s is the reason of a %s run, never of a %s one", rsn, rsn.Status(), q.Status))
		default:
			q.Reason = rsn
		}
	}
	switch u := c.QueryParam("upcoming"); u {
	case "", "false":
	case "true":
		q.Upcoming = true
	default:
		errs.Add(fieldError("upcoming", "must be true or false, got %q", u))
	}
	return q, errs.Err()
}
