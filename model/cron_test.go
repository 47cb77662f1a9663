package model

import (
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/stretchr/testify/require"
)

// mustTime parses an RFC 3339 time or fails the test.
func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(t, err)
	return v
}

// mustCron parses a cron expression or fails the test.
func mustCron(t *testing.T, expr, zone string, dialect Dialect) *CronSchedule {
	t.Helper()
	s, err := ParseCron(expr, zone, dialect, time.Time{})
	require.NoError(t, err)
	c, ok := s.(*CronSchedule)
	require.True(t, ok, "%q parsed to %T", expr, s)
	return c
}

// formatTimes renders fire times as RFC 3339 strings for comparison.
func formatTimes(ts []time.Time) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Format(time.RFC3339)
	}
	return out
}

// TestNextDST pins fire times across DST changes by hand: skipped local
// times never fire, repeated ones fire at both instants.
func TestNextDST(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, expr, zone, after string
		want                    []string
	}{
		{"new york 9am", "0 9 * * *", "America/New_York", "2026-01-01T00:00:00Z",
			[]string{"2026-01-01T14:00:00Z", "2026-01-02T14:00:00Z"}},
		{"new york spring forward skips 02:30", "30 2 * * *", "America/New_York", "2026-03-07T12:00:00Z",
			[]string{"2026-03-09T06:30:00Z", "2026-03-10T06:30:00Z"}},
		{"new york fall back fires 01:30 twice", "30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z", "2026-11-02T06:30:00Z"}},
		{"new york fall back with seconds", "15 30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T05:30:15Z", "2026-11-01T06:30:15Z"}},
		{"new york fall back every 20 minutes", "*/20 1 * * *", "America/New_York", "2026-11-01T05:10:00Z",
			[]string{"2026-11-01T05:20:00Z", "2026-11-01T05:40:00Z", "2026-11-01T06:00:00Z", "2026-11-01T06:20:00Z", "2026-11-01T06:40:00Z", "2026-11-02T06:00:00Z"}},
		{"london spring forward skips 01:30", "30 1 * * *", "Europe/London", "2026-03-28T12:00:00Z",
			[]string{"2026-03-30T00:30:00Z"}},
		{"london fall back fires 01:30 twice", "30 1 * * *", "Europe/London", "2026-10-24T12:00:00Z",
			[]string{"2026-10-25T00:30:00Z", "2026-10-25T01:30:00Z", "2026-10-26T01:30:00Z"}},
		{"lord howe 30-minute spring forward skips 02:15", "15 2 * * *", "Australia/Lord_Howe", "2026-10-03T00:00:00Z",
			[]string{"2026-10-04T15:15:00Z"}},
		{"lord howe 02:45 survives the 30-minute jump", "45 2 * * *", "Australia/Lord_Howe", "2026-10-03T00:00:00Z",
			[]string{"2026-10-03T15:45:00Z", "2026-10-04T15:45:00Z"}},
		{"lord howe 30-minute fall back fires 01:45 twice", "45 1 * * *", "Australia/Lord_Howe", "2026-04-04T00:00:00Z",
			[]string{"2026-04-04T14:45:00Z", "2026-04-04T15:15:00Z", "2026-04-05T15:15:00Z"}},
		{"havana midnight skipped", "0 0 * * *", "America/Havana", "2026-03-07T12:00:00Z",
			[]string{"2026-03-09T04:00:00Z"}},
		{"havana 00:30 repeated", "30 0 * * *", "America/Havana", "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T04:30:00Z", "2026-11-01T05:30:00Z", "2026-11-02T05:30:00Z"}},
		{"santiago midnight skipped", "0 0 * * *", "America/Santiago", "2026-09-05T12:00:00Z",
			[]string{"2026-09-07T03:00:00Z"}},
		{"santiago yearly date on the skipped day", "30 0 6 9 *", "America/Santiago", "2026-09-01T00:00:00Z",
			[]string{"2027-09-06T03:30:00Z"}},
		{"santiago 23:30 repeated before midnight", "30 23 * * *", "America/Santiago", "2026-04-04T12:00:00Z",
			[]string{"2026-04-05T02:30:00Z", "2026-04-05T03:30:00Z", "2026-04-06T03:30:00Z"}},
		{"azores midnight skipped", "0 0 * * *", "Atlantic/Azores", "2026-03-28T12:00:00Z",
			[]string{"2026-03-30T00:00:00Z"}},
		{"azores 00:30 repeated", "30 0 * * *", "Atlantic/Azores", "2026-10-24T12:00:00Z",
			[]string{"2026-10-25T00:30:00Z", "2026-10-25T01:30:00Z", "2026-10-26T01:30:00Z"}},
		{"chatham +12:45 to +13:45 skips 03:00", "0 3 * * *", "Pacific/Chatham", "2026-09-26T00:00:00Z",
			[]string{"2026-09-27T13:15:00Z"}},
		{"chatham 03:15 repeated", "15 3 * * *", "Pacific/Chatham", "2026-04-04T00:00:00Z",
			[]string{"2026-04-04T13:30:00Z", "2026-04-04T14:30:00Z", "2026-04-05T14:30:00Z"}},
		{"st johns half-hour zone skips 02:30", "30 2 * * *", "America/St_Johns", "2026-03-07T12:00:00Z",
			[]string{"2026-03-09T05:00:00Z"}},
		{"kathmandu +05:45", "0 0 * * *", "Asia/Kathmandu", "2026-01-01T00:00:00Z",
			[]string{"2026-01-01T18:15:00Z"}},
		{"apia skipped 2011-12-30 entirely", "0 12 * * *", "Pacific/Apia", "2011-12-29T00:00:00Z",
			[]string{"2011-12-29T22:00:00Z", "2011-12-30T22:00:00Z", "2011-12-31T22:00:00Z"}},
		{"apia 30 december waits a year", "0 12 30 12 *", "Pacific/Apia", "2011-12-01T00:00:00Z",
			[]string{"2012-12-29T22:00:00Z"}},
		{"feb 29 across 2096 to 2104", "0 0 29 2 *", "UTC", "2096-03-01T00:00:00Z",
			[]string{"2104-02-29T00:00:00Z", "2108-02-29T00:00:00Z"}},
		{"feb 29 in berlin", "0 0 29 2 *", "Europe/Berlin", "2096-02-29T00:00:00Z",
			[]string{"2104-02-28T23:00:00Z"}},
		{"leap-year end past the listed transitions", "30 * 31 12 *", "Europe/Berlin", "2040-12-30T23:00:00Z",
			[]string{"2040-12-30T23:30:00Z", "2040-12-31T00:30:00Z"}},
		{"leap-year end, with a zone whose rule flips", "0 12 31 12 *", "America/Santiago", "2096-12-30T00:00:00Z",
			[]string{"2096-12-31T15:00:00Z", "2097-12-31T15:00:00Z"}},
		{"day-of-month or day-of-week", "0 12 13 * 5", "UTC", "2026-02-01T00:00:00Z",
			[]string{"2026-02-06T12:00:00Z", "2026-02-13T12:00:00Z", "2026-02-20T12:00:00Z", "2026-02-27T12:00:00Z", "2026-03-06T12:00:00Z", "2026-03-13T12:00:00Z"}},
		{"stepped day-of-week is restricted", "0 0 15 * */3", "UTC", "2026-01-13T00:00:00Z",
			[]string{"2026-01-14T00:00:00Z", "2026-01-15T00:00:00Z", "2026-01-17T00:00:00Z", "2026-01-18T00:00:00Z"}},
		{"day-of-week with open day-of-month", "0 0 * * sat", "UTC", "2026-02-01T00:00:00Z",
			[]string{"2026-02-07T00:00:00Z", "2026-02-14T00:00:00Z"}},
		{"fractional after rounds to the next second", "* * * * * *", "UTC", "2026-01-01T00:00:00.5Z",
			[]string{"2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z"}},
		{"posix dialect in new york", "0 9 * * 1-5", "America/New_York", "2026-01-02T15:00:00Z",
			[]string{"2026-01-05T14:00:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dialect := DialectStandard
			if tt.name == "posix dialect in new york" {
				dialect = DialectPosix
			}
			c := mustCron(t, tt.expr, tt.zone, dialect)
			after := mustTime(t, tt.after)
			require.Equal(t, tt.want, formatTimes(Preview(c, after, len(tt.want))))

			// The table itself agrees with the brute-force walk.
			if after.Year() < 2090 {
				prev := after
				for i, w := range tt.want {
					got, ok := oracleNext(t, c, prev, 60*24*400)
					require.True(t, ok)
					require.Equal(t, w, got.Format(time.RFC3339), "oracle, fire %d", i+1)
					prev = got
				}
			}
		})
	}
}

