package model

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Parses are cached by (expression, zone, dialect); the cache is bounded
// and a cached schedule is the same as a fresh one.
func TestParseCronCache(t *testing.T) {
	ny, err := ParseCron("0 9 * * *", "America/New_York", DialectStandard, time.Time{})
	require.NoError(t, err)
	again, err := ParseCron("0 9 * * *", "America/New_York", DialectStandard, time.Time{})
	require.NoError(t, err)
	require.Same(t, ny, again)
	berlin, err := ParseCron("0 9 * * *", "Europe/Berlin", DialectStandard, time.Time{})
	require.NoError(t, err)
	after := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	require.NotEqual(t, ny.Next(after), berlin.Next(after))

	// @every depends on its anchor: never cached.
	a := time.Date(2026, 1, 1, 0, 0, 7, 0, time.UTC)
	e1, err := ParseCron("@every 1m", "UTC", DialectStandard, a)
	require.NoError(t, err)
	e2, err := ParseCron("@every 1m", "UTC", DialectStandard, a.Add(13*time.Second))
	require.NoError(t, err)
	require.NotEqual(t, e1.Next(a), e2.Next(a))

	for i := range parsedMax + 10 {
		_, err := ParseCron(fmt.Sprintf("%d %d * * *", i%60, (i/60)%24), fmt.Sprint("Etc/GMT+", i/1440%12), DialectStandard, time.Time{})
		require.NoError(t, err)
	}
	require.LessOrEqual(t, parsedCount.Load(), int64(parsedMax))
	fresh, err := ParseCron("0 9 * * *", "America/New_York", DialectStandard, time.Time{})
	require.NoError(t, err)
	require.Equal(t, ny.Next(after), fresh.Next(after))
}
