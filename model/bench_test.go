package model

import (
	"testing"
	"time"
)

func BenchmarkNext(b *testing.B) {
	for _, bc := range []struct{ name, expr, zone string }{
		{"every5min/America/New_York", "*/5 * * * *", "America/New_York"},
		{"weekdays9am/America/New_York", "0 9 * * 1-5", "America/New_York"},
		{"halfhour/Australia/Lord_Howe", "0,30 * * * *", "Australia/Lord_Howe"},
		{"seconds/UTC", "*/10 * * * * *", "UTC"},
		{"sparse_feb29/UTC", "0 0 29 2 *", "UTC"},
		{"sparse_feb29/Europe/Berlin", "0 0 29 2 *", "Europe/Berlin"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s, err := ParseCron(bc.expr, bc.zone, "", time.Time{})
			if err != nil {
				b.Fatal(err)
			}
			after := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
			for b.Loop() {
				// Follow the schedule, restarting each simulated year so
				// the sparse case measures a full 2028-or-later search.
				next := s.Next(after)
				if next.IsZero() || next.Year() > 2060 {
					next = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
				}
				after = next
			}
		})
	}
}

func BenchmarkParseCron(b *testing.B) {
	for _, bc := range []struct {
		name, expr string
		dialect    Dialect
	}{
		{"standard", "0 9 * * 1-5", DialectStandard},
		{"standard_names_steps", "*/15 9-17 ? jan-jun mon-fri", DialectStandard},
		{"standard_invalid_field", "0 9 * * funday", DialectStandard},
		{"posix", "0 9 * * 1-5", DialectPosix},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				parsedCrons.Clear() // a first parse, not a cache hit
				_, _ = ParseCron(bc.expr, "America/New_York", bc.dialect, time.Time{})
			}
		})
	}
	b.Run("cached", func(b *testing.B) {
		for b.Loop() {
			_, _ = ParseCron("0 9 * * 1-5", "America/New_York", DialectStandard, time.Time{})
		}
	})
}
