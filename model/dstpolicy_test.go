package model

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDSTPolicyParseAndString(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]DSTPolicy{
		"":              {},
		"skip":          {},
		"both":          {},
		"skip,both":     {},
		"shift":         {SpringForward: SpringForwardShift},
		"first":         {FallBack: FallBackFirst},
		"last,shift":    {SpringForward: SpringForwardShift, FallBack: FallBackLast},
		" shift , last": {SpringForward: SpringForwardShift, FallBack: FallBackLast},
	} {
		got, err := ParseDSTPolicy("dst_policy", in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
		back, err := ParseDSTPolicy("dst_policy", got.String())
		require.NoError(t, err)
		require.Equal(t, got, back, "String reads back")
	}
	require.Equal(t, "shift,last", DSTPolicy{SpringForward: "shift", FallBack: "last"}.String())
	require.Equal(t, "", DSTPolicy{SpringForward: "skip", FallBack: "both"}.String())
	for in, msg := range map[string]string{
		"later":      `dst_policy: unknown value "later" (want skip or shift for spring_forward, both, first or last for fall_back, comma-separated)`,
		"skip,shift": `dst_policy: "skip,shift" names spring_forward twice`,
		"first,both": `dst_policy: "first,both" names fall_back twice`,
	} {
		_, err := ParseDSTPolicy("dst_policy", in)
		require.EqualError(t, err, msg)
		require.Equal(t, "dst_policy", ErrorField(err))
	}
}

func TestDSTPolicyValidate(t *testing.T) {
	t.Parallel()
	require.NoError(t, DSTPolicy{}.Validate())
	require.NoError(t, DSTPolicy{SpringForward: "shift", FallBack: "last"}.Validate())
	err := DSTPolicy{SpringForward: "Shift", FallBack: "all"}.Validate()
	require.EqualError(t, err, `dst_policy.spring_forward: unknown spring_forward "Shift" (want skip or shift); dst_policy.fall_back: unknown fall_back "all" (want both, first or last)`)
	var all FieldErrors
	require.True(t, errors.As(err, &all))
	require.Len(t, all, 2)
	require.True(t, DSTPolicy{SpringForward: "skip"}.IsDefault())
	require.False(t, DSTPolicy{FallBack: "first"}.IsDefault())
	require.Equal(t, DSTPolicy{SpringForward: "skip", FallBack: "first"}, DSTPolicy{FallBack: "first"}.Effective())
}

// validRecord is a cron schedule that passes Validate.
func validRecord() *ScheduleRecord {
	return &ScheduleRecord{ID: "s", WorkflowID: "wf", Version: "1", Kind: KindCron, CronExpr: "30 2 * * *",
		Timezone: "America/New_York", OverlapPolicy: OverlapSkip, CatchupPolicy: CatchupNone}
}

func TestRecordDSTPolicy(t *testing.T) {
	t.Parallel()
	r := validRecord()
	plain := r.TimingKey()
	r.DSTPolicy = DSTPolicy{SpringForward: "skip", FallBack: "both"}
	require.NoError(t, r.Validate())
	require.Equal(t, DSTPolicy{}, r.DSTPolicy, "Validate makes the policy canonical")
	require.Equal(t, plain, r.TimingKey(), "the default policy keeps the timing key of records stored before policies")

	r.DSTPolicy = DSTPolicy{SpringForward: "shift"}
	require.NoError(t, r.Validate())
	require.NotEqual(t, plain, r.TimingKey(), "a policy is part of the timing")
	s, err := r.Compile()
	require.NoError(t, err)
	after := time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC)
	require.Equal(t, time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC), s.Next(after), "02:30 shifts to 03:00 EDT")

	// Inside a window too.
	start := time.Date(2026, 3, 8, 0, 0, 0, 0, time.UTC)
	r.StartAt = &start
	require.NoError(t, r.Validate())
	s, err = r.Compile()
	require.NoError(t, err)
	require.Equal(t, time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC), s.Next(after))
	p := PreviewDST(s, nil, after, 1)
	require.Equal(t, DSTShifted, p.Times[0].DST)

	r.DSTPolicy = DSTPolicy{SpringForward: "sideways"}
	require.EqualError(t, r.Validate(), `dst_policy.spring_forward: unknown spring_forward "sideways" (want skip or shift)`)

	for _, mk := range []func(*ScheduleRecord){
		func(r *ScheduleRecord) { r.CronExpr = "@every 1h" },
		func(r *ScheduleRecord) { r.Kind, r.CronExpr, r.Timezone, r.EverySeconds = KindEvery, "", "UTC", 60 },
	} {
		r := validRecord()
		mk(r)
		r.DSTPolicy = DSTPolicy{FallBack: "last"}
		require.False(t, r.WallClock())
		require.EqualError(t, r.Validate(), "dst_policy: only a cron expression evaluated on the wall clock takes one: @every, every and once schedules fire on instants that no clock change moves")
		r.DSTPolicy = DSTPolicy{FallBack: "both"}
		require.NoError(t, r.Validate(), "the default, spelt out, changes nothing")
	}
}

