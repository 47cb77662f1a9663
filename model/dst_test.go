package model

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// wallKey is a wall clock as seconds since 1970-01-01T00:00:00 of that
// clock, computed through the time package rather than the engine.
func wallKey(lt time.Time) int64 {
	return time.Date(lt.Year(), lt.Month(), lt.Day(), lt.Hour(), lt.Minute(), lt.Second(), 0, time.UTC).Unix()
}

// wallMatches reports whether wall clock w (a wallKey) matches c's fields.
func wallMatches(c *CronSchedule, w int64) bool {
	wt := time.Unix(w, 0).UTC()
	has := func(set uint64, v int) bool { return set&(1<<uint(v)) != 0 }
	domOK, dowOK := has(c.dom, wt.Day()), has(c.dow, int(wt.Weekday()))
	dayOK := domOK || dowOK
	if c.domStar || c.dowStar {
		dayOK = domOK && dowOK
	}
	return dayOK && has(c.month, int(wt.Month())) && has(c.hour, wt.Hour()) && has(c.minute, wt.Minute()) && has(c.second, wt.Second())
}

// oraclePreviewDST is PreviewDST by brute force, for expressions that
// fire at second 0: it walks every UTC minute, counts how many instants
// show each wall clock, and reads the notes off those counts. after must
// be a whole minute.
func oraclePreviewDST(t *testing.T, c *CronSchedule, after time.Time, n int) DSTPreview {
	t.Helper()
	require.Equal(t, uint64(1), c.second, "the oracle walks minutes")
	out := DSTPreview{Times: []FireTime{}, Skipped: []SkippedTime{}}
	var fires []time.Time
	for at := after.Add(time.Minute); len(fires) < n; at = at.Add(time.Minute) {
		require.True(t, at.Before(after.AddDate(1, 0, 0)), "oracle walk too long")
		if oracleMatches(c, at) {
			fires = append(fires, at.UTC())
		}
	}
	last := fires[len(fires)-1]
	seen := map[int64]int{}
	for at := after.Add(-foldWindow); !at.After(last.Add(foldWindow)); at = at.Add(time.Minute) {
		seen[wallKey(at.In(c.loc))]++
	}
	for _, f := range fires {
		ft := FireTime{At: f, Local: f.In(c.loc)}
		if seen[wallKey(ft.Local)] >= 2 {
			ft.DST = DSTRepeated
		}
		out.Times = append(out.Times, ft)
	}
	for w := wallKey(after.In(c.loc)) + 60; w <= wallKey(last.In(c.loc)) && len(out.Skipped) < n; w += 60 {
		if seen[w] == 0 && wallMatches(c, w) {
			out.Skipped = append(out.Skipped, SkippedTime{Local: time.Unix(w, 0).UTC().Format(LocalLayout), Reason: SkipReasonDSTGap})
		}
	}
	return out
}

// TestPreviewDSTOracle compares PreviewDST with the brute-force walk
// around every 2026 offset change of zones with a 1-hour change at 02:00
// (New York), a 30-minute change (Lord Howe) and changes at midnight
// (Havana).
func TestPreviewDSTOracle(t *testing.T) {
	t.Parallel()
	exprs := []string{
		"*/15 * * * *", "30 * * * *", "0,30 0-3 * * *", "* 2 * * *", "0 0 * * *", "30 1 * * *",
		"0 9 * * 1-5", "15,45 1,2 * * *", "* 0 * * *",
	}
	notes := 0
	for _, zone := range []string{"America/New_York", "Australia/Lord_Howe", "America/Havana"} {
		loc, err := LoadZone(zone)
		require.NoError(t, err)
		trans := zoneTransitions(loc, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC))
		require.Len(t, trans, 2, zone)
		for _, tr := range trans {
			for _, expr := range exprs {
				t.Run(fmt.Sprintf("%s/%s/%s", zone, tr.Format(time.DateOnly), expr), func(t *testing.T) {
					s, err := ParseCron(expr, zone, DialectStandard, tr)
					require.NoError(t, err)
					c := s.(*CronSchedule)
					after := tr.Add(-3 * time.Hour).Truncate(time.Minute)
					want := oraclePreviewDST(t, c, after, 20)
					got := PreviewDST(s, nil, after, 20)
					require.Equal(t, len(want.Times), len(got.Times))
					for i := range want.Times {
						require.Equal(t, want.Times[i].At, got.Times[i].At, "time %d", i)
						require.Equal(t, want.Times[i].Local.Format(time.RFC3339), got.Times[i].Local.Format(time.RFC3339), "time %d", i)
						require.Equal(t, want.Times[i].DST, got.Times[i].DST, "time %d at %s", i, got.Times[i].Local)
						if got.Times[i].DST != "" {
							notes++
						}
					}
					require.Equal(t, want.Skipped, got.Skipped)
					notes += len(got.Skipped)
				})
			}
		}
	}
	require.NotZero(t, notes, "the cases must meet DST notes")
}

