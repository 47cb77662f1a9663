package crontool

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var testNow = time.Date(2026, 2, 10, 12, 0, 0, 0, time.UTC)

type testBundle struct {
	tool  *Tool
	store *fakeStore
}

func setup(t *testing.T, tz string) *testBundle {
	t.Helper()
	now := func() time.Time { return testNow }
	st := &fakeStore{now: now}
	tool, err := New(st, &Config{DefaultTZ: tz, Now: now})
	require.NoError(t, err)
	return &testBundle{tool: tool, store: st}
}

func (b *testBundle) call(t *testing.T, args string) *Result {
	t.Helper()
	res, err := b.tool.Call(context.Background(), ownerA, []byte(args))
	require.NoError(t, err)
	return res
}

var createdRE = regexp.MustCompile(`^Created job '(.*)' \(id: ([0-9a-f]{8})\)$`)

// add adds a job and returns its id.
func (b *testBundle) add(t *testing.T, args string) string {
	t.Helper()
	res := b.call(t, args)
	require.False(t, res.IsError, res.Text)
	m := createdRE.FindStringSubmatch(res.Text)
	require.NotNil(t, m, res.Text)
	require.Equal(t, m[2], res.Job.ID)
	return m[2]
}

func TestErrorTexts(t *testing.T) {
	t.Parallel()
	b := setup(t, "Europe/Berlin")
	for _, tc := range []struct{ args, want string }{
		{`{"action":"add"}`, "Error: message is required for add"},
		{`{"action":"add","message":""}`, "Error: message is required for add"},
		{`{"action":"add","message":"hi"}`, "Error: either every_seconds, cron_expr, or at is required"},
		{`{"action":"add","message":"hi","every_seconds":0,"cron_expr":"","at":""}`, "Error: either every_seconds, cron_expr, or at is required"},
		{`{"action":"add","message":"hi","every_seconds":60,"cron_expr":"0 9 * * *"}`, "Error: give only one of every_seconds, cron_expr, or at"},
		{`{"action":"add","message":"hi","every_seconds":60,"tz":"Europe/Berlin"}`, "Error: tz can only be used with cron_expr or at"},
		{`{"action":"add","message":"hi","cron_expr":"0 9 * * *","tz":"Mars/Olympus"}`, "Error: unknown timezone 'Mars/Olympus'"},
		{`{"action":"add","message":"hi","cron_expr":"0 9 * * *","tz":"Local"}`, "Error: unknown timezone 'Local'"},
		{`{"action":"add","message":"hi","every_seconds":-5}`, "Error: every_seconds must be between 1 and 3153600000, got -5"},
		{`{"action":"add","message":"hi","every_seconds":1.5}`, "Error: every_seconds must be a whole number of seconds, got 1.5"},
		{`{"action":"add","message":"hi","every_seconds":"60"}`, `Error: every_seconds must be a whole number of seconds, got "60"`},
		{`{"action":"add","message":7}`, "Error: message must be a string, got 7"},
		{`{"action":"add","message":"hi","every_seconds":60,"deliver":"yes"}`, `Error: deliver must be true or false, got "yes"`},
		{`{"action":"add","message":"hi","cron_expr":"0 0 9 * * *"}`, "Error: invalid cron expression '0 0 9 * * *': want 5 fields (minute hour day-of-month month day-of-week) or a descriptor such as @daily, got 6 fields"},
		{`{"action":"add","message":"hi","at":"tomorrow"}`, "Error: invalid ISO datetime format 'tomorrow'. Expected format: YYYY-MM-DDTHH:MM:SS (or RFC 3339 with an offset)"},
		{`{"action":"add","message":"hi","at":"2026-02-10T12:00:00"}`, "Error: at '2026-02-10T12:00:00' (2026-02-10T12:00:00+01:00 (Europe/Berlin)) is in the past; now is 2026-02-10T13:00:00+01:00 (Europe/Berlin)"},
		{`{"action":"remove"}`, "Error: job_id is required for remove"},
		{`{"action":"remove","job_id":"deadbeef"}`, "Job deadbeef not found"},
		{`{"action":"pause"}`, "Unknown action: pause (want add, list or remove)"},
		{`{}`, "Error: action is required (add, list or remove)"},
		{`[1]`, "Error: the arguments must be a JSON object"},
	} {
		res := b.call(t, tc.args)
		require.True(t, res.IsError, tc.args)
		require.Equal(t, tc.want, res.Text, tc.args)
	}
	require.True(t, strings.HasPrefix(b.call(t, `{"action":"add","message":"hi","cron_expr":"61 * * * *"}`).Text,
		"Error: invalid cron expression '61 * * * *': "))
	require.Empty(t, b.store.alarms, "no call above creates anything")
}