// TestRobfigNextDisagrees records why the engine does not call robfig/cron's
// own Next: in zones whose DST changes at midnight it fires on the wrong
// day (the skipped midnight makes it normalize to 01:00 of a day the
// day-of-week field excludes), and with 30-minute DST it skips a day. The
// engine agrees with the brute-force walk on every case. (robfig's Next
// also loops forever on some Pacific/Apia inputs; not reproduced here.)
func TestRobfigNextDisagrees(t *testing.T) {
	t.Parallel()
	tests := []struct {
		zone, expr, after string
		want, robfig      string
	}{
		// Saturdays at 01:00; the midnight that starts Sunday 14 March is
		// skipped and robfig fires that Sunday.
		{"America/Havana", "*/2 1 * * 6", "2027-03-13T20:26:00-05:00", "2027-03-20T05:00:00Z", "2027-03-14T05:00:00Z"},
		{"America/Santiago", "3/2 1-3 * * 6", "2027-09-04T17:51:00-04:00", "2027-09-11T04:03:00Z", "2027-09-05T04:03:00Z"},
		{"Atlantic/Azores", "* 1-4 * * 4/1", "2030-03-30T07:23:00-01:00", "2030-04-04T01:00:00Z", "2030-03-31T01:00:00Z"},
		// Midnight right after Lord Howe's 30-minute fall back: robfig
		// moves on to the next day.
		{"Australia/Lord_Howe", "0 0 * * *", "2026-04-05T01:00:00+11:00", "2026-04-05T13:30:00Z", "2026-04-06T13:30:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.zone, func(t *testing.T) {
			t.Parallel()
			c := mustCron(t, tt.expr, tt.zone, DialectStandard)
			after := mustTime(t, tt.after)

			oracle, ok := oracleNext(t, c, after, 60*24*30)
			require.True(t, ok)
			require.Equal(t, tt.want, oracle.Format(time.RFC3339), "oracle")
			require.Equal(t, tt.want, c.Next(after).Format(time.RFC3339), "engine")

			parsed, err := robfigParser.Parse(tt.expr)
			require.NoError(t, err)
			spec := parsed.(*cron.SpecSchedule)
			spec.Location = c.Location()
			require.Equal(t, tt.robfig, spec.Next(after).UTC().Format(time.RFC3339), "robfig")
			require.NotEqual(t, tt.want, tt.robfig)
		})
	}
}

