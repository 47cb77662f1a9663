package crontool

import (
	"fmt"
	"strings"
	"time"

	"github.com/chronos-sched/chronos/model"
)

// Error is an answer of the tool that reports a mistake a model can act
// on: HTTP answers it with 200 and is_error, MCP with a tool result whose
// isError is set. Its Text is what the model reads.
type Error struct {
	Text string
}

func (e *Error) Error() string { return e.Text }

func errorf(format string, args ...any) *Error { return &Error{Text: fmt.Sprintf(format, args...)} }

// The texts a model reads. Those nanobot has are nanobot's, word for word.
const (
	textNoJobs         = "No scheduled jobs."
	textJobsHeader     = "Scheduled jobs:"
	errMessageRequired = "Error: message is required for add"
	errScheduleNeeded  = "Error: either every_seconds, cron_expr, or at is required"
	errScheduleOne     = "Error: give only one of every_seconds, cron_expr, or at"
	errTZOnlyCron      = "Error: tz can only be used with cron_expr or at"
	errJobIDRequired   = "Error: job_id is required for remove"
)

func textCreated(j *Job) string     { return fmt.Sprintf("Created job '%s' (id: %s)", j.Name, j.ID) }
func textRemoved(id string) string  { return "Removed job " + id }
func textNotFound(id string) string { return "Job " + id + " not found" }
func textUnknownAction(a string) string {
	return fmt.Sprintf("Unknown action: %s (want add, list or remove)", a)
}

// listLine is one job of the list: its name, id, kind with its timing,
// and its next run in the job's zone (the default zone but for cron).
func listLine(j *Job, defaultZone *time.Location) string {
	loc := defaultZone
	var timing string
	switch j.Kind {
	case KindEvery:
		timing = "every " + formatInterval(j.EverySeconds)
	case KindCron:
		timing = fmt.Sprintf("cron: %s (%s)", j.CronExpr, j.TZ)
		if l, err := model.LoadZone(j.TZ); err == nil {
			loc = l
		}
	case KindAt:
		timing = "at"
	}
	next := "none"
	if j.NextRunAt != nil {
		next = formatTime(*j.NextRunAt, loc)
	}
	return fmt.Sprintf("- %s (id: %s, %s, next run: %s)", j.Name, j.ID, timing, next)
}

// formatInterval writes an interval as nanobot's list does: in hours,
// minutes or seconds, the largest unit that divides it.
func formatInterval(s int64) string {
	switch {
	case s%3600 == 0:
		return fmt.Sprintf("%dh", s/3600)
	case s%60 == 0:
		return fmt.Sprintf("%dm", s/60)
	}
	return fmt.Sprintf("%ds", s)
}

// formatTime is an instant as a model reads it best: the wall clock and
// offset in loc, and loc's name.
func formatTime(t time.Time, loc *time.Location) string {
	return t.In(loc).Format(time.RFC3339) + " (" + zoneName(loc) + ")"
}

func zoneName(loc *time.Location) string {
	if loc == time.UTC {
		return "UTC"
	}
	return loc.String()
}

// listText is the list's text.
func listText(jobs []*Job, defaultZone *time.Location) string {
	if len(jobs) == 0 {
		return textNoJobs
	}
	var b strings.Builder
	b.WriteString(textJobsHeader)
	for _, j := range jobs {
		b.WriteString("\n")
		b.WriteString(listLine(j, defaultZone))
	}
	return b.String()
}
