package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api"
	"github.com/chronos-sched/chronos/api/crontool"
	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/scheduler"
)

// cronNow is when the cron tool's tests run: the time the nanobot test
// files' next runs were computed for.
var cronNow = time.Date(2026, 2, 10, 12, 0, 0, 0, time.UTC)

func setupCron(t *testing.T, cfg api.Config, qcfg *queue.Config) *testBundle {
	t.Helper()
	b := setupAlarms(t, cfg, qcfg)
	b.clock.Set(cronNow)
	return b
}

// cron calls the tool as did and returns its result, which is always a
// 200.
func (b *testBundle) cron(t *testing.T, did, args string) crontool.Result {
	t.Helper()
	rec := b.as(t, did, http.MethodPost, "/v1/tools/cron", args)
	require.Equal(t, http.StatusOK, rec.Code, "body: %s", rec.Body.String())
	var res crontool.Result
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &res), rec.Body.String())
	return res
}

var createdJob = regexp.MustCompile(`^Created job '(.*)' \(id: ([0-9a-f]{8})\)$`)

func (b *testBundle) addJob(t *testing.T, did, args string) string {
	t.Helper()
	res := b.cron(t, did, args)
	require.False(t, res.IsError, res.Text)
	m := createdJob.FindStringSubmatch(res.Text)
	require.NotNil(t, m, res.Text)
	return m[2]
}

// Each action and kind through HTTP on a real Redis: the texts a model
// reads, the alarms behind the jobs, and what the wake will carry.
func TestCronToolActions(t *testing.T) {
	t.Parallel()
	b := setupCron(t, api.Config{CronToolTZ: "Europe/Berlin"}, nil)
	require.Equal(t, "No scheduled jobs.", b.cron(t, didA, `{"action":"list"}`).Text)

	every := b.addJob(t, didA, `{"action":"add","message":"Drink water","every_seconds":5400}`)
	cron := b.addJob(t, didA, `{"action":"add","name":"Standup","message":"Send standup reminder","cron_expr":"0 9 * * 1-5","tz":"Asia/Ho_Chi_Minh","channel":"telegram","to":"12345"}`)
	berlin := b.addJob(t, didA, `{"action":"add","message":"Weekly review","cron_expr":"30 17 * * 5"}`)
	at := b.addJob(t, didA, `{"action":"add","message":"Call mum","at":"2026-02-12T10:30:00","deliver":false}`)

	res := b.cron(t, didA, `{"action":"list"}`)
	require.Equal(t, "Scheduled jobs:\n"+
		"- Drink water (id: "+every+", every 90m, next run: 2026-02-10T14:30:00+01:00 (Europe/Berlin))\n"+
		"- Standup (id: "+cron+", cron: 0 9 * * 1-5 (Asia/Ho_Chi_Minh), next run: 2026-02-11T09:00:00+07:00 (Asia/Ho_Chi_Minh))\n"+
		"- Call mum (id: "+at+", at, next run: 2026-02-12T10:30:00+01:00 (Europe/Berlin))\n"+
		"- Weekly review (id: "+berlin+", cron: 30 17 * * 5 (Europe/Berlin), next run: 2026-02-13T17:30:00+01:00 (Europe/Berlin))",
		res.Text)
	require.Len(t, res.Jobs, 4)

	// Each job is an alarm of its owner: label, wake message, idempotency
	// key, and the payload the wake carries.
	alarms := b.listAlarms(t, didA, "")
	require.Len(t, alarms, 4)
	for _, a := range alarms {
		if a.IdempotencyKey != cron {
			continue
		}
		require.Equal(t, "Standup", a.Label)
		require.Equal(t, "Send standup reminder", a.WakeMessage)
		require.Equal(t, "cron", a.Kind)
		require.Equal(t, "Asia/Ho_Chi_Minh", a.Timezone)
		var p map[string]any
		require.NoError(t, json.Unmarshal(a.Payload, &p))
		require.Equal(t, cron, p["cron_job_id"])
		require.Equal(t, true, p["deliver"])
		require.Equal(t, "telegram", p["channel"])
		require.Equal(t, "12345", p["to"])
	}

	require.Equal(t, "Removed job "+cron, b.cron(t, didA, `{"action":"remove","job_id":"`+cron+`"}`).Text)
	res = b.cron(t, didA, `{"action":"remove","job_id":"`+cron+`"}`)
	require.True(t, res.IsError)
	require.Equal(t, "Job "+cron+" not found", res.Text)
	require.Len(t, b.cron(t, didA, `{"action":"list"}`).Jobs, 3)

	// Another owner sees none of it, removes nothing.
	require.Equal(t, "No scheduled jobs.", b.cron(t, didB, `{"action":"list"}`).Text)
	require.Equal(t, "Job "+every+" not found", b.cron(t, didB, `{"action":"remove","job_id":"`+every+`"}`).Text)
	require.Len(t, b.cron(t, didA, `{"action":"list"}`).Jobs, 3)
}

