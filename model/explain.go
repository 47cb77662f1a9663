package model

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// Explain returns s in words, such as "At 09:00, Monday through Friday, in
// America/New_York". It describes what fires, not how it was written: it
// reads the parsed fields, so "mon-fri", "1-5" and "MON-FRI" explain alike,
// and so do the posix and standard spellings of one schedule. A Window
// explains as the schedule it bounds. It returns "" for a nil Schedule
// and for kinds it does not know.
func Explain(s Schedule) string {
	switch v := s.(type) {
	case *CronSchedule:
		if v == nil {
			return ""
		}
		return v.Explain()
	case Every:
		return v.Explain()
	case Once:
		return "Once, at " + ceilSecond(v.At).UTC().Format(time.RFC3339)
	case Window:
		return Explain(v.Schedule)
	}
	return ""
}

// Explain returns the interval in words: "Every 90 minutes". The anchor is
// left out: it is when the schedule was created or its timing changed.
func (e Every) Explain() string {
	switch d := e.Interval; {
	case d <= 0:
		return "Never"
	case d%time.Hour == 0:
		return "Every " + plural(int(d/time.Hour), "hour")
	case d%time.Minute == 0:
		return "Every " + plural(int(d/time.Minute), "minute")
	default:
		return "Every " + plural(int(d/time.Second), "second")
	}
}

// plural returns "hour" for 1 and "3 hours" for 3.
func plural(n int, unit string) string {
	if n == 1 {
		return unit
	}
	return strconv.Itoa(n) + " " + unit + "s"
}

// clockListMax is how many wall-clock times "At 09:00 and 17:00" lists
// before the time of day is described field by field instead.
const clockListMax = 4

var (
	monthNames   = [13]string{"", "January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"}
	weekdayNames = [7]string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}
)

// Explain returns the expression in words, such as "At 09:00, Monday
// through Friday, in America/New_York". When both day-of-month and
// day-of-week are restricted the text joins them with "or", as they fire.
func (c *CronSchedule) Explain() string {
	parts := []string{c.explainTime()}
	monthFull := c.month == bitRange(1, 12)
	switch {
	case c.domStar && c.dowStar:
	case c.dowStar:
		// "on day 1 of January" reads better than "on day 1 of the
		// month, in January".
		of := "the month"
		if !monthFull {
			of = listText(c.month, 1, 12, monthName)
			monthFull = true
		}
		parts = append(parts, "on "+c.domText()+" of "+of)
	case c.domStar:
		parts = append(parts, c.dowText())
	default:
		parts = append(parts, "on "+c.domText()+" of the month or on "+c.dowList())
	}
	if !monthFull {
		parts = append(parts, "in "+listText(c.month, 1, 12, monthName))
	}
	if c.loc != nil {
		parts = append(parts, "in "+c.loc.String())
	}
	out := strings.Join(parts, ", ")
	return strings.ToUpper(out[:1]) + out[1:]
}

// explainTime describes the second, minute and hour fields: a short list
// of clock times when there are few, otherwise each field in turn.
func (c *CronSchedule) explainTime() string {
	ns, nm, nh := bits.OnesCount64(c.second), bits.OnesCount64(c.minute), bits.OnesCount64(c.hour)
	if ns*nm*nh <= clockListMax {
		var times []string
		for h := range bitValues(c.hour) {
			for m := range bitValues(c.minute) {
				for s := range bitValues(c.second) {
					if c.second == 1 {
						times = append(times, fmt.Sprintf("%02d:%02d", h, m))
					} else {
						times = append(times, fmt.Sprintf("%02d:%02d:%02d", h, m, s))
					}
				}
			}
		}
		return "at " + joinAnd(times)
	}

	// Field by field, finest first. A full field is implied by a finer
	// one that repeats ("every 15 minutes" runs in every hour); "at"
	// phrases need the coarser field said ("at minute 5 of every hour").
	var out []string
	last := "" // "every" or "at": how the previous phrase began
	add := func(p, kind string) { out = append(out, p); last = kind }
	full := bitRange(0, 59)
	switch {
	case c.second == full:
		add("every second", "every")
	case c.second == 1:
	default:
		add(fieldText(c.second, 0, 59, "second"), kindOf(c.second, 0, 59))
	}
	switch {
	case c.minute == full && last == "":
		add("every minute", "every")
	case c.minute == full && last == "at":
		add("of every minute", "every")
	case c.minute == full:
	default:
		p := fieldText(c.minute, 0, 59, "minute")
		if last == "at" {
			p = "of " + p
		}
		add(p, kindOf(c.minute, 0, 59))
	}
	switch h := c.hour; {
	case h == bitRange(0, 23) && last == "at":
		add("of every hour", "every")
	case h == bitRange(0, 23):
	case isRun(h):
		lo, hi := bits.TrailingZeros64(h), 63-bits.LeadingZeros64(h)
		add(fmt.Sprintf("between %02d:00 and %02d:59", lo, hi), "between")
	default:
		if k, _, _, ok := stepOf(h, 0, 23); ok {
			add(stepText(h, 0, 23, k, "hour"), "every")
		} else {
			add("past "+plural0(h, "hour")+" "+listText(h, 0, 23, strconv.Itoa), "at")
		}
	}
	// Phrases that continue the previous one join with a space.
	s := out[0]
	for _, p := range out[1:] {
		if strings.HasPrefix(p, "of ") || strings.HasPrefix(p, "past ") {
			s += " " + p
		} else {
			s += ", " + p
		}
	}
	return s
}