// TestNextBounds covers the edges of the search: strictly after, whole
// seconds, the year-9999 limit and far-away starting points.
func TestNextBounds(t *testing.T) {
	t.Parallel()
	c := mustCron(t, "0 0 1 1 *", "America/New_York", "")

	// A fire time is never returned for after itself.
	first := c.Next(mustTime(t, "2026-01-01T04:59:59Z"))
	require.Equal(t, "2026-01-01T05:00:00Z", first.Format(time.RFC3339))
	require.Equal(t, "2027-01-01T05:00:00Z", c.Next(first).Format(time.RFC3339))
	require.Equal(t, time.UTC, first.Location())

	// Fire times stop at 9999-12-31T23:59:59Z.
	require.Equal(t, "9999-01-01T05:00:00Z", c.Next(mustTime(t, "9998-06-01T00:00:00Z")).Format(time.RFC3339))
	require.True(t, c.Next(mustTime(t, "9999-06-01T00:00:00Z")).IsZero())
	require.True(t, c.Next(time.Unix(1<<62, 0)).IsZero())

	// Before year 1 the search starts at year 1.
	require.Equal(t, "0001-01-01T00:00:00Z", mustCron(t, "* * * * *", "", "").Next(time.Unix(-1<<62, 0)).Format(time.RFC3339))
	require.Equal(t, "0001-01-01T00:01:00Z", mustCron(t, "* * * * *", "", "").Next(time.Time{}).Format(time.RFC3339))

	// The result does not depend on after's location.
	after := mustTime(t, "2026-06-01T12:00:00Z")
	tokyo, err := LoadZone("Asia/Tokyo")
	require.NoError(t, err)
	require.Equal(t, c.Next(after), c.Next(after.In(tokyo)))
}