// Every error text reaches the model as a 200 result, and none creates
// anything.
func TestCronToolErrorTexts(t *testing.T) {
	t.Parallel()
	b := setupCron(t, api.Config{AlarmLabelMaxBytes: 40}, nil)
	long := strings.Repeat("x", 41)
	for _, tc := range []struct{ args, want string }{
		{`{}`, "Error: action is required (add, list or remove)"},
		{`[]`, "Error: the arguments must be a JSON object"},
		{`{"action":"pause"}`, "Unknown action: pause (want add, list or remove)"},
		{`{"action":"add"}`, "Error: message is required for add"},
		{`{"action":"add","message":"m"}`, "Error: either every_seconds, cron_expr, or at is required"},
		{`{"action":"add","message":"m","every_seconds":60,"at":"2026-03-01T10:00:00"}`, "Error: give only one of every_seconds, cron_expr, or at"},
		{`{"action":"add","message":"m","every_seconds":60,"tz":"UTC"}`, "Error: tz can only be used with cron_expr or at"},
		{`{"action":"add","message":"m","cron_expr":"0 9 * * *","tz":"Europe/Atlantis"}`, "Error: unknown timezone 'Europe/Atlantis'"},
		{`{"action":"add","message":"m","every_seconds":-1}`, "Error: every_seconds must be between 1 and 3153600000, got -1"},
		{`{"action":"add","message":"m","every_seconds":0.5}`, "Error: every_seconds must be a whole number of seconds, got 0.5"},
		{`{"action":"add","message":"m","every_seconds":60,"channel":5}`, "Error: channel must be a string, got 5"},
		{`{"action":"add","message":"m","every_seconds":60,"deliver":1}`, "Error: deliver must be true or false, got 1"},
		{`{"action":"add","message":"m","cron_expr":"0 9 * *"}`, "Error: invalid cron expression '0 9 * *': want 5 fields (minute hour day-of-month month day-of-week) or a descriptor such as @daily, got 4 fields"},
		{`{"action":"add","message":"m","cron_expr":"0 9 31 2 *"}`, "Error: invalid cron expression '0 9 31 2 *': "},
		{`{"action":"add","message":"m","at":"next tuesday"}`, "Error: invalid ISO datetime format 'next tuesday'. Expected format: YYYY-MM-DDTHH:MM:SS (or RFC 3339 with an offset)"},
		{`{"action":"add","message":"m","at":"2026-02-10T11:59:59Z"}`, "Error: at '2026-02-10T11:59:59Z' (2026-02-10T11:59:59Z (UTC)) is in the past; now is 2026-02-10T12:00:00Z (UTC)"},
		{`{"action":"add","message":"m","every_seconds":60,"name":"` + long + `"}`, "Error: name: longer than 40 bytes, got 41"},
		{`{"action":"add","message":"m","every_seconds":60,"name":"two\nlines"}`, "Error: name: must be one line, without control characters"},
		{`{"action":"remove"}`, "Error: job_id is required for remove"},
		{`{"action":"remove","job_id":"0123abcd"}`, "Job 0123abcd not found"},
	} {
		res := b.cron(t, didA, tc.args)
		require.True(t, res.IsError, tc.args)
		require.True(t, strings.HasPrefix(res.Text, tc.want), "%s: %q does not start with %q", tc.args, res.Text, tc.want)
	}
	require.Empty(t, b.listAlarms(t, didA, ""))
}

// The alarms' limit on active alarms is an answer the model reads.
func TestCronToolActiveLimit(t *testing.T) {
	t.Parallel()
	b := setupCron(t, api.Config{}, &queue.Config{AlarmMaxActive: 1})
	b.addJob(t, didA, `{"action":"add","message":"one","every_seconds":60}`)
	res := b.cron(t, didA, `{"action":"add","message":"two","every_seconds":60}`)
	require.True(t, res.IsError)
	require.True(t, strings.HasPrefix(res.Text, "Error: "+didA+" has 1 active alarms, the most allowed (ALARM_MAX_ACTIVE)"), res.Text)
}

// An at job leaves the list once its run has been delivered, as
// deleteAfterRun asks; its alarm is kept, fired, for audit.
func TestCronToolAtJobRemovedAfterItsRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupCron(t, api.Config{}, nil)
	at := b.addJob(t, didA, `{"action":"add","message":"Call mum","at":"2026-02-10T12:05:00Z"}`)
	every := b.addJob(t, didA, `{"action":"add","message":"Drink water","every_seconds":60}`)
	require.Len(t, b.cron(t, didA, `{"action":"list"}`).Jobs, 2)

	var alarmID string
	for _, a := range b.listAlarms(t, didA, "") {
		if a.IdempotencyKey == at {
			alarmID = a.ID
		}
	}
	require.NotEmpty(t, alarmID)
	fireAt := time.Date(2026, 2, 10, 12, 5, 0, 0, time.UTC)
	b.clock.Set(fireAt)
	s, err := scheduler.New(b.store, nil, nil, nil)
	require.NoError(t, err)
	require.NoError(t, s.TickShard(ctx, queue.ShardOf(alarmID, b.store.Config().Shards)))
	// The launcher's wake executor reports the delivery as a run's
	// success; the run's end marks the once alarm fired.
	key := model.IdempotencyKey(alarmID, fireAt)
	_, err = b.store.UpdateRunStatus(ctx, key, queue.StatusUpdate{Status: model.RunSuccess})
	require.NoError(t, err)
	rec, err := b.store.GetAlarm(ctx, didA, alarmID)
	require.NoError(t, err)
	require.Equal(t, model.AlarmFired, rec.Alarm.Status)

	res := b.cron(t, didA, `{"action":"list"}`)
	require.Len(t, res.Jobs, 1)
	require.Equal(t, every, res.Jobs[0].ID)
	require.Equal(t, "Job "+at+" not found", b.cron(t, didA, `{"action":"remove","job_id":"`+at+`"}`).Text)
}

