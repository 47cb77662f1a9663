package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api/auth"
	"github.com/chronos-sched/chronos/api/crontool"
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
	var stderr syncBuffer // the process writes it while the test reads it
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

// An at job added through the tool fires through chronos dev's scheduler
// and launcher: its wake reaches WAKE_URL carrying the job (message,
// name, id, deliver, channel, to), and the job leaves the list.
func TestAtJobWakesAndIsRemoved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	wakes := make(chan []byte, 16)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		wakes <- b
	}))
	t.Cleanup(recv.Close)
	_, base := startInProcessAt(t, "dev", "--http-addr", "127.0.0.1:0", "--log-level", "error", "--auth-jwt-secret", testSecret,
		"--tick-ms", "100", "--wake-url", recv.URL, "--wake-secret", testSecret)
	cl := newAPIClient(base, mintToken(t, testSecret, cronOwner, auth.ScopeSchedulesRead))
	call := func(args string) crontool.Result {
		t.Helper()
		b, err := cl.do(ctx, http.MethodPost, "/v1/tools/cron", []byte(args))
		require.NoError(t, err)
		var res crontool.Result
		require.NoError(t, json.Unmarshal(b, &res))
		return res
	}
	at := time.Now().Add(2 * time.Second).Truncate(time.Second).UTC().Format(time.RFC3339)
	res := call(`{"action":"add","name":"Call mum","message":"Remind me to call mum","at":"` + at + `","channel":"telegram","to":"12345"}`)
	require.False(t, res.IsError, res.Text)
	id := res.Job.ID

	var wake struct {
		OwnerDID    string `json:"owner_did"`
		Label       string `json:"label"`
		WakeMessage string `json:"wake_message"`
		Payload     struct {
			JobID   string `json:"cron_job_id"`
			Kind    string `json:"kind"`
			Deliver bool   `json:"deliver"`
			Channel string `json:"channel"`
			To      string `json:"to"`
		} `json:"payload"`
		ScheduledFor time.Time `json:"scheduled_for"`
	}
	select {
	case b := <-wakes:
		require.NoError(t, json.Unmarshal(b, &wake), string(b))
	case <-time.After(30 * time.Second):
		t.Fatal("no wake within 30s of the at job's time")
	}
	require.Equal(t, cronOwner, wake.OwnerDID)
	require.Equal(t, "Call mum", wake.Label)
	require.Equal(t, "Remind me to call mum", wake.WakeMessage)
	require.Equal(t, id, wake.Payload.JobID)
	require.Equal(t, "agent_turn", wake.Payload.Kind)
	require.True(t, wake.Payload.Deliver)
	require.Equal(t, "telegram", wake.Payload.Channel)
	require.Equal(t, "12345", wake.Payload.To)
	require.Equal(t, at, wake.ScheduledFor.UTC().Format(time.RFC3339))

	// The delivery's success is recorded after the receiver answers: the
	// job leaves the list then.
	require.Eventually(t, func() bool { return call(`{"action":"list"}`).Text == "No scheduled jobs." },
		10*time.Second, 50*time.Millisecond)
	require.Equal(t, "Job "+id+" not found", call(`{"action":"remove","job_id":"`+id+`"}`).Text)
}