// kindOf says whether fieldText phrases set as "every …" or "at …".
func kindOf(set uint64, lo, hi int) string {
	if _, _, _, ok := stepOf(set, lo, hi); ok {
		return "every"
	}
	return "at"
}

// fieldText describes a restricted second or minute field: "every 15
// minutes" for a step, "at minutes 0 through 10 and 30" otherwise.
func fieldText(set uint64, lo, hi int, unit string) string {
	if k, _, _, ok := stepOf(set, lo, hi); ok {
		return stepText(set, lo, hi, k, unit)
	}
	return "at " + plural0(set, unit) + " " + listText(set, lo, hi, strconv.Itoa)
}

// plural0 returns unit, or its plural when set holds more than one value.
func plural0(set uint64, unit string) string {
	if bits.OnesCount64(set) > 1 {
		return unit + "s"
	}
	return unit
}

// stepOf reports whether set is a step series a, a+k, …, b with k >= 2
// and at least three values, the shape "a-b/k" and "*/k" parse to.
func stepOf(set uint64, lo, hi int) (k, a, b int, ok bool) {
	if bits.OnesCount64(set) < 3 {
		return 0, 0, 0, false
	}
	a = bits.TrailingZeros64(set)
	rest := set &^ (1 << uint(a))
	k = bits.TrailingZeros64(rest) - a
	b = 63 - bits.LeadingZeros64(set)
	if k < 2 || a < lo || b > hi || (b-a)%k != 0 {
		return 0, 0, 0, false
	}
	var want uint64
	for v := a; v <= b; v += k {
		want |= 1 << uint(v)
	}
	return k, a, b, want == set
}

// stepText phrases a step series: "every 15 minutes", "every 5 minutes
// from minute 5 through 40".
func stepText(set uint64, lo, hi, k int, unit string) string {
	_, a, b, _ := stepOf(set, lo, hi)
	s := "every " + plural(k, unit)
	if a != lo {
		s += fmt.Sprintf(" from %s %d", unit, a)
	}
	if b+k <= hi {
		if a == lo {
			s += fmt.Sprintf(" from %s %d", unit, a)
		}
		s += fmt.Sprintf(" through %d", b)
	}
	return s
}

// domText describes the day-of-month field, without its "of …" tail.
func (c *CronSchedule) domText() string {
	if k, _, _, ok := stepOf(c.dom, 1, 31); ok {
		return stepText(c.dom, 1, 31, k, "day")
	}
	return plural0(c.dom, "day") + " " + listText(c.dom, 1, 31, strconv.Itoa)
}

// dowText describes the day-of-week field: "Monday through Friday" for one
// range, "on Monday and Friday" otherwise.
func (c *CronSchedule) dowText() string {
	t := c.dowList()
	if isRun(c.dow) && bits.OnesCount64(c.dow) >= 3 {
		return t
	}
	return "on " + t
}

// dowList lists the day-of-week field: "Monday through Friday".
func (c *CronSchedule) dowList() string {
	return listText(c.dow, 0, 6, func(v int) string { return weekdayNames[v] })
}

func monthName(v int) string { return monthNames[v] }

// isRun reports whether set's values are consecutive.
func isRun(set uint64) bool {
	if set == 0 {
		return false
	}
	v := set >> uint(bits.TrailingZeros64(set))
	return v&(v+1) == 0
}

// listText lists set's values in [lo, hi], runs of three or more as
// "a through b": "1 through 5 and 7".
func listText(set uint64, lo, hi int, name func(int) string) string {
	var items []string
	for v := lo; v <= hi; v++ {
		if set&(1<<uint(v)) == 0 {
			continue
		}
		end := v
		for end < hi && set&(1<<uint(end+1)) != 0 {
			end++
		}
		switch {
		case end-v >= 2:
			items = append(items, name(v)+" through "+name(end))
		case end == v+1:
			items = append(items, name(v), name(end))
		default:
			items = append(items, name(v))
		}
		v = end
	}
	if len(items) == 0 {
		return "none"
	}
	return joinAnd(items)
}

// joinAnd joins "a", "b" and "c" as "a, b and c".
func joinAnd(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

// bitValues yields the set bits of mask, lowest first.
func bitValues(mask uint64) func(func(int) bool) {
	return func(yield func(int) bool) {
		for mask != 0 {
			v := bits.TrailingZeros64(mask)
			if !yield(v) {
				return
			}
			mask &^= 1 << uint(v)
		}
	}
}