// TestParseCronStandard checks what the standard dialect accepts and the
// fields it reads.
func TestParseCronStandard(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr, after string
		want        []string
	}{
		{"*/15 * * * *", "2026-01-01T00:00:00Z", []string{"2026-01-01T00:15:00Z", "2026-01-01T00:30:00Z"}},
		{"5-40/5 3 * * *", "2026-01-01T03:30:00Z", []string{"2026-01-01T03:35:00Z", "2026-01-01T03:40:00Z", "2026-01-02T03:05:00Z"}},
		{"7/10 0 * * *", "2026-01-01T00:40:00Z", []string{"2026-01-01T00:47:00Z", "2026-01-01T00:57:00Z", "2026-01-02T00:07:00Z"}},
		{"0 0 1 JAN,jul ?", "2026-01-01T00:00:00Z", []string{"2026-07-01T00:00:00Z", "2027-01-01T00:00:00Z"}},
		{"0 0 ? * Mon-FRI", "2026-01-02T00:00:00Z", []string{"2026-01-05T00:00:00Z", "2026-01-06T00:00:00Z"}},
		{"30 */20 * * * *", "2026-01-01T00:00:00Z", []string{"2026-01-01T00:00:30Z", "2026-01-01T00:20:30Z"}},
		{"  0 12 * * *  ", "2026-01-01T00:00:00Z", []string{"2026-01-01T12:00:00Z"}},
		{"0\t12 *\t* *", "2026-01-01T00:00:00Z", []string{"2026-01-01T12:00:00Z"}},
		{"@yearly", "2026-01-01T00:00:00Z", []string{"2027-01-01T00:00:00Z"}},
		{"@annually", "2026-01-01T00:00:00Z", []string{"2027-01-01T00:00:00Z"}},
		{"@monthly", "2026-01-01T00:00:00Z", []string{"2026-02-01T00:00:00Z"}},
		{"@weekly", "2026-01-01T00:00:00Z", []string{"2026-01-04T00:00:00Z"}},
		{"@daily", "2026-01-01T00:00:00Z", []string{"2026-01-02T00:00:00Z"}},
		{"@midnight", "2026-01-01T00:00:00Z", []string{"2026-01-02T00:00:00Z"}},
		{"@hourly", "2026-01-01T00:00:00Z", []string{"2026-01-01T01:00:00Z"}},
		{"0 0 31 * *", "2026-01-31T00:00:00Z", []string{"2026-03-31T00:00:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			t.Parallel()
			c := mustCron(t, tt.expr, "", "")
			require.Equal(t, tt.expr, c.String())
			require.Equal(t, DialectStandard, c.Dialect())
			require.Equal(t, tt.want, formatTimes(Preview(c, mustTime(t, tt.after), len(tt.want))))
		})
	}
}

