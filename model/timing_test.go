package model

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestEveryNext(t *testing.T) {
	t.Parallel()
	anchor := mustTime(t, "2026-01-01T00:00:00Z")
	e := Every{Interval: 90 * time.Minute, Anchor: anchor}
	tests := []struct{ after, want string }{
		{"2025-06-01T00:00:00Z", "2026-01-01T01:30:00Z"}, // before the anchor: k = 1
		{"2026-01-01T00:00:00Z", "2026-01-01T01:30:00Z"},
		{"2026-01-01T01:29:59.999Z", "2026-01-01T01:30:00Z"},
		{"2026-01-01T01:30:00Z", "2026-01-01T03:00:00Z"},
		{"2026-01-01T01:30:00.5Z", "2026-01-01T03:00:00Z"},
		{"2036-01-01T00:00:00Z", "2036-01-01T01:30:00Z"}, // no drift over ten years
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, e.Next(mustTime(t, tt.after)).Format(time.RFC3339), "after %s", tt.after)
	}

	// The anchor's sub-second part is dropped, and its zone does not matter.
	tokyo, err := LoadZone("Asia/Tokyo")
	require.NoError(t, err)
	e2 := Every{Interval: time.Hour, Anchor: anchor.Add(400 * time.Millisecond).In(tokyo)}
	got := e2.Next(anchor)
	require.Equal(t, "2026-01-01T01:00:00Z", got.Format(time.RFC3339Nano))
	require.Equal(t, time.UTC, got.Location())

	// Invalid intervals and anchors, and the year-9999 limit, give zero.
	for _, bad := range []Every{
		{Interval: 0, Anchor: anchor},
		{Interval: -time.Second, Anchor: anchor},
		{Interval: 1500 * time.Millisecond, Anchor: anchor},
		{Interval: time.Hour, Anchor: time.Unix(1<<40, 0)},
	} {
		require.True(t, bad.Next(anchor).IsZero(), "%+v", bad)
	}
	require.True(t, e.Next(mustTime(t, "9999-12-31T23:00:00Z")).IsZero())
	require.Equal(t, "2026-01-01T01:30:00Z", e.Next(time.Unix(-1<<62, 0)).Format(time.RFC3339))
}

func TestParseCronEvery(t *testing.T) {
	t.Parallel()
	anchor := mustTime(t, "2026-01-01T00:00:00.7Z")
	s, err := ParseCron("@every 1h30m", "Europe/Berlin", "", anchor)
	require.NoError(t, err)
	require.Equal(t, Every{Interval: 90 * time.Minute, Anchor: mustTime(t, "2026-01-01T00:00:00Z")}, s)
	require.Equal(t, []string{"2026-01-01T01:30:00Z", "2026-01-01T03:00:00Z"},
		formatTimes(Preview(s, anchor, 2)))

	// In a stateless preview the anchor is the preview's start.
	after := mustTime(t, "2026-03-01T10:20:30Z")
	s, err = ParseCron(" @every 45s ", "", DialectStandard, after)
	require.NoError(t, err)
	require.Equal(t, []string{"2026-03-01T10:21:15Z", "2026-03-01T10:22:00Z"}, formatTimes(Preview(s, after, 2)))
}

func TestOnceNext(t *testing.T) {
	t.Parallel()
	o := Once{At: mustTime(t, "2026-01-01T12:00:00Z")}
	require.Equal(t, "2026-01-01T12:00:00Z", o.Next(mustTime(t, "2026-01-01T11:59:59.9Z")).Format(time.RFC3339))
	require.True(t, o.Next(mustTime(t, "2026-01-01T12:00:00Z")).IsZero())
	require.True(t, o.Next(mustTime(t, "2027-01-01T00:00:00Z")).IsZero())
	require.Equal(t, []string{"2026-01-01T12:00:00Z"}, formatTimes(Preview(o, time.Time{}, 5)))
	// A sub-second At rounds up, like ResolveOnce.
	require.Equal(t, "2026-01-01T12:00:01Z", Once{At: mustTime(t, "2026-01-01T12:00:00.2Z")}.Next(time.Time{}).Format(time.RFC3339Nano))
}

