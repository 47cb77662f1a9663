package model

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestExplain(t *testing.T) {
	t.Parallel()
	anchor := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		expr, tz string
		dialect  Dialect
		want     string
	}{
		{"*/15 * * * *", "", "", "Every 15 minutes, in UTC"},
		{"0 9 * * 1-5", "America/New_York", "", "At 09:00, Monday through Friday, in America/New_York"},
		{"0 9 * * mon-fri", "America/New_York", "", "At 09:00, Monday through Friday, in America/New_York"},
		{"0 9 * * 1-5", "America/New_York", DialectPosix, "At 09:00, Monday through Friday, in America/New_York"},
		{"0 0 1 1 *", "", "", "At 00:00, on day 1 of January, in UTC"},
		{"@hourly", "", "", "At minute 0 of every hour, in UTC"},
		{"@daily", "Europe/Berlin", "", "At 00:00, in Europe/Berlin"},
		{"@weekly", "", "", "At 00:00, on Sunday, in UTC"},
		{"@monthly", "", "", "At 00:00, on day 1 of the month, in UTC"},
		{"@yearly", "", "", "At 00:00, on day 1 of January, in UTC"},
		{"@every 90m", "", "", "Every 90 minutes"},
		{"@every 1h", "", "", "Every hour"},
		{"@every 2h", "", "", "Every 2 hours"},
		{"@every 45s", "", "", "Every 45 seconds"},
		{"@every 1h0m30s", "", "", "Every 3630 seconds"},
		{"0 30 9 * * *", "", "", "At 09:30, in UTC"},
		{"15 30 9 * * *", "", "", "At 09:30:15, in UTC"},
		{"0 9,17 * * *", "", "", "At 09:00 and 17:00, in UTC"},
		{"0 9 1 * mon", "", "", "At 09:00, on day 1 of the month or on Monday, in UTC"},
		{"0 9 1,15 * 1-5", "", "", "At 09:00, on days 1 and 15 of the month or on Monday through Friday, in UTC"},
		{"0 9 * jan mon", "", "", "At 09:00, on Monday, in January, in UTC"},
		{"0 9 * JAN-MAR,oct * ", "", "", "At 09:00, in January through March and October, in UTC"},
		{"0 9 * * sat,sun", "", "", "At 09:00, on Sunday and Saturday, in UTC"},
		{"0 9 * * 1,3,5", "", "", "At 09:00, on Monday, Wednesday and Friday, in UTC"},
		{"* * * * *", "", "", "Every minute, in UTC"},
		{"* * * * * *", "", "", "Every second, in UTC"},
		{"*/20 * * * * *", "", "", "Every 20 seconds, in UTC"},
		{"15 * * * * *", "", "", "At second 15 of every minute, in UTC"},
		{"5 * * * *", "", "", "At minute 5 of every hour, in UTC"},
		{"0 */2 * * *", "", "", "At minute 0, every 2 hours, in UTC"},
		{"*/15 9-17 * * *", "", "", "Every 15 minutes, between 09:00 and 17:59, in UTC"},
		{"* 9 * * *", "", "", "Every minute, between 09:00 and 09:59, in UTC"},
		{"0,30 9,12,17 * * *", "", "", "At minutes 0 and 30 past hours 9, 12 and 17, in UTC"},
		{"5-40/5 * * * *", "", "", "Every 5 minutes from minute 5 through 40, in UTC"},
		{"0-10,30 * * * *", "", "", "At minutes 0 through 10 and 30 of every hour, in UTC"},
		{"0 0 */2 * *", "", "", "At 00:00, on every 2 days of the month, in UTC"},
		{"0 12 1-7 * *", "", "", "At 12:00, on days 1 through 7 of the month, in UTC"},
		{"0 12 1 1 *", "Europe/Berlin", DialectPosix, "At 12:00, on day 1 of January, in Europe/Berlin"},
		{"0 0 ? * *", "", "", "At 00:00, in UTC"},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			s, err := ParseCron(tc.expr, tc.tz, tc.dialect, anchor)
			require.NoError(t, err)
			require.Equal(t, tc.want, Explain(s))
		})
	}
}

func TestExplainOtherKinds(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 5, 5, 10, 0, 0, 500, time.UTC)
	require.Equal(t, "Once, at 2026-05-05T10:00:01Z", Explain(Once{At: at}))
	require.Equal(t, "Every 10 minutes", Explain(Window{Schedule: Every{Interval: 10 * time.Minute}, End: at}))
	require.Empty(t, Explain(nil))
}

// FuzzExplain checks that every expression ParseCron accepts explains
// without panic and into a non-empty text, and previews with DST notes.
func FuzzExplain(f *testing.F) {
	for _, e := range []string{
		"0 9 * * 1-5", "*/15 * * * *", "0 0 1 1 *", "@hourly", "@every 90m", "0 30 9 * * *",
		"0 9,17 * * *", "0 9 1 * mon", "5-40/5 7/10 * JAN-mar mon,FRI", "0 0 29 2 *", "1-59/58 * * * *",
	} {
		f.Add(e, false)
	}
	f.Fuzz(func(t *testing.T, expr string, posix bool) {
		d := DialectStandard
		if posix {
			d = DialectPosix
		}
		s, err := ParseCron(expr, "America/New_York", d, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		if err != nil {
			return
		}
		require.NotEmpty(t, Explain(s), "%q", expr)
		after := time.Date(2026, 3, 7, 0, 0, 0, 0, time.UTC)
		p := PreviewDST(s, nil, after, 5)
		require.Len(t, p.Times, len(Preview(s, after, 5)))
		require.LessOrEqual(t, len(p.Skipped), 5)
	})
}
