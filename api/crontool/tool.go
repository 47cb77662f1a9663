package crontool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/chronos-sched/chronos/api/auth"
	"github.com/chronos-sched/chronos/model"
)

// Store is what the tool needs of chronos's alarms. Every method is
// scoped to one owner (a DID): another owner's alarm does not exist for
// it. An error that is the caller's to fix (a label too long, too many
// active alarms) is an *Error or a *model.FieldError, which the tool
// answers as a result the model reads; any other error is the server's.
type Store interface {
	// CreateAlarm creates rec, an alarm of rec.Owner; when the owner
	// already has an alarm with rec's idempotency key, it creates
	// nothing and returns that alarm with deduped set.
	CreateAlarm(ctx context.Context, rec *model.ScheduleRecord) (alarm *model.ScheduleRecord, deduped bool, err error)
	// ListAlarms lists the owner's alarms in status, newest first, as
	// many as it keeps in one list (the API's store: 500).
	ListAlarms(ctx context.Context, owner string, status model.AlarmStatus) ([]*model.ScheduleRecord, error)
	// CancelAlarm cancels the owner's alarm id.
	CancelAlarm(ctx context.Context, owner, id string) error
	// PauseAlarm pauses (or resumes) the owner's active alarm id.
	PauseAlarm(ctx context.Context, owner, id string, paused bool) error
}

// DefaultTZ is the zone a cron_expr without tz, and an `at` without an
// offset or tz, is read in when Config names none.
const DefaultTZ = "UTC"