func TestWindowNext(t *testing.T) {
	t.Parallel()
	hourly := mustCron(t, "0 * * * *", "", "")
	w := Window{
		Schedule: hourly,
		Start:    mustTime(t, "2026-01-01T03:00:00Z"),
		End:      mustTime(t, "2026-01-01T06:00:00Z"),
	}
	// Start and End are both inclusive.
	require.Equal(t, []string{"2026-01-01T03:00:00Z", "2026-01-01T04:00:00Z", "2026-01-01T05:00:00Z", "2026-01-01T06:00:00Z"},
		formatTimes(Preview(w, mustTime(t, "2026-01-01T00:00:00Z"), 10)))
	require.Equal(t, "2026-01-01T05:00:00Z", w.Next(mustTime(t, "2026-01-01T04:30:00Z")).Format(time.RFC3339))
	require.True(t, w.Next(mustTime(t, "2026-01-01T06:00:00Z")).IsZero())

	// Open sides.
	require.Equal(t, "2026-01-01T01:00:00Z", Window{Schedule: hourly, End: w.End}.Next(mustTime(t, "2026-01-01T00:00:00Z")).Format(time.RFC3339))
	require.Equal(t, "2026-01-01T03:00:00Z", Window{Schedule: hourly, Start: w.Start}.Next(time.Time{}).Format(time.RFC3339))
	require.Equal(t, "2027-01-01T01:00:00Z", Window{Schedule: hourly, Start: w.Start}.Next(mustTime(t, "2027-01-01T00:00:00Z")).Format(time.RFC3339))

	// An off-grid Start: the first fire time at or after it.
	require.Equal(t, "2026-01-01T04:00:00Z", Window{Schedule: hourly, Start: mustTime(t, "2026-01-01T03:00:00.001Z")}.Next(time.Time{}).Format(time.RFC3339))

	require.True(t, Window{}.Next(time.Time{}).IsZero())
	require.True(t, Window{Schedule: Once{}, Start: w.Start}.Next(time.Time{}).IsZero())
}

func TestPreview(t *testing.T) {
	t.Parallel()
	c := mustCron(t, "0 0 * * *", "", "")
	after := mustTime(t, "2026-01-01T00:00:00Z")
	require.Empty(t, Preview(c, after, 0))
	require.NotNil(t, Preview(c, after, 0))
	require.NotNil(t, Preview(c, after, -3))
	require.NotNil(t, Preview(nil, after, 3))
	require.Len(t, Preview(c, after, 500), 500)
	// Stops early when the schedule runs out.
	require.Len(t, Preview(Once{At: after.Add(time.Hour)}, after, 5), 1)
	require.Empty(t, Preview(c, mustTime(t, "9999-12-31T00:00:00Z"), 5))
}

func TestResolveOnce(t *testing.T) {
	t.Parallel()
	now := mustTime(t, "2026-01-01T12:00:00.250Z")
	ptr := func(v int64) *int64 { return &v }
	tests := []struct {
		name    string
		delay   *int64
		fireAt  string
		want    string
		wantErr string
	}{
		{name: "delay rounds up", delay: ptr(600), want: "2026-01-01T12:10:01Z"},
		{name: "delay from a whole second", delay: ptr(1), want: "2026-01-01T12:00:02Z"},
		{name: "fire_at", fireAt: "2026-01-02T09:00:00+01:00", want: "2026-01-02T08:00:00Z"},
		{name: "fire_at with fraction rounds up", fireAt: "2026-01-01T12:00:00.5Z", want: "2026-01-01T12:00:01Z"},
		{name: "both", delay: ptr(5), fireAt: "2026-01-02T00:00:00Z", wantErr: "once alarm takes either delay_seconds or fire_at, not both"},
		{name: "neither", wantErr: "once alarm requires delay_seconds or fire_at"},
		{name: "zero delay", delay: ptr(0), wantErr: "delay_seconds must be > 0"},
		{name: "negative delay", delay: ptr(-5), wantErr: "delay_seconds must be > 0"},
		{name: "huge delay", delay: ptr(1 << 62), wantErr: "delay_seconds 4611686018427387904 is too large (fire time after year 9999)"},
		{name: "fire_at past year 9999 in UTC", fireAt: "9999-12-31T23:59:59-05:00", wantErr: "fire_at 9999-12-31T23:59:59-05:00 is after year 9999 in UTC"},
		{name: "fire_at rounding past year 9999", fireAt: "9999-12-31T23:59:59.5Z", wantErr: "fire_at 9999-12-31T23:59:59.5Z is after year 9999 in UTC"},
		{name: "not rfc3339", fireAt: "tomorrow", wantErr: `invalid fire_at "tomorrow" (want RFC3339)`},
		{name: "no zone", fireAt: "2026-01-02T00:00:00", wantErr: `invalid fire_at "2026-01-02T00:00:00" (want RFC3339)`},
		{name: "past", fireAt: "2025-12-31T00:00:00Z", wantErr: "fire_at 2025-12-31T00:00:00Z is not in the future"},
		{name: "now", fireAt: "2026-01-01T12:00:00.25Z", wantErr: "fire_at 2026-01-01T12:00:00.25Z is not in the future"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ResolveOnce(tt.delay, tt.fireAt, now)
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				require.True(t, got.IsZero())
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got.Format(time.RFC3339Nano))
			require.Equal(t, time.UTC, got.Location())
		})
	}
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	at := mustTime(t, "2026-01-01T14:00:00Z")
	// printf nightly:1767276000 | sha256sum
	want := "237dc51181b851105c5b4e4f1d54c385cae17d26ff413c7e9cb8d92f16855a37"
	require.Equal(t, want, IdempotencyKey("nightly", at))
	// Zone and sub-second parts do not change the key.
	ny, err := LoadZone("America/New_York")
	require.NoError(t, err)
	require.Equal(t, want, IdempotencyKey("nightly", at.In(ny).Add(300*time.Millisecond)))
	require.NotEqual(t, want, IdempotencyKey("nightly", at.Add(time.Second)))
	require.NotEqual(t, want, IdempotencyKey("nightly2", at))
}

