package model

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The oracle: a brute-force walk over real instants, written independently
// of the engine's bit jumping and zone stepping. It asks the time package
// for each instant's wall clock in the zone (Date, Clock, Weekday) and
// matches it against the parsed fields.

// oracleSeed seeds the randomized oracle tests; change it to explore, and
// pass the seed a failure prints to reproduce it.
var oracleSeed = flag.Uint64("model.seed", 20260101, "seed for the randomized cron oracle tests")

// oracleMatches reports whether the wall clock of instant t in c's zone
// matches every field of c.
func oracleMatches(c *CronSchedule, t time.Time) bool {
	lt := t.In(c.loc)
	_, mo, d := lt.Date()
	h, mi, s := lt.Clock()
	has := func(set uint64, v int) bool { return set&(1<<uint(v)) != 0 }
	domOK, dowOK := has(c.dom, d), has(c.dow, int(lt.Weekday()))
	dayOK := domOK || dowOK
	if c.domStar || c.dowStar {
		dayOK = domOK && dowOK
	}
	return dayOK && has(c.month, int(mo)) && has(c.hour, h) && has(c.minute, mi) && has(c.second, s)
}

// oracleNext returns the first instant strictly after after that c
// matches, walking every whole second, or every whole UTC minute when the
// expression only fires at second 0 (sound because every offset the walk
// meets is a whole number of minutes, which it checks). ok is false when
// nothing matched within maxSteps steps.
func oracleNext(t *testing.T, c *CronSchedule, after time.Time, maxSteps int) (next time.Time, ok bool) {
	t.Helper()
	step := time.Second
	if c.second == 1 {
		step = time.Minute
	}
	at := after.Truncate(step).Add(step)
	for range maxSteps {
		if step == time.Minute {
			_, off := at.In(c.loc).Zone()
			require.Zero(t, off%60, "oracle minute walk needs whole-minute offsets: %s at %s", c.loc, at)
		}
		if oracleMatches(c, at) {
			return at.UTC(), true
		}
		at = at.Add(step)
	}
	return time.Time{}, false
}

// oracleZones are the zones the randomized tests cover: every awkward DST
// rule the design names, plus plain ones.
var oracleZones = []string{
	"UTC", "Asia/Tokyo", "Europe/Berlin", "America/New_York", "Europe/London",
	"Europe/Dublin", "Australia/Lord_Howe", "Pacific/Chatham", "Asia/Kathmandu",
	"America/Havana", "America/Santiago", "Atlantic/Azores", "Pacific/Apia",
	"America/St_Johns", "America/Sao_Paulo", "Asia/Tehran", "Africa/Casablanca",
	"Australia/Adelaide",
}

// zoneTransitions returns the instants in [from, to) at which loc's offset
// or abbreviation changes.
func zoneTransitions(loc *time.Location, from, to time.Time) []time.Time {
	var out []time.Time
	for t := from; t.Before(to); {
		_, end := t.In(loc).ZoneBounds()
		if end.IsZero() || !end.Before(to) || !end.After(t) { // golang/go#81583
			break
		}
		out = append(out, end)
		t = end
	}
	return out
}

// oracleInstants returns the instants around which random cases cluster:
// loc's transitions in 2026-2030 and 2040, the end of the leap years 2040
// and 2096, and random instants in 2026-2030; Pacific/Apia also gets its
// 2011 transitions (the skipped 30 December).
func oracleInstants(loc *time.Location, rng *rand.Rand) []time.Time {
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	to := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	out := zoneTransitions(loc, from, to)
	// Years served by the zone's TZ rule rather than listed transitions,
	// including the leap-year end where ZoneBounds errs (golang/go#81583).
	out = append(out, zoneTransitions(loc,
		time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2041, 1, 1, 0, 0, 0, 0, time.UTC))...)
	out = append(out, time.Date(2040, 12, 31, 12, 0, 0, 0, time.UTC), time.Date(2096, 12, 31, 6, 0, 0, 0, time.UTC))
	if loc.String() == "Pacific/Apia" {
		out = append(out, zoneTransitions(loc,
			time.Date(2011, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2012, 1, 1, 0, 0, 0, 0, time.UTC))...)
	}
	for range 4 {
		out = append(out, from.Add(time.Duration(rng.Int64N(int64(to.Sub(from))))))
	}
	return out
}

