package nanobot

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func read(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	require.NoError(t, err)
	return b
}

// testdata/roundtrip.json and empty.json were written by Python's
// json.dumps(data, indent=2, ensure_ascii=False), nanobot's writer, with
// data laid out as nanobot's _save_store lays it out.
func TestEncodeWritesWhatNanobotWrites(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"roundtrip.json", "empty.json"} {
		want := read(t, name)
		f, err := Decode(want)
		require.NoError(t, err)
		require.Empty(t, f.Invalid)
		require.Equal(t, string(want), string(Encode(f)), name)
	}
}

func TestDecodeReadsEveryKey(t *testing.T) {
	t.Parallel()
	f, err := Decode(read(t, "roundtrip.json"))
	require.NoError(t, err)
	require.Len(t, f.Jobs, 6)
	j := f.Jobs[0]
	require.Equal(t, "a1b2c3d4", j.ID)
	require.Equal(t, "Daily standup", j.Name)
	require.True(t, j.Enabled)
	require.Equal(t, Schedule{Kind: "cron", Expr: ptr("0 9 * * *"), TZ: ptr("Asia/Ho_Chi_Minh")}, j.Schedule)
	require.Equal(t, Payload{Kind: "agent_turn", Message: "Send standup reminder", Deliver: true, Channel: ptr("telegram"), To: ptr("12345")}, j.Payload)
	require.Equal(t, State{NextRunAtMs: ptr[int64](1770775200000), LastRunAtMs: ptr[int64](1770688800000), LastStatus: ptr("ok")}, j.State)
	require.Equal(t, int64(1767225600000), j.CreatedAtMs)
	require.False(t, j.DeleteAfterRun)
	require.Equal(t, "Wochenrückblick: was lief gut? 🎉\nZeile zwei\tmit Tab \u2028 und \\ Backslash", f.Jobs[1].Payload.Message)
	require.Equal(t, "timeout after 30s", *f.Jobs[1].State.LastError)
	require.Equal(t, int64(7200000), *f.Jobs[2].Schedule.EveryMs)
	require.True(t, f.Jobs[4].DeleteAfterRun)
}

func TestDecodeTakesNanobotsDefaults(t *testing.T) {
	t.Parallel()
	f, err := Decode(read(t, "minimal.json"))
	require.NoError(t, err)
	require.Empty(t, f.Invalid)
	require.Equal(t, []Job{
		{ID: "1234abcd", Name: "minimal", Enabled: true, Schedule: Schedule{Kind: "every", EveryMs: ptr[int64](60000)},
			Payload: Payload{Kind: "agent_turn", Message: "hi"}},
		{ID: "5678abcd", Name: "no state", Schedule: Schedule{Kind: "cron", Expr: ptr("0 9 * * 1-5")},
			Payload: Payload{Kind: "agent_turn"}},
		{ID: "9abcdef0", Name: "at", Enabled: true, Schedule: Schedule{Kind: "at", AtMs: ptr[int64](1770892200000)},
			Payload: Payload{Kind: "agent_turn", Message: "float ms", Deliver: true}},
	}, f.Jobs)
}

func TestDecodeKeepsTheJobsItCanRead(t *testing.T) {
	t.Parallel()
	f, err := Decode([]byte(`{"version": 1, "jobs": [
		{"name": "no id", "schedule": {"kind": "every"}, "payload": {}},
		{"id": "aaaaaaaa", "name": "bad kind", "schedule": {"kind": "hourly"}, "payload": {}},
		{"id": "bbbbbbbb", "name": "bad ms", "schedule": {"kind": "every", "everyMs": "60000"}, "payload": {}},
		{"id": "cccccccc", "name": "no payload", "schedule": {"kind": "every", "everyMs": 60000}},
		{"id": "dddddddd", "name": "fine", "schedule": {"kind": "every", "everyMs": 60000}, "payload": {}},
		7
	]}`))
	require.NoError(t, err)
	require.Len(t, f.Jobs, 1)
	require.Equal(t, "dddddddd", f.Jobs[0].ID)
	var got []string
	for _, iv := range f.Invalid {
		got = append(got, iv.ID+": "+iv.Err.Error())
	}
	require.Equal(t, []string{
		": id: is required",
		`aaaaaaaa: schedule.kind: want at, every or cron, got "hourly"`,
		`bbbbbbbb: schedule.everyMs: want a whole number or null, got "60000"`,
		"cccccccc: payload: is required",
		": job is not an object: 7",
	}, got)
	require.Equal(t, 5, f.Invalid[4].Index)
}

func TestDecodeRefusesWhatIsNoJobsFile(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{``, `[]`, `null`, `{"version": 2, "jobs": []}`, `{"jobs": {}}`} {
		_, err := Decode([]byte(bad))
		require.Error(t, err, bad)
	}
}

func TestEncodeEscapesAsPython(t *testing.T) {
	t.Parallel()
	w := &writer{}
	w.str("a\"b\\c\n\r\t\b\f\x01\x1f\x7f<>&\u2028é🎉\xff")
	require.Equal(t, `"a\"b\\c\n\r\t\b\f\u0001\u001f`+"\x7f<>&\u2028é🎉\ufffd"+`"`, w.buf.String())
}

func FuzzDecode(f *testing.F) {
	for _, name := range []string{"roundtrip.json", "empty.json", "minimal.json"} {
		f.Add(read(f, name))
	}
	f.Add([]byte(`{"jobs":[{"id":"x","name":"y","schedule":{"kind":"at","atMs":1e3},"payload":{"to":"\u0000"}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Decode(b)
		if err != nil {
			return
		}
		// What Decode reads, Encode writes and Decode reads back the same,
		// and writing that again changes no byte.
		out := Encode(file)
		again, err := Decode(out)
		require.NoError(t, err, "%s", out)
		require.Empty(t, again.Invalid)
		require.Equal(t, len(file.Jobs), len(again.Jobs))
		for i := range file.Jobs {
			want := file.Jobs[i]
			want.Name, want.ID = valid(want.Name), valid(want.ID)
			require.Equal(t, want.ID, again.Jobs[i].ID)
			require.Equal(t, want.Name, again.Jobs[i].Name)
			require.Equal(t, want.Schedule.EveryMs, again.Jobs[i].Schedule.EveryMs)
			require.Equal(t, want.State, again.Jobs[i].State)
		}
		require.Equal(t, string(out), string(Encode(again)))
	})
}

// valid is s as it survives JSON: invalid UTF-8 as U+FFFD.
func valid(s string) string { return strings.ToValidUTF8(s, "\ufffd") }

func ptr[T any](v T) *T { return &v }