// TestParseCronErrors pins every error message of ParseCron.
func TestParseCronErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr, tz string
		dialect  Dialect
		want     string
	}{
		{"0 9 * * *", "", "quartz", `unknown dialect "quartz" (want standard or posix)`},
		{"0 9 * * *", "Mars/Olympus", "", `unknown time zone "Mars/Olympus"`},
		{"0 9 * * *", "Local", "", `unknown time zone "Local"`},
		{"0 9 * * *", "America//New_York", "", `unknown time zone "America//New_York"`},
		{"0 9 * * *", "America/./New_York", "", `unknown time zone "America/./New_York"`},
		{"0 9 * * *", "../etc/passwd", "", `unknown time zone "../etc/passwd"`},
		{"", "", "", "empty cron expression"},
		{"   ", "", DialectStandard, "empty cron expression"},
		{"* * * *", "", "", `invalid cron expression "* * * *": expected 5 or 6 fields, got 4`},
		{"* * * * * * *", "", "", `invalid cron expression "* * * * * * *": expected 5 or 6 fields, got 7`},
		{"60 * * * *", "", "", `invalid cron expression "60 * * * *": minute field: end of range (60) above maximum (59): 60`},
		{"* 24 * * *", "", "", `invalid cron expression "* 24 * * *": hour field: end of range (24) above maximum (23): 24`},
		{"* * 0 * *", "", "", `invalid cron expression "* * 0 * *": day-of-month field: beginning of range (0) below minimum (1): 0`},
		{"* * * 13 *", "", "", `invalid cron expression "* * * 13 *": month field: end of range (13) above maximum (12): 13`},
		{"* * * * 7", "", "", `invalid cron expression "* * * * 7": day-of-week field: end of range (7) above maximum (6): 7`},
		{"61 * * * * *", "", "", `invalid cron expression "61 * * * * *": second field: end of range (61) above maximum (59): 61`},
		{"x * * * *", "", "", `invalid cron expression "x * * * *": minute field: invalid value "x"`},
		{"* * * * funday", "", "", `invalid cron expression "* * * * funday": day-of-week field: invalid value "funday"`},
		{"5-2 * * * *", "", "", `invalid cron expression "5-2 * * * *": minute field: beginning of range (5) beyond end of range (2): 5-2`},
		{"*/0 * * * *", "", "", `invalid cron expression "*/0 * * * *": minute field: step of range should be a positive number: */0`},
		{"1-2-3 * * * *", "", "", `invalid cron expression "1-2-3 * * * *": minute field: too many hyphens: 1-2-3`},
		{"1/2/3 * * * *", "", "", `invalid cron expression "1/2/3 * * * *": minute field: too many slashes: 1/2/3`},
		{"1,,2 * * * *", "", "", `invalid cron expression "1,,2 * * * *": minute field: empty list item`},
		{"* , * * *", "", "", `invalid cron expression "* , * * *": hour field: empty list item`},
		{"*-5 * * * *", "", "", `invalid cron expression "*-5 * * * *": minute field: "*-5": "*" may only be followed by a step`},
		{"@often", "", "", `invalid cron expression "@often": unknown descriptor "@often" (want @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or @every <duration>)`},
		{"@daily 5", "", "", `invalid cron expression "@daily 5": unknown descriptor "@daily 5" (want @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or @every <duration>)`},
		{"TZ=UTC 0 9 * * *", "", "", `invalid cron expression "TZ=UTC 0 9 * * *": TZ= and CRON_TZ= prefixes are not supported (set the timezone instead)`},
		{"CRON_TZ=Asia/Tokyo 0 9 * * *", "", "", `invalid cron expression "CRON_TZ=Asia/Tokyo 0 9 * * *": TZ= and CRON_TZ= prefixes are not supported (set the timezone instead)`},
		{"TZ=UTC", "", "", `invalid cron expression "TZ=UTC": TZ= and CRON_TZ= prefixes are not supported (set the timezone instead)`},
		{"@every", "", "", `invalid cron expression "@every": @every takes one duration, e.g. "@every 1h30m"`},
		{"@every 1h 2h", "", "", `invalid cron expression "@every 1h 2h": @every takes one duration, e.g. "@every 1h30m"`},
		{"@every soon", "", "", `invalid cron expression "@every soon": @every: invalid duration "soon"`},
		{"@every 500ms", "", "", `invalid cron expression "@every 500ms": @every interval 500ms is shorter than 1s`},
		{"@every -1h", "", "", `invalid cron expression "@every -1h": @every interval -1h0m0s is shorter than 1s`},
		{"@every 1.5s", "", "", `invalid cron expression "@every 1.5s": @every interval 1.5s is not a whole number of seconds`},
		{"@every 1h", "", DialectPosix, `Invalid cron expression "@every 1h": macros ("@every 1h") are not supported`},
		{"0 0 30 2 *", "", "", `cron "0 0 30 2 *" yields no future time`},
		{"0 0 31 4,6,9,11 *", "", "", `cron "0 0 31 4,6,9,11 *" yields no future time`},
		{"0 0 0 30 feb ?", "", "", `cron "0 0 0 30 feb ?" yields no future time`},
		{"0 0 30 2 *", "", DialectPosix, `cron "0 0 30 2 *" yields no future time`},
		{"0 0 1 1 *" + strings.Repeat(" ", MaxCronLen), "", "", "cron expression longer than 1024 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			t.Parallel()
			s, err := ParseCron(tt.expr, tt.tz, tt.dialect, time.Time{})
			require.EqualError(t, err, tt.want)
			require.Nil(t, s)
		})
	}
}

// TestParseCronImpossibleDayIsFineWithWeekday: a day-of-month no month has
// still fires when day-of-week (OR) supplies days.
func TestParseCronImpossibleDayIsFineWithWeekday(t *testing.T) {
	t.Parallel()
	c := mustCron(t, "0 0 30 2 mon", "", "")
	require.Equal(t, []string{"2026-02-02T00:00:00Z"}, formatTimes(Preview(c, mustTime(t, "2026-02-01T00:00:00Z"), 1)))
}