// exprGen builds random cron expressions biased to fire within a few days
// of a given wall-clock time, so the oracle's walk stays short.
type exprGen struct {
	rng *rand.Rand
}

func (g exprGen) pick(opts ...string) string { return opts[g.rng.IntN(len(opts))] }

func (g exprGen) n(lo, hi int) int { return lo + g.rng.IntN(hi-lo+1) }

var (
	genMonthNames = []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}
	genDowNames   = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}
)

// name returns the name of v in names, in a random case.
func (g exprGen) name(names []string, v int) string {
	s := names[v]
	switch g.rng.IntN(3) {
	case 0:
		return strings.ToUpper(s)
	case 1:
		return strings.ToUpper(s[:1]) + s[1:]
	}
	return s
}

// numeric returns a field over [lo, hi] built from numbers, ranges and
// lists only (the posix grammar), favouring values near the hint.
func (g exprGen) numeric(lo, hi, hint int, star bool) string {
	near := func() int { return min(hi, max(lo, hint+g.n(-1, 2))) }
	switch r := g.rng.IntN(10); {
	case star && r < 3:
		return "*"
	case r < 5:
		return fmt.Sprint(near())
	case r < 7:
		a := near()
		return fmt.Sprintf("%d-%d", a, min(hi, a+g.n(0, 5)))
	default:
		items := []string{fmt.Sprint(near())}
		for range g.n(1, 3) {
			if g.rng.IntN(2) == 0 {
				a := g.n(lo, hi)
				items = append(items, fmt.Sprintf("%d-%d", a, min(hi, a+g.n(0, 4))))
			} else {
				items = append(items, fmt.Sprint(g.n(lo, hi)))
			}
		}
		return strings.Join(items, ",")
	}
}

// standard returns a field over [lo, hi] in the standard grammar: the
// numeric forms plus "?", steps and (when names is set) names.
func (g exprGen) standard(lo, hi, hint int, names []string) string {
	switch g.rng.IntN(12) {
	case 0:
		return "?"
	case 1:
		return fmt.Sprintf("*/%d", g.n(1, 4))
	case 2:
		return fmt.Sprintf("%d/%d", g.n(lo, min(hi, lo+5)), g.n(1, 7))
	case 3:
		a := min(hi, max(lo, hint-g.n(0, 4)))
		return fmt.Sprintf("%d-%d/%d", a, min(hi, a+g.n(2, 20)), g.n(2, 5))
	case 4:
		if names != nil {
			a := min(hi, max(lo, hint))
			b := min(hi, a+g.n(0, 3))
			if g.rng.IntN(2) == 0 {
				return g.name(names, a-lo)
			}
			return g.name(names, a-lo) + "-" + g.name(names, b-lo)
		}
	}
	return g.numeric(lo, hi, hint, true)
}

// expr returns an expression that tends to fire within days of wall time
// w: in the posix grammar, or the standard one with or without seconds.
func (g exprGen) expr(w time.Time, dialect Dialect, seconds bool) string {
	var f []string
	if dialect == DialectPosix {
		f = []string{
			g.numeric(0, 59, w.Minute(), true),
			g.hourField(w),
			g.dayField(w, func() string { return g.numeric(1, 31, w.Day(), true) }),
			g.monthField(w, false),
			g.dayField(w, func() string { return g.numeric(0, 6, int(w.Weekday()), true) }),
		}
		return strings.Join(f, " ")
	}
	if seconds {
		// The oracle walks seconds here, so keep every day a candidate
		// or nearly: open day-of-month, broad day-of-week.
		return strings.Join([]string{
			g.pick("0", "*/15", "5,35", "10-20", "*/7", "30", "7/20", "59", "*"),
			g.pick("*", "*/2", "*/10", fmt.Sprint(w.Minute()), "0-30", "*/7"),
			g.hourField(w),
			g.pick("*", "*", "*", "?"),
			g.monthField(w, true),
			g.pick("*", "?", "1-5", "mon-fri", "*/2", "0,3,5", "SAT,sun,Wed", "1-6/2"),
		}, " ")
	}
	f = append(f,
		g.standard(0, 59, w.Minute(), nil),
		g.hourField(w),
		g.dayField(w, func() string { return g.standard(1, 31, w.Day(), nil) }),
		g.monthField(w, true),
		g.dayField(w, func() string { return g.standard(0, 6, int(w.Weekday()), genDowNames) }))
	return strings.Join(f, " ")
}

