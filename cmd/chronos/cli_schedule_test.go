package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api"
	"github.com/chronos-sched/chronos/api/auth"
)

// cliResult is what one CLI command printed and its exit status.
type cliResult struct {
	Stdout, Stderr string
	Code           int
}

// cliBundle runs the CLI's commands against one chronos dev.
type cliBundle struct {
	t     *testing.T
	base  string
	admin string // a token of scope admin
}

// setupCLI starts chronos dev with tokens required (so the CLI's
// authentication is exercised) and returns a runner of CLI commands
// against it.
func setupCLI(t *testing.T, extra ...string) *cliBundle {
	t.Helper()
	args := append([]string{"dev", "--http-addr", "127.0.0.1:0", "--log-level", "error", "--auth-jwt-secret", testSecret,
		"--tick-ms", "100"}, extra...)
	_, base := startInProcessAt(t, args...)
	return &cliBundle{t: t, base: base, admin: mintToken(t, testSecret, "cli-test", auth.ScopeAdmin)}
}

// run runs a command with --url and the admin token.
func (b *cliBundle) run(args ...string) cliResult {
	b.t.Helper()
	return b.runAs(b.admin, args...)
}

// runAs runs a command with --url and token ("" for none).
func (b *cliBundle) runAs(token string, args ...string) cliResult {
	b.t.Helper()
	args = append(args, "--url", b.base)
	if token != "" {
		args = append(args, "--token", token)
	}
	return runCLI(b.t, args...)
}

// runCLI runs chronos with args as main does, returning its output and
// the exit status main would end with.
func runCLI(t *testing.T, args ...string) cliResult {
	t.Helper()
	var out, errOut bytes.Buffer
	err := execute(context.Background(), args, &Env{Stdout: &out, Stderr: &errOut})
	if err != nil {
		errOut.WriteString("chronos: " + err.Error() + "\n")
	}
	return cliResult{Stdout: out.String(), Stderr: errOut.String(), Code: exitCode(err)}
}

// ok requires a command to succeed and returns its stdout.
func (b *cliBundle) ok(args ...string) string {
	b.t.Helper()
	r := b.run(args...)
	require.Equal(b.t, ExitOK, r.Code, "chronos %v: %s", args, r.Stderr)
	return r.Stdout
}

// okJSON runs a command with -o json and decodes its one document.
func (b *cliBundle) okJSON(v any, args ...string) {
	b.t.Helper()
	out := b.ok(append(args, "-o", "json")...)
	dec := json.NewDecoder(strings.NewReader(out))
	require.NoError(b.t, dec.Decode(v), out)
	require.False(b.t, dec.More(), "one JSON document: %s", out)
}

// putHello stores workflow hello version 1 from a file.
func (b *cliBundle) putHello() {
	b.t.Helper()
	dag := filepath.Join(b.t.TempDir(), "dag.json")
	require.NoError(b.t, os.WriteFile(dag, []byte(`{"nodes":[{"id":"say-hi"}]}`), 0o600))
	require.Equal(b.t, "Workflow hello version 1 stored (27 bytes).\n", b.ok("workflow", "put", "hello", "1", dag))
}

func TestCLIWorkflowPutGet(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	b.putHello()
	require.Equal(t, "{\n  \"nodes\": [\n    {\n      \"id\": \"say-hi\"\n    }\n  ]\n}\n", b.ok("workflow", "get", "hello", "1"))
	require.Equal(t, `{"nodes":[{"id":"say-hi"}]}`+"\n", b.ok("workflow", "get", "hello", "1", "-o", "json"))

	dag := filepath.Join(t.TempDir(), "dag.json")
	require.NoError(t, os.WriteFile(dag, []byte(`{"nodes":[]}`), 0o600))
	var ref api.WorkflowRef
	b.okJSON(&ref, "workflow", "put", "hello", "2", dag)
	require.Equal(t, api.WorkflowRef{WorkflowID: "hello", Version: "2"}, ref)

	r := b.run("workflow", "get", "hello", "3")
	require.Equal(t, ExitNotFound, r.Code, r.Stderr)
	require.Contains(t, r.Stderr, "chronos workflow put hello 3 dag.json")
	require.NoError(t, os.WriteFile(dag, []byte(`[1]`), 0o600))
	r = b.run("workflow", "put", "hello", "4", dag)
	require.Equal(t, ExitUsage, r.Code, r.Stderr)
	require.Contains(t, r.Stderr, "must be a JSON object")
}

