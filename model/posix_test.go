package model

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestParsePosixRejects pins every rejection rule of the posix dialect and
// its message.
func TestParsePosixRejects(t *testing.T) {
	t.Parallel()
	tests := []struct{ expr, want string }{
		// Steps, names, macros and Quartz extensions.
		{"*/5 * * * *", `Invalid cron expression "*/5 * * * *": minute field does not allow steps ("*/5")`},
		{"0 0-12/2 * * *", `Invalid cron expression "0 0-12/2 * * *": hour field does not allow steps ("0-12/2")`},
		{"0 0 * jan *", `Invalid cron expression "0 0 * jan *": month field does not allow names ("jan")`},
		{"0 0 * * MON", `Invalid cron expression "0 0 * * MON": day-of-week field does not allow names ("MON")`},
		{"0 0 * * mon-fri", `Invalid cron expression "0 0 * * mon-fri": day-of-week field does not allow names ("mon")`},
		{"@daily", `Invalid cron expression "@daily": macros ("@daily") are not supported`},
		{" @reboot", `Invalid cron expression " @reboot": macros ("@reboot") are not supported`},
		{"0 0 ? * *", `Invalid cron expression "0 0 ? * *": day-of-month field does not allow "?"`},
		{"0 0 * * ?", `Invalid cron expression "0 0 * * ?": day-of-week field does not allow "?"`},
		{"0 0 L * *", `Invalid cron expression "0 0 L * *": day-of-month field does not allow "L"`},
		{"0 0 * * 5L", `Invalid cron expression "0 0 * * 5L": day-of-week field does not allow "L"`},
		{"0 0 15W * *", `Invalid cron expression "0 0 15W * *": day-of-month field does not allow "W"`},
		{"0 0 LW * *", `Invalid cron expression "0 0 LW * *": day-of-month field does not allow "L"`},
		{"0 0 * * 1#2", `Invalid cron expression "0 0 * * 1#2": day-of-week field does not allow "#"`},
		// Weekday 7, wrap-around ranges, values out of range.
		{"0 0 * * 7", `Invalid cron expression "0 0 * * 7": day-of-week field value 7 is out of range 0-6 (Sunday is 0)`},
		{"0 0 * * 5-7", `Invalid cron expression "0 0 * * 5-7": day-of-week field value 7 is out of range 0-6 (Sunday is 0)`},
		{"0 0 * * 5-1", `Invalid cron expression "0 0 * * 5-1": day-of-week field range "5-1" wraps around (start greater than end)`},
		{"0 22-2 * * *", `Invalid cron expression "0 22-2 * * *": hour field range "22-2" wraps around (start greater than end)`},
		{"60 * * * *", `Invalid cron expression "60 * * * *": minute field value 60 is out of range 0-59`},
		{"* 24 * * *", `Invalid cron expression "* 24 * * *": hour field value 24 is out of range 0-23`},
		{"* * 0 * *", `Invalid cron expression "* * 0 * *": day-of-month field value 0 is out of range 1-31`},
		{"* * 32 * *", `Invalid cron expression "* * 32 * *": day-of-month field value 32 is out of range 1-31`},
		{"* * * 0 *", `Invalid cron expression "* * * 0 *": month field value 0 is out of range 1-12`},
		{"* * * 13 *", `Invalid cron expression "* * * 13 *": month field value 13 is out of range 1-12`},
		{"99999999999999999999999 * * * *", `Invalid cron expression "99999999999999999999999 * * * *": minute field value 99999999999999999999999 is out of range 0-59`},
		// Non-decimal numbers.
		{"+1 * * * *", `Invalid cron expression "+1 * * * *": minute field has invalid value "+1" (want a decimal number)`},
		{"-1 * * * *", `Invalid cron expression "-1 * * * *": minute field has invalid value "-1" (want a decimal number or a range a-b)`},
		{"0x1 * * * *", `Invalid cron expression "0x1 * * * *": minute field has invalid value "0x1" (want a decimal number)`},
		{"1e1 * * * *", `Invalid cron expression "1e1 * * * *": minute field has invalid value "1e1" (want a decimal number)`},
		{"1.0 * * * *", `Invalid cron expression "1.0 * * * *": minute field has invalid value "1.0" (want a decimal number)`},
		{"١ * * * *", `Invalid cron expression "١ * * * *": minute field has invalid value "١" (want a decimal number)`},
		{"0 0 * * 1--3", `Invalid cron expression "0 0 * * 1--3": day-of-week field has invalid value "1--3" (want a decimal number or a range a-b)`},
		{"0 0 * * 1-2-3", `Invalid cron expression "0 0 * * 1-2-3": day-of-week field has invalid value "1-2-3" (want a decimal number or a range a-b)`},
		{"0 0 * * 1-", `Invalid cron expression "0 0 * * 1-": day-of-week field has invalid value "1-" (want a decimal number or a range a-b)`},
		// Lists.
		{"1,,2 * * * *", `Invalid cron expression "1,,2 * * * *": minute field has an empty list item in "1,,2"`},
		{"1, * * * *", `Invalid cron expression "1, * * * *": minute field has an empty list item in "1,"`},
		{"* ,3 * * *", `Invalid cron expression "* ,3 * * *": hour field has an empty list item in ",3"`},
		{"*,5 * * * *", `Invalid cron expression "*,5 * * * *": minute field allows "*" only on its own, not in the list "*,5"`},
		// Field counts.
		{"", `Invalid cron expression "": expected 5 fields, got 0`},
		{"* * * *", `Invalid cron expression "* * * *": expected 5 fields, got 4`},
		{"0 * * * * *", `Invalid cron expression "0 * * * * *": expected 5 fields, got 6`},
		{"TZ=UTC 0 * * * *", `Invalid cron expression "TZ=UTC 0 * * * *": expected 5 fields, got 6`},
		// Only spaces and tabs separate fields (the grammar's SP).
		{"0 0\n* * *", `Invalid cron expression "0 0\n* * *": expected 5 fields, got 4`},
		{"0 0 * *\v*", `Invalid cron expression "0 0 * *\v*": expected 5 fields, got 4`},
		{"0\u00a00 * * *", `Invalid cron expression "0\u00a00 * * *": expected 5 fields, got 4`},
		{"0 0 * * *\n", `Invalid cron expression "0 0 * * *\n": day-of-week field has invalid value "*\n" (want a decimal number)`},
		// Valid syntax, no date.
		{"0 0 31 4 *", `cron "0 0 31 4 *" yields no future time`},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			t.Parallel()
			s, err := ParseCron(tt.expr, "", DialectPosix, time.Time{})
			require.EqualError(t, err, tt.want)
			require.Nil(t, s)
		})
	}
}

