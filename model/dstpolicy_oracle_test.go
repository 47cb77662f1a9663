package model

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The DST policy oracle: around each offset change of a zone, a walk over
// every UTC minute asks the time package for each instant's wall clock,
// and applies the policies' words to what it sees, independently of the
// engine's interval stepping:
//   - a matching wall clock that no instant shows was skipped by a gap;
//     under spring_forward shift it fires at the first instant whose wall
//     clock is later (once per instant);
//   - a matching wall clock that several instants show is repeated; under
//     fall_back first only the earliest of them fires, under last only the
//     latest.

// dstPolicies are every combination of the two policies' values.
var dstPolicies = func() []DSTPolicy {
	var out []DSTPolicy
	for _, sf := range []SpringForward{SpringForwardSkip, SpringForwardShift} {
		for _, fb := range []FallBack{FallBackBoth, FallBackFirst, FallBackLast} {
			out = append(out, DSTPolicy{sf, fb})
		}
	}
	return out
}()

// dstOracleZones have 1-hour changes at 02:00 or 03:00 (New York,
// Berlin), a 30-minute change (Lord Howe) and changes at midnight
// (Havana, Santiago).
var dstOracleZones = []string{"America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "America/Havana", "America/Santiago"}

// dstWalk is the minute walk around one offset change for one
// expression: [lo, hi] with the change near the middle.
type dstWalk struct {
	c       *CronSchedule
	lo, hi  time.Time
	mins    []time.Time // every minute of [lo, hi]
	keys    []int64     // the wall clock (wallKey) of each
	fired   map[DSTPolicy][]time.Time
	walls   map[int64][]time.Time // wall clock (wallKey) -> instants showing it
	matches map[int64]bool        // instants whose wall clock matches
	gaps    []int64               // matching wall clocks no instant shows, ascending
	after   map[int64]time.Time   // gap wall clock -> first instant with a later wall clock
	targets map[int64][]int64     // that instant -> the gap wall clocks it carries
}

func newDSTWalk(t *testing.T, c *CronSchedule, tr time.Time) *dstWalk {
	t.Helper()
	require.Equal(t, uint64(1), c.second, "the oracle walks minutes")
	w := &dstWalk{c: c, lo: tr.Add(-30 * time.Hour).Truncate(time.Minute), hi: tr.Add(30 * time.Hour).Truncate(time.Minute),
		walls: map[int64][]time.Time{}, fired: map[DSTPolicy][]time.Time{}, matches: map[int64]bool{}, after: map[int64]time.Time{}, targets: map[int64][]int64{}}
	for at := w.lo; !at.After(w.hi); at = at.Add(time.Minute) {
		u := at.UTC()
		if _, off := u.In(c.loc).Zone(); off%60 != 0 {
			require.Zero(t, off%60, "the oracle walks whole-minute offsets")
		}
		k := wallKey(u.In(c.loc))
		w.mins = append(w.mins, u)
		w.keys = append(w.keys, k)
		w.walls[k] = append(w.walls[k], u)
		if oracleMatches(c, u) {
			w.matches[u.Unix()] = true
		}
	}
	// Gaps: wall clocks inside the walk's middle (away from its edges)
	// that no instant shows.
	from, to := wallKey(w.lo.Add(6*time.Hour).In(c.loc)), wallKey(w.hi.Add(-6*time.Hour).In(c.loc))
	for k := from; k <= to; k += 60 {
		if len(w.walls[k]) > 0 || !wallMatches(c, k) {
			continue
		}
		w.gaps = append(w.gaps, k)
		for i, u := range w.mins {
			if w.keys[i] > k {
				w.after[k] = u
				w.targets[u.Unix()] = append(w.targets[u.Unix()], k)
				break
			}
		}
		require.Contains(t, w.after, k, "no instant after the gap at %s", time.Unix(k, 0).UTC())
	}
	return w
}

// fires returns the instants of the walk that fire under p, ascending.
func (w *dstWalk) fires(p DSTPolicy) []time.Time {
	p = p.Effective()
	if f, ok := w.fired[p]; ok {
		return f
	}
	var out []time.Time
	for i, u := range w.mins {
		fire := false
		if w.matches[u.Unix()] {
			occ := w.walls[w.keys[i]]
			switch p.FallBack {
			case FallBackBoth:
				fire = true
			case FallBackFirst:
				fire = u.Equal(occ[0])
			case FallBackLast:
				fire = u.Equal(occ[len(occ)-1])
			}
		}
		if p.SpringForward == SpringForwardShift && len(w.targets[u.Unix()]) > 0 {
			fire = true
		}
		if fire {
			out = append(out, u)
		}
	}
	w.fired[p] = out
	return out
}

// preview is PreviewDST by the oracle: the first n fires after after (ok
// is false when they run past the walk's trusted middle), their notes,
// and what did not fire up to the last of them.
func (w *dstWalk) preview(p DSTPolicy, after time.Time, n int) (DSTPreview, bool) {
	fires := w.fires(p)
	out := DSTPreview{Times: []FireTime{}, Skipped: []SkippedTime{}}
	var times []time.Time
	for _, f := range fires {
		if f.After(after) && len(times) < n {
			times = append(times, f)
		}
	}
	if len(times) < n || times[len(times)-1].After(w.hi.Add(-6*time.Hour)) {
		return out, false
	}
	e := p.Effective()
	for _, f := range times {
		ft := FireTime{At: f, Local: f.In(w.c.loc)}
		switch {
		case e.SpringForward == SpringForwardShift && len(w.targets[f.Unix()]) > 0:
			ft.DST = DSTShifted
		case len(w.walls[wallKey(ft.Local)]) >= 2:
			ft.DST = DSTRepeated
		}
		out.Times = append(out.Times, ft)
	}
	last := times[len(times)-1]
	type keyed struct {
		at time.Time
		s  SkippedTime
	}
	var all []keyed
	if e.SpringForward == SpringForwardSkip {
		for _, k := range w.gaps {
			if k > wallKey(after.In(w.c.loc)) && k <= wallKey(last.In(w.c.loc)) {
				all = append(all, keyed{w.after[k], SkippedTime{Local: time.Unix(k, 0).UTC().Format(LocalLayout), Reason: SkipReasonDSTGap}})
			}
		}
	}
	kept := map[int64]bool{}
	for _, f := range fires {
		kept[f.Unix()] = true
	}
	for _, u := range w.mins {
		if u.After(after) && !u.After(last) && w.matches[u.Unix()] && !kept[u.Unix()] {
			all = append(all, keyed{u, SkippedTime{Local: u.In(w.c.loc).Format(time.RFC3339), Reason: SkipReasonDSTOverlap}})
		}
	}
	slices.SortStableFunc(all, func(a, b keyed) int { return a.at.Compare(b.at) })
	for _, k := range all[:min(len(all), n)] {
		out.Skipped = append(out.Skipped, k.s)
	}
	return out, true
}

// dstOracleTransitions returns loc's offset changes in 2026-2027 (listed
// in the tz database) and 2040 (computed from the zone's TZ rule).
func dstOracleTransitions(t *testing.T, loc *time.Location) []time.Time {
	t.Helper()
	out := zoneTransitions(loc, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2028, 1, 1, 0, 0, 0, 0, time.UTC))
	out = append(out, zoneTransitions(loc, time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2041, 1, 1, 0, 0, 0, 0, time.UTC))...)
	// Keep real offset changes only (ZoneBounds also ends intervals where
	// just the abbreviation changes).
	out = slices.DeleteFunc(out, func(tr time.Time) bool {
		return offsetAt(loc, tr.Unix()-1) == offsetAt(loc, tr.Unix())
	})
	require.GreaterOrEqual(t, len(out), 4, "%s has DST changes in 2026-2027", loc)
	if raceEnabled {
		// A sample under the race detector: 2026's spring and autumn
		// changes (race_on_test.go).
		out = out[:2]
	}
	return out
}

