package crontool

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/chronos-sched/chronos/api/auth"
	"github.com/chronos-sched/chronos/api/crontool/nanobot"
	"github.com/chronos-sched/chronos/model"
)

// Outcomes of one job of an import.
const (
	// OutcomeImported: the job is an alarm now (paused when disabled).
	OutcomeImported = "imported"
	// OutcomeExisting: the owner has a job of this id already (an
	// earlier import of the same file): nothing was created.
	OutcomeExisting = "already_imported"
	// OutcomeSkipped: the job could not be imported; Reason says why.
	OutcomeSkipped = "skipped"
)

// ImportReport is what an import did, job by job in the file's order.
type ImportReport struct {
	Imported int         `json:"imported"`
	Existing int         `json:"already_imported"`
	Skipped  int         `json:"skipped"`
	Jobs     []ImportJob `json:"jobs"`
}

// ImportJob is what an import did with one job of the file.
type ImportJob struct {
	// Index is the job's position in the file, from 0.
	Index   int    `json:"index"`
	ID      string `json:"id"`
	Name    string `json:"name"`
	Outcome string `json:"outcome"`
	// Reason says why a job was skipped.
	Reason string `json:"reason,omitempty"`
	// Note says what changed on the way in (a cron job without tz is read
	// in the default zone).
	Note    string `json:"note,omitempty"`
	AlarmID string `json:"alarm_id,omitempty"`
	Enabled bool   `json:"enabled"`
}

// Import makes an alarm of owner of each job of a nanobot jobs.json,
// keeping disabled jobs disabled (paused). It is idempotent: a job's id is
// its alarm's idempotency key, so importing a file again creates nothing
// twice. A job that cannot be imported is skipped and reported, and the
// rest of the file is imported; a file that is not a jobs.json is a
// *model.FieldError.
func (t *Tool) Import(ctx context.Context, owner auth.DID, data []byte) (*ImportReport, error) {
	f, err := nanobot.Decode(data)
	if err != nil {
		return nil, &model.FieldError{Field: "jobs.json", Message: err.Error()}
	}
	rep := &ImportReport{Jobs: []ImportJob{}}
	invalid := make(map[int]nanobot.InvalidJob, len(f.Invalid))
	for _, iv := range f.Invalid {
		invalid[iv.Index] = iv
	}
	seen := map[string]bool{}
	now := t.now()
	next := 0 // f.Jobs keeps the readable jobs in the file's order
	for i := range len(f.Jobs) + len(f.Invalid) {
		var r ImportJob
		if iv, ok := invalid[i]; ok {
			r = ImportJob{Index: i, ID: iv.ID, Outcome: OutcomeSkipped, Reason: "cannot be read: " + iv.Err.Error()}
		} else {
			nj := &f.Jobs[next]
			next++
			r = ImportJob{Index: i, ID: nj.ID, Name: nj.Name}
			if seen[nj.ID] {
				r.Outcome, r.Reason = OutcomeSkipped, fmt.Sprintf("id %s appears earlier in the file", nj.ID)
			} else {
				seen[nj.ID] = true
				if err := t.importJob(ctx, owner, nj, now, &r); err != nil {
					return nil, err
				}
			}
		}
		switch r.Outcome {
		case OutcomeImported:
			rep.Imported++
		case OutcomeExisting:
			rep.Existing++
		default:
			rep.Skipped++
		}
		rep.Jobs = append(rep.Jobs, r)
	}
	return rep, nil
}

// importJob imports one job, recording the outcome in r; the error is
// the server's.
func (t *Tool) importJob(ctx context.Context, owner auth.DID, nj *nanobot.Job, now time.Time, r *ImportJob) error {
	j, reason, note := t.fromNanobot(nj, now)
	r.Note = note
	if reason != "" {
		r.Outcome, r.Reason = OutcomeSkipped, reason
		return nil
	}
	j.fileIndex = r.Index
	rec, err := ToAlarm(j, owner)
	if err != nil {
		return err
	}
	got, deduped, err := t.store.CreateAlarm(ctx, rec)
	if err != nil {
		if te := userError(err); te != nil {
			r.Outcome, r.Reason = OutcomeSkipped, strings.TrimPrefix(te.Text, "Error: ")
			return nil
		}
		return err
	}
	r.AlarmID = got.ID
	if deduped {
		r.Outcome, r.Enabled = OutcomeExisting, got.Alarm.Status == model.AlarmActive && !got.Paused
		return nil
	}
	r.Outcome, r.Enabled = OutcomeImported, true
	if !j.Enabled {
		if err := t.store.PauseAlarm(ctx, owner.Raw, got.ID, true); err != nil {
			return err
		}
		r.Enabled = false
	}
	return nil
}

