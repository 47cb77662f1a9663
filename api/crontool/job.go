package crontool

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/chronos-sched/chronos/api/auth"
	"github.com/chronos-sched/chronos/model"
)

// Kind is a job's schedule kind, as nanobot names it.
type Kind string

// The kinds of job.
const (
	// KindEvery repeats every EverySeconds: an alarm of kind every.
	KindEvery Kind = "every"
	// KindCron fires on a 5-field cron expression in TZ: an alarm of kind
	// cron.
	KindCron Kind = "cron"
	// KindAt fires once, at At: an alarm of kind once.
	KindAt Kind = "at"
)

// PayloadKindAgentTurn is nanobot's payload kind of a job that runs an
// agent turn: the kind of every job the tool adds.
const PayloadKindAgentTurn = "agent_turn"

// NameRunes is how many characters of the message name a job added
// without a name, as nanobot does.
const NameRunes = 30

// Job is a cron job: what the tool shows and jobs.json holds, kept as an
// alarm (see ToAlarm and FromAlarm for the mapping).
type Job struct {
	// ID is 8 hex characters for jobs the tool adds; imported jobs keep
	// theirs. It is the alarm's idempotency key.
	ID      string
	Name    string
	Enabled bool
	Kind    Kind
	// EverySeconds is the interval of KindEvery.
	EverySeconds int64
	// CronExpr and TZ are the expression and zone of KindCron; TZ is
	// never empty on a job that passed validation.
	CronExpr string
	TZ       string
	// At is the instant of KindAt.
	At time.Time

	Message     string
	PayloadKind string
	Deliver     bool
	// Channel and To are nil when unset (null in jobs.json).
	Channel, To    *string
	DeleteAfterRun bool
	// CreatedAt and UpdatedAt are the job's own times (nanobot's for an
	// imported job), kept in the alarm's payload.
	CreatedAt, UpdatedAt time.Time

	// Filled from the alarm by FromAlarm.
	AlarmID      string
	alarmCreated time.Time
	// fileIndex is an imported job's position in its jobs.json, which
	// orders the jobs one import created within one millisecond.
	fileIndex  int
	Status     model.AlarmStatus
	NextRunAt  *time.Time
	LastRunAt  *time.Time
	LastStatus *string
	LastError  *string
}

// payload is what a job keeps in its alarm's payload, which every wake
// of the alarm carries to the agent's gateway: nanobot's payload object
// (kind, deliver, channel, to; the message is the wake_message) with the
// job id, and what jobs.json needs that an alarm has no field for.
type payload struct {
	JobID          string  `json:"cron_job_id"`
	Kind           string  `json:"kind"`
	Deliver        bool    `json:"deliver"`
	Channel        *string `json:"channel"`
	To             *string `json:"to"`
	DeleteAfterRun bool    `json:"delete_after_run"`
	CreatedAtMs    int64   `json:"created_at_ms"`
	UpdatedAtMs    int64   `json:"updated_at_ms"`
	// FileIndex is an imported job's position in its jobs.json.
	FileIndex int `json:"file_index,omitempty"`
	// An imported job's last run, until chronos runs it.
	LastRunAtMs *int64  `json:"last_run_at_ms,omitempty"`
	LastStatus  *string `json:"last_status,omitempty"`
	LastError   *string `json:"last_error,omitempty"`
}

