package declarative

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// named is what every error of the taxonomy offers besides Error.
type named interface {
	error
	Name() string
}

func TestSpec_Errors_ValidationErrorsComeBackBeforeAnythingIsWritten(t *testing.T) {
	t.Parallel()
	b := setup(t, t0)
	tests := []struct {
		name    string
		regs    []Registration
		want    named
		message string
	}{
		{"RegistrationsNotArrayError", nil, &RegistrationsNotArrayError{}, "Registrations must be an array"},
		{"RegistrationShapeError", []Registration{{"a", "* * * * *", ok, 0}, {"b", "* * * * *", nil, 0}},
			&RegistrationShapeError{RegistrationIndex: 1, Received: Registration{"b", "* * * * *", nil, 0}},
			"Invalid registration shape: expected [string, string, function, Duration]"},
		{"InvalidRegistrationError", []Registration{{"", "* * * * *", ok, 0}},
			&InvalidRegistrationError{Field: "name", Value: "", Reason: "must be a non-empty string"},
			"Invalid registration: name must be a non-empty string"},
		{"ScheduleDuplicateTaskError", []Registration{{"a", "* * * * *", ok, 0}, {"a", "0 * * * *", ok, 0}},
			&ScheduleDuplicateTaskError{TaskName: "a"}, `Task with name "a" is already scheduled`},
		{"NegativeRetryDelayError", []Registration{{"a", "* * * * *", ok, -1500 * time.Millisecond}},
			&NegativeRetryDelayError{RetryDelayMs: -1500}, "Retry delay must be non-negative"},
		{"CronExpressionInvalidError", []Registration{{"a", "*/15 * * * *", ok, 0}},
			&CronExpressionInvalidError{Expression: "*/15 * * * *", Field: "minute", Reason: `does not allow steps ("*/15")`,
				Cause: &InvalidCronExpressionError{Expression: "*/15 * * * *", Field: "minute", Reason: `does not allow steps ("*/15")`,
					Cause: &FieldParseError{FieldValue: "*/15", FieldName: "minute", Reason: `does not allow steps ("*/15")`}}},
			`Invalid cron expression "*/15 * * * *": minute field does not allow steps ("*/15")`},
		{"CronCalculationError", []Registration{{"a", "0 0 31 2 *", ok, 0}},
			nil, `Failed to calculate next occurrence: cron "0 0 31 2 *" yields no future time`},
	}
	for _, tt := range tests {
		s := b.newScheduler(t)
		err := s.Initialize(ctx, tt.regs)
		require.EqualError(t, err, tt.message, tt.name)
		var n named
		require.ErrorAs(t, err, &n)
		require.Equal(t, tt.name, n.Name())
		if tt.want != nil {
			require.Equal(t, tt.want, err, tt.name)
		}
		require.Equal(t, stateUninitialized, s.state, "a failed Initialize leaves the scheduler Uninitialized")
		require.Equal(t, SchedulerInitializationFailed, b.ev.types("")[len(b.ev.types(""))-1])
	}
	var calc *CronCalculationError
	err := b.newScheduler(t).Initialize(ctx, []Registration{{"a", "0 0 31 2 *", ok, 0}})
	require.ErrorAs(t, err, &calc)
	require.Equal(t, "0 0 31 2 *", calc.Expression)
	require.Equal(t, t0.Format(time.RFC3339), calc.CurrentTime)
	require.Error(t, calc.Cause)

	keys, err := b.rdb.Keys(ctx, "*").Result()
	require.NoError(t, err)
	require.Empty(t, keys, "nothing is persisted on a validation error")
}

func TestSpec_Errors_CronErrorsChainForErrorsAs(t *testing.T) {
	t.Parallel()
	b := setup(t, t0)
	err := b.newScheduler(t).Initialize(ctx, []Registration{{"a", "0 0 * * 7", ok, 0}})
	var cei *CronExpressionInvalidError
	var ice *InvalidCronExpressionError
	var fpe *FieldParseError
	require.ErrorAs(t, err, &cei)
	require.ErrorAs(t, err, &ice)
	require.ErrorAs(t, err, &fpe)
	require.Equal(t, "day-of-week", cei.Field)
	require.Equal(t, "InvalidCronExpressionError", ice.Name())
	require.Equal(t, ice.Error(), cei.Error())
	require.Equal(t, &FieldParseError{FieldValue: "7", FieldName: "day-of-week", Reason: "value 7 is out of range 0-6 (Sunday is 0)"}, fpe)
	require.Equal(t, `Invalid day-of-week field "7": value 7 is out of range 0-6 (Sunday is 0)`, fpe.Error())
	require.Equal(t, "FieldParseError", fpe.Name())
	require.Equal(t, "CronExpressionInvalidError", cei.Name())
}