// fromNanobot converts a job of jobs.json; reason says why it cannot be
// imported, note what changed on the way.
func (t *Tool) fromNanobot(nj *nanobot.Job, now time.Time) (j *Job, reason, note string) {
	if err := model.ValidateID("id", nj.ID); err != nil {
		return nil, err.Error(), ""
	}
	j = &Job{
		ID: nj.ID, Name: nj.Name, Enabled: nj.Enabled, Message: nj.Payload.Message, PayloadKind: nj.Payload.Kind,
		Deliver: nj.Payload.Deliver, Channel: nj.Payload.Channel, To: nj.Payload.To, DeleteAfterRun: nj.DeleteAfterRun,
		CreatedAt: time.UnixMilli(nj.CreatedAtMs).UTC(), UpdatedAt: time.UnixMilli(nj.UpdatedAtMs).UTC(),
		LastStatus: nj.State.LastStatus, LastError: nj.State.LastError,
	}
	if nj.State.LastRunAtMs != nil {
		t := time.UnixMilli(*nj.State.LastRunAtMs).UTC()
		j.LastRunAt = &t
	}
	s := nj.Schedule
	switch s.Kind {
	case "every":
		switch {
		case s.EveryMs == nil || *s.EveryMs <= 0:
			return nil, "schedule.everyMs is missing or not positive", ""
		case *s.EveryMs%1000 != 0:
			return nil, fmt.Sprintf("schedule.everyMs %d is not a whole number of seconds (chronos counts intervals in seconds)", *s.EveryMs), ""
		case *s.EveryMs/1000 > model.MaxEverySeconds:
			return nil, fmt.Sprintf("schedule.everyMs %d is longer than %d seconds", *s.EveryMs, model.MaxEverySeconds), ""
		}
		j.Kind, j.EverySeconds = KindEvery, *s.EveryMs/1000
	case "cron":
		if s.Expr == nil || *s.Expr == "" {
			return nil, "schedule.expr is missing", ""
		}
		tz := zoneName(t.zone)
		if s.TZ != nil && *s.TZ != "" {
			if _, err := model.LoadZone(*s.TZ); err != nil {
				return nil, fmt.Sprintf("schedule.tz %q is not a known IANA time zone", *s.TZ), ""
			}
			tz = *s.TZ
		} else {
			note = fmt.Sprintf("no schedule.tz: read in %s, chronos's default zone (nanobot read it in its machine's zone)", tz)
		}
		if err := validCron(*s.Expr, tz, now); err != nil {
			return nil, fmt.Sprintf("schedule.expr %q: %v", *s.Expr, err), note
		}
		j.Kind, j.CronExpr, j.TZ = KindCron, *s.Expr, tz
	case "at":
		if s.AtMs == nil {
			return nil, "schedule.atMs is missing", ""
		}
		at := time.UnixMilli(*s.AtMs).UTC()
		if !at.After(now) {
			return nil, fmt.Sprintf("schedule.atMs %d (%s) is in the past", *s.AtMs, at.Format(time.RFC3339)), ""
		}
		j.Kind, j.At = KindAt, at
	}
	return j, "", note
}

// Export is owner's jobs as a nanobot jobs.json: those the owner has
// (enabled or disabled), and `at` jobs that ran but are kept
// (deleteAfterRun false, as nanobot keeps them, disabled). Removed jobs
// and `at` jobs deleted after their run are not in it. Jobs come in the
// order nanobot appends them: as they were added or imported.
func (t *Tool) Export(ctx context.Context, owner auth.DID) (*nanobot.File, error) {
	// Cancelled jobs were removed: not listed at all.
	jobs, err := t.Jobs(ctx, owner, model.AlarmActive, model.AlarmFired, model.AlarmFailed)
	if err != nil {
		return nil, err
	}
	f := &nanobot.File{Version: nanobot.Version, Jobs: []nanobot.Job{}}
	for _, j := range jobs {
		switch {
		case j.Status == model.AlarmCancelled:
			continue
		case j.Status == model.AlarmFired && j.DeleteAfterRun:
			continue
		}
		f.Jobs = append(f.Jobs, toNanobot(j))
	}
	return f, nil
}

func toNanobot(j *Job) nanobot.Job {
	nj := nanobot.Job{
		ID: j.ID, Name: j.Name, Enabled: j.Enabled,
		Payload: nanobot.Payload{Kind: cmp.Or(j.PayloadKind, PayloadKindAgentTurn), Message: j.Message,
			Deliver: j.Deliver, Channel: j.Channel, To: j.To},
		State:       nanobot.State{NextRunAtMs: msPtr(j.NextRunAt), LastRunAtMs: msPtr(j.LastRunAt), LastStatus: j.LastStatus, LastError: j.LastError},
		CreatedAtMs: j.CreatedAt.UnixMilli(), UpdatedAtMs: j.UpdatedAt.UnixMilli(), DeleteAfterRun: j.DeleteAfterRun,
	}
	nj.Schedule.Kind = string(j.Kind)
	switch j.Kind {
	case KindEvery:
		ms := j.EverySeconds * 1000
		nj.Schedule.EveryMs = &ms
	case KindCron:
		expr, tz := j.CronExpr, j.TZ
		nj.Schedule.Expr, nj.Schedule.TZ = &expr, &tz
	case KindAt:
		nj.Schedule.AtMs = msPtr(&j.At)
	}
	return nj
}

func msPtr(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	ms := t.UnixMilli()
	return &ms
}

// sortForExport orders jobs as nanobot appends them: by when their
// alarms were created, and the jobs of one import created within the
// same millisecond by their place in the file.
func sortForExport(jobs []*Job) {
	slices.SortStableFunc(jobs, func(a, b *Job) int {
		return cmp.Or(a.alarmCreated.Compare(b.alarmCreated), cmp.Compare(a.fileIndex, b.fileIndex),
			a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
}