func TestPreviewDSTExamples(t *testing.T) {
	t.Parallel()
	at := func(s string) time.Time {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			panic(err)
		}
		return t
	}
	type note struct{ local, dst string }
	for _, tc := range []struct {
		name, expr, zone, after string
		n                       int
		times                   []note
		skipped                 []string
	}{
		{
			name: "NewYorkSpringForward", expr: "30 2 * * *", zone: "America/New_York", after: "2026-03-07T00:00:00Z", n: 2,
			times:   []note{{"2026-03-07T02:30:00-05:00", ""}, {"2026-03-09T02:30:00-04:00", ""}},
			skipped: []string{"2026-03-08T02:30:00"},
		},
		{
			name: "NewYorkFallBack", expr: "30 1 * * *", zone: "America/New_York", after: "2026-10-31T12:00:00Z", n: 3,
			times: []note{{"2026-11-01T01:30:00-04:00", "repeated"}, {"2026-11-01T01:30:00-05:00", "repeated"}, {"2026-11-02T01:30:00-05:00", ""}},
		},
		{
			// Clocks go from 02:00 to 02:30 on 2026-10-04.
			name: "LordHoweHalfHourGap", expr: "*/15 2 * * *", zone: "Australia/Lord_Howe", after: "2026-10-03T12:00:00Z", n: 2,
			times:   []note{{"2026-10-04T02:30:00+11:00", ""}, {"2026-10-04T02:45:00+11:00", ""}},
			skipped: []string{"2026-10-04T02:00:00", "2026-10-04T02:15:00"},
		},
		{
			// Midnight does not happen on 2026-03-08: 00:00 CST is 01:00 CDT.
			name: "HavanaMidnightGap", expr: "0 0 * * *", zone: "America/Havana", after: "2026-03-07T12:00:00Z", n: 1,
			times:   []note{{"2026-03-09T00:00:00-04:00", ""}},
			skipped: []string{"2026-03-08T00:00:00"},
		},
		{
			name: "EveryHasNoNotes", expr: "@every 30m", zone: "America/New_York", after: "2026-11-01T05:00:00Z", n: 3,
			times: []note{{"2026-11-01T01:30:00-04:00", ""}, {"2026-11-01T01:00:00-05:00", ""}, {"2026-11-01T01:30:00-05:00", ""}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseCron(tc.expr, tc.zone, DialectStandard, at(tc.after))
			require.NoError(t, err)
			loc, err := LoadZone(tc.zone)
			require.NoError(t, err)
			got := PreviewDST(s, loc, at(tc.after), tc.n)
			var times []note
			for _, ft := range got.Times {
				times = append(times, note{ft.Local.Format(time.RFC3339), string(ft.DST)})
			}
			require.Equal(t, tc.times, times)
			var skipped []string
			for _, sk := range got.Skipped {
				require.Equal(t, SkipReasonDSTGap, sk.Reason)
				skipped = append(skipped, sk.Local)
			}
			require.Equal(t, tc.skipped, skipped)
		})
	}
}

// TestPreviewDSTWindowStart: a gap before a window's start is not listed;
// those local times would not fire anyway.
func TestPreviewDSTWindowStart(t *testing.T) {
	t.Parallel()
	s, err := ParseCron("30 2 * * *", "America/New_York", DialectStandard, time.Time{})
	require.NoError(t, err)
	after := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	require.Len(t, PreviewDST(s, nil, after, 10).Skipped, 1)
	w := Window{Schedule: s, Start: time.Date(2026, 3, 8, 12, 0, 0, 0, time.UTC)}
	p := PreviewDST(w, nil, after, 2)
	require.Empty(t, p.Skipped)
	require.Equal(t, "2026-03-09T02:30:00-04:00", p.Times[0].Local.Format(time.RFC3339))
}
