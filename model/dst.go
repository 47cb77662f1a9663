package model

import (
	"cmp"
	"slices"
	"time"
)

// DSTNote says how a change of the zone's offset touches a fire time.
type DSTNote string

// DSTRepeated marks a fire time whose local wall-clock time happens twice,
// on the night clocks fall back. Both instants fire under today's rule,
// so the preview shows the local time twice, each marked.
const DSTRepeated DSTNote = "repeated"

// SkipReasonDSTGap is why a local time the expression matches did not
// fire: clocks sprang forward over it, so it never happened.
const SkipReasonDSTGap = "dst_gap"

// LocalLayout formats a skipped local time: a wall clock with no offset,
// since no offset ever showed it.
const LocalLayout = "2006-01-02T15:04:05"

// FireTime is one fire time of a preview, with its wall clock in the zone.
type FireTime struct {
	// At is the instant, in UTC.
	At time.Time
	// Local is At in the zone.
	Local time.Time
	// DST is DSTShifted when a spring_forward "shift" policy carried
	// skipped local times to this instant, DSTRepeated when Local's wall
	// clock happens twice, else "".
	DST DSTNote
}

// SkippedTime is a local time the expression matches that did not fire.
type SkippedTime struct {
	// Local is the wall clock: formatted with LocalLayout for a time a
	// gap skipped (no offset ever showed it), RFC 3339 with its offset
	// for the instant of a repeated time the fall_back policy leaves out.
	Local string
	// Reason is SkipReasonDSTGap or SkipReasonDSTOverlap.
	Reason string
}

// DSTPreview is a preview with its daylight-saving notes.
type DSTPreview struct {
	Times   []FireTime
	Skipped []SkippedTime
}

// foldWindow bounds how far apart two instants with the same wall clock
// can be: no zone has changed its offset by more than a day at once.
const foldWindow = 26 * time.Hour

// PreviewDST returns up to n fire times of s strictly after after, as
// Preview does, each with its wall clock in loc, and what the expression
// matches between after and the last fire time listed that did not fire,
// at most n of them, earliest first: the local times clocks skipped
// (under spring_forward skip) and the left-out instants of repeated local
// times (under fall_back first or last).
//
// The notes follow the cron expression's DST policy. When s is a
// *CronSchedule (or a Window around one) its own zone is used and loc is
// ignored. Other schedules, such as @every, fire on a fixed grid of
// instants that no DST change moves: their times carry Local only, and
// nothing is skipped.
func PreviewDST(s Schedule, loc *time.Location, after time.Time, n int) DSTPreview {
	if loc == nil {
		loc = time.UTC
	}
	c := cronOf(s)
	if c != nil {
		loc = c.loc
	}
	times := Preview(s, after, n)
	out := DSTPreview{Times: make([]FireTime, len(times)), Skipped: []SkippedTime{}}
	for i, t := range times {
		ft := FireTime{At: t, Local: t.In(loc)}
		switch {
		case c == nil:
		case c.dst.SpringForward == SpringForwardShift && c.gapShifts(t.Unix()):
			ft.DST = DSTShifted
		case wallRepeats(t, loc):
			ft.DST = DSTRepeated
		}
		out.Times[i] = ft
	}
	if c != nil && len(times) > 0 {
		// A window's start hides the local times before it: they would
		// not fire whatever the clocks did.
		if w, ok := s.(Window); ok && !w.Start.IsZero() && w.Start.After(after) {
			after = w.Start.Add(-time.Second)
		}
		out.Skipped = c.skipped(after, times[len(times)-1], n)
	}
	return out
}

