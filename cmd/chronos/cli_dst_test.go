package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api"
	"github.com/chronos-sched/chronos/api/auth"
)

// schedule upsert --dst-policy sets the schedule's dst_policy, and
// schedule get shows it with what it does to the next fire times: under
// shift, the local time the spring-forward gap skips fires at the first
// instant after it (03:00 CEST); under last, a repeated local time fires
// at its second instant only, and the first is listed as not firing.
func TestCLIScheduleDSTPolicy(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	b.ok("schedule", "upsert", "--id", "march", "--workflow", "w", "--version", "1", "--user", "me",
		"--cron", "30 2 * 3 0", "--tz", "Europe/Berlin", "--dst-policy", "shift")
	out := b.ok("schedule", "get", "march")
	require.Contains(t, out, "DST policy: spring forward shift, fall back both\n")
	require.Regexp(t, `(?m)^  Sun \d{4}-03-(2[5-9]|3[01]) 03:00:00 CEST  \d{4}-03-\d\dT01:00:00Z  shifted: clocks sprang forward over the planned time; fires at the first instant after the gap$`, out)
	require.NotContains(t, out, "do not fire")
	var d api.ScheduleDetail
	b.okJSON(&d, "schedule", "get", "march")
	require.Empty(t, d.PreviewSkipped)

	b.ok("schedule", "upsert", "--id", "october", "--workflow", "w", "--version", "1", "--user", "me",
		"--cron", "30 2 * 10 0", "--tz", "Europe/Berlin", "--dst-policy", "last")
	out = b.ok("schedule", "get", "october")
	require.Contains(t, out, "DST policy: spring forward skip, fall back last\n")
	require.Regexp(t, `(?m)^  Sun \d{4}-10-(2[5-9]|3[01]) 02:30:00 CET\s+\d{4}-10-\d\dT01:30:00Z  repeated: `, out)
	require.Regexp(t, `\nLocal times that do not fire:\n  Sun \d{4}-10-(2[5-9]|3[01]) 02:30:00 CEST  dst_overlap: this local time happens twice, and fires at its other instant`, out)

	// The alarm of an agent takes the same flag.
	r := b.runAs(mintToken(t, testSecret, cliOwner, auth.ScopeSchedulesRead), "alarm", "add", "--cron", "30 2 * * *", "--tz", "Europe/Berlin",
		"--dst-policy", "shift,first", "-m", "night", "-o", "json")
	require.Equal(t, ExitOK, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, `"dst_policy":{"spring_forward":"shift","fall_back":"first"}`)
}
