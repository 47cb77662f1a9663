package model

import (
	"errors"
	"fmt"
	"time"
)

// Every fires at Anchor + k*Interval for k >= 1.
//
// Each fire time is computed from the anchor, never from the previous run
// or from now, so the schedule does not drift. Interval must be a positive
// whole number of seconds and Anchor is truncated to the whole second;
// Next returns the zero Time for an Interval that is not, or for an Anchor
// outside years 1-9999.
type Every struct {
	Interval time.Duration
	Anchor   time.Time
}

// Next returns the smallest Anchor + k*Interval (k >= 1) strictly after
// after, in UTC.
func (e Every) Next(after time.Time) time.Time {
	if e.Interval < time.Second || e.Interval%time.Second != 0 {
		return time.Time{}
	}
	a, ok := unixInRange(e.Anchor)
	if !ok {
		return time.Time{}
	}
	iv := int64(e.Interval / time.Second)
	// Fire times are whole seconds, so "> after" is "> floor(after)".
	f := clampUnix(after)
	k := int64(1)
	if f >= a {
		k = (f-a)/iv + 1
	}
	if k > (maxUnix-a)/iv {
		return time.Time{}
	}
	return time.Unix(a+k*iv, 0).UTC()
}

// Once fires once, at At.
//
// At is rounded up to the whole second (ResolveOnce already does so).
type Once struct {
	At time.Time
}

// Next returns At in UTC if it is after after, else the zero Time.
func (o Once) Next(after time.Time) time.Time {
	at := ceilSecond(o.At)
	if at.After(after) {
		return at.UTC()
	}
	return time.Time{}
}

// Window restricts a Schedule to fire times t with Start <= t <= End; a zero
// Start or End leaves that side open.
type Window struct {
	Schedule   Schedule
	Start, End time.Time
}

// Next returns the first fire time of the inner Schedule that is strictly
// after after and within the window, or the zero Time.
func (w Window) Next(after time.Time) time.Time {
	if w.Schedule == nil {
		return time.Time{}
	}
	if !w.Start.IsZero() {
		// Next(Start - 1ns) is the first fire time at or after Start.
		if s := w.Start.Add(-time.Nanosecond); after.Before(s) {
			after = s
		}
	}
	t := w.Schedule.Next(after)
	if t.IsZero() || (!w.End.IsZero() && t.After(w.End)) {
		return time.Time{}
	}
	return t
}

// ResolveOnce turns the once inputs into a fire time, relative to now.
//
// Exactly one of delaySeconds (a positive delay after now) and fireAt (an
// RFC 3339 time strictly after now) must be given. The result is rounded
// up to the whole second, in UTC.
func ResolveOnce(delaySeconds *int64, fireAt string, now time.Time) (time.Time, error) {
	var at time.Time
	switch {
	case delaySeconds != nil && fireAt != "":
		return time.Time{}, errors.New("once alarm takes either delay_seconds or fire_at, not both")
	case delaySeconds != nil:
		d := *delaySeconds
		if d <= 0 {
			return time.Time{}, errors.New("delay_seconds must be > 0")
		}
		n, ok := unixInRange(now)
		if !ok || d > maxUnix-n-1 {
			return time.Time{}, fmt.Errorf("delay_seconds %d is too large (fire time after year 9999)", d)
		}
		at = time.Unix(n+d, int64(now.Nanosecond()))
	case fireAt != "":
		t, err := time.Parse(time.RFC3339, fireAt)
		if err != nil {
			return time.Time{}, fmt.Errorf("invalid fire_at %q (want RFC3339)", fireAt)
		}
		if !t.After(now) {
			return time.Time{}, fmt.Errorf("fire_at %s is not in the future", fireAt)
		}
		at = t
	default:
		return time.Time{}, errors.New("once alarm requires delay_seconds or fire_at")
	}
	at = ceilSecond(at).UTC()
	if _, ok := unixInRange(at); !ok {
		return time.Time{}, fmt.Errorf("fire_at %s is after year 9999 in UTC", fireAt)
	}
	return at, nil
}

// ceilSecond rounds t up to the whole second.
func ceilSecond(t time.Time) time.Time {
	tr := t.Truncate(time.Second)
	if tr.Before(t) {
		return tr.Add(time.Second)
	}
	return tr
}

// unixInRange returns t's epoch seconds (rounded down) if t lies within
// years 1-9999.
func unixInRange(t time.Time) (int64, bool) {
	if y := t.UTC().Year(); y < 1 || y > 9999 {
		return 0, false
	}
	return t.Unix(), true
}

// clampUnix returns t's epoch seconds (rounded down), clamped to the
// supported range widened by one second on each side.
func clampUnix(t time.Time) int64 {
	switch y := t.UTC().Year(); {
	case y < 1:
		return minUnix - 1
	case y > 9999:
		return maxUnix + 1
	}
	return t.Unix()
}
