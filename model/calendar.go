package model

// Proleptic Gregorian calendar arithmetic on plain integers, with no time
// zone: the wall-clock side of the engine. Day numbers count from
// 1970-01-01 (day 0), like Unix time; the conversions are H. Hinnant's
// days_from_civil and civil_from_days, exact for every year a time.Time can
// hold within the supported range.

const (
	secondsPerDay = 24 * 60 * 60

	// minUnix and maxUnix bound every fire time: 0001-01-01T00:00:00Z and
	// 9999-12-31T23:59:59Z, the range RFC 3339 (and so every API and
	// stored record) can express.
	minUnix int64 = -62135596800
	maxUnix int64 = 253402300799
)

// civil is a wall-clock date and time: the fields a cron expression is
// matched against. Month is 1-12, day 1-31.
type civil struct {
	year                       int64
	month, day, hour, min, sec int
}

// floorDiv divides rounding toward negative infinity.
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// daysFromCivil returns the day number of y-m-d.
func daysFromCivil(y int64, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := floorDiv(y, 400)
	yoe := y - era*400                     // [0, 399]
	mp := int64((m + 9) % 12)              // March is 0
	doy := (153*mp+2)/5 + int64(d) - 1     // [0, 365]
	doe := yoe*365 + yoe/4 - yoe/100 + doy // [0, 146096]
	return era*146097 + doe - 719468       // 719468: 0000-03-01 to 1970-01-01
}

// civilFromDays returns the date of day number z.
func civilFromDays(z int64) (y int64, m, d int) {
	z += 719468
	era := floorDiv(z, 146097)
	doe := z - era*146097                                  // [0, 146096]
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365 // [0, 399]
	y = yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100) // [0, 365]
	mp := (5*doy + 2) / 153                  // [0, 11]
	d = int(doy - (153*mp+2)/5 + 1)
	if mp < 10 {
		m = int(mp + 3)
	} else {
		m = int(mp - 9)
	}
	if m <= 2 {
		y++
	}
	return y, m, d
}

// civilFromUnix splits a count of seconds since 1970-01-01T00:00:00 (of
// any clock) into calendar fields.
func civilFromUnix(s int64) civil {
	days := floorDiv(s, secondsPerDay)
	rem := int(s - days*secondsPerDay)
	y, m, d := civilFromDays(days)
	return civil{year: y, month: m, day: d, hour: rem / 3600, min: rem / 60 % 60, sec: rem % 60}
}

// unix is the inverse of civilFromUnix.
func (c civil) unix() int64 {
	return daysFromCivil(c.year, c.month, c.day)*secondsPerDay +
		int64(c.hour*3600+c.min*60+c.sec)
}

// weekdayOfDays is the weekday (0 = Sunday) of day number z.
func weekdayOfDays(z int64) int {
	w := (z + 4) % 7 // 1970-01-01 was a Thursday
	if w < 0 {
		w += 7
	}
	return int(w)
}

// daysIn returns the number of days in month m of year y.
func daysIn(y int64, m int) int {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