// TestDSTPolicyExamples: one change of each kind of zone, the transitions
// read from the tz database.
func TestDSTPolicyExamples(t *testing.T) {
	t.Parallel()
	changes := func(zone string, year int) (spring, fall time.Time) {
		loc, err := LoadZone(zone)
		require.NoError(t, err)
		for _, tr := range zoneTransitions(loc, time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(year+1, 1, 1, 0, 0, 0, 0, time.UTC)) {
			switch d := offsetAt(loc, tr.Unix()) - offsetAt(loc, tr.Unix()-1); {
			case d > 0:
				spring = tr
			case d < 0:
				fall = tr
			}
		}
		require.False(t, spring.IsZero() || fall.IsZero(), zone)
		return spring, fall
	}
	local := func(t time.Time, zone string) string {
		loc, _ := LoadZone(zone)
		return t.In(loc).Format(time.RFC3339)
	}
	next := func(expr, zone string, p DSTPolicy, after time.Time) string {
		s, err := ParseCron(expr, zone, DialectStandard, time.Time{})
		require.NoError(t, err)
		return local(s.(*CronSchedule).WithDST(p).Next(after), zone)
	}
	shift := DSTPolicy{SpringForward: SpringForwardShift}
	first, last := DSTPolicy{FallBack: FallBackFirst}, DSTPolicy{FallBack: FallBackLast}

	// Lord Howe springs from 02:00 to 02:30 (+10:30 to +11) and falls
	// back from 02:00 to 01:30.
	sp, fa := changes("Australia/Lord_Howe", 2026)
	require.Equal(t, "2026-10-04T02:30:00+11:00", local(sp, "Australia/Lord_Howe"))
	require.Equal(t, "2026-10-04T02:30:00+11:00", next("15 2 * * *", "Australia/Lord_Howe", shift, sp.Add(-time.Hour)))
	require.Equal(t, "2026-10-05T02:15:00+11:00", next("15 2 * * *", "Australia/Lord_Howe", DSTPolicy{}, sp.Add(-time.Hour)))
	require.Equal(t, "2026-04-05T01:45:00+11:00", next("45 1 * * *", "Australia/Lord_Howe", first, fa.Add(-time.Hour)))
	require.Equal(t, "2026-04-06T01:45:00+10:30", next("45 1 * * *", "Australia/Lord_Howe", first, fa.Add(-time.Minute)))
	require.Equal(t, "2026-04-05T01:45:00+10:30", next("45 1 * * *", "Australia/Lord_Howe", last, fa.Add(-time.Hour)))

	// Havana springs from 00:00 to 01:00 and falls back from 01:00 to
	// 00:00: a daily 00:30 is skipped or shifted to 01:00, and happens
	// twice in November.
	sp, fa = changes("America/Havana", 2026)
	require.Equal(t, "01:00:00", sp.In(mustZone(t, "America/Havana")).Format(time.TimeOnly))
	day := sp.In(mustZone(t, "America/Havana")).Format(time.DateOnly)
	require.Equal(t, day+"T01:00:00-04:00", next("30 0 * * *", "America/Havana", shift, sp.Add(-2*time.Hour)))
	require.Equal(t, day+"T01:00:00-04:00", next("*/10 0 * * *", "America/Havana", shift, sp.Add(-2*time.Hour)), "the gap's six times fire once")
	require.NotEqual(t, day, next("30 0 * * *", "America/Havana", DSTPolicy{}, sp.Add(-2*time.Hour))[:10])
	fday := fa.In(mustZone(t, "America/Havana")).Format(time.DateOnly)
	require.Equal(t, fday+"T00:30:00-04:00", next("30 0 * * *", "America/Havana", first, fa.Add(-2*time.Hour)))
	require.Equal(t, fday+"T00:30:00-05:00", next("30 0 * * *", "America/Havana", last, fa.Add(-2*time.Hour)))
	require.Equal(t, fday+"T00:30:00-05:00", next("30 0 * * *", "America/Havana", DSTPolicy{}, fa.Add(-time.Minute)))

	// Santiago falls back from 24:00 to 23:00 on Saturday night, and
	// springs from 24:00 to 01:00.
	sp, fa = changes("America/Santiago", 2026)
	scl := mustZone(t, "America/Santiago")
	fday = fa.Add(-time.Hour).In(scl).Format(time.DateOnly)
	require.Equal(t, fday+"T23:30:00-03:00", next("30 23 * * *", "America/Santiago", first, fa.Add(-3*time.Hour)))
	require.Equal(t, fday+"T23:30:00-04:00", next("30 23 * * *", "America/Santiago", last, fa.Add(-3*time.Hour)))
	day = sp.In(scl).Format(time.DateOnly)
	require.Equal(t, day+"T01:00:00-03:00", next("15 0 * * *", "America/Santiago", shift, sp.Add(-3*time.Hour)))
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := LoadZone(name)
	require.NoError(t, err)
	return loc
}

// TestDSTPolicyDefaultIsTheWallClockRule: WithDST of the default policy is
// the schedule itself, and Next under it is unchanged.
func TestDSTPolicyDefaultIsTheWallClockRule(t *testing.T) {
	t.Parallel()
	s, err := ParseCron("30 2 * * *", "America/New_York", DialectStandard, time.Time{})
	require.NoError(t, err)
	c := s.(*CronSchedule)
	require.Same(t, c, c.WithDST(DSTPolicy{SpringForward: "skip", FallBack: "both"}))
	shifted := c.WithDST(DSTPolicy{SpringForward: "shift"})
	require.NotSame(t, c, shifted)
	require.Equal(t, DSTPolicy{}, c.DSTPolicy(), "the cached schedule is untouched")
	require.Equal(t, DSTPolicy{SpringForward: "shift"}, shifted.DSTPolicy())
	require.Equal(t, c.Explain(), shifted.Explain())
}