func TestSpec_Cron_AcceptsStrictPOSIXOnly(t *testing.T) {
	t.Parallel()
	for _, expr := range []string{"0 0 * * *", "15 3 * * 1-5", "0,30 * * * *", "0 12 14 2 *", " 0\t0 * * * ", "0 0 1,15 * 1"} {
		_, err := parseCron(expr, time.UTC, t0)
		require.NoError(t, err, expr)
	}
	for expr, field := range map[string]string{
		"*/15 * * * *": "minute", "0 0 * * mon": "day-of-week", "@daily": "expression", "0 0 ? * *": "day-of-month",
		"0 0 L * *": "day-of-month", "0 0 15W * *": "day-of-month", "0 0 * * 1#2": "day-of-week", "0 0 * * 7": "day-of-week",
		"0 0 * * 5-1": "day-of-week", "60 * * * *": "minute", "1e1 * * * *": "minute", "0x1 * * * *": "minute",
		"+1 * * * *": "minute", "* * * *": "expression", "* * * * * *": "expression", "0 0\n* * *": "expression", "0 0 * jan *": "month",
	} {
		_, err := parseCron(expr, time.UTC, t0)
		var ice *InvalidCronExpressionError
		require.ErrorAs(t, err, &ice, expr)
		require.Equal(t, field, ice.Field, expr)
	}
}

func TestSpec_Cron_DayOfMonthOrDayOfWeekWhenBothRestricted(t *testing.T) {
	t.Parallel()
	c, err := parseCron("0 0 1,15 * 1", time.UTC, t0)
	require.NoError(t, err)
	// 2026-01: Mondays 5, 12, 19, 26; days 1 and 15.
	var days []int
	for at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(-time.Second); ; {
		at = c.Next(at)
		if at.Month() != time.January {
			break
		}
		days = append(days, at.Day())
	}
	require.Equal(t, []int{1, 5, 12, 15, 19, 26}, days)
	c, err = parseCron("0 0 * * 1", time.UTC, t0)
	require.NoError(t, err)
	require.Equal(t, time.Date(2026, 1, 12, 0, 0, 0, 0, time.UTC), c.Next(time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)))
}

