package api

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/chronos-sched/chronos/api/auth"
	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
)

// The alarms of agents: POST/GET /v1/alarms, GET/DELETE /v1/alarms/{id}.
// An alarm is a schedule record of the caller's DID with target wake
// (queue.CreateAlarm); these handlers read the owner from the verified
// token (guardOwner), decode and check the body, and render the alarms
// specification's View.

// AlarmListLimitDefault is how many alarms GET /v1/alarms returns
// without ?limit=: all of them up to queue.AlarmListMax.
const AlarmListLimitDefault = queue.AlarmListMax

// AlarmView is an alarm as the API shows it: the View of the alarms
// specification, with its JSON names, plus fire_at and every_seconds.
// NextFireAt is set only while the alarm is active. Payload and
// WakeMessage are what was posted, byte for byte.
type AlarmView struct {
	ID             string          `json:"id"`
	Label          string          `json:"label"`
	Kind           string          `json:"kind"`
	CronExpr       string          `json:"cron_expr,omitempty"`
	Timezone       string          `json:"timezone,omitempty"`
	NextFireAt     *time.Time      `json:"next_fire_at,omitempty"`
	ConversationID string          `json:"conversation_id,omitempty"`
	WakeMessage    string          `json:"wake_message"`
	Payload        json.RawMessage `json:"payload,omitempty"`
	Status         string          `json:"status"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	MaxFailures    int             `json:"max_failures"`
	FailureCount   int             `json:"failure_count"`
	LastError      string          `json:"last_error,omitempty"`
	CreatedAt      time.Time       `json:"created_at"`
	LastFiredAt    *time.Time      `json:"last_fired_at,omitempty"`
	// FireAt is a once alarm's fire time, whatever its status; an
	// addition to the specification's View.
	FireAt *time.Time `json:"fire_at,omitempty"`
	// EverySeconds is an "every" alarm's interval; an addition.
	EverySeconds int64 `json:"every_seconds,omitempty"`
	// Paused is set on an active alarm the cron tool disabled: it fires
	// no more until enabled again, so it has no next_fire_at. An
	// addition.
	Paused bool `json:"paused,omitempty"`
	// DSTPolicy is a cron alarm's policy for clock changes, defaults
	// spelt out; absent on once, every and @every alarms. An addition.
	DSTPolicy *model.DSTPolicy `json:"dst_policy,omitempty"`
}

// CreatedAlarm is the body of POST /v1/alarms: the alarm, and whether an
// earlier post with the same idempotency_key had created it.
type CreatedAlarm struct {
	AlarmView
	Deduped bool `json:"deduped"`
}

// AlarmList is the body of GET /v1/alarms, newest first.
type AlarmList struct {
	Alarms []AlarmView `json:"alarms"`
}

// AlarmViewOf projects an alarm's record (queue.GetAlarm's) onto its
// view.
func AlarmViewOf(rec *model.ScheduleRecord) AlarmView {
	a := rec.Alarm
	if a == nil {
		a = &model.Alarm{}
	}
	v := AlarmView{
		ID: rec.ID, Label: a.Label, Kind: string(rec.Kind), CronExpr: rec.CronExpr, Timezone: rec.Timezone,
		ConversationID: a.ConversationID, WakeMessage: a.WakeMessage, Payload: a.Payload, Status: string(a.Status),
		IdempotencyKey: a.IdempotencyKey, MaxFailures: a.MaxFailures, FailureCount: a.FailureCount,
		LastError: a.LastError, CreatedAt: rec.CreatedAt, LastFiredAt: a.LastFiredAt, FireAt: rec.FireAt,
		EverySeconds: rec.EverySeconds, DSTPolicy: shownDSTPolicy(rec),
	}
	if a.Status == model.AlarmActive {
		v.Paused = rec.Paused
		if !rec.Paused {
			v.NextFireAt = rec.NextRunAt
		}
	}
	return v
}

// MarshalJSON writes the view with its payload as stored, byte for byte
// (encoding/json would compact it and escape <, > and &), and its
// strings unescaped for HTML, so that what an agent posted is what it
// reads back. The encoders of echo still compact what a Marshaler
// returns: the handlers write views with writeJSON.
func (v AlarmView) MarshalJSON() ([]byte, error) {
	type plain AlarmView // without this method
	p := plain(v)
	p.Payload = nil
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return nil, err
	}
	out := bytes.TrimRight(buf.Bytes(), "\n")
	if len(v.Payload) == 0 {
		return out, nil
	}
	out = out[:len(out)-1] // the closing brace
	out = append(out, `,"payload":`...)
	out = append(out, v.Payload...)
	return append(out, '}'), nil
}

// MarshalJSON keeps the alarm's own MarshalJSON (an embedded Marshaler
// would otherwise be the whole body) and adds deduped.
func (c CreatedAlarm) MarshalJSON() ([]byte, error) {
	b, err := c.AlarmView.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return append(b[:len(b)-1], fmt.Sprintf(`,"deduped":%t}`, c.Deduped)...), nil
}

// writeJSON writes v's own MarshalJSON, untouched, as the response.
func writeJSON(c echo.Context, status int, v json.Marshaler) error {
	b, err := v.MarshalJSON()
	if err != nil {
		return err
	}
	return c.Blob(status, echo.MIMEApplicationJSONCharsetUTF8, b)
}

// MarshalJSON writes the list with each view's own MarshalJSON.
func (l AlarmList) MarshalJSON() ([]byte, error) {
	out := []byte(`{"alarms":[`)
	for i, v := range l.Alarms {
		if i > 0 {
			out = append(out, ',')
		}
		b, err := v.MarshalJSON()
		if err != nil {
			return nil, err
		}
		out = append(out, b...)
	}
	return append(out, "]}"...), nil
}

// alarmFields are the fields POST /v1/alarms takes. every_seconds (kind
// every) is an addition to the alarms specification, for the cron tool's
// "every" jobs.
var alarmFields = []string{"kind", "label", "delay_seconds", "fire_at", "cron_expr", "timezone", "every_seconds",
	"conversation_id", "wake_message", "payload", "idempotency_key", "max_failures", "dst_policy"}

// owner returns the verified DID of the request (guardOwner put it there).
func owner(c echo.Context) (auth.DID, error) {
	id, ok := auth.FromContext(c.Request().Context())
	if !ok {
		return auth.DID{}, errors.New("api: an owner route ran without an identity")
	}
	return id.Owner()
}

// alarmFromBody builds and validates the alarm a POST /v1/alarms body asks
// for, owned by did, at now. Its error names every field at fault; the
// engine's errors (once, cron) keep their texts after the field's name.
func (s *server) alarmFromBody(o object, did auth.DID, now time.Time) (*model.ScheduleRecord, error) {
	var errs model.FieldErrors
	errs.Add(o.unknown(alarmFields...))
	str := keep[string](&errs)
	integer := keep[*int64](&errs)
	rec := &model.ScheduleRecord{
		ID: s.store.NewAlarmID(did.Raw), Owner: did.Raw, UserID: did.UserID, Target: model.TargetWake,
		Dialect: model.DialectStandard, OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupLatest,
	}
	a := &model.Alarm{Status: model.AlarmActive, MaxFailures: s.cfg.AlarmMaxFailures}
	rec.Alarm = a

	kind := str(o.str("kind"))
	delay := integer(o.integer("delay_seconds"))
	fireAt := str(o.str("fire_at"))
	cronExpr := str(o.str("cron_expr"))
	every := integer(o.integer("every_seconds"))
	rec.Timezone = cmp.Or(str(o.str("timezone")), "UTC")
	rec.DSTPolicy = keep[model.DSTPolicy](&errs)(o.dstPolicy())
	only := func(field string, set bool, kinds string) {
		if set && !errs.Has(field) {
			errs.Add(fieldError(field, "is only for kind %s, not %s", kinds, kind))
		}
	}
	switch model.Kind(kind) {
	case model.KindOnce:
		rec.Kind = model.KindOnce
		if delay != nil && *delay == 0 {
			// The specification's NextOnce takes 0 for "not set", so a
			// client that always sends the field (0 when it means
			// fire_at) is understood.
			delay = nil
		}
		if !errs.Has("delay_seconds") && !errs.Has("fire_at") {
			at, err := model.ResolveOnce(delay, fireAt, now)
			if err != nil {
				field := "fire_at"
				if strings.HasPrefix(err.Error(), "delay_seconds") {
					field = "delay_seconds"
				}
				errs.Add(&model.FieldError{Field: field, Message: err.Error()})
			} else {
				rec.FireAt = &at
			}
		}
		only("cron_expr", o.raw("cron_expr") != nil, "cron")
		only("every_seconds", o.raw("every_seconds") != nil, "every")
	case model.KindCron:
		rec.Kind, rec.CronExpr = model.KindCron, cronExpr
		if strings.TrimSpace(cronExpr) == "" && !errs.Has("cron_expr") {
			errs.Add(fieldError("cron_expr", "empty cron expression"))
		}
		only("delay_seconds", o.raw("delay_seconds") != nil, "once")
		only("fire_at", o.raw("fire_at") != nil, "once")
		only("every_seconds", o.raw("every_seconds") != nil, "every")
	case model.KindEvery:
		rec.Kind = model.KindEvery
		switch {
		case every != nil:
			rec.EverySeconds = *every
		case !errs.Has("every_seconds"):
			errs.Add(fieldError("every_seconds", "is required for kind every"))
		}
		only("delay_seconds", o.raw("delay_seconds") != nil, "once")
		only("fire_at", o.raw("fire_at") != nil, "once")
		only("cron_expr", o.raw("cron_expr") != nil, "cron")
	default:
		if !errs.Has("kind") {
			if kind == "" {
				errs.Add(fieldError("kind", "is required: once, cron or every"))
			} else {
				errs.Add(fieldError("kind", "unknown kind %q (want once, cron or every)", kind))
			}
		}
	}

	a.Label = str(s.alarmText(o, "label", s.cfg.AlarmLabelMaxBytes, "ALARM_LABEL_MAX_BYTES", false))
	a.WakeMessage = str(s.alarmText(o, "wake_message", s.cfg.AlarmWakeMessageMaxBytes, "ALARM_WAKE_MESSAGE_MAX_BYTES", true))
	a.ConversationID = str(boundedString(o, "conversation_id", false))
	a.IdempotencyKey = str(boundedString(o, "idempotency_key", false))
	if n := integer(o.integer("max_failures")); n != nil {
		if *n < 1 || *n > model.MaxAlarmFailures {
			errs.Add(fieldError("max_failures", "must be between 1 and %d, got %d", model.MaxAlarmFailures, *n))
		} else {
			a.MaxFailures = int(*n)
		}
	}
	a.Payload = json.RawMessage("{}")
	if p := o.raw("payload"); p != nil {
		if len(p) > s.cfg.AlarmPayloadMaxBytes {
			// 413 rather than 400, alone: the body is well formed but
			// holds more than an alarm keeps.
			return nil, &statusError{status: http.StatusRequestEntityTooLarge, code: CodePayloadTooLarge,
				message: fmt.Sprintf("payload: larger than %d bytes (ALARM_PAYLOAD_MAX_BYTES), got %d", s.cfg.AlarmPayloadMaxBytes, len(p))}
		}
		if !utf8.Valid(p) {
			// Kept byte for byte, so refused rather than rewritten: the
			// answer would not be valid JSON text.
			errs.Add(fieldError("payload", "must be valid UTF-8"))
		}
		a.Payload = p
	}
	if errs.Has("kind") || errs.Has("delay_seconds") || errs.Has("fire_at") || errs.Has("every_seconds") ||
		(rec.Kind == model.KindOnce && rec.FireAt == nil) {
		// The timing is wrong already; Validate would only say it again.
		errs.Add(model.ValidateText("owner", rec.Owner))
		errs.Add(model.ValidateText("user_id", rec.UserID))
	} else {
		errs.Add(rec.Validate())
	}
	// An unknown zone is an error for every kind, never a fallback to
	// UTC (a once alarm keeps its zone only for the agent's reading).
	if _, err := model.LoadZone(rec.Timezone); err != nil {
		errs.Add(&model.FieldError{Field: "timezone", Message: err.Error()})
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return rec, nil
}

// alarmText reads label or wake_message: a string of at most limit bytes
// (config names the setting). A wake message is text for a chat, so it
// may hold newlines and tabs; a label may not (it is one line in lists).
func (s *server) alarmText(o object, field string, limit int, config string, multiline bool) (string, error) {
	v, err := o.str(field)
	if err != nil {
		return "", err
	}
	if len(v) > limit {
		return "", fieldError(field, "longer than %d bytes (%s), got %d", limit, config, len(v))
	}
	bad := func(r rune) bool {
		if multiline && (r == '\n' || r == '\t' || r == '\r') {
			return false
		}
		return unicode.IsControl(r)
	}
	if i := strings.IndexFunc(v, bad); i >= 0 {
		r, _ := utf8.DecodeRuneInString(v[i:])
		return "", fieldError(field, "must not contain control characters, found %U", r)
	}
	return v, nil
}

// createAlarm is POST /v1/alarms: 201 with the new alarm, or 200 with the
// alarm an earlier post with the same idempotency_key created.
func (s *server) createAlarm(c echo.Context) error {
	did, err := owner(c)
	if err != nil {
		return err
	}
	o, err := s.readObject(c)
	if err != nil {
		return err
	}
	rec, err := s.alarmFromBody(o, did, s.store.Clock().Now())
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	got, deduped, err := s.store.CreateAlarm(ctx, rec)
	if errors.Is(err, queue.ErrQuota) {
		return &statusError{status: http.StatusBadRequest, code: CodeQuotaExceeded, message: err.Error()}
	}
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if deduped {
		status = http.StatusOK
	} else {
		s.log.InfoContext(ctx, "alarm created", slog.String("alarm_id", got.ID), slog.String("owner", got.Owner),
			slog.String("kind", string(got.Kind)))
	}
	return writeJSON(c, status, CreatedAlarm{AlarmView: AlarmViewOf(got), Deduped: deduped})
}

// listAlarms is GET /v1/alarms?status=&limit=: the owner's alarms,
// newest first.
func (s *server) listAlarms(c echo.Context) error {
	did, err := owner(c)
	if err != nil {
		return err
	}
	var errs model.FieldErrors
	limit := keep[int](&errs)(queryInt(c, "limit", AlarmListLimitDefault, 1, queue.AlarmListMax))
	var status model.AlarmStatus
	if st := c.QueryParam("status"); st != "" {
		status = keep[model.AlarmStatus](&errs)(model.ParseAlarmStatus(st))
	}
	if err := errs.Err(); err != nil {
		return err
	}
	recs, err := s.store.ListAlarms(c.Request().Context(), did.Raw, status, limit)
	if err != nil {
		return err
	}
	out := AlarmList{Alarms: make([]AlarmView, len(recs))}
	for i, r := range recs {
		out.Alarms[i] = AlarmViewOf(r)
	}
	return writeJSON(c, http.StatusOK, out)
}

// getAlarm is GET /v1/alarms/{id}. Another owner's alarm is a 404, as a
// missing one.
func (s *server) getAlarm(c echo.Context) error {
	did, err := owner(c)
	if err != nil {
		return err
	}
	id, err := pathID(c, "id", "id")
	if err != nil {
		return err
	}
	rec, err := s.store.GetAlarm(c.Request().Context(), did.Raw, id)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, AlarmViewOf(rec))
}

// cancelAlarm is DELETE /v1/alarms/{id}: an active alarm becomes
// cancelled, and its wakes already queued are never delivered; one
// already terminal answers 200, unchanged. Either way the body is the
// alarm.
func (s *server) cancelAlarm(c echo.Context) error {
	did, err := owner(c)
	if err != nil {
		return err
	}
	id, err := pathID(c, "id", "id")
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	rec, err := s.store.CancelAlarm(ctx, did.Raw, id)
	if err != nil {
		return err
	}
	s.log.InfoContext(ctx, "alarm cancelled", slog.String("alarm_id", id), slog.String("status", string(rec.Alarm.Status)))
	return writeJSON(c, http.StatusOK, AlarmViewOf(rec))
}
