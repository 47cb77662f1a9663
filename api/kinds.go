package api

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
)

// timingFields are the upsert fields that say when a schedule fires, each
// taken by some kinds only (kindTakes).
var timingFields = []string{"cron_expr", "timezone", "dialect", "delay_seconds", "fire_at", "every_seconds",
	"start_at", "end_at"}

// kindTakes lists the timing fields of each kind. A once schedule takes no
// window: its fire_at is its one time. Once and every schedules take no
// zone: their times are instants, the same in every zone.
var kindTakes = map[model.Kind][]string{
	model.KindCron:  {"cron_expr", "timezone", "dialect", "start_at", "end_at"},
	model.KindOnce:  {"delay_seconds", "fire_at"},
	model.KindEvery: {"every_seconds", "start_at", "end_at"},
}

// parseKind reads the upsert's kind; absent, null or "" is cron, the only
// kind the registrar took before once and every. An unknown kind is
// returned with its error, for Validate to refuse again (one error, as
// both name the field kind).
func parseKind(o object) (model.Kind, error) {
	s, err := o.str("kind")
	if err != nil {
		return "", err
	}
	switch k := model.Kind(cmp.Or(s, string(model.KindCron))); k {
	case model.KindCron, model.KindOnce, model.KindEvery:
		return k, nil
	}
	return model.Kind(s), fieldError("kind", "unknown kind %q (want cron, once or every)", s)
}

// foreignTimingFields refuses the timing fields that kind does not take:
// sent to the wrong kind, they would be dropped without a word.
func foreignTimingFields(o object, kind model.Kind) error {
	var errs model.FieldErrors
	for _, f := range timingFields {
		if o.raw(f) == nil || slices.Contains(kindTakes[kind], f) {
			continue
		}
		var takers []string
		for _, k := range []model.Kind{model.KindCron, model.KindOnce, model.KindEvery} {
			if slices.Contains(kindTakes[k], f) {
				takers = append(takers, string(k))
			}
		}
		why := ""
		switch f {
		case "start_at", "end_at":
			why = ": a once schedule fires at its one time, fire_at"
		case "timezone":
			why = ": its fire times are instants, the same in every zone"
		}
		// The wording of /v1/alarms' refusals (alarms.go).
		errs.Add(fieldError(f, "is only for kind %s, not %s%s", strings.Join(takers, " or "), kind, why))
	}
	return errs.Err()
}

// kindTiming reads the timing fields of a once or an every schedule into
// rec (cron's are read by scheduleFromBody, as before the other kinds);
// an unknown kind has none.
// Field errors go to errs; the error returned is a store failure, which
// is no fault of the request.
func (s *server) kindTiming(ctx context.Context, o object, rec *model.ScheduleRecord, idGiven bool,
	errs *model.FieldErrors) error {
	switch rec.Kind {
	case model.KindOnce:
		delay := keep[*int64](errs)(o.integer("delay_seconds"))
		fireAt := keep[string](errs)(o.str("fire_at"))
		if errs.Has("delay_seconds") || errs.Has("fire_at") {
			return nil
		}
		id := ""
		if idGiven {
			id = rec.ID
		}
		rec.Timezone = "UTC"
		at, err := s.onceTime(ctx, id, delay, fireAt)
		var fe *model.FieldError
		if err != nil && !errors.As(err, &fe) {
			return err
		}
		errs.Add(err)
		if err == nil {
			rec.FireAt = &at
			if delay != nil {
				rec.DelaySeconds = *delay
			}
		}
	case model.KindEvery:
		rec.Timezone = "UTC"
		every := keep[*int64](errs)(o.integer("every_seconds"))
		switch {
		case every != nil:
			rec.EverySeconds = *every
		case !errs.Has("every_seconds"):
			errs.Add(fieldError("every_seconds", "is required for kind every"))
		}
	}
	return nil
}

// onceTime resolves a once schedule's fire time with the engine's rules
// and error texts (model.ResolveOnce) against the store's clock.
//
// A once schedule stored under id keeps its fire time when the body
// repeats it: the same delay_seconds, or a fire_at at the same instant,
// even one now past. So a deploy pipeline that upserts the same body on
// every deploy neither moves the time later at each call nor, once the
// schedule ran, fires it again or is refused for a time in the past. Any
// other delay_seconds or fire_at is resolved anew, against now.
func (s *server) onceTime(ctx context.Context, id string, delay *int64, fireAt string) (time.Time, error) {
	if id != "" && (delay == nil) != (fireAt == "") {
		stored, err := s.store.GetSchedule(ctx, id)
		switch {
		case errors.Is(err, queue.ErrNotFound):
		case err != nil:
			return time.Time{}, err
		case stored.Kind == model.KindOnce && stored.Target == model.TargetWorkflow && stored.FireAt != nil:
			if delay != nil && *delay == stored.DelaySeconds {
				return *stored.FireAt, nil
			}
			// Resolved against the zero time, fire_at is only parsed
			// and rounded up to the second, as stored.
			if at, err := model.ResolveOnce(nil, fireAt, time.Time{}); fireAt != "" && err == nil && at.Equal(*stored.FireAt) {
				return at, nil
			}
		}
	}
	at, err := model.ResolveOnce(delay, fireAt, s.store.Clock().Now())
	if err != nil {
		// The engine's text, whole, after the field at fault.
		field := "fire_at"
		if delay != nil && fireAt == "" {
			field = "delay_seconds"
		}
		return time.Time{}, &model.FieldError{Field: field, Message: err.Error()}
	}
	return at, nil
}

// kindDefaultCatchup is the catch-up policy of a schedule whose body
// names none. A once schedule has no later time to wait for: under
// "none" a fire time missed in an outage would never run, so it fires
// late instead ("latest"), as the engine's once alarms do.
func (s *server) kindDefaultCatchup(kind model.Kind) model.CatchupPolicy {
	if kind == model.KindOnce {
		return model.CatchupLatest
	}
	return s.cfg.DefaultCatchupPolicy
}

// withoutField drops err's errors about field. A once schedule whose
// delay_seconds or fire_at was refused has no fire_at, which Validate
// would report again, in other words.
func withoutField(err error, field string) error {
	var all model.FieldErrors
	if !errors.As(err, &all) {
		all = model.FieldErrors{err}
	}
	var out model.FieldErrors
	for _, e := range all {
		if e != nil && model.ErrorField(e) != field {
			out.Add(e)
		}
	}
	return out.Err()
}