// upsert, list, get, runs, pause, resume, trigger and delete, each for
// people and with -o json, on one schedule that fires every second.
func TestCLIScheduleLifecycle(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	b.putHello()

	out := b.ok("schedule", "upsert", "--id", "tick", "--workflow", "hello", "--version", "1", "--user", "me",
		"--cron", "* * * * * *", "--tz", "Europe/Berlin")
	require.Regexp(t, `^Schedule tick created: active, next run \w{3} \d{4}-\d\d-\d\d \d\d:\d\d:\d\d CET\n$`, out)
	var up api.UpsertResponse
	b.okJSON(&up, "schedule", "upsert", "--id", "tick", "--workflow", "hello", "--version", "1", "--user", "me",
		"--cron", "* * * * * *", "--tz", "Europe/Berlin")
	require.False(t, up.Created)
	require.False(t, up.Changed)
	require.Equal(t, "Schedule tick unchanged: active", strings.Split(b.ok("schedule", "upsert", "--id", "tick", "--workflow", "hello",
		"--version", "1", "--user", "me", "--cron", "* * * * * *", "--tz", "Europe/Berlin"), ",")[0])

	// A file body, flags over it, a warning on stderr for a version not
	// stored, and --set for any other field.
	file := filepath.Join(t.TempDir(), "s.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"schedule_id":"nightly","workflow_id":"hello","version":"9","user_id":"me","cron_expr":"0 3 * * *"}`), 0o600))
	r := b.run("schedule", "upsert", "-f", file, "--tz", "America/New_York", "--set", "jitter_ms=1500", "--overlap", "queue")
	require.Equal(t, ExitOK, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, "Schedule nightly created: active, next run ")
	require.Contains(t, r.Stdout, " ES") // EST or EDT
	require.Contains(t, r.Stderr, "warning: workflow hello version 9 is not registered")
	b.ok("schedule", "upsert", "--id", "every", "--workflow", "hello", "--version", "1", "--user", "me", "--every", "90s", "--paused")

	out = b.ok("schedule", "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4, out)
	require.Regexp(t, `^ID\s+STATE\s+TIMING\s+ZONE\s+WORKFLOW\s+NEXT RUN$`, lines[0])
	require.Regexp(t, `(?m)^every\s+paused\s+every 1m30s\s+UTC\s+hello@1\s+-$`, out)
	require.Regexp(t, `(?m)^nightly\s+active\s+cron 0 3 \* \* \*\s+America/New_York\s+hello@9\s+\w{3} \d{4}-\d\d-\d\d 03:00:00 E[SD]T$`, out)
	require.Regexp(t, `(?m)^tick\s+active\s+cron \* \* \* \* \* \*\s+Europe/Berlin\s+hello@1\s+`, out)
	var list api.ScheduleList
	b.okJSON(&list, "schedule", "list")
	require.Len(t, list.Schedules, 3)
	// One a page: the hint names the next page; --all follows them.
	r = b.run("schedule", "list", "--limit", "1")
	require.Equal(t, ExitOK, r.Code)
	require.Len(t, strings.Split(strings.TrimSpace(r.Stdout), "\n"), 2)
	require.Contains(t, r.Stderr, "More schedules: --cursor ")
	b.okJSON(&list, "schedule", "list", "--limit", "1", "--all")
	require.Len(t, list.Schedules, 3)
	require.Empty(t, list.NextCursor)

	// Runs fire; runs lists them, in the schedule's zone.
	require.Eventually(t, func() bool {
		var runs api.RunList
		b.okJSON(&runs, "schedule", "runs", "tick", "--status", "SUCCESS", "--limit", "2")
		if len(runs.Runs) < 2 {
			return false
		}
		require.Regexp(t, `^[0-9a-f]{64}$`, runs.Runs[0].IdempotencyKey, "-o json keeps whole keys")
		return true
	}, 30*time.Second, 100*time.Millisecond, "no two runs of tick succeeded")
	out = b.ok("schedule", "runs", "tick", "--status", "SUCCESS", "--limit", "2")
	require.Regexp(t, `^RUN AT\s+STATUS\s+REASON\s+SOURCE\s+ATTEMPTS\s+KEY\s+ERROR\n\w{3} \d{4}-\d\d-\d\d \d\d:\d\d:\d\d CET\s+SUCCESS\s+-\s+schedule\s+0\s+[0-9a-f]{12}\s+-\n`, out)

	out = b.ok("schedule", "get", "tick")
	for _, want := range []string{"Schedule:   tick\n", "State:      active\n", "Workflow:   hello version 1, for user me\n",
		"Timing:     cron * * * * * *, zone Europe/Berlin\n", "Explained:  Every second, in Europe/Berlin\n",
		"Policies:   overlap skip, catch-up none, jitter 0ms\n", "\nNext fire times in Europe/Berlin:\n", "\nRecent runs:\n  RUN AT"} {
		require.Contains(t, out, want)
	}
	require.Regexp(t, `(?m)^Last run:   \w{3} \d{4}-\d\d-\d\d \d\d:\d\d:\d\d CET  (SUCCESS|ENQUEUED|STARTED|SKIPPED|FAILED)`, out)
	require.Regexp(t, `(?m)^  \w{3} \d{4}-\d\d-\d\d \d\d:\d\d:\d\d CET  \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`, out)
	var d api.ScheduleDetail
	b.okJSON(&d, "schedule", "get", "tick", "--runs", "2")
	require.Equal(t, "tick", d.ID)
	require.Len(t, d.PreviewTimes, api.SchedulePreviewCount)
	require.Len(t, d.RecentRuns, 2)

	// trigger: the schedule's workflow, now; again for the same second
	// starts nothing new.
	out = b.ok("schedule", "trigger", "tick", "--at", "2026-01-02T03:04:05Z")
	require.Regexp(t, `^Started run [0-9a-f]{64} of hello version 1 for Fri 2026-01-02 04:04:05 CET: ENQUEUED\n$`, out)
	var started api.ManualStartResponse
	b.okJSON(&started, "schedule", "trigger", "tick", "--at", "2026-01-02T03:04:05Z")
	require.False(t, started.Started)
	require.Equal(t, "manual", string(started.Run.Source))
	require.Contains(t, b.ok("schedule", "trigger", "tick", "--at", "2026-01-02T03:04:05Z"), "Already started earlier: run ")

	// pause and resume.
	require.Equal(t, "Schedule tick is paused\n", b.ok("schedule", "pause", "tick"))
	require.Contains(t, b.ok("schedule", "get", "tick"), "State:      paused\n")
	var v api.ScheduleView
	b.okJSON(&v, "schedule", "pause", "tick")
	require.Equal(t, api.StatePaused, v.State)
	require.Regexp(t, `^Schedule tick is active, next run \w{3} .* CET\n$`, b.ok("schedule", "resume", "tick"))
	b.okJSON(&v, "schedule", "resume", "tick")
	require.Equal(t, api.StateActive, v.State)

	// delete.
	require.Equal(t, "Schedule tick deleted; its runs stay readable by key for 7 days.\n", b.ok("schedule", "delete", "tick"))
	var del map[string]any
	b.okJSON(&del, "schedule", "delete", "nightly")
	require.Equal(t, map[string]any{"schedule_id": "nightly", "deleted": true}, del)
	r = b.run("schedule", "get", "tick")
	require.Equal(t, ExitNotFound, r.Code)
}

// schedule get shows the next fire times in the schedule's zone with
// their DST notes: a local time that clocks skip (the last Sunday of
// March in Berlin, 02:30) is listed as not firing, and one that happens
// twice (the last Sunday of October) is marked repeated.
func TestCLIScheduleGetShowsDSTNotes(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	b.ok("schedule", "upsert", "--id", "march", "--workflow", "w", "--version", "1", "--user", "me",
		"--cron", "30 2 * 3 0", "--tz", "Europe/Berlin")
	out := b.ok("schedule", "get", "march")
	require.Contains(t, out, "Explained:  At 02:30, on Sunday, in March, in Europe/Berlin\n")
	require.Regexp(t, `(?m)^  Sun \d{4}-03-\d\d 02:30:00 CET  \d{4}-03-\d\dT01:30:00Z$`, out)
	require.Regexp(t, `\nLocal times that do not fire:\n  Sun \d{4}-03-(2[5-9]|3[01]) 02:30:00  dst_gap: clocks spring forward over it\n`, out)
	var d api.ScheduleDetail
	b.okJSON(&d, "schedule", "get", "march")
	require.NotEmpty(t, d.PreviewSkipped)
	require.Equal(t, "dst_gap", d.PreviewSkipped[0].Reason)

	b.ok("schedule", "upsert", "--id", "october", "--workflow", "w", "--version", "1", "--user", "me",
		"--cron", "30 2 * 10 0", "--tz", "Europe/Berlin")
	out = b.ok("schedule", "get", "october")
	require.Regexp(t, `(?m)^  Sun \d{4}-10-(2[5-9]|3[01]) 02:30:00 CEST  \d{4}-10-\d\dT00:30:00Z  repeated: clocks fall back, this local time happens twice$`, out)
	require.NotContains(t, out, "do not fire")
}
