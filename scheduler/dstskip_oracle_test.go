package scheduler

import (
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
)

// oracleGaps walks zone loc hour by hour from from to to, finds each
// offset change that moves the clocks forward (to the second, by
// bisection), and keeps those whose skipped wall-clock minutes include
// one that matches: it returns the gaps' ends (the first instant after
// each), oldest first. It shares nothing with the scheduler's walk
// (ZoneBounds, GapBefore).
func oracleGaps(t *testing.T, loc *time.Location, from, to time.Time, match func(hour, minute int) bool) []time.Time {
	t.Helper()
	offset := func(u time.Time) int { _, o := u.In(loc).Zone(); return o }
	var out []time.Time
	for at := from.Truncate(time.Hour).Add(time.Hour); !at.After(to); at = at.Add(time.Hour) {
		before, after := offset(at.Add(-time.Hour)), offset(at)
		if after <= before {
			continue
		}
		lo, hi := at.Add(-time.Hour), at // offset(lo) == before, offset(hi) == after
		for hi.Sub(lo) > time.Second {
			mid := lo.Add(hi.Sub(lo) / 2).Truncate(time.Second)
			if offset(mid) == before {
				lo = mid
			} else {
				hi = mid
			}
		}
		end := hi
		if !end.After(from) || end.After(to) {
			continue
		}
		// The skipped wall clocks are [end+before, end+after), read as UTC.
		wall := end.Add(time.Duration(before) * time.Second).UTC()
		for w := wall; w.Before(end.Add(time.Duration(after) * time.Second).UTC()); w = w.Add(time.Minute) {
			if match(w.Hour(), w.Minute()) {
				out = append(out, end.UTC())
				break
			}
		}
	}
	return out
}

// dstRecordTimes returns the run_at of schedule id's dst_skipped records,
// oldest first, and the records.
func dstRecordTimes(t *testing.T, store *queue.Store, id string) ([]time.Time, []*model.Run) {
	t.Helper()
	_, records := splitDSTRecords(t, store, id)
	out := make([]time.Time, len(records))
	for i, r := range records {
		out[i] = r.RunAt.UTC()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out, records
}

// An outage of years records every spring-forward gap that skipped a
// local time of the schedule, since it was created: the same gaps as a
// brute-force walk of the zone's offsets finds, in zones with 1-hour,
// 30-minute (Lord Howe) and midnight (Santiago) changes.
func TestDSTSkippedRecordsEveryGapOfAnOutage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		zone, cron string
		match      func(hour, minute int) bool
	}{
		{"America/New_York", "30 2 * * *", func(h, m int) bool { return h == 2 && m == 30 }},
		{"Australia/Lord_Howe", "0 2 * * *", func(h, m int) bool { return h == 2 && m == 0 }},
		{"America/Santiago", "0 0 * * *", func(h, m int) bool { return h == 0 && m == 0 }},
	} {
		t.Run(c.zone, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil, &queue.Config{Shards: 1, RunHistory: 1000})
			created := time.Date(2014, 1, 20, 12, 0, 0, 0, time.UTC)
			b.clock.Set(created)
			rec := b.upsert(t, model.ScheduleRecord{ID: "down", CronExpr: c.cron, Timezone: c.zone, CatchupPolicy: model.CatchupNone})
			back := time.Date(2026, 1, 20, 12, 0, 0, 0, time.UTC) // twelve years later
			b.clock.Set(back)
			b.tickAll(t)
			b.clock.Advance(time.Second)
			b.tickAll(t)
			loc, err := time.LoadLocation(c.zone)
			require.NoError(t, err)
			want := oracleGaps(t, loc, created, back, c.match)
			require.GreaterOrEqual(t, len(want), 11, "the oracle finds a gap a year")
			got, records := dstRecordTimes(t, b.store, rec.ID)
			require.Equal(t, want, got)
			for _, r := range records {
				requireDSTRecord(t, b, rec.ID, r)
				require.NotContains(t, r.Error, "not recorded one by one")
			}
		})
	}
}

// An outage longer than dstGapsPerPlan gaps records the latest
// dstGapsPerPlan of them, and the oldest of those says that the gaps
// before it are not recorded one by one.
func TestDSTSkippedRecordsBoundAPlan(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, &queue.Config{Shards: 1, RunHistory: 1000})
	created := time.Date(1980, 1, 20, 12, 0, 0, 0, time.UTC)
	b.clock.Set(created)
	rec := b.upsert(t, model.ScheduleRecord{ID: "ancient", CronExpr: "30 2 * * *", Timezone: "America/New_York",
		CatchupPolicy: model.CatchupNone})
	back := time.Date(2026, 1, 20, 12, 0, 0, 0, time.UTC)
	b.clock.Set(back)
	b.tickAll(t)
	b.clock.Advance(time.Second)
	b.tickAll(t)
	loc, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	want := oracleGaps(t, loc, created, back, func(h, m int) bool { return h == 2 && m == 30 })
	require.Greater(t, len(want), dstGapsPerPlan)
	got, records := dstRecordTimes(t, b.store, rec.ID)
	require.Equal(t, want[len(want)-dstGapsPerPlan:], got, "the latest gaps")
	noted := 0
	for _, r := range records {
		requireDSTRecord(t, b, rec.ID, r)
		if r.RunAt.Equal(got[0]) {
			require.Contains(t, r.Error, "any gaps before it since 1980-01-21T07:30:00Z are not recorded one by one: a plan records at most 32, the latest")
			noted++
		} else {
			require.NotContains(t, r.Error, "not recorded one by one")
		}
	}
	require.Equal(t, 1, noted)
}