// Config configures the tool; nil means all defaults.
type Config struct {
	// DefaultTZ is the IANA zone of a cron_expr given without tz and of a
	// local `at` given without tz (CRON_TOOL_TZ). Default DefaultTZ (UTC).
	DefaultTZ string
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Tool is the cron tool: add, list and remove jobs kept as alarms.
type Tool struct {
	store Store
	zone  *time.Location
	now   func() time.Time
}

// New returns the tool on store.
func New(store Store, cfg *Config) (*Tool, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	c.DefaultTZ = cmp.Or(c.DefaultTZ, DefaultTZ)
	if c.Now == nil {
		c.Now = time.Now
	}
	loc, err := model.LoadZone(c.DefaultTZ)
	if err != nil {
		return nil, fmt.Errorf("crontool: Config.DefaultTZ: %w", err)
	}
	return &Tool{store: store, zone: loc, now: c.Now}, nil
}

// Zone is the tool's default zone.
func (t *Tool) Zone() *time.Location { return t.zone }

// Result is the tool's answer: Text for the model, and the structured
// result for programs.
type Result struct {
	// Text is what the model reads.
	Text string `json:"text"`
	// IsError marks a call the model should correct or reconsider.
	IsError bool `json:"is_error"`
	// Job is the job added.
	Job *JobView `json:"job,omitempty"`
	// Jobs are the active jobs listed, soonest first.
	Jobs []*JobView `json:"jobs,omitzero"`
	// JobID is the job removed.
	JobID string `json:"job_id,omitempty"`
}

// JobView is a job in the tool's structured result.
type JobView struct {
	ID           string     `json:"id"`
	Name         string     `json:"name"`
	Kind         Kind       `json:"kind"`
	Enabled      bool       `json:"enabled"`
	EverySeconds int64      `json:"every_seconds,omitempty"`
	CronExpr     string     `json:"cron_expr,omitempty"`
	TZ           string     `json:"tz,omitempty"`
	At           *time.Time `json:"at,omitempty"`
	Message      string     `json:"message"`
	Deliver      bool       `json:"deliver"`
	Channel      *string    `json:"channel"`
	To           *string    `json:"to"`
	NextRunAt    *time.Time `json:"next_run_at"`
	// AlarmID is the alarm that keeps the job (GET /v1/alarms/{id}).
	AlarmID string `json:"alarm_id"`
}

// View is the job's structured form.
func (j *Job) View() *JobView {
	v := &JobView{ID: j.ID, Name: j.Name, Kind: j.Kind, Enabled: j.Enabled, EverySeconds: j.EverySeconds,
		CronExpr: j.CronExpr, TZ: j.TZ, Message: j.Message, Deliver: j.Deliver, Channel: j.Channel, To: j.To,
		NextRunAt: j.NextRunAt, AlarmID: j.AlarmID}
	if j.Kind == KindAt {
		at := j.At
		v.At = &at
	}
	return v
}

// Call runs the tool with a model's arguments (a JSON object) for owner.
// Mistakes a model can act on are a Result with IsError; the error is
// for failures of the server (Redis unavailable and the like).
func (t *Tool) Call(ctx context.Context, owner auth.DID, raw []byte) (*Result, error) {
	a, terr := ParseArgs(raw)
	if terr != nil {
		return errResult(terr), nil
	}
	res, err := t.call(ctx, owner, a)
	if err != nil {
		if te := userError(err); te != nil {
			return errResult(te), nil
		}
		return nil, err
	}
	return res, nil
}

func (t *Tool) call(ctx context.Context, owner auth.DID, a Args) (*Result, error) {
	switch a.Action {
	case ActionAdd:
		return t.add(ctx, owner, a)
	case ActionList:
		return t.list(ctx, owner)
	case ActionRemove:
		return t.remove(ctx, owner, a.JobID)
	case "":
		return errResult(errorf("Error: action is required (add, list or remove)")), nil
	}
	return errResult(&Error{Text: textUnknownAction(a.Action)}), nil
}

func errResult(e *Error) *Result { return &Result{Text: e.Text, IsError: true} }

// userError is err as an answer to the model, nil when err is the
// server's.
func userError(err error) *Error {
	var (
		te  *Error
		fe  *model.FieldError
		all model.FieldErrors
	)
	switch {
	case errors.As(err, &te):
		return te
	case errors.As(err, &all), errors.As(err, &fe):
		return &Error{Text: "Error: " + err.Error()}
	}
	return nil
}

// JobFromArgs validates an add's arguments into a new job (without its
// id). Its checks come in nanobot's order, so a call with several
// mistakes gets nanobot's first answer.
func (t *Tool) JobFromArgs(a Args) (*Job, *Error) {
	if a.Message == "" {
		return nil, &Error{Text: errMessageRequired}
	}
	if !validText(a.Message) || !validText(a.Name) {
		return nil, errorf("Error: message and name must be valid UTF-8")
	}
	set := 0
	for _, b := range []bool{a.EverySeconds != 0, a.CronExpr != "", a.At != ""} {
		if b {
			set++
		}
	}
	if a.TZ != "" && a.CronExpr == "" && a.At == "" {
		return nil, &Error{Text: errTZOnlyCron}
	}
	loc := t.zone
	if a.TZ != "" {
		l, err := model.LoadZone(a.TZ)
		if err != nil {
			return nil, errorf("Error: unknown timezone '%s'", a.TZ)
		}
		loc = l
	}
	switch {
	case set == 0:
		return nil, &Error{Text: errScheduleNeeded}
	case set > 1:
		return nil, &Error{Text: errScheduleOne}
	}
	now := t.now()
	j := &Job{
		Name: a.Name, Enabled: true, Message: a.Message, PayloadKind: PayloadKindAgentTurn, Deliver: true,
		CreatedAt: now.Truncate(time.Millisecond).UTC(),
	}
	j.UpdatedAt = j.CreatedAt
	if j.Name == "" {
		j.Name = defaultName(a.Message)
	}
	if a.Deliver != nil {
		j.Deliver = *a.Deliver
	}
	if a.Channel != "" {
		j.Channel = &a.Channel
	}
	if a.To != "" {
		j.To = &a.To
	}
	switch {
	case a.EverySeconds != 0:
		if a.EverySeconds < 0 || a.EverySeconds > model.MaxEverySeconds {
			return nil, errorf("Error: every_seconds must be between 1 and %d, got %d", model.MaxEverySeconds, a.EverySeconds)
		}
		j.Kind, j.EverySeconds = KindEvery, a.EverySeconds
	case a.CronExpr != "":
		tz := zoneName(loc)
		if err := validCron(a.CronExpr, tz, now); err != nil {
			return nil, errorf("Error: invalid cron expression '%s': %v", a.CronExpr, err)
		}
		j.Kind, j.CronExpr, j.TZ = KindCron, a.CronExpr, tz
	default:
		at, ok := ParseAt(a.At, loc)
		if !ok {
			return nil, errorf("Error: invalid ISO datetime format '%s'. Expected format: YYYY-MM-DDTHH:MM:SS (or RFC 3339 with an offset)", a.At)
		}
		if !at.After(now) {
			return nil, errorf("Error: at '%s' (%s) is in the past; now is %s", a.At, formatTime(at, loc), formatTime(now, loc))
		}
		j.Kind, j.At, j.DeleteAfterRun = KindAt, at.UTC(), true
	}
	return j, nil
}

// addTries bounds the draws of a job id that the owner already uses.
const addTries = 5

func (t *Tool) add(ctx context.Context, owner auth.DID, a Args) (*Result, error) {
	j, terr := t.JobFromArgs(a)
	if terr != nil {
		return errResult(terr), nil
	}
	for range addTries {
		j.ID = NewJobID()
		rec, err := ToAlarm(j, owner)
		if err != nil {
			return nil, err
		}
		got, deduped, err := t.store.CreateAlarm(ctx, rec)
		if err != nil {
			return nil, err
		}
		if deduped {
			continue // the owner has a job of this id already: draw again
		}
		created, ok := FromAlarm(got)
		if !ok {
			return nil, fmt.Errorf("alarm %s of job %s does not read back as a job", got.ID, j.ID)
		}
		return &Result{Text: textCreated(created), Job: created.View()}, nil
	}
	return nil, fmt.Errorf("no free job id for %s after %d draws", owner.Raw, addTries)
}

// Jobs lists the owner's jobs whose alarms are in one of statuses, in
// the order nanobot appends them: as they were added or imported. Each
// status is listed apart, so the alarms an owner has fired or cancelled
// over time (which chronos keeps) never crowd active jobs out of the
// store's bounded list.
func (t *Tool) Jobs(ctx context.Context, owner auth.DID, statuses ...model.AlarmStatus) ([]*Job, error) {
	var jobs []*Job
	for _, st := range statuses {
		recs, err := t.store.ListAlarms(ctx, owner.Raw, st)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			if j, ok := FromAlarm(r); ok {
				jobs = append(jobs, j)
			}
		}
	}
	sortForExport(jobs)
	return jobs, nil
}