func TestAddListRemove(t *testing.T) {
	t.Parallel()
	b := setup(t, "UTC")
	require.Equal(t, "No scheduled jobs.", b.call(t, `{"action":"list"}`).Text)

	every := b.add(t, `{"action":"add","message":"Drink water, every two hours of the day","every_seconds":7200}`)
	cron := b.add(t, `{"action":"add","name":"Daily standup","message":"Send standup reminder","cron_expr":"0 9 * * *","tz":"Asia/Ho_Chi_Minh","channel":"telegram","to":"12345"}`)
	at := b.add(t, `{"action":"add","message":"Call mum","at":"2026-02-12T10:30:00","tz":"Europe/Berlin","deliver":false}`)

	res := b.call(t, `{"action":"list"}`)
	require.False(t, res.IsError)
	require.Equal(t, "Scheduled jobs:\n"+
		"- Drink water, every two hours o (id: "+every+", every 2h, next run: 2026-02-10T14:00:00Z (UTC))\n"+
		"- Daily standup (id: "+cron+", cron: 0 9 * * * (Asia/Ho_Chi_Minh), next run: 2026-02-11T09:00:00+07:00 (Asia/Ho_Chi_Minh))\n"+
		"- Call mum (id: "+at+", at, next run: 2026-02-12T09:30:00Z (UTC))", res.Text)
	require.Len(t, res.Jobs, 3)
	require.Equal(t, "Daily standup", res.Jobs[1].Name)
	require.Equal(t, "telegram", *res.Jobs[1].Channel)
	require.True(t, res.Jobs[1].Deliver)
	require.False(t, res.Jobs[2].Deliver)
	require.Equal(t, time.Date(2026, 2, 12, 9, 30, 0, 0, time.UTC), *res.Jobs[2].At)

	// The wake carries the job: its alarm's payload names it.
	for _, a := range b.store.alarms {
		require.Contains(t, string(a.Alarm.Payload), `"cron_job_id":"`+a.Alarm.IdempotencyKey+`"`)
	}

	require.Equal(t, "Removed job "+cron, b.call(t, `{"action":"remove","job_id":"`+cron+`"}`).Text)
	res = b.call(t, `{"action":"remove","job_id":"`+cron+`"}`)
	require.True(t, res.IsError)
	require.Equal(t, "Job "+cron+" not found", res.Text)

	// An at job leaves the list once it has run.
	b.store.fire(ownerA.Raw, at)
	res = b.call(t, `{"action":"list"}`)
	require.Equal(t, "Scheduled jobs:\n- Drink water, every two hours o (id: "+every+", every 2h, next run: 2026-02-10T14:00:00Z (UTC))", res.Text)

	// Another owner sees none of it and removes nothing.
	other, err := b.tool.Call(context.Background(), ownerB, []byte(`{"action":"remove","job_id":"`+every+`"}`))
	require.NoError(t, err)
	require.Equal(t, "Job "+every+" not found", other.Text)
	other, err = b.tool.Call(context.Background(), ownerB, []byte(`{"action":"list"}`))
	require.NoError(t, err)
	require.Equal(t, "No scheduled jobs.", other.Text)
}

// The alarms of at jobs that ran are kept, fired: however many there
// are, they never crowd the active jobs out of the store's bounded list.
func TestFiredAlarmsDoNotHideJobs(t *testing.T) {
	t.Parallel()
	b := setup(t, "UTC")
	b.store.limit = 2
	every := b.add(t, `{"action":"add","message":"Drink water","every_seconds":3600}`)
	for range 3 {
		id := b.add(t, `{"action":"add","message":"Once","at":"2026-03-01T10:00:00Z"}`)
		b.store.fire(ownerA.Raw, id)
	}
	res := b.call(t, `{"action":"list"}`)
	require.Len(t, res.Jobs, 1)
	require.Equal(t, every, res.Jobs[0].ID)
	require.Equal(t, "Removed job "+every, b.call(t, `{"action":"remove","job_id":"`+every+`"}`).Text)
}

func TestDefaultNameCountsCharacters(t *testing.T) {
	t.Parallel()
	require.Equal(t, "短い", defaultName("短い"))
	require.Equal(t, strings.Repeat("é", 30), defaultName(strings.Repeat("é", 31)))
}

func TestParseAt(t *testing.T) {
	t.Parallel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	for _, tc := range []struct {
		in   string
		loc  *time.Location
		want string
	}{
		{"2026-02-12T10:30:00Z", berlin, "2026-02-12T10:30:00Z"},
		{"2026-02-12T10:30:00+07:00", berlin, "2026-02-12T03:30:00Z"},
		{"2026-02-12T10:30:00", berlin, "2026-02-12T09:30:00Z"},
		{"2026-02-12T10:30", time.UTC, "2026-02-12T10:30:00Z"},
		{"2026-02-12 10:30:00.5", time.UTC, "2026-02-12T10:30:00.5Z"},
		// Skipped by the spring-forward change: moved forward by it.
		{"2026-03-29T02:30:00", berlin, "2026-03-29T01:30:00Z"},
		// Twice on the fall-back night: the first.
		{"2026-10-25T02:30:00", berlin, "2026-10-25T00:30:00Z"},
	} {
		got, ok := ParseAt(tc.in, tc.loc)
		require.True(t, ok, tc.in)
		require.Equal(t, tc.want, got.UTC().Format(time.RFC3339Nano), tc.in)
	}
	for _, bad := range []string{"", "12/02/2026", "2026-02-12T25:00:00", "now"} {
		_, ok := ParseAt(bad, time.UTC)
		require.False(t, ok, bad)
	}
}

// Whatever a model sends, the tool answers with a text and no server
// error, and what it creates lists back.
func FuzzCall(f *testing.F) {
	for _, s := range validCalls {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"action":"add","message":"\u0000","at":"2026-03-29T02:30:00","tz":"Europe/Berlin"}`))
	f.Add([]byte(`{"action":"add","message":"m","every_seconds":1e300}`))
	f.Add([]byte(`{"action":"add","message":"m","cron_expr":"@every 0s"}`))
	f.Fuzz(func(t *testing.T, args []byte) {
		b := setup(t, "Asia/Kolkata")
		res, err := b.tool.Call(context.Background(), ownerA, args)
		require.NoError(t, err)
		require.NotEmpty(t, res.Text)
		if res.Job != nil {
			list, err := b.tool.Call(context.Background(), ownerA, []byte(`{"action":"list"}`))
			require.NoError(t, err)
			require.Len(t, list.Jobs, 1)
			require.Equal(t, res.Job.ID, list.Jobs[0].ID)
		}
	})
}
