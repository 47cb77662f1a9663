package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
)

// schedule backfill --overlap-policy queue against chronos dev, whose
// launcher runs every run with the demo executor: the dry run and the
// backfill say which runs wait, and every run of the range then runs, in
// time order, each started by the end of the one before (the runs'
// ends come in that order), and nothing is left in flight.
func TestCLIScheduleBackfillQueue(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	b.putHello()
	b.ok("schedule", "upsert", "--id", "q", "--workflow", "hello", "--version", "1", "--user", "me", "--cron", "0 * * * *")
	top := time.Now().UTC().Truncate(time.Hour)
	from, to := utcTime(top.Add(-210*time.Minute)), utcTime(top.Add(-30*time.Minute))

	out := b.ok("schedule", "backfill", "q", "--from", from, "--to", to, "--overlap-policy", "queue", "--dry-run")
	require.Regexp(t, `(?m)^`+top.Add(-3*time.Hour).Format(localLayout)+`\s+would_create\s`, out)
	require.Regexp(t, `(?m)^`+top.Add(-time.Hour).Format(localLayout)+`\s+would_queue\s`, out)
	require.True(t, strings.HasSuffix(out, "\nDry run: 3 of 3 planned runs would be created, 2 of them would wait for the run before to end (overlap_policy queue).\n"), out)

	out = b.ok("schedule", "backfill", "q", "--from", from, "--to", to, "--overlap-policy", "queue")
	require.True(t, strings.HasSuffix(out, "\n3 of 3 planned runs created, 2 of them wait for the run before to end (overlap_policy queue).\n"), out)

	var runs []model.Run
	require.Eventually(t, func() bool {
		var page struct {
			Runs []model.Run `json:"runs"`
		}
		b.okJSON(&page, "schedule", "runs", "q", "--status", "SUCCESS")
		runs = page.Runs
		return len(runs) == 3
	}, 30*time.Second, 50*time.Millisecond, "every queued run ran: %s", b.ok("schedule", "runs", "q"))
	// Newest first: each run's end came after the end of the run before.
	for i, r := range runs {
		require.Equal(t, model.SourceBackfill, r.Source)
		require.Equal(t, top.Add(-time.Duration(i+1)*time.Hour), r.RunAt.UTC())
		if i > 0 {
			require.False(t, r.UpdatedAt.After(runs[i-1].UpdatedAt), "run at %s ended after the one after it", r.RunAt)
		}
	}
	var again backfillAnswer
	b.okJSON(&again, "schedule", "backfill", "q", "--from", from, "--to", to, "--overlap", "queue")
	require.Zero(t, again.Created, "a second backfill creates nothing twice")

	r := b.run("schedule", "backfill", "q", "--from", from, "--to", to, "--overlap-policy", "buffer")
	require.Equal(t, ExitUsage, r.Code, r.Stderr)
	require.Contains(t, r.Stderr, "--overlap-policy must be one of")
}
