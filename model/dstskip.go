package model

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"
)

// DSTSkippedKey is the key of the ledger's record of the local times a
// DST gap skipped for a schedule: hex(sha256("dst_skipped" NUL scheduleID
// NUL epoch_seconds(gapEnd))), gapEnd being the first instant after the
// gap. One record per gap, whatever number of local times it skipped, so
// replicas that plan the same time write the same record and the volume
// stays at most one record per spring-forward per schedule. Identifiers
// hold no NUL, so it is never a run's IdempotencyKey or a ManualRunKey.
func DSTSkippedKey(scheduleID string, gapEnd time.Time) string {
	sum := sha256.Sum256([]byte("dst_skipped\x00" + scheduleID + "\x00" + strconv.FormatInt(gapEnd.Unix(), 10)))
	return hex.EncodeToString(sum[:])
}

// CatchupDroppedKey is the key of the ledger's record of the missed runs
// a catch-up dropped for a schedule: hex(sha256("catchup_dropped" NUL
// scheduleID NUL epoch_seconds(last))), last being the last run dropped.
// The record has a key of its own, never a run's: the runs it stands for
// keep their IdempotencyKeys free, so a backfill of the outage creates
// them and a run planned before under one is never ended by it.
// Replicas that plan the same drop write the same record. Identifiers
// hold no NUL, so it is never a run's IdempotencyKey, a ManualRunKey or
// a DSTSkippedKey.
func CatchupDroppedKey(scheduleID string, last time.Time) string {
	sum := sha256.Sum256([]byte("catchup_dropped\x00" + scheduleID + "\x00" + strconv.FormatInt(last.Unix(), 10)))
	return hex.EncodeToString(sum[:])
}

// DSTGap is a spring-forward gap whose local times a cron expression
// matches.
type DSTGap struct {
	// End is the first instant after the gap, in UTC.
	End time.Time
	// Locals are the first matching local times the gap skipped,
	// formatted with LocalLayout, earliest first; Total counts them all.
	Locals []string
	Total  int
}

// dstGapSearch bounds how far GapBefore looks back: the offset intervals
// it steps over (a zone's year has two, and ZoneBounds may split one at a
// new year).
const dstGapSearch = 4

// GapBefore returns the latest spring-forward gap ending at or before t
// whose skipped local times the expression matches, listing at most max
// of them, and false when there is none among the last few offset changes
// before t. The caller decides whether the gap lies between t and the
// fire time before it (Next(End - 1s) == t says so). The DST policy is
// not consulted: under spring_forward shift, the gap's times fire at End.
func (c *CronSchedule) GapBefore(t time.Time, max int) (DSTGap, bool) {
	u := t.Unix()
	for range dstGapSearch {
		start, _ := time.Unix(u, 0).In(c.loc).ZoneBounds()
		if start.IsZero() {
			break
		}
		s := start.Unix()
		if s > u { // golang/go#81583 can misplace a bound; give up rather than loop
			break
		}
		before, after := offsetAt(c.loc, s-1), offsetAt(c.loc, s)
		if after > before && c.gapShifts(s) {
			g := DSTGap{End: time.Unix(s, 0).UTC()}
			from, to := s+before, s+after // the gap's wall clocks [from, to)
			for from < to {
				w, ok := c.nextWall(civilFromUnix(from), civilFromUnix(to).year)
				if !ok || w.unix() >= to {
					break
				}
				if len(g.Locals) < max {
					g.Locals = append(g.Locals, time.Unix(w.unix(), 0).UTC().Format(LocalLayout))
				}
				g.Total++
				from = w.unix() + 1
			}
			return g, true
		}
		u = s - 1
	}
	return DSTGap{}, false
}
