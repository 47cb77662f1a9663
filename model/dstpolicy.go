package model

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// SpringForward says what a cron schedule does with the local times that
// clocks skip when they spring forward.
type SpringForward string

const (
	// SpringForwardSkip: a skipped local time does not fire (the
	// wall-clock rule; the default).
	SpringForwardSkip SpringForward = "skip"
	// SpringForwardShift: the local times a gap skips fire once, at the
	// first instant after the gap (03:00 when 02:00-02:59 is skipped).
	SpringForwardShift SpringForward = "shift"
)

// FallBack says what a cron schedule does with the local times that
// happen twice when clocks fall back.
type FallBack string

const (
	// FallBackBoth: a repeated local time fires at both instants (the
	// wall-clock rule; the default).
	FallBackBoth FallBack = "both"
	// FallBackFirst: a repeated local time fires at its first instant
	// only (still under the summer offset).
	FallBackFirst FallBack = "first"
	// FallBackLast: a repeated local time fires at its last instant only
	// (under the offset clocks fell back to).
	FallBackLast FallBack = "last"
)

// DSTPolicy says what a cron schedule does when its zone's clocks change.
// A zero member is its default (skip, both), so the zero DSTPolicy is
// the wall-clock rule every schedule had before policies existed. It has
// no effect on schedules that fire on a grid of instants ("@every",
// every, once): no clock change moves them.
type DSTPolicy struct {
	SpringForward SpringForward `json:"spring_forward,omitempty"`
	FallBack      FallBack      `json:"fall_back,omitempty"`
}

// DSTShifted marks a fire time that a spring_forward "shift" policy
// carried over a gap: local times the expression matches were skipped
// by the clocks just before it, and fire at this first instant after the
// gap (once, even when the instant matches on its own too).
const DSTShifted DSTNote = "shifted"

// SkipReasonDSTOverlap is why a repeated local time did not fire at one
// of its two instants: fall_back "first" or "last" kept the other one.
const SkipReasonDSTOverlap = "dst_overlap"

// Canonical returns p with default members made zero, so that equal
// policies compare equal and the default one is the zero value.
func (p DSTPolicy) Canonical() DSTPolicy {
	if p.SpringForward == SpringForwardSkip {
		p.SpringForward = ""
	}
	if p.FallBack == FallBackBoth {
		p.FallBack = ""
	}
	return p
}

// IsDefault reports whether p is the wall-clock rule: skip and both.
func (p DSTPolicy) IsDefault() bool { return p.Canonical() == DSTPolicy{} }

// Effective returns p with every member spelt out, defaults included.
func (p DSTPolicy) Effective() DSTPolicy {
	if p.SpringForward == "" {
		p.SpringForward = SpringForwardSkip
	}
	if p.FallBack == "" {
		p.FallBack = FallBackBoth
	}
	return p
}

// Validate checks each member; errors are *FieldError named
// dst_policy.spring_forward or dst_policy.fall_back.
func (p DSTPolicy) Validate() error {
	var errs FieldErrors
	switch p.SpringForward {
	case "", SpringForwardSkip, SpringForwardShift:
	default:
		errs.Add(&FieldError{"dst_policy.spring_forward", fmt.Sprintf("unknown spring_forward %q (want skip or shift)", p.SpringForward)})
	}
	switch p.FallBack {
	case "", FallBackBoth, FallBackFirst, FallBackLast:
	default:
		errs.Add(&FieldError{"dst_policy.fall_back", fmt.Sprintf("unknown fall_back %q (want both, first or last)", p.FallBack)})
	}
	return errs.Err()
}

// String returns the canonical policy's members that are not defaults,
// joined by a comma ("shift", "last", "shift,last"), or "" for the
// default policy. ParseDSTPolicy reads it back.
func (p DSTPolicy) String() string {
	c := p.Canonical()
	var parts []string
	if c.SpringForward != "" {
		parts = append(parts, string(c.SpringForward))
	}
	if c.FallBack != "" {
		parts = append(parts, string(c.FallBack))
	}
	return strings.Join(parts, ",")
}

// ParseDSTPolicy reads a compact policy: comma-separated values, each
// either spring_forward's (skip, shift) or fall_back's (both, first,
// last), at most one of each; "" is the default policy. The result is
// canonical. Errors are *FieldError named field.
func ParseDSTPolicy(field, s string) (DSTPolicy, error) {
	var p DSTPolicy
	if strings.TrimSpace(s) == "" {
		return p, nil
	}
	for v := range strings.SplitSeq(s, ",") {
		v = strings.TrimSpace(v)
		switch {
		case slices.Contains([]string{"skip", "shift"}, v):
			if p.SpringForward != "" {
				return DSTPolicy{}, &FieldError{field, fmt.Sprintf("%q names spring_forward twice", s)}
			}
			p.SpringForward = SpringForward(v)
		case slices.Contains([]string{"both", "first", "last"}, v):
			if p.FallBack != "" {
				return DSTPolicy{}, &FieldError{field, fmt.Sprintf("%q names fall_back twice", s)}
			}
			p.FallBack = FallBack(v)
		default:
			return DSTPolicy{}, &FieldError{field, fmt.Sprintf("unknown value %q (want skip or shift for spring_forward, both, first or last for fall_back, comma-separated)", v)}
		}
	}
	return p.Canonical(), nil
}

// WithDST returns the schedule under policy p: c itself for the default
// policy, else a copy (a CronSchedule is immutable and may be shared by
// ParseCron's cache).
func (c *CronSchedule) WithDST(p DSTPolicy) *CronSchedule {
	p = p.Canonical()
	if c == nil || c.dst == p {
		return c
	}
	cp := *c
	cp.dst = p
	return &cp
}

// DSTPolicy returns the policy the schedule fires under (canonical).
func (c *CronSchedule) DSTPolicy() DSTPolicy { return c.dst }

// offsetAt returns loc's offset at Unix second u.
func offsetAt(loc *time.Location, u int64) int64 {
	_, off := time.Unix(u, 0).In(loc).Zone()
	return int64(off)
}

// gapShifts reports whether clocks spring forward at instant u (the
// offset grows there) over a local time the expression matches: under
// shift, u is then a fire time.
func (c *CronSchedule) gapShifts(u int64) bool {
	before, after := offsetAt(c.loc, u-1), offsetAt(c.loc, u)
	if after <= before {
		return false
	}
	// The gap is the wall clocks [u+before, u+after).
	w, ok := c.nextWall(civilFromUnix(u+before), civilFromUnix(u+after).year)
	return ok && w.unix() < u+after
}

// foldBounds narrows the search within the zone interval [start, end)
// with offset off, which ts lies in, to the instants the fall_back policy
// lets fire: from (>= ts) and limit (<= end). "first" leaves out the
// second occurrences at the interval's start when clocks fell back into
// it; "last" leaves out the first occurrences at its end when clocks fall
// back out of it. start is zero when the interval has no known start;
// endKnown is false when it has no end.
func (c *CronSchedule) foldBounds(start time.Time, ts, end, off int64, endKnown bool) (from, limit int64) {
	from, limit = ts, end
	switch c.dst.FallBack {
	case FallBackFirst:
		if !start.IsZero() {
			s := start.Unix()
			if prev := offsetAt(c.loc, s-1); prev > off {
				from = max(ts, s+prev-off)
			}
		}
	case FallBackLast:
		if endKnown {
			if next := offsetAt(c.loc, end); next < off {
				limit = end - (off - next)
			}
		}
	}
	return from, limit
}