func TestSpec_Errors_CorruptPersistedStateIsADeserializeError(t *testing.T) {
	t.Parallel()
	good := []any{fieldName, "job", fieldCron, "* * * * *", fieldRetryDelay, "0"}
	tests := []struct {
		name    string
		prep    func(b *bundle) error
		want    named
		message string
	}{
		{"TaskMissingFieldError", func(b *bundle) error {
			return b.rdb.HSet(ctx, taskKey(b.ns, "job"), fieldName, "job", fieldRetryDelay, "0").Err()
		}, &TaskMissingFieldError{Field: "cron"}, "Missing required field: cron"},
		{"TaskInvalidTypeError", func(b *bundle) error {
			return b.rdb.HSet(ctx, taskKey(b.ns, "job"), append(good, fieldAttempt, "yesterday")...).Err()
		}, &TaskInvalidTypeError{Field: fieldAttempt, Value: "yesterday", ExpectedType: "integer", ActualType: "string"},
			"Invalid type for field 'lastAttemptAt': expected integer, got string"},
		{"TaskInvalidTypeError", func(b *bundle) error {
			return b.rdb.HSet(ctx, taskKey(b.ns, "job"), append(good, fieldRetryDelay, "1.5")...).Err()
		}, &TaskInvalidTypeError{Field: fieldRetryDelay, Value: "1.5", ExpectedType: "integer", ActualType: "number"},
			"Invalid type for field 'retryDelayMs': expected integer, got number"},
		{"TaskInvalidValueError", func(b *bundle) error {
			return b.rdb.HSet(ctx, taskKey(b.ns, "job"), append(good, fieldRetryDelay, "-5")...).Err()
		}, &TaskInvalidValueError{Field: fieldRetryDelay, Value: int64(-5), Reason: "must be non-negative"},
			"Invalid value for field 'retryDelayMs': must be non-negative"},
		{"TaskInvalidStructureError", func(b *bundle) error {
			return b.rdb.Set(ctx, taskKey(b.ns, "job"), "garbage", 0).Err()
		}, nil, `Invalid task state structure: key "{test}:task:job" is not a hash`},
		{"TaskInvalidStructureError", func(b *bundle) error {
			return b.rdb.HSet(ctx, taskKey(b.ns, "job"), fieldName, "other", fieldCron, "* * * * *", fieldRetryDelay, "0").Err()
		}, nil, `Invalid task state structure: record of task "other" is stored under "job"`},
		{"TaskInvalidStructureError", func(b *bundle) error {
			return b.rdb.HSet(ctx, taskKey(b.ns, "job"), append(good, fieldLeaseHolder, "x")...).Err()
		}, nil, `Invalid task state structure: task "job" has only one of leaseHolder and leaseUntil`},
	}
	for _, tt := range tests {
		t.Run(tt.name+"/"+tt.message, func(t *testing.T) {
			t.Parallel()
			b := setup(t, t0)
			require.NoError(t, tt.prep(b))
			s := b.newScheduler(t)
			err := s.Initialize(ctx, []Registration{{"job", "* * * * *", ok, 0}})
			require.Error(t, err)
			require.Equal(t, `load task "job": `+tt.message, err.Error())
			var n named
			require.ErrorAs(t, err, &n)
			require.Equal(t, tt.name, n.Name())
			if tt.want != nil {
				require.Equal(t, tt.want, errors.Unwrap(err))
			}
			var base *TaskTryDeserializeError
			require.ErrorAs(t, err, &base, "every deserialize error is a TaskTryDeserializeError")
			require.Equal(t, tt.message, base.Error())
			require.Equal(t, "TaskTryDeserializeError", base.Name())
			require.Equal(t, stateUninitialized, s.state)
		})
	}
}

func TestDecodeState_NeverPanics(t *testing.T) {
	t.Parallel()
	for _, h := range []map[string]string{
		nil, {}, {fieldName: "job"}, {fieldName: "job", fieldCron: "", fieldRetryDelay: "0"},
		{fieldName: "job", fieldCron: "x", fieldRetryDelay: "99999999999999999999999"},
		{fieldName: "job", fieldCron: "x", fieldRetryDelay: "0", fieldLeaseUntil: "5"},
	} {
		_, err := decodeState("job", h)
		var base *TaskTryDeserializeError
		require.ErrorAs(t, err, &base, "%v", h)
	}
}

func FuzzDecodeState(f *testing.F) {
	f.Add("job", "* * * * *", "0", "1", "2", "", "")
	f.Add("job", "", "-1", "x", "1.5", "holder", "")
	f.Fuzz(func(t *testing.T, name, cron, delay, served, attempt, holder, until string) {
		h := map[string]string{fieldName: name, fieldCron: cron, fieldRetryDelay: delay, fieldServed: served, fieldAttempt: attempt}
		if holder != "" {
			h[fieldLeaseHolder] = holder
		}
		if until != "" {
			h[fieldLeaseUntil] = until
		}
		st, err := decodeState("job", h)
		if err != nil {
			var base *TaskTryDeserializeError
			if !errors.As(err, &base) {
				t.Fatalf("%v is not a TaskTryDeserializeError", err)
			}
			return
		}
		if st.Name != "job" || st.RetryDelay < 0 {
			t.Fatalf("decoded an impossible state %+v", st)
		}
	})
}

func FuzzParseCron(f *testing.F) {
	for _, s := range []string{"0 0 * * *", "*/5 * * * *", "@daily", "0 0 1,15 * 1", "1-5 0 * * 0-6", "\t0 0 * * *"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		c, err := parseCron(expr, time.UTC, t0)
		if err != nil {
			var n named
			if !errors.As(err, &n) {
				t.Fatalf("%q: %v is not of the taxonomy", expr, err)
			}
			return
		}
		if next := c.Next(t0); next.IsZero() || next.Second() != 0 {
			t.Fatalf("%q: accepted, but next after %s is %s", expr, t0, next)
		}
	})
}
