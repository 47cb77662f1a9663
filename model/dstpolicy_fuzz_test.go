package model

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// FuzzDSTPolicyNext: under any policy, Next returns a time after after that
// fires by the policy's words (a matching wall clock, or a gap's end
// under shift), and consistently (Next of the second before it is it);
// PreviewDST's notes and skipped list come out bounded.
func FuzzDSTPolicyNext(f *testing.F) {
	f.Add("30 2 * * *", uint8(1), uint8(0), uint8(0), int64(1772920800))
	f.Add("* 1 * * *", uint8(0), uint8(2), uint8(0), int64(1793426400))
	f.Add("15 2 * * *", uint8(1), uint8(1), uint8(2), int64(1775314800))
	f.Add("*/10 0 * * *", uint8(1), uint8(2), uint8(3), int64(1773000000))
	f.Add("30 23 * * 6", uint8(0), uint8(1), uint8(4), int64(1775300000))
	zones := []string{"America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "America/Havana", "America/Santiago"}
	f.Fuzz(func(t *testing.T, expr string, sf, fb, zone uint8, afterS int64) {
		s, err := ParseCron(expr, zones[int(zone)%len(zones)], DialectStandard, time.Time{})
		if err != nil {
			return
		}
		base, ok := s.(*CronSchedule)
		if !ok {
			return
		}
		p := DSTPolicy{SpringForward: []SpringForward{"", SpringForwardSkip, SpringForwardShift}[int(sf)%3],
			FallBack: []FallBack{"", FallBackBoth, FallBackFirst, FallBackLast}[int(fb)%4]}
		c := base.WithDST(p)
		after := time.Unix(1767225600+afterS%(20*365*86400), 0) // 2026 and 20 years on
		prev := after
		for range 4 {
			n := c.Next(prev)
			if n.IsZero() {
				break
			}
			require.True(t, n.After(prev), "Next(%s) = %s", prev, n)
			matches := c.Next(n.Add(-time.Second)).Equal(n)
			require.True(t, matches, "%q %+v: Next(Next-1s) != Next at %s", expr, p, n)
			if !base.Next(n.Add(-time.Second)).Equal(n) {
				require.Equal(t, SpringForwardShift, c.DSTPolicy().SpringForward, "%q %+v: %s fires but does not match", expr, p, n)
				require.True(t, c.gapShifts(n.Unix()), "%q %+v: %s is no gap's end", expr, p, n)
			}
			prev = n
		}
		pv := PreviewDST(c, nil, after, 5)
		require.LessOrEqual(t, len(pv.Times), 5)
		require.LessOrEqual(t, len(pv.Skipped), 5)
	})
}
