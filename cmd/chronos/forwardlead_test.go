package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/scheduler"
)

// FORWARD_LEAD_MS=0 means no lead, where the package's zero means its
// default; the default setting is the package's default.
func TestForwardLeadSetting(t *testing.T) {
	t.Parallel()
	for ms, want := range map[int64]time.Duration{0: 0, 250: 250 * time.Millisecond, 750: scheduler.ForwardLeadDefault} {
		cfg := schedulerConfig(Common{}, &SchedulerOpts{ForwardLeadMS: ms})
		require.Equal(t, want, cfg.WithDefaults().ForwardLead, "FORWARD_LEAD_MS=%d", ms)
	}
}
