package crontool

import (
	"time"
)

// localLayouts are the wall-clock forms `at` accepts without an offset,
// as Python's datetime.fromisoformat reads them (nanobot parses `at` with
// it): seconds optional, a fraction allowed, T or a space between date and
// time.
var localLayouts = []string{
	"2006-01-02T15:04:05.999999999",
	"2006-01-02T15:04",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02 15:04",
}

// ParseAt reads the tool's `at`: an RFC 3339 time (its offset decides;
// loc is not used), or a local wall-clock time read in loc.
//
// A wall-clock time that a DST change skips is moved forward by the
// change (02:30 on a spring-forward night is 03:30), and one that happens
// twice is its first occurrence, so the job never fires later than the
// user could have meant.
func ParseAt(s string, loc *time.Location) (time.Time, bool) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, true
	}
	for _, layout := range localLayouts {
		w, err := time.Parse(layout, s)
		if err != nil {
			continue
		}
		return wallIn(w, loc), true
	}
	return time.Time{}, false
}

// wallIn is the instant whose wall clock in loc reads w's (w is in UTC),
// the first one when the clock reads it twice, w moved forward by the gap
// when never.
func wallIn(w time.Time, loc *time.Location) time.Time {
	var first time.Time
	// The offsets in force around w: a wall time can only map to an
	// instant with one of them.
	for _, probe := range []time.Duration{-36 * time.Hour, 0, 36 * time.Hour} {
		_, off := w.Add(probe).In(loc).Zone()
		t := w.Add(-time.Duration(off) * time.Second)
		if sameWall(t.In(loc), w) && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	if !first.IsZero() {
		return first
	}
	// In a gap: read with the offset before it, which lands after the
	// gap by as much as w was into it.
	_, before := w.Add(-36 * time.Hour).In(loc).Zone()
	return w.Add(-time.Duration(before) * time.Second)
}

func sameWall(t, w time.Time) bool {
	y1, m1, d1 := t.Date()
	y2, m2, d2 := w.Date()
	return y1 == y2 && m1 == m2 && d1 == d2 && t.Hour() == w.Hour() && t.Minute() == w.Minute() &&
		t.Second() == w.Second() && t.Nanosecond() == w.Nanosecond()
}