// NewJobID draws a job id: 8 lowercase hex characters, as nanobot's
// str(uuid4())[:8].
func NewJobID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// IsJobID reports whether id is 8 lowercase hex characters.
func IsJobID(id string) bool {
	if len(id) != 8 {
		return false
	}
	for _, c := range []byte(id) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// ToAlarm is the alarm that keeps job for owner: kind every, cron or
// once, the name as label, the message as wake_message, the job id as
// idempotency key, and the rest in the payload.
func ToAlarm(job *Job, owner auth.DID) (*model.ScheduleRecord, error) {
	rec := &model.ScheduleRecord{
		Owner:  owner.Raw,
		UserID: owner.UserID,
		Target: model.TargetWake,
	}
	switch job.Kind {
	case KindEvery:
		rec.Kind, rec.EverySeconds = model.KindEvery, job.EverySeconds
	case KindCron:
		rec.Kind, rec.CronExpr, rec.Timezone, rec.Dialect = model.KindCron, job.CronExpr, job.TZ, model.DialectStandard
	case KindAt:
		at := job.At.UTC()
		rec.Kind, rec.FireAt = model.KindOnce, &at
	default:
		return nil, fmt.Errorf("job %s: unknown kind %q", job.ID, job.Kind)
	}
	p := payload{
		JobID: job.ID, Kind: job.PayloadKind, Deliver: job.Deliver, Channel: job.Channel, To: job.To,
		DeleteAfterRun: job.DeleteAfterRun, CreatedAtMs: job.CreatedAt.UnixMilli(), UpdatedAtMs: job.UpdatedAt.UnixMilli(),
		LastStatus: job.LastStatus, LastError: job.LastError, FileIndex: job.fileIndex,
	}
	if p.Kind == "" {
		p.Kind = PayloadKindAgentTurn
	}
	if job.LastRunAt != nil {
		ms := job.LastRunAt.UnixMilli()
		p.LastRunAtMs = &ms
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	rec.Alarm = &model.Alarm{
		Label:          job.Name,
		WakeMessage:    job.Message,
		Payload:        b,
		Status:         model.AlarmActive,
		IdempotencyKey: job.ID,
	}
	return rec, nil
}

// FromAlarm reads the job an alarm keeps; false when the alarm is not a
// job's (created through /v1/alarms, not the tool or an import).
func FromAlarm(rec *model.ScheduleRecord) (*Job, bool) {
	if rec == nil || rec.Alarm == nil || rec.Alarm.IdempotencyKey == "" {
		return nil, false
	}
	var p payload
	if err := json.Unmarshal(rec.Alarm.Payload, &p); err != nil || p.JobID != rec.Alarm.IdempotencyKey {
		return nil, false
	}
	j := &Job{
		ID: p.JobID, Name: rec.Alarm.Label, Message: rec.Alarm.WakeMessage,
		PayloadKind: p.Kind, Deliver: p.Deliver, Channel: p.Channel, To: p.To, DeleteAfterRun: p.DeleteAfterRun,
		CreatedAt: time.UnixMilli(p.CreatedAtMs).UTC(), UpdatedAt: time.UnixMilli(p.UpdatedAtMs).UTC(),
		AlarmID: rec.ID, alarmCreated: rec.CreatedAt, fileIndex: p.FileIndex, Status: rec.Alarm.Status, LastStatus: p.LastStatus, LastError: p.LastError,
	}
	if j.Status == "" {
		j.Status = model.AlarmActive
	}
	j.Enabled = j.Status == model.AlarmActive && !rec.Paused
	switch rec.Kind {
	case model.KindEvery:
		j.Kind, j.EverySeconds = KindEvery, rec.EverySeconds
	case model.KindCron, "":
		j.Kind, j.CronExpr, j.TZ = KindCron, rec.CronExpr, cmpOr(rec.Timezone, "UTC")
	case model.KindOnce:
		j.Kind = KindAt
		if rec.FireAt != nil {
			j.At = rec.FireAt.UTC()
		}
	default:
		return nil, false
	}
	if j.Enabled && rec.NextRunAt != nil {
		t := rec.NextRunAt.UTC()
		j.NextRunAt = &t
	}
	if p.LastRunAtMs != nil {
		t := time.UnixMilli(*p.LastRunAtMs).UTC()
		j.LastRunAt = &t
	}
	// chronos's own runs supersede the imported state. An alarm keeps
	// its last_error after later deliveries succeed, and does not say
	// when it failed: so the job's last status is "error" only when the
	// alarm failed or never delivered a wake.
	if rec.Alarm.LastFiredAt != nil {
		t := rec.Alarm.LastFiredAt.UTC()
		j.LastRunAt = &t
		ok := "ok"
		j.LastStatus, j.LastError = &ok, nil
	}
	if rec.Alarm.LastError != "" {
		e := rec.Alarm.LastError
		j.LastError = &e
		if rec.Alarm.LastFiredAt == nil || j.Status == model.AlarmFailed {
			st := "error"
			j.LastStatus = &st
		}
	}
	return j, true
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// defaultName is the first NameRunes characters of the message.
func defaultName(message string) string {
	n := 0
	for i := range message {
		if n == NameRunes {
			return message[:i]
		}
		n++
	}
	return message
}

// validCron checks a cron expression of the tool: the standard dialect's
// five fields or a descriptor (@daily, @every 1h). Six fields are refused:
// robfig/cron reads the first as seconds, nanobot's croniter the last, so
// either reading would surprise someone.
func validCron(expr, tz string, now time.Time) error {
	if !strings.HasPrefix(expr, "@") && len(strings.Fields(expr)) != 5 {
		return fmt.Errorf("want 5 fields (minute hour day-of-month month day-of-week) or a descriptor such as @daily, got %d fields",
			len(strings.Fields(expr)))
	}
	_, err := model.ParseCron(expr, tz, model.DialectStandard, now)
	return err
}

// validText checks a free-form text the tool stores: valid UTF-8.
func validText(s string) bool { return utf8.ValidString(s) }