func (t *Tool) list(ctx context.Context, owner auth.DID) (*Result, error) {
	all, err := t.Jobs(ctx, owner, model.AlarmActive)
	if err != nil {
		return nil, err
	}
	// Only enabled jobs, soonest first, as nanobot's list_jobs.
	var jobs []*Job
	for _, j := range all {
		if j.Enabled {
			jobs = append(jobs, j)
		}
	}
	slices.SortStableFunc(jobs, func(a, b *Job) int {
		switch {
		case a.NextRunAt == nil && b.NextRunAt == nil:
			return 0
		case a.NextRunAt == nil:
			return 1
		case b.NextRunAt == nil:
			return -1
		}
		return a.NextRunAt.Compare(*b.NextRunAt)
	})
	views := make([]*JobView, len(jobs))
	for i, j := range jobs {
		views[i] = j.View()
	}
	return &Result{Text: listText(jobs, t.zone), Jobs: views}, nil
}

func (t *Tool) remove(ctx context.Context, owner auth.DID, id string) (*Result, error) {
	if id == "" {
		return errResult(&Error{Text: errJobIDRequired}), nil
	}
	jobs, err := t.Jobs(ctx, owner, model.AlarmActive)
	if err != nil {
		return nil, err
	}
	for _, j := range jobs {
		if j.ID != id || j.Status != model.AlarmActive {
			continue
		}
		if err := t.store.CancelAlarm(ctx, owner.Raw, j.AlarmID); err != nil {
			return nil, err
		}
		return &Result{Text: textRemoved(id), JobID: id}, nil
	}
	return errResult(&Error{Text: textNotFound(id)}), nil
}
