package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// schedule backfill: a dry run lists what would run, the backfill creates
// it, a second one creates nothing twice; each for people and with -o
// json. A paused schedule is a conflict that says to resume it.
func TestCLIScheduleBackfill(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	b.putHello()
	b.ok("schedule", "upsert", "--id", "hourly", "--workflow", "hello", "--version", "1", "--user", "me", "--cron", "0 * * * *")
	top := time.Now().UTC().Truncate(time.Hour)
	from, to := utcTime(top.Add(-150*time.Minute)), utcTime(top.Add(-30*time.Minute))
	first, second := top.Add(-2*time.Hour), top.Add(-time.Hour)

	out := b.ok("schedule", "backfill", "hourly", "--from", from, "--to", to, "--dry-run")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4, out)
	require.Regexp(t, `^RUN AT\s+OUTCOME\s+RUNNABLE AT\s+STATUS\s+KEY$`, lines[0])
	require.Regexp(t, `^`+first.Format(localLayout)+`\s+would_create\s+-\s+-\s+[0-9a-f]{12}$`, lines[1])
	require.Regexp(t, `^`+second.Format(localLayout)+`\s+would_create\s+`, lines[2])
	require.Equal(t, "Dry run: 2 of 2 planned runs would be created.", lines[3])
	var dry backfillAnswer
	b.okJSON(&dry, "schedule", "backfill", "hourly", "--from", from, "--to", to, "--dry-run")
	require.True(t, dry.DryRun)
	require.Zero(t, dry.Created)
	require.Len(t, dry.Runs, 2)

	out = b.ok("schedule", "backfill", "hourly", "--from", from, "--to", to)
	require.Regexp(t, `(?m)^`+first.Format(localLayout)+`\s+created\s+\w{3} `, out)
	require.True(t, strings.HasSuffix(out, "\n2 of 2 planned runs created.\n"), out)
	var again backfillAnswer
	b.okJSON(&again, "schedule", "backfill", "hourly", "--from", from, "--to", to)
	require.Zero(t, again.Created, "a second backfill creates nothing twice")
	for _, r := range again.Runs {
		require.Equal(t, "exists", r.Outcome)
		require.Equal(t, "backfill", r.Source)
	}
	require.Equal(t, dry.Runs[0].IdempotencyKey, again.Runs[0].IdempotencyKey, "the run's normal key")

	b.ok("schedule", "pause", "hourly")
	r := b.run("schedule", "backfill", "hourly", "--from", from, "--to", to)
	require.Equal(t, ExitConflict, r.Code, r.Stderr)
	require.Contains(t, r.Stderr, "answered 409")
	require.Contains(t, r.Stderr, "`chronos schedule resume hourly` first")

	r = b.run("schedule", "backfill", "hourly", "--from", from, "--to", utcTime(time.Now().Add(time.Hour)))
	require.Equal(t, ExitUsage, r.Code, r.Stderr)
	require.Contains(t, r.Stderr, "to: is in the future")
	r = b.run("schedule", "backfill", "nope", "--from", from, "--to", to)
	require.Equal(t, ExitNotFound, r.Code, r.Stderr)
	r = b.run("schedule", "backfill", "hourly", "--from", from)
	require.Equal(t, ExitUsage, r.Code, r.Stderr)
	require.Contains(t, r.Stderr, "missing flags: --to=STRING")
}
