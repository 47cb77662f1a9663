package model

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Kind says how a schedule computes its fire times.
type Kind string

const (
	// KindCron fires on a cron expression (including "@every").
	KindCron Kind = "cron"
	// KindOnce fires once, at FireAt.
	KindOnce Kind = "once"
	// KindEvery fires every EverySeconds, anchored at the schedule's creation.
	KindEvery Kind = "every"
)

// Target says what a run starts.
type Target string

const (
	// TargetWorkflow starts a run of (WorkflowID, Version) through the Executor.
	TargetWorkflow Target = "workflow"
)

// OverlapPolicy decides what happens when a run comes due while the
// schedule's previous run is still in flight (ENQUEUED or STARTED).
type OverlapPolicy string

const (
	// OverlapAllow starts every run regardless of the previous one.
	OverlapAllow OverlapPolicy = "allow"
	// OverlapSkip records the new run as SKIPPED.
	OverlapSkip OverlapPolicy = "skip"
	// OverlapQueue holds the schedule until the in-flight run ends, then
	// starts the next planned run.
	OverlapQueue OverlapPolicy = "queue"
)

// CatchupPolicy decides what happens to planned runs that were missed
// because no scheduler was working (downtime), found late by more than the
// misfire grace.
type CatchupPolicy string

const (
	// CatchupNone drops missed runs; the schedule resumes at its next time.
	CatchupNone CatchupPolicy = "none"
	// CatchupLatest fires the most recent missed run once.
	CatchupLatest CatchupPolicy = "latest"
	// CatchupFireImmediately fires every missed run now, at most
	// MAX_CATCHUP_PER_TICK per schedule per tick.
	CatchupFireImmediately CatchupPolicy = "fire_immediately"
	// CatchupSpread fires every missed run, each delayed by a deterministic
	// offset within the spread window so a backlog does not land at once.
	CatchupSpread CatchupPolicy = "spread"
)

// ParseOverlapPolicy validates an overlap policy name.
func ParseOverlapPolicy(s string) (OverlapPolicy, error) {
	switch p := OverlapPolicy(s); p {
	case OverlapAllow, OverlapSkip, OverlapQueue:
		return p, nil
	}
	return "", fmt.Errorf("unknown overlap_policy %q (want allow, skip or queue)", s)
}

// ParseCatchupPolicy validates a catch-up policy name.
func ParseCatchupPolicy(s string) (CatchupPolicy, error) {
	switch p := CatchupPolicy(s); p {
	case CatchupNone, CatchupLatest, CatchupFireImmediately, CatchupSpread:
		return p, nil
	}
	return "", fmt.Errorf("unknown catchup_policy %q (want none, latest, fire_immediately or spread)", s)
}

// Version is a workflow version. JSON accepts a number or a string so that
// pipelines sending either are understood; it is kept as a string.
type Version string

// UnmarshalJSON accepts 3 and "3".
func (v *Version) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*v = Version(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("version must be a string or a number")
	}
	*v = Version(n.String())
	return nil
}

