package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// schedule pause --note keeps why with the schedule, and get shows it;
// schedule resume --catchup replay says how many missed runs it replayed.
func TestCLISchedulePauseNoteAndResumeCatchup(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	b.putHello()
	b.ok("schedule", "upsert", "--id", "n", "--workflow", "hello", "--version", "1", "--user", "me", "--cron", "0 9 * * *",
		"--pause-after-failures", "3")
	require.Contains(t, b.ok("schedule", "get", "n"), "Auto-pause: after 3 consecutive failed runs\n")
	require.Equal(t, "Schedule n is paused\n", b.ok("schedule", "pause", "n", "--note", "maintenance until noon"))
	out := b.ok("schedule", "get", "n")
	require.Regexp(t, `(?m)^Paused:     manual, since \w{3} .* UTC: maintenance until noon$`, out)
	require.Regexp(t, `^Schedule n is active, next run \w{3} \d{4}-\d\d-\d\d 09:00:00 UTC; 0 runs missed while paused replayed\n$`,
		b.ok("schedule", "resume", "n", "--catchup", "replay"))
	var v map[string]any
	b.okJSON(&v, "schedule", "pause", "n", "--note", "again")
	require.Equal(t, "again", v["paused_note"])
	b.okJSON(&v, "schedule", "resume", "n", "--catchup", "skip")
	require.Equal(t, "active", v["state"])
	r := b.run("schedule", "resume", "n", "--catchup", "later")
	require.Equal(t, ExitUsage, r.Code, r.Stderr)
}
