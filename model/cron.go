package model

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// CronSchedule is a parsed cron expression evaluated in an IANA time zone.
// An instant fires when its wall clock in the zone matches every field, so
// a local time skipped by a DST change never fires and a local time that
// happens twice fires at both instants. Day-of-month and day-of-week
// combine with OR when both are restricted and with AND when either is
// "*" or "?".
//
// That is the default DST policy; WithDST returns the schedule under
// another (see DSTPolicy).
//
// A CronSchedule is immutable and safe for concurrent use; build one with
// ParseCron.
type CronSchedule struct {
	expr    string
	dialect Dialect
	loc     *time.Location

	// Value bitsets: bit v is set when the field allows value v. robfig's
	// star bit is not kept here; domStar and dowStar say whether the
	// day fields were unrestricted ("*" or "?").
	second, minute, hour, dom, month, dow uint64
	domStar, dowStar                      bool

	// dst is the policy for clock changes, canonical: the zero value is
	// the wall-clock rule above (see WithDST).
	dst DSTPolicy
}

// horizonYears bounds Next's search. A satisfiable expression matches at
// least once every 8 years of wall-clock calendar (Feb 29: 2096, then
// 2104); the rest of the margin covers matches that DST changes skip.
const horizonYears = 28

// starBit is robfig/cron's marker for a field written as "*" or "?".
const starBit = 1 << 63

// standardFieldNames names the fields of a 6-field standard expression.
var standardFieldNames = [6]string{"second", "minute", "hour", "day-of-month", "month", "day-of-week"}

var (
	// robfigParser parses whole standard expressions, including
	// descriptors ("@every" is handled before it is reached).
	robfigParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour |
		cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
	// robfigProbe parses single-field probes, to name the field at fault
	// when robfigParser rejects an expression.
	robfigProbe = cron.NewParser(cron.Second | cron.Minute | cron.Hour |
		cron.Dom | cron.Month | cron.Dow)
)

// parseStandard parses expr in the standard dialect.
func parseStandard(expr string, loc *time.Location, anchor time.Time) (Schedule, error) {
	s := strings.TrimSpace(expr)
	if s == "" {
		return nil, errors.New("empty cron expression")
	}
	if strings.HasPrefix(s, "TZ=") || strings.HasPrefix(s, "CRON_TZ=") {
		return nil, fmt.Errorf("invalid cron expression %q: TZ= and CRON_TZ= prefixes are not supported (set the timezone instead)", expr)
	}
	fields := strings.Fields(s)
	if fields[0] == "@every" {
		return parseEvery(expr, fields, anchor)
	}
	if strings.HasPrefix(s, "@") {
		switch s {
		case "@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly":
		default:
			return nil, fmt.Errorf("invalid cron expression %q: unknown descriptor %q (want @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or @every <duration>)", expr, s)
		}
	} else {
		if n := len(fields); n != 5 && n != 6 {
			return nil, fmt.Errorf("invalid cron expression %q: expected 5 or 6 fields, got %d", expr, n)
		}
		if len(fields) == 5 {
			fields = append([]string{"0"}, fields...)
		}
		if err := checkStandardFields(expr, fields); err != nil {
			return nil, err
		}
	}

	parsed, err := robfigParser.Parse(s)
	if err != nil {
		return nil, standardFieldError(expr, fields, err)
	}
	spec, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return nil, fmt.Errorf("invalid cron expression %q: unsupported form", expr)
	}
	c := &CronSchedule{
		expr:    expr,
		dialect: DialectStandard,
		loc:     loc,
		second:  spec.Second &^ starBit,
		minute:  spec.Minute &^ starBit,
		hour:    spec.Hour &^ starBit,
		dom:     spec.Dom &^ starBit,
		month:   spec.Month &^ starBit,
		dow:     spec.Dow &^ starBit,
		domStar: spec.Dom&starBit != 0,
		dowStar: spec.Dow&starBit != 0,
	}
	if !c.satisfiable() {
		return nil, fmt.Errorf("cron %q yields no future time", expr)
	}
	return c, nil
}