func TestCronToolSchema(t *testing.T) {
	t.Parallel()
	b := setupCron(t, api.Config{CronToolTZ: "America/Vancouver"}, nil)
	rec := b.as(t, didA, http.MethodGet, "/v1/tools/cron/schema", "")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var def crontool.Definition
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &def))
	require.Equal(t, "cron", def.Name)
	require.Contains(t, def.Description, "read in America/Vancouver")
	require.Equal(t, http.StatusUnauthorized, b.as(t, "", http.MethodGet, "/v1/tools/cron/schema", "").Code)
	require.Equal(t, http.StatusUnauthorized, b.as(t, "", http.MethodPost, "/v1/tools/cron", `{"action":"list"}`).Code)
}

func TestCronToolBadTZConfig(t *testing.T) {
	t.Parallel()
	_, err := api.New(nil, &api.Config{Open: true, CronToolTZ: "Local"}, nil, nil)
	require.Error(t, err)
}

// A nanobot jobs.json with every kind, enabled and disabled, imports,
// exports byte for byte, and imports again as nothing new.
func TestCronToolImportExport(t *testing.T) {
	t.Parallel()
	b := setupCron(t, api.Config{}, nil)
	in, err := os.ReadFile("crontool/nanobot/testdata/roundtrip.json")
	require.NoError(t, err)

	rec := b.as(t, didA, http.MethodPost, "/v1/tools/cron/import", string(in))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var rep crontool.ImportReport
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &rep))
	require.Equal(t, 6, rep.Imported, rec.Body.String())

	rec = b.as(t, didA, http.MethodGet, "/v1/tools/cron/export", "")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, string(in), rec.Body.String())

	rec = b.as(t, didA, http.MethodPost, "/v1/tools/cron/import", string(in))
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &rep))
	require.Equal(t, 6, rep.Existing, rec.Body.String())
	require.Len(t, b.listAlarms(t, didA, ""), 6)

	// Disabled jobs are paused alarms: active, not listed by the tool.
	require.Len(t, b.cron(t, didA, `{"action":"list"}`).Jobs, 3)
	require.Len(t, b.listAlarms(t, didA, "?status=active"), 6)

	// Owner B's export is empty; a file that is no jobs.json is a 400.
	rec = b.as(t, didB, http.MethodGet, "/v1/tools/cron/export", "")
	require.Equal(t, "{\n  \"version\": 1,\n  \"jobs\": []\n}", rec.Body.String())
	requireError(t, b.as(t, didA, http.MethodPost, "/v1/tools/cron/import", `{"version":2}`), http.StatusBadRequest,
		api.CodeInvalidArgument, "jobs.json: jobs.json: version 2, want 1")
}

// bearer adds a token to every request of an HTTP client.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// The MCP tools over streamable HTTP at /mcp, the caller's bearer token
// its identity.
func TestCronToolMCPOverHTTP(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupCron(t, api.Config{}, nil)
	srv := httptest.NewServer(b.e)
	t.Cleanup(srv.Close)

	connect := func(did string) *mcp.ClientSession {
		t.Helper()
		client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp",
			HTTPClient: &http.Client{Transport: bearer{token(t, testSecret, did, time.Hour), http.DefaultTransport}}}, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	text := func(r *mcp.CallToolResult) string { return r.Content[0].(*mcp.TextContent).Text }

	a := connect(didA)
	res, err := a.CallTool(ctx, &mcp.CallToolParams{Name: "cron_add", Arguments: map[string]any{"message": "Stretch", "every_seconds": 1800}})
	require.NoError(t, err)
	require.False(t, res.IsError, text(res))
	id := createdJob.FindStringSubmatch(text(res))[2]

	res, err = a.CallTool(ctx, &mcp.CallToolParams{Name: "cron_list"})
	require.NoError(t, err)
	require.Equal(t, "Scheduled jobs:\n- Stretch (id: "+id+", every 30m, next run: 2026-02-10T12:30:00Z (UTC))", text(res))

	// Another token is another owner.
	res, err = connect(didB).CallTool(ctx, &mcp.CallToolParams{Name: "cron_list"})
	require.NoError(t, err)
	require.Equal(t, "No scheduled jobs.", text(res))

	// No token: refused before MCP.
	resp, err := http.Post(srv.URL+"/mcp", "application/json", strings.NewReader(`{}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}
