package model

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSuggestField(t *testing.T) {
	t.Parallel()
	known := []string{"schedule_id", "workflow_id", "timezone", "cron_expr", "jitter_ms", "overlap_policy"}
	for _, tc := range []struct{ name, want string }{
		{"tz", "timezone"},
		{"Timezone", "timezone"},
		{"timezon", "timezone"},
		{"cron", "cron_expr"},
		{"jitter", "jitter_ms"},
		{"overlap", "overlap_policy"},
		{"workflowid", "workflow_id"},
		{"color", ""},
		{"", ""},
	} {
		require.Equal(t, tc.want, SuggestField(tc.name, known), tc.name)
	}
}

func TestValidateReportsEveryField(t *testing.T) {
	t.Parallel()
	r := &ScheduleRecord{ID: "s", WorkflowID: "wf}", Version: "1", UserID: "u", Kind: KindCron,
		CronExpr: "0 9 * * *", Timezone: "UTC", JitterMs: -1, OverlapPolicy: "never", CatchupPolicy: CatchupNone}
	err := r.Validate()
	var all FieldErrors
	require.True(t, errors.As(err, &all), "%T %v", err, err)
	var fields []string
	for _, e := range all {
		fields = append(fields, ErrorField(e))
	}
	require.Equal(t, []string{"workflow_id", "jitter_ms", "overlap_policy"}, fields)
	var fe *FieldError
	require.True(t, errors.As(err, &fe), "a list still answers errors.As for its first field error")
	require.Equal(t, "workflow_id", fe.Field)

	r = &ScheduleRecord{ID: "s", WorkflowID: "wf", Version: "1", UserID: "u", Kind: KindCron,
		CronExpr: "0 9 * * *", Timezone: "UTC", OverlapPolicy: OverlapSkip, CatchupPolicy: CatchupNone, JitterMs: -1}
	err = r.Validate()
	require.True(t, errors.As(err, &fe))
	require.False(t, errors.As(err, &all), "one wrong field is a plain *FieldError")
	require.Equal(t, "jitter_ms: must be between 0 and 86400000", err.Error())
}

func TestFieldErrorsKeepsTheFirstErrorOfAField(t *testing.T) {
	t.Parallel()
	var errs FieldErrors
	errs.Add(&FieldError{"a", "first"})
	errs.Add(nil)
	errs.Add(&FieldError{"a", "second"})
	errs.Add(&UnknownFieldError{Field: "tz", Suggestion: "timezone"})
	require.Len(t, errs, 2)
	require.Equal(t, `a: first; unknown field "tz" (did you mean "timezone"?)`, errs.Err().Error())
}