// ScheduleRecord is a registered schedule: what fires, when, and how.
// NextRunAt, Paused and the timestamps are maintained by the store.
// DelaySeconds is the delay a once schedule's FireAt was resolved from (0
// when FireAt was given), kept so that an upsert repeating the delay keeps
// FireAt rather than moving it later at every call.
type ScheduleRecord struct {
	ID            string        `json:"schedule_id"`
	Owner         string        `json:"owner,omitempty"`
	Kind          Kind          `json:"kind"`
	Target        Target        `json:"target"`
	WorkflowID    string        `json:"workflow_id"`
	Version       Version       `json:"version"`
	UserID        string        `json:"user_id"`
	CronExpr      string        `json:"cron_expr,omitempty"`
	Dialect       Dialect       `json:"dialect,omitempty"`
	Timezone      string        `json:"timezone"`
	EverySeconds  int64         `json:"every_seconds,omitempty"`
	FireAt        *time.Time    `json:"fire_at,omitempty"`
	DelaySeconds  int64         `json:"delay_seconds,omitempty"`
	StartAt       *time.Time    `json:"start_at,omitempty"`
	EndAt         *time.Time    `json:"end_at,omitempty"`
	JitterMs      int64         `json:"jitter_ms"`
	OverlapPolicy OverlapPolicy `json:"overlap_policy"`
	CatchupPolicy CatchupPolicy `json:"catchup_policy"`
	// PauseAfterFailures, when positive, pauses the schedule after that
	// many consecutive FAILED runs; a SUCCESS resets the count. 0: never.
	PauseAfterFailures int `json:"pause_after_failures,omitempty"`
	// DSTPolicy says what a cron expression does when clocks change.
	// Validate makes it canonical: the default policy is the zero value.
	// The API's views show it in full (see api's ScheduleView).
	DSTPolicy DSTPolicy `json:"dst_policy,omitzero"`
	// Anchor is where "every" and "@every" intervals count from; set when
	// the schedule is created or its timing changes.
	Anchor    time.Time `json:"anchor"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`

	Paused    bool       `json:"paused"`
	NextRunAt *time.Time `json:"next_run_at"`

	// ConsecutiveFailures counts the schedule's FAILED runs since its
	// last SUCCESS or resume (see PauseAfterFailures).
	ConsecutiveFailures int `json:"consecutive_failures,omitempty"`
	// PausedReason says why a paused schedule is: PausedManual or
	// PausedFailures; PausedNote is the caller's note or what failed,
	// PausedAt when it paused.
	PausedReason PausedReason `json:"paused_reason,omitempty"`
	PausedNote   string       `json:"paused_note,omitempty"`
	PausedAt     *time.Time   `json:"paused_at,omitempty"`
	// LastError is the error of the schedule's last FAILED run.
	LastError string `json:"last_error,omitempty"`

	// Alarm is set on an agent's alarm (Target TargetWake) and nil on a
	// registrar's schedule. The API renders it in the alarm's own view.
	Alarm *Alarm `json:"-"`
}

// PausedReason says why a schedule is paused.
type PausedReason string

const (
	// PausedManual: POST /schedules/pause (or an upsert with paused).
	PausedManual PausedReason = "manual"
	// PausedFailures: its runs failed pause_after_failures times in a row.
	PausedFailures PausedReason = "pause_after_failures"
)

// MaxPauseAfterFailures bounds pause_after_failures.
const MaxPauseAfterFailures = 1000

// MaxJitterMs bounds jitter_ms: a day.
const MaxJitterMs = 24 * 60 * 60 * 1000

// MaxRunErrorLen bounds the error text a run record keeps; longer text
// is cut to this many bytes.
const MaxRunErrorLen = 4096

// MaxEverySeconds bounds every_seconds (100 years), far inside
// time.Duration, whose overflow would turn a huge interval into a tiny one.
const MaxEverySeconds = 100 * 365 * 24 * 60 * 60

// MaxIDLen bounds ids and other free-form identifiers.
const MaxIDLen = 200

// FieldError is a validation error naming the request field at fault.
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// Validate checks everything that does not depend on the clock and
// compiles the schedule, so an accepted record always has a working
// timetable. It reports every field at fault at once: the error is a
// *FieldError, or FieldErrors when several fields are wrong.
func (r *ScheduleRecord) Validate() error {
	var errs FieldErrors
	errs.Add(ValidateID("schedule_id", r.ID))
	if r.Target == "" {
		r.Target = TargetWorkflow
	}
	switch r.Target {
	case TargetWorkflow:
		errs.Add(ValidateWorkflowID("workflow_id", r.WorkflowID))
		errs.Add(ValidateID("version", string(r.Version)))
	case TargetWake:
		// An alarm wakes its owner: it has one and says what the wake
		// carries, and starts no workflow.
		errs.Add(ValidateText("owner", r.Owner))
		if r.Owner == "" {
			errs.Add(&FieldError{"owner", "is required for target wake"})
		}
		if r.Alarm == nil {
			errs.Add(&FieldError{"target", "target wake needs the alarm's fields"})
		}
	default:
		errs.Add(&FieldError{"target", fmt.Sprintf("unknown target %q (want workflow or wake)", r.Target)})
	}
	errs.Add(ValidateText("user_id", r.UserID))
	if r.JitterMs < 0 || r.JitterMs > MaxJitterMs {
		errs.Add(&FieldError{"jitter_ms", fmt.Sprintf("must be between 0 and %d", MaxJitterMs)})
	}
	if r.PauseAfterFailures < 0 || r.PauseAfterFailures > MaxPauseAfterFailures {
		errs.Add(&FieldError{"pause_after_failures", fmt.Sprintf("must be between 0 (never) and %d", MaxPauseAfterFailures)})
	}
	if _, err := ParseOverlapPolicy(string(r.OverlapPolicy)); err != nil {
		errs.Add(&FieldError{"overlap_policy", err.Error()})
	}
	if _, err := ParseCatchupPolicy(string(r.CatchupPolicy)); err != nil {
		errs.Add(&FieldError{"catchup_policy", err.Error()})
	}
	errs.Add(r.validateDST())
	errs.Add(r.validateWindow())
	if !errs.Has("start_at") && !errs.Has("end_at") && !errs.Has("fire_at") {
		if _, err := r.Compile(); err != nil {
			errs.Add(err)
		}
	}
	return errs.Err()
}

