package model

import (
	"fmt"
	"strings"
	"time"
)

// The posix dialect is the strict grammar of the declarative scheduler:
//
//	expr  = field 4*(space field)       ; minute hour day-of-month month day-of-week
//	field = "*" | item *("," item)
//	item  = number | number "-" number  ; start <= end
//	number = 1*DIGIT                    ; decimal, within the field's range
//
// Steps, names, macros, "?", "L", "W", "#", weekday 7 and wrap-around
// ranges are rejected. Its error messages keep that scheduler's wording:
// `Invalid cron expression "<expr>": <field> field <reason>`.

// posixField describes one field of a posix expression.
type posixField struct {
	name     string
	min, max int
}

var posixFields = [5]posixField{
	{"minute", 0, 59},
	{"hour", 0, 23},
	{"day-of-month", 1, 31},
	{"month", 1, 12},
	{"day-of-week", 0, 6},
}

// posixNames are the month and weekday names other dialects accept, for a
// precise error message.
var posixNames = map[string]bool{
	"jan": true, "feb": true, "mar": true, "apr": true, "may": true, "jun": true,
	"jul": true, "aug": true, "sep": true, "oct": true, "nov": true, "dec": true,
	"sun": true, "mon": true, "tue": true, "wed": true, "thu": true, "fri": true, "sat": true,
}

// PosixError is a posix expression that breaks the grammar. Field is the
// field at fault ("minute" … "day-of-week"), or "expression" when the
// expression as a whole is wrong (a macro, the number of fields).
type PosixError struct {
	Expr   string
	Field  string
	Value  string // the field's text, empty when Field is "expression"
	Reason string
}

// Error returns `Invalid cron expression "<expr>": <field> field <reason>`
// for a field, or `Invalid cron expression "<expr>": <reason>` otherwise.
func (e *PosixError) Error() string {
	if e.Field == "expression" {
		return fmt.Sprintf("Invalid cron expression %q: %s", e.Expr, e.Reason)
	}
	return fmt.Sprintf("Invalid cron expression %q: %s field %s", e.Expr, e.Field, e.Reason)
}

// ParsePosix parses expr in the posix dialect and evaluates it in loc,
// which may be time.Local (ParseCron takes IANA names only). Grammar errors
// are a *PosixError; an expression no date satisfies is another error.
func ParsePosix(expr string, loc *time.Location) (*CronSchedule, error) {
	if len(expr) > MaxCronLen {
		return nil, &PosixError{Expr: expr, Field: "expression", Reason: fmt.Sprintf("is longer than %d bytes", MaxCronLen)}
	}
	return parsePosix(expr, loc)
}

// isPosixSpace reports whether c separates posix fields: the grammar's SP
// is a space or a tab, nothing else (no newline, no Unicode spaces).
func isPosixSpace(c rune) bool { return c == ' ' || c == '\t' }

// parsePosix parses expr in the posix dialect.
func parsePosix(expr string, loc *time.Location) (*CronSchedule, error) {
	s := strings.TrimFunc(expr, isPosixSpace)
	if strings.HasPrefix(s, "@") {
		return nil, &PosixError{Expr: expr, Field: "expression", Reason: fmt.Sprintf("macros (%q) are not supported", s)}
	}
	fields := strings.FieldsFunc(s, isPosixSpace)
	if len(fields) != len(posixFields) {
		return nil, &PosixError{Expr: expr, Field: "expression", Reason: fmt.Sprintf("expected 5 fields, got %d", len(fields))}
	}
	var set [5]uint64
	var star [5]bool
	for i, f := range fields {
		b, st, reason := parsePosixField(f, posixFields[i])
		if reason != "" {
			return nil, &PosixError{Expr: expr, Field: posixFields[i].name, Value: f, Reason: reason}
		}
		set[i], star[i] = b, st
	}
	c := &CronSchedule{
		expr:    expr,
		dialect: DialectPosix,
		loc:     loc,
		second:  1, // second 0
		minute:  set[0],
		hour:    set[1],
		dom:     set[2],
		month:   set[3],
		dow:     set[4],
		domStar: star[2],
		dowStar: star[4],
	}
	if !c.satisfiable() {
		return nil, fmt.Errorf("cron %q yields no future time", expr)
	}
	return c, nil
}

// parsePosixField returns the values field allows and whether it is "*",
// or, when it is invalid, the reason, phrased to follow "<name> field".
func parsePosixField(field string, pf posixField) (set uint64, star bool, reason string) {
	if field == "*" {
		return bitRange(pf.min, pf.max), true, ""
	}
	for _, c := range []string{"/", "?", "#"} {
		if strings.Contains(field, c) {
			if c == "/" {
				return 0, false, fmt.Sprintf("does not allow steps (%q)", field)
			}
			return 0, false, fmt.Sprintf("does not allow %q", c)
		}
	}
	for item := range strings.SplitSeq(field, ",") {
		if item == "" {
			return 0, false, fmt.Sprintf("has an empty list item in %q", field)
		}
		if item == "*" {
			return 0, false, fmt.Sprintf("allows \"*\" only on its own, not in the list %q", field)
		}
		lo, hi, isRange := strings.Cut(item, "-")
		if isRange && (lo == "" || hi == "" || strings.Contains(hi, "-")) {
			return 0, false, fmt.Sprintf("has invalid value %q (want a decimal number or a range a-b)", item)
		}
		a, reason := parsePosixNumber(lo, pf)
		if reason != "" {
			return 0, false, reason
		}
		b := a
		if isRange {
			if b, reason = parsePosixNumber(hi, pf); reason != "" {
				return 0, false, reason
			}
			if a > b {
				return 0, false, fmt.Sprintf("range %q wraps around (start greater than end)", item)
			}
		}
		set |= bitRange(a, b)
	}
	return set, false, ""
}

// parsePosixNumber parses a decimal number within pf's range.
func parsePosixNumber(tok string, pf posixField) (int, string) {
	n := 0
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if c < '0' || c > '9' {
			switch {
			case posixNames[strings.ToLower(tok)]:
				return 0, fmt.Sprintf("does not allow names (%q)", tok)
			case strings.Contains(tok, "L"):
				return 0, `does not allow "L"`
			case strings.Contains(tok, "W"):
				return 0, `does not allow "W"`
			}
			return 0, fmt.Sprintf("has invalid value %q (want a decimal number)", tok)
		}
		if n <= pf.max { // stop growing once out of range; no overflow
			n = n*10 + int(c-'0')
		}
	}
	if n < pf.min || n > pf.max {
		hint := ""
		if pf.name == "day-of-week" && n == 7 {
			hint = " (Sunday is 0)"
		}
		return 0, fmt.Sprintf("value %s is out of range %d-%d%s", tok, pf.min, pf.max, hint)
	}
	return n, ""
}

// bitRange returns a mask with bits lo through hi set.
func bitRange(lo, hi int) uint64 {
	return (uint64(1)<<(hi+1) - 1) &^ (uint64(1)<<lo - 1)
}