// hourField favours hours that DST changes touch and hours near w.
func (g exprGen) hourField(w time.Time) string {
	switch g.rng.IntN(6) {
	case 0:
		return "*"
	case 1:
		return fmt.Sprint(g.n(0, 3))
	case 2:
		return fmt.Sprintf("%d-%d", g.n(0, 2), g.n(2, 5))
	case 3:
		return fmt.Sprintf("%d,%d", g.n(0, 3), g.n(20, 23))
	}
	return g.numeric(0, 23, w.Hour(), true)
}

// dayField returns "*" half the time, else a restricted field from gen.
func (g exprGen) dayField(w time.Time, gen func() string) string {
	if g.rng.IntN(2) == 0 {
		return "*"
	}
	return gen()
}

// monthField mostly leaves the month open; otherwise it allows w's month
// and the next, by number or (standard) name.
func (g exprGen) monthField(w time.Time, standard bool) string {
	if g.rng.IntN(4) != 0 {
		return "*"
	}
	m := int(w.Month())
	next := m%12 + 1
	if standard && g.rng.IntN(2) == 0 {
		return g.name(genMonthNames, m-1) + "," + g.name(genMonthNames, next-1)
	}
	return fmt.Sprintf("%d,%d", m, next)
}

// TestNextMatchesOracle compares the engine with the brute-force walk over
// thousands of random (expression, zone, instant) cases clustered around
// each zone's DST transitions, following each case for three fire times so
// that a repeated wall time must fire twice.
func TestNextMatchesOracle(t *testing.T) {
	t.Parallel()
	seed := *oracleSeed
	perZone := 300 // cases per zone, over all dialects
	if raceEnabled {
		perZone = 80
	}
	for zi, zone := range oracleZones {
		t.Run(zone, func(t *testing.T) {
			t.Parallel()
			loc, err := LoadZone(zone)
			require.NoError(t, err)
			rng := rand.New(rand.NewPCG(seed, uint64(zi)))
			g := exprGen{rng: rng}
			instants := oracleInstants(loc, rng)
			compared, capped := 0, 0
			for i := range perZone {
				// Cluster: up to two days before a transition, one after,
				// sometimes at a fractional second.
				at := instants[rng.IntN(len(instants))].
					Add(time.Duration(rng.Int64N(int64(72*time.Hour))) - 48*time.Hour)
				if rng.IntN(2) == 0 {
					at = at.Truncate(time.Minute)
				}
				if rng.IntN(4) == 0 {
					at = at.Add(time.Duration(rng.Int64N(int64(time.Second))))
				}
				dialect, seconds := DialectStandard, false
				switch i % 4 {
				case 0:
					dialect = DialectPosix
				case 1:
					seconds = true
				}
				expr := g.expr(at.In(loc), dialect, seconds)
				s, err := ParseCron(expr, zone, dialect, time.Time{})
				if err != nil {
					// Random day fields can name impossible dates (30 Feb).
					require.ErrorContains(t, err, "yields no future time", "seed %d case %d: %q", seed, i, expr)
					continue
				}
				c := s.(*CronSchedule)
				maxSteps := 60 * 24 * 40 // 40 days of minutes
				if c.second != 1 {
					maxSteps = 3 * 24 * 3600 // 3 days of seconds
				}
				prev := at
				for k := range 3 {
					want, ok := oracleNext(t, c, prev, maxSteps)
					if !ok {
						capped++
						break
					}
					require.Equal(t, want, c.Next(prev),
						"seed %d zone %s case %d: %q, fire %d: Next(%s)",
						seed, zone, i, expr, k+1, prev.Format(time.RFC3339Nano))
					compared++
					prev = want
				}
			}
			t.Logf("seed %d: %d fire times compared, %d oracle walks capped", seed, compared, capped)
			require.Less(t, capped, perZone/40, "the oracle's walk is capped too often to be a useful check")
			require.Greater(t, compared, perZone*2)
		})
	}
}
