package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api"
	"github.com/chronos-sched/chronos/api/auth"
)

const cliOwner = "did:matrix:cli-user:keyC"

// alarm add, list and cancel, for people and with -o json, as an agent
// (its token) and for an owner (--owner, a token minted with the API's
// secret).
func TestCLIAlarms(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	agent := mintToken(t, testSecret, cliOwner, auth.ScopeSchedulesRead)
	as := func(args ...string) cliResult {
		t.Helper()
		return b.runAs(agent, args...)
	}
	okAs := func(args ...string) string {
		t.Helper()
		r := as(args...)
		require.Equal(t, ExitOK, r.Code, "%v: %s", args, r.Stderr)
		return r.Stdout
	}

	out := okAs("alarm", "add", "--at", "2999-01-01T10:00:00Z", "-m", "check the build", "--label", "build", "--payload", `{"build":42}`)
	require.Regexp(t, `^Alarm \S+ set: once at 2999-01-01T10:00:00Z, next Tue 2999-01-01 10:00:00 UTC\n$`, out)
	out = okAs("alarm", "add", "--cron", "0 9 * * 1-5", "--tz", "Europe/Berlin", "-m", "standup", "--label", "standup")
	require.Regexp(t, `^Alarm \S+ set: cron 0 9 \* \* 1-5, next \w{3} \d{4}-\d\d-\d\d 09:00:00 CES?T\n$`, out)
	var every api.CreatedAlarm
	r := as("alarm", "add", "--every", "1h", "-m", "water", "--idempotency-key", "water", "-o", "json")
	require.Equal(t, ExitOK, r.Code, r.Stderr)
	require.NoError(t, jsonUnmarshalString(r.Stdout, &every))
	require.Equal(t, "every", every.Kind)
	require.EqualValues(t, 3600, every.EverySeconds)
	require.False(t, every.Deduped)
	require.Contains(t, okAs("alarm", "add", "--every", "1h", "-m", "water", "--idempotency-key", "water"), " already set (same --idempotency-key): every 1h")
	require.Regexp(t, `^Alarm \S+ set: once at `, okAs("alarm", "add", "--in", "10m", "-m", "soon"))

	out = okAs("alarm", "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 5, out)
	require.Regexp(t, `^ID\s+STATUS\s+TIMING\s+ZONE\s+NEXT\s+FAILURES\s+LABEL$`, lines[0])
	require.Regexp(t, `(?m)^\S+\s+active\s+once at 2999-01-01T10:00:00Z\s+UTC\s+Tue 2999-01-01 10:00:00 UTC\s+0/5\s+build$`, out)
	require.Regexp(t, `(?m)^`+every.ID+`\s+active\s+every 1h\s+UTC\s+`, out)
	var list api.AlarmList
	r = as("alarm", "list", "-o", "json")
	require.Equal(t, ExitOK, r.Code, r.Stderr)
	require.NoError(t, jsonUnmarshalString(r.Stdout, &list))
	require.Len(t, list.Alarms, 4)

	require.Equal(t, "Alarm "+every.ID+" is cancelled.\n", okAs("alarm", "cancel", every.ID))
	var cancelled api.AlarmView
	r = as("alarm", "cancel", every.ID, "-o", "json")
	require.Equal(t, ExitOK, r.Code, r.Stderr)
	require.NoError(t, jsonUnmarshalString(r.Stdout, &cancelled))
	require.Equal(t, "cancelled", cancelled.Status)
	out = okAs("alarm", "list", "--status", "cancelled")
	require.Len(t, strings.Split(strings.TrimSpace(out), "\n"), 2, out)

	// --owner mints the owner's token with the API's secret: the same
	// agent's alarms.
	r = runCLI(t, "alarm", "list", "--url", b.base, "--owner", cliOwner, "--auth-jwt-secret", testSecret, "--status", "active")
	require.Equal(t, ExitOK, r.Code, r.Stderr)
	require.Len(t, strings.Split(strings.TrimSpace(r.Stdout), "\n"), 4, r.Stdout)
	r = b.run("alarm", "list", "--owner", cliOwner) // the admin token is not the owner's
	require.Equal(t, ExitUsage, r.Code, r.Stderr)
	require.Contains(t, r.Stderr, "is not CHRONOS_TOKEN's sub")
	// Without a token, or with a service's: refused, exit 5.
	r = runCLI(t, "alarm", "list", "--url", b.base)
	require.Equal(t, ExitAuth, r.Code, r.Stderr)
	require.Contains(t, r.Stderr, "no token: set CHRONOS_TOKEN")
	r = b.run("alarm", "list") // the admin token names no DID
	require.Equal(t, ExitAuth, r.Code, r.Stderr)
	// Unknown alarm, and bad input.
	r = as("alarm", "cancel", "nope")
	require.Equal(t, ExitNotFound, r.Code, r.Stderr)
	require.Contains(t, r.Stderr, "`chronos alarm list` lists its ids")
	r = as("alarm", "add", "-m", "when?")
	require.Equal(t, ExitUsage, r.Code, r.Stderr)
	require.Contains(t, r.Stderr, "give one of --in, --at, --cron and --every")
	r = as("alarm", "add", "--cron", "0 9 * * *", "--tz", "Mars/Olympus")
	require.Equal(t, ExitUsage, r.Code, r.Stderr)
	require.Contains(t, r.Stderr, "timezone: ")
	r = as("alarm", "add", "--in", "1m", "--payload", "{not json")
	require.Equal(t, ExitUsage, r.Code, r.Stderr)
}