// dstOracleExprs touch the hours where the five zones change clocks.
var dstOracleExprs = []string{
	"* * * * *", "*/30 * * * *", "0 * * * *", "30 * * * *", "15,45 * * * *", "30 2 * * *", "0,30 0-3 * * *",
	"15 0 * * *", "45 23 * * *", "* 2 * * *", "* 0 * * *", "* 23 * * *", "0 9 * * 1-5", "15,45 1,2 * * *",
	"*/20 23,0,1 * * *", "0 0 * * *", "0 2 * * *", "0 3 * * *", "59 1 * * *", "0 1 * * 0", "5 2 8 3 *",
}

// TestDSTPolicyNextMatchesOracle compares Next under every policy with the
// oracle: from every minute within three hours of each change, from each
// fire time and the second before it, and along the chain of fire times
// across the walk.
func TestDSTPolicyNextMatchesOracle(t *testing.T) {
	t.Parallel()
	seed := *oracleSeed
	for zi, zone := range dstOracleZones {
		t.Run(zone, func(t *testing.T) {
			t.Parallel()
			loc, err := LoadZone(zone)
			require.NoError(t, err)
			g := exprGen{rng: rand.New(rand.NewPCG(seed, uint64(100+zi)))}
			compared, shifted, dropped := 0, 0, 0
			for _, tr := range dstOracleTransitions(t, loc) {
				exprs := slices.Clone(dstOracleExprs)
				for range 6 {
					exprs = append(exprs, g.expr(tr.In(loc), DialectStandard, false))
				}
				for _, expr := range exprs {
					s, err := ParseCron(expr, zone, DialectStandard, time.Time{})
					if err != nil {
						require.ErrorContains(t, err, "yields no future time", "seed %d: %q", seed, expr)
						continue
					}
					base := s.(*CronSchedule)
					w := newDSTWalk(t, base, tr)
					mid := w.hi.Add(-6 * time.Hour)
					both := w.fires(DSTPolicy{})
					for _, p := range dstPolicies {
						c := base.WithDST(p)
						want := w.fires(p)
						inBoth := map[int64]bool{}
						for _, u := range both {
							inBoth[u.Unix()] = true
						}
						for _, u := range want {
							if inBoth[u.Unix()] {
								delete(inBoth, u.Unix())
							} else {
								shifted++
							}
						}
						dropped += len(inBoth)
						check := func(after time.Time) {
							i, _ := slices.BinarySearchFunc(want, after, func(u, a time.Time) int {
								if u.After(a) {
									return 1
								}
								return -1
							})
							got := c.Next(after)
							if i == len(want) || want[i].After(mid) {
								if got.IsZero() || got.After(mid) {
									return
								}
								require.True(t, false,
									"seed %d %s %s %q %+v: Next(%s) = %s, want none before %s", seed, zone, tr, expr, p, after, got, mid)
								return
							}
							if !got.Equal(want[i]) {
								require.Equal(t, want[i], got, "seed %d %s change at %s %q policy %+v: Next(%s)",
									seed, zone, tr.Format(time.RFC3339), expr, p, after.Format(time.RFC3339))
							}
							compared++
						}
						// Every minute within 70 minutes of the change, every
						// ten within three hours.
						for at := tr.Add(-3 * time.Hour); at.Before(tr.Add(3 * time.Hour)); at = at.Add(time.Minute) {
							if d := at.Sub(tr); d > 70*time.Minute || d < -70*time.Minute {
								if at.Minute()%10 != 0 {
									continue
								}
							}
							check(at)
							check(at.Add(30 * time.Second))
						}
						for _, f := range want {
							if f.After(w.lo.Add(6*time.Hour)) && !f.After(mid) {
								check(f)
								check(f.Add(-time.Second))
							}
						}
						// The chain, as the scheduler walks it.
						var chain []time.Time
						for at := c.Next(w.lo.Add(6 * time.Hour)); !at.IsZero() && !at.After(mid); at = c.Next(at) {
							chain = append(chain, at)
						}
						var wantChain []time.Time
						for _, f := range want {
							if f.After(w.lo.Add(6*time.Hour)) && !f.After(mid) {
								wantChain = append(wantChain, f)
							}
						}
						require.Equal(t, wantChain, chain, "%s %s %q %+v", zone, tr, expr, p)
					}
				}
			}
			t.Logf("seed %d: %d fire times compared; %d shifted-only and %d dropped fire times met", seed, compared, shifted, dropped)
			require.NotZero(t, shifted, "the cases must meet shifted fire times")
			require.NotZero(t, dropped, "the cases must meet left-out repetitions")
		})
	}
}

