package crontool

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api/crontool/nanobot"
)

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("nanobot/testdata/" + name)
	require.NoError(t, err)
	return b
}

func TestImportExportRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, "UTC")
	in := readFile(t, "roundtrip.json")

	rep, err := b.tool.Import(ctx, ownerA, in)
	require.NoError(t, err)
	require.Equal(t, 6, rep.Imported, "%+v", rep)
	for _, j := range rep.Jobs {
		require.Equal(t, OutcomeImported, j.Outcome)
	}
	require.False(t, rep.Jobs[1].Enabled, "disabled jobs stay disabled")

	f, err := b.tool.Export(ctx, ownerA)
	require.NoError(t, err)
	out := nanobot.Encode(f)
	// Every value survives at the import's own time (next runs are the
	// ones chronos computes, and the file was written with them), so the
	// export is the file, byte for byte.
	require.Equal(t, string(in), string(out))
	requireSameKeys(t, in, out)

	// Importing again creates nothing.
	rep, err = b.tool.Import(ctx, ownerA, in)
	require.NoError(t, err)
	require.Equal(t, 6, rep.Existing, "%+v", rep)
	require.Len(t, b.store.alarms, 6)

	// Disabled jobs are not listed; enabled ones are.
	res := b.call(t, `{"action":"list"}`)
	require.Len(t, res.Jobs, 3)
}

// requireSameKeys compares two jobs.json key by key.
func requireSameKeys(t *testing.T, a, b []byte) {
	t.Helper()
	var x, y any
	require.NoError(t, json.Unmarshal(a, &x))
	require.NoError(t, json.Unmarshal(b, &y))
	require.Equal(t, x, y)
}

func TestImportReportsWhatItSkips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, "Europe/Berlin")
	rep, err := b.tool.Import(ctx, ownerA, []byte(`{"version": 1, "jobs": [
		{"id": "00000001", "name": "half seconds", "schedule": {"kind": "every", "everyMs": 1500}, "payload": {"message": "m"}},
		{"id": "00000002", "name": "past", "schedule": {"kind": "at", "atMs": 1000}, "payload": {"message": "m"}},
		{"id": "00000003", "name": "mars", "schedule": {"kind": "cron", "expr": "0 9 * * *", "tz": "Mars/Olympus"}, "payload": {"message": "m"}},
		{"id": "00000004", "name": "local", "schedule": {"kind": "cron", "expr": "0 9 * * *"}, "payload": {"message": "m"}},
		{"id": "00000004", "name": "again", "schedule": {"kind": "every", "everyMs": 60000}, "payload": {"message": "m"}},
		{"name": "no id", "schedule": {"kind": "every", "everyMs": 60000}, "payload": {}},
		{"id": "00000005", "name": "six fields", "schedule": {"kind": "cron", "expr": "0 0 9 * * *", "tz": "UTC"}, "payload": {}},
		{"id": "00000006", "name": "fine", "enabled": false, "schedule": {"kind": "every", "everyMs": 60000}, "payload": {}}
	]}`))
	require.NoError(t, err)
	require.Equal(t, 2, rep.Imported)
	require.Equal(t, 6, rep.Skipped)
	reasons := map[int]string{}
	for _, j := range rep.Jobs {
		reasons[j.Index] = j.Reason
	}
	require.Equal(t, map[int]string{
		0: "schedule.everyMs 1500 is not a whole number of seconds (chronos counts intervals in seconds)",
		1: "schedule.atMs 1000 (1970-01-01T00:00:01Z) is in the past",
		2: `schedule.tz "Mars/Olympus" is not a known IANA time zone`,
		3: "",
		4: "id 00000004 appears earlier in the file",
		5: "cannot be read: id: is required",
		6: `schedule.expr "0 0 9 * * *": want 5 fields (minute hour day-of-month month day-of-week) or a descriptor such as @daily, got 6 fields`,
		7: "",
	}, reasons)
	require.Equal(t, "no schedule.tz: read in Europe/Berlin, chronos's default zone (nanobot read it in its machine's zone)", rep.Jobs[3].Note)
	require.False(t, rep.Jobs[7].Enabled)
}

func TestImportMinimalFile(t *testing.T) {
	t.Parallel()
	b := setup(t, "UTC")
	rep, err := b.tool.Import(context.Background(), ownerA, readFile(t, "minimal.json"))
	require.NoError(t, err)
	require.Equal(t, 3, rep.Imported, "%+v", rep)
	f, err := b.tool.Export(context.Background(), ownerA)
	require.NoError(t, err)
	require.Len(t, f.Jobs, 3)
	require.Equal(t, "UTC", *f.Jobs[1].Schedule.TZ, "a cron job without tz exports the zone chronos reads it in")
	require.Equal(t, "agent_turn", f.Jobs[0].Payload.Kind)
}

func TestExportKeepsRanAtJobsNanobotKeeps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, "UTC")
	_, err := b.tool.Import(ctx, ownerA, readFile(t, "roundtrip.json"))
	require.NoError(t, err)
	b.store.fire(ownerA.Raw, "c0ffee00") // deleteAfterRun true: gone
	b.store.fire(ownerA.Raw, "deadbeef") // deleteAfterRun false: kept, disabled
	f, err := b.tool.Export(ctx, ownerA)
	require.NoError(t, err)
	var ids []string
	for _, j := range f.Jobs {
		ids = append(ids, j.ID)
	}
	require.Equal(t, []string{"a1b2c3d4", "0badc0de", "5e1f00d5", "77aa88bb", "deadbeef"}, ids)
	last := f.Jobs[4]
	require.False(t, last.Enabled)
	require.Nil(t, last.State.NextRunAtMs)
	require.Equal(t, testNow.UnixMilli(), *last.State.LastRunAtMs)
	require.Equal(t, "ok", *last.State.LastStatus)
}
