package model_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
)

// The schedule engine specification's error texts, "…" standing for the
// value at fault: agents match on them, so they are kept exactly.
func TestEngineErrorTextsMatchTheSpecification(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	delay := int64(600)
	for _, tc := range []struct {
		err  error
		spec string
	}{
		{once(&delay, "2026-01-01T18:30:00Z", now), "once alarm takes either delay_seconds or fire_at, not both"},
		{once(nil, "", now), "once alarm requires delay_seconds or fire_at"},
		{once(nil, "at noon", now), `invalid fire_at … (want RFC3339)`},
		{once(nil, "2026-01-01T11:00:00Z", now), "fire_at … is not in the future"},
		{once(nil, "2026-01-01T12:00:00Z", now), "fire_at … is not in the future"},
		{cron(""), "empty cron expression"},
		{cron("61 * * * *"), "invalid cron expression …"},
		{cron("@every 10"), "invalid cron expression …"},
		{cron("0 0 30 2 *"), "cron … yields no future time"},
	} {
		require.Error(t, tc.err, tc.spec)
		prefix, suffix, _ := strings.Cut(tc.spec, "…")
		require.True(t, strings.HasPrefix(tc.err.Error(), prefix) && strings.HasSuffix(tc.err.Error(), suffix),
			"%q does not read as the specification's %q", tc.err, tc.spec)
	}
	// The specification's examples resolve.
	at, err := model.ResolveOnce(&delay, "", now)
	require.NoError(t, err)
	require.Equal(t, time.Date(2026, 1, 1, 12, 10, 0, 0, time.UTC), at)
	at, err = model.ResolveOnce(nil, "2026-01-01T18:30:00Z", now)
	require.NoError(t, err)
	require.Equal(t, time.Date(2026, 1, 1, 18, 30, 0, 0, time.UTC), at)
}

func once(delay *int64, fireAt string, now time.Time) error {
	_, err := model.ResolveOnce(delay, fireAt, now)
	return err
}

func cron(expr string) error {
	_, err := model.ParseCron(expr, "UTC", model.DialectStandard, time.Time{})
	return err
}
