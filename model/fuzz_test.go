package model

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// checkNext asserts the Schedule contract on one call: the zero Time or a
// whole-second UTC time strictly after after; and a second call from that
// time moves forward.
func checkNext(t *testing.T, s Schedule, after time.Time) time.Time {
	t.Helper()
	next := s.Next(after)
	if next.IsZero() {
		return next
	}
	require.True(t, next.After(after), "Next(%s) = %s", after, next)
	require.Equal(t, time.UTC, next.Location())
	require.Zero(t, next.Nanosecond())
	if again := s.Next(next); !again.IsZero() {
		require.True(t, again.After(next), "Next(%s) = %s", next, again)
	}
	return next
}

// fuzzCheckCron runs the contract checks for a parsed expression and, for
// instants in 1980-2100 where a short walk finds a match, compares with
// the brute-force oracle.
func fuzzCheckCron(t *testing.T, s Schedule, after time.Time) {
	next := checkNext(t, s, after)
	c, ok := s.(*CronSchedule)
	if !ok || after.Year() < 1980 || after.Year() > 2100 {
		return
	}
	if want, found := oracleNext(t, c, after, 3000); found {
		require.Equal(t, want, next, "Next(%s)", after.Format(time.RFC3339Nano))
	}
}

func fuzzAfter(sec int64, nsec uint32) time.Time {
	return time.Unix(sec, int64(nsec%1_000_000_000))
}

func FuzzParseStandard(f *testing.F) {
	after := time.Date(2026, 3, 8, 6, 0, 0, 0, time.UTC).Unix()
	for _, e := range []string{
		"0 9 * * *", "*/15 * * * *", "0 0 29 2 *", "30 2 * * *", "0 30 1 * * *",
		"5-40/5 7/10 * JAN-mar mon,FRI", "0 0 ? * *", "@daily", "@every 1h30m",
		"@every 1.5s", "TZ=UTC", "CRON_TZ= ", "*-5 * * * *", "1,,2 * * * *", "0 0 30 2 *",
		"@", "  ", "* * * * * * *", "*/0 * * * *",
	} {
		f.Add(e, after, uint32(0), uint8(3))
	}
	f.Fuzz(func(t *testing.T, expr string, sec int64, nsec uint32, zone uint8) {
		z := oracleZones[int(zone)%len(oracleZones)]
		at := fuzzAfter(sec, nsec)
		s, err := ParseCron(expr, z, DialectStandard, at)
		if err != nil {
			require.Nil(t, s)
			return
		}
		fuzzCheckCron(t, s, at)
	})
}

func FuzzParsePosix(f *testing.F) {
	after := time.Date(2026, 11, 1, 4, 0, 0, 0, time.UTC).Unix()
	for _, e := range []string{
		"0 9 * * 1-5", "0,15,30,45 * * * *", "59 23 31 12 *", "0 0 29 2 *", "*/5 * * * *",
		"0 0 * * 7", "0 22-2 * * *", "+1 * * * *", "0x1 * * * *", "1e1 * * * *", "1,,2 * * * *",
		"@daily", "0 0 L * *", "0 0 * * 1#2", "* * * *", "",
	} {
		f.Add(e, after, uint32(0), uint8(9))
	}
	f.Fuzz(func(t *testing.T, expr string, sec int64, nsec uint32, zone uint8) {
		z := oracleZones[int(zone)%len(oracleZones)]
		at := fuzzAfter(sec, nsec)
		s, err := ParseCron(expr, z, DialectPosix, at)
		if err != nil {
			require.Nil(t, s)
			return
		}
		fuzzCheckCron(t, s, at)

		// The posix grammar is a subset of the standard one, read the same.
		std, err := ParseCron(expr, z, DialectStandard, at)
		require.NoError(t, err, "standard rejects posix %q", expr)
		pc, sc := *s.(*CronSchedule), *std.(*CronSchedule)
		pc.dialect = DialectStandard
		require.Equal(t, sc, pc)
	})
}

func FuzzResolveOnce(f *testing.F) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC).Unix()
	f.Add(int64(600), true, "", now, uint32(0))
	f.Add(int64(0), false, "2026-01-02T09:00:00+01:00", now, uint32(250_000_000))
	f.Add(int64(0), false, "9999-12-31T23:59:59.9Z", now, uint32(0))
	f.Add(int64(1<<62), true, "", now, uint32(0))
	f.Fuzz(func(t *testing.T, delay int64, hasDelay bool, fireAt string, nowSec int64, nsec uint32) {
		var d *int64
		if hasDelay {
			d = &delay
		}
		now := fuzzAfter(nowSec, nsec)
		at, err := ResolveOnce(d, fireAt, now)
		if err != nil {
			require.True(t, at.IsZero())
			return
		}
		require.True(t, at.After(now), "ResolveOnce = %s, now %s", at, now)
		_, inRange := unixInRange(at)
		require.True(t, inRange, "ResolveOnce = %s, after year 9999", at)
		require.Zero(t, at.Nanosecond())
		require.Equal(t, time.UTC, at.Location())
		require.Equal(t, at, Once{At: at}.Next(now))
	})
}