// validateWindow checks start_at, end_at and fire_at, and narrows them to
// the milliseconds chronos stores.
func (r *ScheduleRecord) validateWindow() error {
	if r.StartAt != nil && r.EndAt != nil && r.EndAt.Before(*r.StartAt) {
		return &FieldError{"end_at", "is before start_at"}
	}
	// Times are stored in milliseconds: a finer start_at or end_at is
	// narrowed to the milliseconds inside it now, so the fire times
	// computed before storing are those computed after (a window with no
	// whole millisecond inside has no fire time).
	if r.StartAt != nil && !r.StartAt.Truncate(time.Millisecond).Equal(*r.StartAt) {
		t := r.StartAt.Truncate(time.Millisecond).Add(time.Millisecond)
		if t.Year() > 9999 {
			return &FieldError{"start_at", "is after 9999-12-31T23:59:59.999Z, the last time chronos can store"}
		}
		r.StartAt = &t
	}
	if r.EndAt != nil {
		t := r.EndAt.Truncate(time.Millisecond)
		r.EndAt = &t
	}
	// The zero time means "no bound" inside (Window): as a bound it
	// would be read as none.
	for _, f := range []struct {
		name string
		at   *time.Time
	}{{"start_at", r.StartAt}, {"end_at", r.EndAt}, {"fire_at", r.FireAt}} {
		if f.at != nil && f.at.IsZero() {
			return &FieldError{f.name, "0001-01-01T00:00:00Z is not a usable time (times count to the millisecond)"}
		}
	}
	return nil
}

// ValidateWorkflowID checks a workflow id: an identifier without '}', which
// ends the Redis hash tag of its versions' keys, so that no two (id,
// version) pairs can share a key.
func ValidateWorkflowID(field, v string) error {
	if err := ValidateID(field, v); err != nil {
		return err
	}
	if strings.Contains(v, "}") {
		return &FieldError{field, "must not contain '}'"}
	}
	return nil
}

// ValidateID checks a required identifier: non-empty, bounded, printable,
// no whitespace, and nothing invisible. An id is shown in logs, URLs and
// dashboards, where a format character (a bidi override, a zero-width
// space, a BOM) would make two different ids look alike or reorder the
// text around it; so those are refused too.
func ValidateID(field, v string) error {
	switch {
	case v == "":
		return &FieldError{field, "is required"}
	case len(v) > MaxIDLen:
		return &FieldError{field, fmt.Sprintf("longer than %d bytes", MaxIDLen)}
	case !utf8.ValidString(v):
		return &FieldError{field, "must be valid UTF-8"}
	case strings.ContainsFunc(v, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }):
		return &FieldError{field, "must not contain whitespace or control characters"}
	}
	return noFormatChars(field, v)
}

// ValidateText checks a free-form string of a request, such as user_id:
// bounded, valid UTF-8, no control characters (NUL, newlines, which
// would forge lines in logs and break executors that pass it on) and no
// invisible format characters (see ValidateID). Spaces are allowed; ""
// passes (the caller decides whether the field is required).
func ValidateText(field, v string) error {
	switch {
	case len(v) > MaxIDLen:
		return &FieldError{field, fmt.Sprintf("longer than %d bytes", MaxIDLen)}
	case !utf8.ValidString(v):
		return &FieldError{field, "must be valid UTF-8"}
	case strings.ContainsFunc(v, unicode.IsControl):
		return &FieldError{field, "must not contain control characters (such as NUL or newlines)"}
	}
	return noFormatChars(field, v)
}