// checkStandardFields rejects what robfig/cron would accept but misread: an
// empty list item ("1,,2", or "," which allows nothing) and a "*" or "?"
// followed by anything but a step ("*-5" reads as "*").
func checkStandardFields(expr string, fields []string) error {
	for i, f := range fields {
		for item := range strings.SplitSeq(f, ",") {
			if item == "" {
				return fmt.Errorf("invalid cron expression %q: %s field: empty list item", expr, standardFieldNames[i])
			}
			if rest := item[1:]; (item[0] == '*' || item[0] == '?') && rest != "" && rest[0] != '/' {
				return fmt.Errorf("invalid cron expression %q: %s field: %q: %q may only be followed by a step", expr, standardFieldNames[i], item, item[:1])
			}
		}
	}
	return nil
}

// standardFieldError names the field robfig/cron rejected: it parses each
// field alone, the others set to "*", and reports the first that fails.
func standardFieldError(expr string, fields []string, err error) error {
	if len(fields) == 6 {
		for i := range fields {
			probe := []string{"*", "*", "*", "*", "*", "*"}
			probe[i] = fields[i]
			if _, perr := robfigProbe.Parse(strings.Join(probe, " ")); perr != nil {
				return fmt.Errorf("invalid cron expression %q: %s field: %s", expr, standardFieldNames[i], robfigReason(perr))
			}
		}
	}
	return fmt.Errorf("invalid cron expression %q: %s", expr, robfigReason(err))
}

// robfigReason shortens robfig/cron's message for an unparsable number,
// which repeats strconv's.
func robfigReason(err error) string {
	msg := err.Error()
	const prefix = "failed to parse int from "
	if rest, ok := strings.CutPrefix(msg, prefix); ok {
		if tok, _, ok := strings.Cut(rest, ": strconv."); ok {
			return fmt.Sprintf("invalid value %q", tok)
		}
	}
	return msg
}

// parseEvery parses "@every <duration>" into an Every anchored at anchor.
func parseEvery(expr string, fields []string, anchor time.Time) (Schedule, error) {
	if len(fields) != 2 {
		return nil, fmt.Errorf("invalid cron expression %q: @every takes one duration, e.g. \"@every 1h30m\"", expr)
	}
	d, err := time.ParseDuration(fields[1])
	if err != nil {
		return nil, fmt.Errorf("invalid cron expression %q: @every: invalid duration %q", expr, fields[1])
	}
	if d < time.Second {
		return nil, fmt.Errorf("invalid cron expression %q: @every interval %s is shorter than 1s", expr, d)
	}
	if d%time.Second != 0 {
		return nil, fmt.Errorf("invalid cron expression %q: @every interval %s is not a whole number of seconds", expr, d)
	}
	return Every{Interval: d, Anchor: anchor.Truncate(time.Second).UTC()}, nil
}

// String returns the expression as it was given to ParseCron.
func (c *CronSchedule) String() string { return c.expr }

// Location returns the zone the expression is evaluated in.
func (c *CronSchedule) Location() *time.Location { return c.loc }

// Dialect returns the grammar the expression was parsed with.
func (c *CronSchedule) Dialect() Dialect { return c.dialect }

// satisfiable reports whether any wall-clock date matches. Every month,
// day of month and weekday occurs in the leap year 2000, so one year of
// search decides it.
func (c *CronSchedule) satisfiable() bool {
	_, ok := c.nextWall(civil{year: 2000, month: 1, day: 1}, 2000)
	return ok
}