// TestDSTPolicyPreviewMatchesOracle compares PreviewDST's times, notes and
// skipped list under every policy with the oracle's.
func TestDSTPolicyPreviewMatchesOracle(t *testing.T) {
	t.Parallel()
	for _, zone := range dstOracleZones {
		t.Run(zone, func(t *testing.T) {
			t.Parallel()
			loc, err := LoadZone(zone)
			require.NoError(t, err)
			notes := map[string]int{}
			for _, tr := range dstOracleTransitions(t, loc) {
				for _, expr := range dstOracleExprs {
					s, err := ParseCron(expr, zone, DialectStandard, time.Time{})
					require.NoError(t, err)
					base := s.(*CronSchedule)
					w := newDSTWalk(t, base, tr)
					for _, p := range dstPolicies {
						c := base.WithDST(p)
						for _, after := range []time.Time{tr.Add(-2 * time.Hour), tr.Add(-61 * time.Minute), tr.Add(-90 * time.Second), tr} {
							for _, n := range []int{1, 5, 40, 150} {
								want, ok := w.preview(p, after, n)
								if !ok {
									continue
								}
								got := PreviewDST(c, nil, after, n)
								same := len(want.Times) == len(got.Times) && slices.Equal(want.Skipped, got.Skipped)
								for i := 0; same && i < len(want.Times); i++ {
									wt, gt := want.Times[i], got.Times[i]
									same = wt.At.Equal(gt.At) && wt.DST == gt.DST && wt.Local.Equal(gt.Local) && wt.Local.Location() == gt.Local.Location()
								}
								if !same {
									name := fmt.Sprintf("%s change at %s %q policy %+v after %s n %d", zone, tr.Format(time.RFC3339), expr, p, after.Format(time.RFC3339), n)
									require.Equal(t, want, got, name)
								}
								for _, ft := range got.Times {
									notes[string(ft.DST)]++
								}
								for _, sk := range got.Skipped {
									notes[sk.Reason]++
								}
							}
						}
					}
				}
			}
			t.Logf("notes met: %v", notes)
			for _, k := range []string{string(DSTShifted), string(DSTRepeated), SkipReasonDSTOverlap, SkipReasonDSTGap} {
				require.NotZero(t, notes[k], "the cases must meet %s", k)
			}
		})
	}
}