// TestParsePosixAccepts checks valid posix expressions and their fire
// times.
func TestParsePosixAccepts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr, after string
		want        []string
	}{
		{"0 9 * * 1-5", "2026-01-02T09:00:00Z", []string{"2026-01-05T09:00:00Z", "2026-01-06T09:00:00Z"}},
		{"0,15,30,45 * * * *", "2026-01-01T00:00:00Z", []string{"2026-01-01T00:15:00Z", "2026-01-01T00:30:00Z"}},
		{"00 09 01 01 0", "2026-01-01T00:00:00Z", []string{"2026-01-01T09:00:00Z", "2026-01-04T09:00:00Z"}},
		{"5 4 1-3,10-12 1,6 0-6", "2026-01-01T00:00:00Z", []string{"2026-01-01T04:05:00Z", "2026-01-02T04:05:00Z"}},
		{"59 23 31 12 *", "2026-01-01T00:00:00Z", []string{"2026-12-31T23:59:00Z"}},
		{"0 0 29 2 *", "2026-01-01T00:00:00Z", []string{"2028-02-29T00:00:00Z"}},
		{"\t0  12 * *\t* ", "2026-01-01T00:00:00Z", []string{"2026-01-01T12:00:00Z"}},
		{"0 0 * * 0", "2026-01-01T00:00:00Z", []string{"2026-01-04T00:00:00Z"}},
		{"7-7 3 * * *", "2026-01-01T00:00:00Z", []string{"2026-01-01T03:07:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			t.Parallel()
			c := mustCron(t, tt.expr, "", DialectPosix)
			require.Equal(t, DialectPosix, c.Dialect())
			require.Equal(t, tt.want, formatTimes(Preview(c, mustTime(t, tt.after), len(tt.want))))
		})
	}
}

// TestParsePosixMatchesStandard: every posix expression is also a standard
// one, and both parsers must read it identically (bitsets and "*" flags),
// so the posix parser inherits the standard dialect's tested semantics.
func TestParsePosixMatchesStandard(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(*oracleSeed, 99))
	g := exprGen{rng: rng}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 3000 {
		w := base.Add(time.Duration(rng.Int64N(int64(365 * 24 * time.Hour))))
		expr := g.expr(w, DialectPosix, false)
		p, perr := ParseCron(expr, "", DialectPosix, time.Time{})
		s, serr := ParseCron(expr, "", DialectStandard, time.Time{})
		if perr != nil {
			require.ErrorContains(t, perr, "yields no future time", "seed %d case %d: %q", *oracleSeed, i, expr)
			require.Error(t, serr)
			continue
		}
		require.NoError(t, serr, "seed %d case %d: %q", *oracleSeed, i, expr)
		pc, sc := *p.(*CronSchedule), *s.(*CronSchedule)
		pc.dialect = DialectStandard
		require.Equal(t, sc, pc, "seed %d case %d: %q", *oracleSeed, i, expr)
	}
}

// TestParsePosixSeparators accepts any run of spaces and tabs between and
// around fields, and reports a grammar error as a *PosixError naming the
// field.
func TestParsePosixSeparators(t *testing.T) {
	t.Parallel()
	for _, expr := range []string{"0 0 * * *", "\t0\t\t0 *  * *\t ", "  0 0 * * * "} {
		s, err := ParsePosix(expr, time.UTC)
		require.NoError(t, err, expr)
		require.Equal(t, time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC), s.Next(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	}
	_, err := ParsePosix("0 25 * * *", time.UTC)
	var pe *PosixError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, PosixError{Expr: "0 25 * * *", Field: "hour", Value: "25", Reason: "value 25 is out of range 0-23"}, *pe)
}