// Next returns the first instant strictly after after whose wall clock in
// the schedule's zone matches the expression, in UTC, or the zero Time when
// there is none within 28 years or before 9999-12-31T23:59:59Z.
//
// It walks the zone's offset intervals rather than the clock: within an
// interval [start, end) with offset o, instant t has wall time t+o, one to
// one, so the first matching wall time w at or after wall(t) gives the
// candidate w-o; if that falls past end, the search resumes at end under
// the next offset. Every instant is considered exactly once, which is what
// makes skipped wall times never fire and repeated ones fire twice.
//
// A DST policy adjusts the walk at the offset changes: fall_back "first"
// starts an interval that clocks fell back into after its repeated wall
// times, "last" ends one that clocks fall back out of before them, and
// spring_forward "shift" returns an interval's end when the wall times
// the change skips include a match.
func (c *CronSchedule) Next(after time.Time) time.Time {
	ts := max(clampUnix(after)+1, minUnix) // the first whole second > after
	if ts > maxUnix {
		return time.Time{}
	}
	maxYear := civilFromUnix(ts).year + horizonYears
	shift := c.dst.SpringForward == SpringForwardShift
	if shift && c.gapShifts(ts) {
		return time.Unix(ts, 0).UTC() // a gap ends at ts itself
	}
	for range 1000 { // a zone has far fewer offset changes in the horizon
		t := time.Unix(ts, 0).In(c.loc)
		_, off := t.Zone()
		endUnix := int64(math.MaxInt64)
		start, end := t.ZoneBounds()
		if !end.IsZero() {
			endUnix = end.Unix()
			if endUnix <= ts {
				// golang/go#81583: in a leap year served by the zone's TZ
				// rule, ZoneBounds ends the year's last interval 24h
				// early, before t. No rule change remains in that UTC
				// year, so the offset holds until the next one begins.
				endUnix = civil{year: civilFromUnix(ts).year + 1, month: 1, day: 1}.unix()
			}
		}
		from, limit := ts, endUnix
		if c.dst.FallBack != "" {
			from, limit = c.foldBounds(start, ts, endUnix, int64(off), !end.IsZero())
		}
		if from < limit {
			w, ok := c.nextWall(civilFromUnix(from+int64(off)), maxYear)
			if !ok {
				return time.Time{}
			}
			cand := w.unix() - int64(off)
			if cand < limit {
				if cand > maxUnix {
					return time.Time{}
				}
				return time.Unix(cand, 0).UTC()
			}
		}
		if shift && !end.IsZero() && c.gapShifts(endUnix) {
			if endUnix > maxUnix {
				return time.Time{}
			}
			return time.Unix(endUnix, 0).UTC()
		}
		ts = endUnix
	}
	return time.Time{}
}

// nextWall returns the first wall-clock time at or after w that matches
// every field, searching no later than the end of year maxYear. It knows
// nothing of zones. Each field jumps straight to its next allowed value;
// when a field runs out, the next coarser field advances by one and the
// finer ones restart from their minimum.
func (c *CronSchedule) nextWall(w civil, maxYear int64) (civil, bool) {
	for w.year <= maxYear {
		m := nextBit(c.month, w.month)
		if m < 0 {
			w = civil{year: w.year + 1, month: 1, day: 1}
			continue
		}
		if m != w.month {
			w = civil{year: w.year, month: m, day: 1}
		}
		d := nextBit(c.dayBits(w.year, w.month), w.day)
		if d < 0 {
			w = civil{year: w.year, month: w.month + 1, day: 1}
			continue
		}
		if d != w.day {
			w.day, w.hour, w.min, w.sec = d, 0, 0, 0
		}
		h := nextBit(c.hour, w.hour)
		if h < 0 {
			w.day, w.hour, w.min, w.sec = w.day+1, 0, 0, 0
			continue
		}
		if h != w.hour {
			w.hour, w.min, w.sec = h, 0, 0
		}
		mi := nextBit(c.minute, w.min)
		if mi < 0 {
			w.hour, w.min, w.sec = w.hour+1, 0, 0
			continue
		}
		if mi != w.min {
			w.min, w.sec = mi, 0
		}
		s := nextBit(c.second, w.sec)
		if s < 0 {
			w.min, w.sec = w.min+1, 0
			continue
		}
		w.sec = s
		return w, true
	}
	return civil{}, false
}

// dayBits returns the days (bits 1-31) of month m of year y that match the
// day-of-month and day-of-week fields.
func (c *CronSchedule) dayBits(y int64, m int) uint64 {
	valid := uint64(1)<<(daysIn(y, m)+1) - 2 // bits 1..days in month
	w1 := uint(weekdayOfDays(daysFromCivil(y, m, 1)))
	// Bit k of p: does the weekday of day k+1 match? Rotate the weekday
	// bits so that bit 0 is day 1's weekday, then repeat every 7 days.
	p := (c.dow>>w1 | c.dow<<(7-w1)) & 0x7f
	dowDays := (p | p<<7 | p<<14 | p<<21 | p<<28) << 1
	if c.domStar || c.dowStar {
		return c.dom & dowDays & valid
	}
	return (c.dom | dowDays) & valid
}

// nextBit returns the lowest set bit of mask at or above from, or -1.
func nextBit(mask uint64, from int) int {
	if from >= 64 {
		return -1
	}
	mask &^= 1<<uint(from) - 1
	if mask == 0 {
		return -1
	}
	return bits.TrailingZeros64(mask)
}
