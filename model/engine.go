package model

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// This file declares the fire-time engine's exported surface; the other
// packages (queue, scheduler, launcher, api) are written against it. The
// machinery lives in cron.go (standard dialect and Next), posix.go,
// calendar.go, zone.go, timing.go and key.go.

// Dialect selects a cron grammar.
type Dialect string

const (
	// DialectStandard is robfig/cron's grammar: 5 fields or 6 with seconds
	// first, names, steps, descriptors and "@every <duration>".
	DialectStandard Dialect = "standard"
	// DialectPosix is the strict 5-field numeric grammar of the declarative
	// scheduler.
	DialectPosix Dialect = "posix"
)

// Schedule yields fire times. Next returns the first fire time strictly
// after after, in UTC, truncated to whole seconds, or the zero Time when
// there is none.
type Schedule interface {
	Next(after time.Time) time.Time
}

// MaxCronLen bounds a cron expression. The longest useful one (every
// value of every field listed) is well under it; the bound keeps a request
// from making the parser, the parse cache and the schedule record hold
// megabytes.
const MaxCronLen = 1024

// ParseCron parses expr in dialect (empty means standard) and evaluates it in
// zone tz (empty means UTC). "@every <d>" (standard only) yields an Every
// anchored at anchor.
//
// Any other expression yields a *CronSchedule. An expression that no date
// can ever satisfy (such as "0 0 30 2 *") is an error, so an accepted
// expression always has fire times.
func ParseCron(expr, tz string, dialect Dialect, anchor time.Time) (Schedule, error) {
	if len(expr) > MaxCronLen {
		return nil, fmt.Errorf("cron expression longer than %d bytes", MaxCronLen)
	}
	if dialect != "" && dialect != DialectStandard && dialect != DialectPosix {
		return nil, fmt.Errorf("unknown dialect %q (want standard or posix)", dialect)
	}
	key := parseKey{expr, tz, dialect}
	if c, ok := parsedCrons.Load(key); ok {
		return c.(*CronSchedule), nil
	}
	loc, err := LoadZone(tz)
	if err != nil {
		return nil, err
	}
	var s Schedule
	if dialect == DialectPosix {
		s, err = parsePosix(expr, loc)
	} else {
		s, err = parseStandard(expr, loc, anchor)
	}
	if c, ok := s.(*CronSchedule); ok && err == nil {
		if parsedCount.Add(1) > parsedMax {
			parsedCrons.Clear()
			parsedCount.Store(1)
		}
		parsedCrons.Store(key, c)
	}
	return s, err
}

// parsedCrons caches successful parses (*CronSchedule only: an Every
// depends on its anchor). The same expressions recur across schedules and
// are parsed on every upsert, plan and launch; a CronSchedule is
// immutable, so one can be shared. Past parsedMax entries the cache
// starts over.
var (
	parsedCrons sync.Map // parseKey -> *CronSchedule
	parsedCount atomic.Int64
)

const parsedMax = 10000

type parseKey struct {
	expr, tz string
	dialect  Dialect
}

// Preview returns up to n fire times of s strictly after after, in order.
// It stops early when s has no further fire time. The result is never nil,
// so it encodes as a JSON array.
func Preview(s Schedule, after time.Time, n int) []time.Time {
	out := make([]time.Time, 0, min(max(n, 0), 64))
	if s == nil {
		return out
	}
	for len(out) < n {
		t := s.Next(after)
		if t.IsZero() || !t.After(after) {
			break
		}
		out = append(out, t)
		after = t
	}
	return out
}