// skipped lists, earliest first and at most n, what the expression
// matches after after and up to last that does not fire: local times a
// gap skipped (under spring_forward skip) and the instants of repeated
// local times that fall_back first or last leaves out.
func (c *CronSchedule) skipped(after, last time.Time, n int) []SkippedTime {
	type keyed struct {
		at int64 // where the entry sorts: the gap's end, or the instant
		s  SkippedTime
	}
	var all []keyed
	if c.dst.SpringForward != SpringForwardShift {
		for _, sk := range c.skippedWalls(after, last, n) {
			// time.Date puts a wall clock a gap skipped next to the gap.
			w, _ := time.ParseInLocation(LocalLayout, sk.Local, c.loc)
			all = append(all, keyed{w.Unix(), sk})
		}
	}
	if c.dst.FallBack != "" {
		// Both instants of a repeated local time: those this policy
		// does not fire. Every instant of both up to last either fires
		// (at most n do, last among them) or is listed.
		both := c.WithDST(DSTPolicy{SpringForward: c.dst.SpringForward})
		listed := 0
		for t := both.Next(after); !t.IsZero() && !t.After(last) && listed < n; t = both.Next(t) {
			if c.Next(t.Add(-time.Second)).Equal(t) {
				continue
			}
			listed++
			all = append(all, keyed{t.Unix(), SkippedTime{Local: t.In(c.loc).Format(time.RFC3339), Reason: SkipReasonDSTOverlap}})
		}
	}
	slices.SortStableFunc(all, func(a, b keyed) int { return cmp.Compare(a.at, b.at) })
	out := make([]SkippedTime, 0, min(len(all), n))
	for _, k := range all[:min(len(all), n)] {
		out = append(out, k.s)
	}
	return out
}

// cronOf returns the cron expression behind s, or nil.
func cronOf(s Schedule) *CronSchedule {
	switch v := s.(type) {
	case *CronSchedule:
		return v
	case Window:
		return cronOf(v.Schedule)
	}
	return nil
}

// wallSeconds returns t's wall clock in loc as seconds since
// 1970-01-01T00:00:00 of that clock.
func wallSeconds(t time.Time, loc *time.Location) int64 {
	_, off := t.In(loc).Zone()
	return t.Unix() + int64(off)
}

// wallRepeats reports whether another instant near t shows the same wall
// clock in loc. It tries each offset loc uses within a day of t: an
// instant u with that offset and t's wall clock is the other occurrence.
func wallRepeats(t time.Time, loc *time.Location) bool {
	w := wallSeconds(t, loc)
	_, own := t.In(loc).Zone()
	tried := map[int]bool{own: true}
	for d := -foldWindow; d <= foldWindow; d += 30 * time.Minute {
		_, off := t.Add(d).In(loc).Zone()
		if tried[off] {
			continue
		}
		tried[off] = true
		u := time.Unix(w-int64(off), 0)
		if wallSeconds(u, loc) == w {
			return true
		}
	}
	return false
}

// skippedWalls lists, earliest first and at most max, the wall-clock
// times the expression matches after after's wall clock and up to last's
// that no instant shows in the zone.
func (c *CronSchedule) skippedWalls(after, last time.Time, max int) []SkippedTime {
	out := []SkippedTime{}
	from := wallSeconds(after.Truncate(time.Second), c.loc) + 1
	to := wallSeconds(last, c.loc)
	maxYear := civilFromUnix(to).year
	for from <= to && len(out) < max {
		w, ok := c.nextWall(civilFromUnix(from), maxYear)
		if !ok || w.unix() > to {
			break
		}
		if !wallExists(w, c.loc) {
			out = append(out, SkippedTime{
				Local:  time.Unix(w.unix(), 0).UTC().Format(LocalLayout),
				Reason: SkipReasonDSTGap,
			})
		}
		from = w.unix() + 1
	}
	return out
}

// wallExists reports whether some instant shows wall clock w in loc.
// time.Date normalizes a wall clock that does not exist to one that does,
// so the two differ exactly when w fell in a gap.
func wallExists(w civil, loc *time.Location) bool {
	t := time.Date(int(w.year), time.Month(w.month), w.day, w.hour, w.min, w.sec, 0, loc)
	return wallSeconds(t, loc) == w.unix()
}
