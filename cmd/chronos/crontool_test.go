package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api/auth"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

const cronOwner = "did:matrix:user-a:keyA"

var createdJobText = regexp.MustCompile(`^Created job '(.*)' \(id: ([0-9a-f]{8})\)$`)

// The SDK's client drives the built binary's `chronos mcp` over stdio,
// against chronos dev: each kind added, listed, one removed, and a
// mistake answered as a result the model reads.
func TestMCPOverStdio(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, base := startInProcessAt(t, "dev", "--http-addr", "127.0.0.1:0", "--log-level", "error", "--auth-jwt-secret", testSecret)
	bin, err := queuetest.BuildChronos(ctx, t.TempDir())
	require.NoError(t, err)

	cmd := exec.Command(bin, "mcp")
	cmd.Env = append(os.Environ(), "CHRONOS_URL="+base, "CHRONOS_TOKEN="+mintToken(t, testSecret, cronOwner, auth.ScopeSchedulesRead))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err, "stderr: %s", stderr.String())
	t.Cleanup(func() { _ = cs.Close() })

	tools, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	require.ElementsMatch(t, []string{"cron_add", "cron_list", "cron_remove"}, names)

	call := func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		require.NoError(t, err, "stderr: %s", stderr.String())
		return res
	}
	text := func(r *mcp.CallToolResult) string { return r.Content[0].(*mcp.TextContent).Text }
	add := func(args map[string]any) string {
		t.Helper()
		res := call("cron_add", args)
		require.False(t, res.IsError, text(res))
		m := createdJobText.FindStringSubmatch(text(res))
		require.NotNil(t, m, text(res))
		return m[2]
	}

	every := add(map[string]any{"message": "Drink water", "every_seconds": 3600})
	cron := add(map[string]any{"message": "Standup", "cron_expr": "0 9 * * 1-5", "tz": "Europe/Berlin"})
	at := add(map[string]any{"message": "Dentist", "at": "2999-01-01T10:00:00Z"})

	list := text(call("cron_list", nil))
	require.True(t, strings.HasPrefix(list, "Scheduled jobs:\n"), list)
	for _, want := range []string{"(id: " + every + ", every 1h, next run: ", "(id: " + cron + ", cron: 0 9 * * 1-5 (Europe/Berlin), next run: ",
		"- Dentist (id: " + at + ", at, next run: 2999-01-01T10:00:00Z (UTC))"} {
		require.Contains(t, list, want)
	}

	require.Equal(t, "Removed job "+cron, text(call("cron_remove", map[string]any{"job_id": cron})))
	require.NotContains(t, text(call("cron_list", nil)), cron)

	res := call("cron_add", map[string]any{"message": "x", "cron_expr": "0 9 * * *", "tz": "Mars/Olympus"})
	require.True(t, res.IsError)
	require.Equal(t, "Error: unknown timezone 'Mars/Olympus'", text(res))
}

// chronos import nanobot and chronos export nanobot, through chronos dev:
// the file imports, imports again as nothing new, and exports.
func TestImportExportNanobot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, base := startInProcessAt(t, "dev", "--http-addr", "127.0.0.1:0", "--log-level", "error", "--auth-jwt-secret", testSecret)
	file := filepath.Join(t.TempDir(), "jobs.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"version": 1, "jobs": [
		{"id": "a1b2c3d4", "name": "Standup", "enabled": true, "schedule": {"kind": "cron", "expr": "0 9 * * *", "tz": "Asia/Ho_Chi_Minh"},
		 "payload": {"kind": "agent_turn", "message": "Send standup reminder", "deliver": true, "channel": "telegram", "to": "12345"},
		 "createdAtMs": 1767225600000, "updatedAtMs": 1767225600000},
		{"id": "5e1f00d5", "name": "Water", "enabled": false, "schedule": {"kind": "every", "everyMs": 7200000}, "payload": {"message": "Drink"}},
		{"id": "0badc0de", "name": "Half", "schedule": {"kind": "every", "everyMs": 1500}, "payload": {"message": "m"}},
		{"id": "deadbeef", "name": "Past", "schedule": {"kind": "at", "atMs": 1000}, "payload": {"message": "m"}},
		{"id": "77aa88bb", "name": "Mars", "schedule": {"kind": "cron", "expr": "0 9 * * *", "tz": "Mars/Olympus"}, "payload": {"message": "m"}}
	]}`), 0o600))

	run := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		err := execute(ctx, append(args, "--url", base, "--owner", cronOwner, "--auth-jwt-secret", testSecret),
			&Env{Stdout: &out, Stderr: io.Discard})
		require.NoError(t, err)
		return out.String()
	}
	require.Equal(t, `a1b2c3d4 "Standup": imported
5e1f00d5 "Water": imported (disabled)
0badc0de "Half": skipped: schedule.everyMs 1500 is not a whole number of seconds (chronos counts intervals in seconds)
deadbeef "Past": skipped: schedule.atMs 1000 (1970-01-01T00:00:01Z) is in the past
77aa88bb "Mars": skipped: schedule.tz "Mars/Olympus" is not a known IANA time zone
2 imported, 0 already imported, 3 skipped
`, run("import", "nanobot", file))
	require.Contains(t, run("import", "nanobot", file), "0 imported, 2 already imported, 3 skipped")

	out := run("export", "nanobot")
	require.True(t, strings.HasPrefix(out, "{\n  \"version\": 1,\n  \"jobs\": [\n    {\n      \"id\": \"a1b2c3d4\",\n"), out)
	require.Contains(t, out, "\"id\": \"5e1f00d5\",\n      \"name\": \"Water\",\n      \"enabled\": false,")
	require.False(t, strings.HasSuffix(out, "\n"), "nanobot's writer ends the file without a newline")

	// The token decides the owner: another DID's --owner with this token
	// is refused before anything is sent.
	err := execute(ctx, []string{"export", "nanobot", "--url", base, "--owner", "did:matrix:user-b:keyB",
		"--token", mintToken(t, testSecret, cronOwner, auth.ScopeSchedulesRead)}, &Env{Stdout: io.Discard, Stderr: io.Discard})
	require.ErrorContains(t, err, "is not CHRONOS_TOKEN's sub")
}
