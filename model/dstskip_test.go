package model

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDSTSkippedKey(t *testing.T) {
	t.Parallel()
	end := time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC)
	k := DSTSkippedKey("s1", end)
	require.Len(t, k, 64)
	require.Equal(t, k, DSTSkippedKey("s1", end.Add(500*time.Millisecond)), "whole seconds")
	require.NotEqual(t, k, DSTSkippedKey("s2", end))
	require.NotEqual(t, k, IdempotencyKey("s1", end), "never a run's key, even one at the gap's end")
}

func TestGapBefore(t *testing.T) {
	t.Parallel()
	parse := func(expr, zone string) *CronSchedule {
		s, err := ParseCron(expr, zone, DialectStandard, time.Time{})
		require.NoError(t, err)
		return s.(*CronSchedule)
	}
	// New York springs forward at 2026-03-08T07:00Z (02:00 EST -> 03:00 EDT).
	end := time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC)
	c := parse("30 2 * * *", "America/New_York")
	next := c.Next(end.Add(-time.Second))
	require.Equal(t, time.Date(2026, 3, 9, 6, 30, 0, 0, time.UTC), next)
	g, ok := c.GapBefore(next, 3)
	require.True(t, ok)
	require.Equal(t, DSTGap{End: end, Locals: []string{"2026-03-08T02:30:00"}, Total: 1}, g)

	g, ok = parse("* 2 * * *", "America/New_York").GapBefore(time.Date(2026, 3, 9, 7, 0, 0, 0, time.UTC), 2)
	require.True(t, ok)
	require.Equal(t, DSTGap{End: end, Locals: []string{"2026-03-08T02:00:00", "2026-03-08T02:01:00"}, Total: 60}, g)

	// A later change (fall back) between the gap and t is stepped over.
	g, ok = c.GapBefore(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), 3)
	require.True(t, ok)
	require.Equal(t, end, g.End)

	// An expression the gap does not touch has none.
	_, ok = parse("0 9 * * *", "America/New_York").GapBefore(next, 3)
	require.False(t, ok)
	_, ok = parse("30 2 * * *", "UTC").GapBefore(next, 3)
	require.False(t, ok)

	// Lord Howe's 30-minute gap, and Havana's at midnight, found from the
	// tz database.
	for _, tc := range []struct{ zone, expr string }{{"Australia/Lord_Howe", "15 2 * * *"}, {"America/Havana", "30 0 * * *"}, {"America/Santiago", "15 0 * * *"}} {
		loc := mustZone(t, tc.zone)
		var spring time.Time
		for _, tr := range zoneTransitions(loc, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)) {
			if offsetAt(loc, tr.Unix()) > offsetAt(loc, tr.Unix()-1) {
				spring = tr
			}
		}
		c := parse(tc.expr, tc.zone)
		n := c.Next(spring.Add(-time.Second))
		g, ok := c.GapBefore(n, 3)
		require.True(t, ok, tc.zone)
		require.Equal(t, spring.UTC(), g.End, tc.zone)
		require.Equal(t, 1, g.Total, tc.zone)
		require.Equal(t, n, c.Next(g.End.Add(-time.Second)), "%s: no fire between the gap and the next time", tc.zone)
	}
}