func TestJitterOffset(t *testing.T) {
	t.Parallel()
	require.Zero(t, JitterOffset("k", 0))
	require.Zero(t, JitterOffset("k", -time.Second))
	require.Zero(t, JitterOffset("k", 999*time.Microsecond))

	max := 30 * time.Second
	seen := map[time.Duration]bool{}
	for i := range 2000 {
		key := IdempotencyKey("s", time.Unix(int64(i), 0))
		j := JitterOffset(key, max)
		require.Equal(t, j, JitterOffset(key, max), "deterministic")
		require.LessOrEqual(t, j, max)
		require.GreaterOrEqual(t, j, -max)
		require.Zero(t, j%time.Millisecond)
		seen[j] = true
	}
	require.Greater(t, len(seen), 1900, "offsets should spread over the range")

	// Any string is a key, and huge maxima do not overflow.
	for _, key := range []string{"", "not hex", "\xff\x00"} {
		j := JitterOffset(key, time.Duration(1<<63-1))
		require.LessOrEqual(t, j, time.Duration(1<<63-1))
		require.GreaterOrEqual(t, j, -time.Duration(1<<63-1))
	}
	require.Equal(t, time.Duration(0), JitterOffset("x", time.Millisecond)%time.Millisecond)
}

func TestLoadZone(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"", "UTC"} {
		loc, err := LoadZone(name)
		require.NoError(t, err)
		require.Equal(t, time.UTC, loc)
	}
	loc, err := LoadZone("Australia/Lord_Howe")
	require.NoError(t, err)
	require.Equal(t, "Australia/Lord_Howe", loc.String())
	again, err := LoadZone("Australia/Lord_Howe")
	require.NoError(t, err)
	require.Same(t, loc, again, "cached")

	// Names of files beside the zones in a system's zoneinfo: the host's
	// own zone, its default rules, leap-second and POSIX copies of zones
	// (not in Go's embedded database, so not the same on every host).
	machine := []string{"localtime", "posixrules", "right/Europe/Berlin", "posix/Europe/Berlin", "zone.tab", "tzdata.zi", "leapseconds"}
	for _, bad := range append([]string{"Local", "Nowhere/City", "america/new_york", "/etc/localtime", "America/../Europe/Berlin", "America/", "Europe\\Berlin"}, machine...) {
		_, err := LoadZone(bad)
		require.EqualError(t, err, fmt.Sprintf("unknown time zone %q", bad))
	}
}

// A once record compiles to a schedule that never fires before fire_at,
// even with a sub-second fire_at.
func TestOnceRecordNeverFiresEarly(t *testing.T) {
	at := time.Date(2030, 1, 1, 10, 0, 0, 500_000_000, time.UTC)
	rec := ScheduleRecord{ID: "o", Kind: KindOnce, WorkflowID: "w", Version: "1", FireAt: &at,
		OverlapPolicy: OverlapAllow, CatchupPolicy: CatchupNone}
	require.NoError(t, rec.Validate())
	s, err := rec.Compile()
	require.NoError(t, err)
	require.Equal(t, at.Truncate(time.Second).Add(time.Second), s.Next(at.Add(-time.Hour)))
}

// every_seconds is bounded above: beyond time.Duration's range a huge
// interval would overflow into a tiny one.
func TestEverySecondsIsBounded(t *testing.T) {
	rec := ScheduleRecord{ID: "e", Kind: KindEvery, WorkflowID: "w", Version: "1",
		OverlapPolicy: OverlapAllow, CatchupPolicy: CatchupNone, Anchor: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	for _, n := range []int64{0, MaxEverySeconds + 1, 1<<55 + 1} {
		rec.EverySeconds = n
		require.ErrorContains(t, rec.Validate(), "every_seconds: must be between 1 and", "every_seconds %d", n)
	}
	rec.EverySeconds = MaxEverySeconds
	require.NoError(t, rec.Validate())
	s, err := rec.Compile()
	require.NoError(t, err)
	require.Equal(t, rec.Anchor.Add(MaxEverySeconds*time.Second), s.Next(rec.Anchor))
}
