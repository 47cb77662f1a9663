package model

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// FuzzValidate: Validate either returns a *FieldError or leaves a record
// that compiles, marshals, and whose fire times lie in its window.
func FuzzValidate(f *testing.F) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Add("s1", "wf-1", "3", "u-1", "cron", "0 9 * * *", "", "America/New_York", int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), "allow", "fire_immediately", int64(0), int64(0))
	f.Add("s1", "wf-1", "v2.1", "u-1", "cron", "15 6 * * 1-5", "posix", "Europe/Berlin", int64(0), int64(0), int64(1769900400), int64(0), int64(1772323200), int64(0), int64(2500), "skip", "latest", int64(0), int64(0))
	f.Add("s1", "wf", "1", "u", "cron", "0 0 * * *", "", "UTC", int64(0), int64(0), int64(1767225599), int64(999500000), int64(1767398400), int64(500000), int64(0), "queue", "spread", int64(0), int64(0))
	f.Add("s1", "wf", "1", "u", "once", "", "", "UTC", int64(1767225600), int64(1), int64(0), int64(0), int64(0), int64(0), int64(0), "allow", "none", int64(0), int64(0))
	f.Add("s1", "wf", "1", "u", "every", "", "", "UTC", int64(0), int64(0), int64(253402300799), int64(999999999), int64(0), int64(0), int64(0), "allow", "none", int64(90), int64(1767225600))
	f.Add("s1", "wf", "1", "u", "cron", "@every 2562047h", "", "UTC", int64(0), int64(0), int64(-62135596800), int64(500000), int64(0), int64(0), int64(0), "allow", "none", int64(0), int64(0))
	f.Add("s1", "wf}", "1", "u", "x", "* * *", "quartz", "Local", int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(-1), "never", "all", int64(-1), int64(0))
	f.Fuzz(func(t *testing.T, id, wf, ver, user, kind, cron, dialect, tz string,
		fireS, fireN, startS, startN, endS, endN, jitter int64, overlap, catchup string, every, anchorS int64) {
		mk := func(s, n int64) *time.Time {
			if s == 0 && n == 0 {
				return nil
			}
			// keep within years 1..9999 as the API's parseTime does
			tt := time.Unix(s, n%1e9).UTC()
			if y := tt.Year(); y < 1 || y > 9999 {
				return nil
			}
			return &tt
		}
		r := &ScheduleRecord{ID: id, WorkflowID: wf, Version: Version(ver), UserID: user, Kind: Kind(kind),
			CronExpr: cron, Dialect: Dialect(dialect), Timezone: tz, EverySeconds: every,
			FireAt: mk(fireS, fireN), StartAt: mk(startS, startN), EndAt: mk(endS, endN), JitterMs: jitter,
			OverlapPolicy: OverlapPolicy(overlap), CatchupPolicy: CatchupPolicy(catchup),
			Anchor: time.Unix(anchorS%253402300799, 0).UTC()}
		err := r.Validate()
		if err != nil {
			var fe *FieldError
			require.True(t, errors.As(err, &fe), "%T %v", err, err)
			require.NotEmpty(t, fe.Field)
			var all FieldErrors
			if errors.As(err, &all) {
				for _, e := range all {
					require.NotEmpty(t, ErrorField(e), "%v", e)
				}
			}
			return
		}
		s, err := r.Compile()
		require.NoError(t, err)
		_, err = json.Marshal(r)
		require.NoError(t, err, "validated record does not marshal")
		after := now
		for range 3 {
			n := s.Next(after)
			if n.IsZero() {
				break
			}
			require.True(t, n.After(after), "Next(%s) = %s", after, n)
			if r.StartAt != nil {
				require.False(t, n.Before(*r.StartAt), "fire %s before start_at %s", n, r.StartAt)
			}
			if r.EndAt != nil {
				require.False(t, n.After(*r.EndAt), "fire %s after end_at %s", n, r.EndAt)
			}
			_, err := json.Marshal(n)
			require.NoError(t, err, "fire time %s does not marshal", n)
			after = n
		}
	})
}