// noFormatChars refuses Unicode format characters (category Cf).
func noFormatChars(field, v string) error {
	if i := strings.IndexFunc(v, func(r rune) bool { return unicode.Is(unicode.Cf, r) }); i >= 0 {
		r, _ := utf8.DecodeRuneInString(v[i:])
		return &FieldError{field, fmt.Sprintf("must not contain invisible format characters (bidi overrides, zero-width characters), found %U", r)}
	}
	return nil
}

// Compile builds the record's timetable: its kind's Schedule inside the
// start_at/end_at window. Errors are *FieldError.
func (r *ScheduleRecord) Compile() (Schedule, error) {
	var s Schedule
	switch r.Kind {
	case KindCron, "":
		if _, err := LoadZone(r.Timezone); err != nil {
			return nil, &FieldError{"timezone", err.Error()}
		}
		c, err := ParseCron(r.CronExpr, r.Timezone, r.Dialect, r.Anchor)
		if err != nil {
			return nil, &FieldError{"cron_expr", err.Error()}
		}
		s = c
		if cs, ok := c.(*CronSchedule); ok {
			s = cs.WithDST(r.DSTPolicy)
		}
	case KindOnce:
		if r.FireAt == nil {
			return nil, &FieldError{"fire_at", "once alarm requires delay_seconds or fire_at"}
		}
		s = Once{At: r.FireAt.UTC()} // Next rounds it up: never early
	case KindEvery:
		if r.EverySeconds < 1 || r.EverySeconds > MaxEverySeconds {
			return nil, &FieldError{"every_seconds", fmt.Sprintf("must be between 1 and %d (100 years)", MaxEverySeconds)}
		}
		s = Every{Interval: time.Duration(r.EverySeconds) * time.Second, Anchor: r.Anchor}
	default:
		return nil, &FieldError{"kind", fmt.Sprintf("unknown kind %q (want cron, once or every)", r.Kind)}
	}
	if r.StartAt == nil && r.EndAt == nil {
		return s, nil
	}
	w := Window{Schedule: s}
	if r.StartAt != nil {
		w.Start = *r.StartAt
	}
	if r.EndAt != nil {
		w.End = *r.EndAt
	}
	return w, nil
}

// TimingKey identifies everything that decides the record's fire times.
// Two records with equal TimingKeys fire at the same instants.
func (r *ScheduleRecord) TimingKey() string {
	t := func(p *time.Time) string {
		if p == nil {
			return ""
		}
		return strconv.FormatInt(p.UnixNano(), 10)
	}
	key := strings.Join([]string{string(r.Kind), r.CronExpr, string(r.Dialect), r.Timezone,
		strconv.FormatInt(r.EverySeconds, 10), t(r.FireAt), t(r.StartAt), t(r.EndAt)}, "\x00")
	// The default DST policy adds nothing, so the keys of schedules
	// stored before policies existed do not change.
	if p := r.DSTPolicy.String(); p != "" {
		key += "\x00dst=" + p
	}
	return key
}

// validateDST checks the DST policy and makes it canonical. A policy
// other than the default is refused where it could change nothing: on
// once and every schedules and "@every" expressions, which fire on a grid
// of instants no clock change moves (an explicit default passes).
func (r *ScheduleRecord) validateDST() error {
	if err := r.DSTPolicy.Validate(); err != nil {
		return err
	}
	r.DSTPolicy = r.DSTPolicy.Canonical()
	if r.DSTPolicy.IsDefault() {
		return nil
	}
	if !r.WallClock() {
		return &FieldError{"dst_policy", "only a cron expression evaluated on the wall clock takes one: @every, every and once schedules fire on instants that no clock change moves"}
	}
	return nil
}

// WallClock reports whether the record's fire times follow the wall clock
// of its zone (a cron expression other than "@every"), so that a DST
// policy applies to it.
func (r *ScheduleRecord) WallClock() bool {
	if r.Kind != KindCron && r.Kind != "" {
		return false
	}
	f := strings.Fields(r.CronExpr)
	return len(f) == 0 || f[0] != "@every"
}
