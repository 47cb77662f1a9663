package main

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api/auth"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// Each failure has its own exit status and a stderr line saying what to
// do: not found, bad input (the command line's or the API's 400),
// unauthorized or forbidden, conflict, and an API that is not there.
func TestCLIExitCodes(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	b.ok("schedule", "upsert", "--id", "s", "--workflow", "w", "--version", "1", "--user", "me", "--cron", "0 9 * * *")
	reader := mintToken(t, testSecret, "reader", auth.ScopeSchedulesRead)

	for _, tc := range []struct {
		name  string
		token string
		args  []string
		code  int
		says  []string
	}{
		{"get unknown", b.admin, []string{"schedule", "get", "nope"}, ExitNotFound,
			[]string{"GET /schedules/nope?runs=10: chronos answered 404", "No schedule \"nope\": `chronos schedule list` lists the ids."}},
		{"runs unknown", b.admin, []string{"schedule", "runs", "nope"}, ExitNotFound, []string{"answered 404"}},
		{"pause unknown", b.admin, []string{"schedule", "pause", "nope"}, ExitNotFound, []string{"answered 404"}},
		{"resume unknown", b.admin, []string{"schedule", "resume", "nope"}, ExitNotFound, []string{"answered 404"}},
		{"delete unknown", b.admin, []string{"schedule", "delete", "nope"}, ExitNotFound, []string{"answered 404"}},
		{"trigger unknown", b.admin, []string{"schedule", "trigger", "nope"}, ExitNotFound, []string{"answered 404"}},
		{"workflow unknown", b.admin, []string{"workflow", "get", "nope", "1"}, ExitNotFound, []string{"answered 404"}},

		{"bad cron", b.admin, []string{"schedule", "upsert", "--id", "x", "--workflow", "w", "--version", "1", "--user", "me",
			"--cron", "61 * * * *"}, ExitUsage, []string{"POST /schedules/upsert: chronos answered 400: cron_expr: "}},
		{"every field at fault", b.admin, []string{"schedule", "upsert", "--id", "x", "--cron", "* * * * *", "--tz", "Mars/Base"},
			ExitUsage, []string{"answered 400", "\n  workflow_id: ", "\n  timezone: "}},
		{"two timings", b.admin, []string{"schedule", "upsert", "--cron", "* * * * *", "--every", "1m"}, ExitUsage,
			[]string{"give one timing: --cron, --every, --at or --in"}},
		{"half seconds", b.admin, []string{"schedule", "upsert", "--every", "1500ms"}, ExitUsage,
			[]string{"--every 1.5s: must be a positive whole number of seconds"}},
		{"nothing to upsert", b.admin, []string{"schedule", "upsert"}, ExitUsage, []string{"nothing to upsert"}},
		{"bad --dst-policy", b.admin, []string{"schedule", "upsert", "--cron", "* * * * *", "--dst-policy", "shift,never"}, ExitUsage,
			[]string{`"never" is none of skip, shift (spring forward) and both, first, last (fall back)`}},
		{"two spring-forward choices", b.admin, []string{"alarm", "add", "--cron", "* * * * *", "--dst-policy", "shift,skip"}, ExitUsage,
			[]string{"two choices for spring_forward"}},
		{"bad --set", b.admin, []string{"schedule", "upsert", "--set", "novalue"}, ExitUsage, []string{"want FIELD=VALUE"}},
		{"unknown flag", b.admin, []string{"schedule", "list", "--colour"}, ExitUsage, []string{"unknown flag --colour"}},
		{"missing argument", b.admin, []string{"schedule", "get"}, ExitUsage, []string{"expected \"<id>\""}},
		{"bad output", b.admin, []string{"schedule", "list", "-o", "yaml"}, ExitUsage, []string{"--output must be one of"}},
		{"bad status", b.admin, []string{"schedule", "runs", "s", "--status", "DONE"}, ExitUsage, []string{"--status must be one of"}},

		{"no token", "", []string{"schedule", "list"}, ExitAuth,
			[]string{"GET /schedules?limit=50: chronos answered 401", "Set CHRONOS_TOKEN (or --token)"}},
		{"bad token", "not-a-token", []string{"schedule", "get", "s"}, ExitAuth, []string{"answered 401"}},
		{"lacks scope", reader, []string{"schedule", "delete", "s"}, ExitAuth,
			[]string{"answered 403", "lacks scope admin", "mint one that has it"}},
	} {
		r := b.runAs(tc.token, tc.args...)
		require.Equal(t, tc.code, r.Code, "%s: %s", tc.name, r.Stderr)
		require.Empty(t, r.Stdout, tc.name)
		for _, s := range tc.says {
			require.Contains(t, r.Stderr, s, tc.name)
		}
	}

	// The same Idempotency-Key with another body: a conflict.
	b.ok("schedule", "upsert", "--workflow", "w", "--version", "1", "--user", "me", "--cron", "0 9 * * *", "--idempotency-key", "k1")
	r := b.run("schedule", "upsert", "--workflow", "w", "--version", "1", "--user", "me", "--cron", "0 10 * * *", "--idempotency-key", "k1")
	require.Equal(t, ExitConflict, r.Code, r.Stderr)
	require.Contains(t, r.Stderr, "answered 422")

	// Nothing listening: unavailable, naming CHRONOS_URL.
	closed := "http://" + queuetest.RefusedAddr(t)
	r = runCLI(t, "schedule", "list", "--url", closed)
	require.Equal(t, ExitUnavailable, r.Code, r.Stderr)
	require.Contains(t, r.Stderr, "chronos API at "+closed+" (CHRONOS_URL)")
	require.Contains(t, r.Stderr, "Is it running there? Set CHRONOS_URL (or --url)")
}

// The status of errors that are not the API's.
func TestExitCodeOfOtherErrors(t *testing.T) {
	t.Parallel()
	require.Equal(t, ExitOK, exitCode(nil))
	require.Equal(t, ExitFailure, exitCode(errNoAuth), "a server that cannot start")
	require.Equal(t, ExitAuth, exitCode(errNoToken))
	for _, status := range []int{429, 500, 503, 507} {
		require.Equal(t, ExitUnavailable, exitCode(fmt.Errorf("wrapped: %w", &apiError{Status: status})), status)
	}
	require.Equal(t, ExitConflict, exitCode(&apiError{Status: 409}))
	require.Equal(t, ExitUsage, exitCode(&apiError{Status: 413}))
}
