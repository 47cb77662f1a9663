package queue

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
)

// TestShardPrefixesAreFormatted checks that the prefixes and per-shard
// keys made once are what formatting each would give, and that a shard
// beyond the table is still formatted.
func TestShardPrefixesAreFormatted(t *testing.T) {
	t.Parallel()
	for s := range ShardsMax + 2 {
		require.Equal(t, formatShardPrefix(s), shardPrefix(s), "shard %d", s)
		require.Equal(t, formatShardPrefix(s)+"due", dueKey(s), "shard %d", s)
		require.Equal(t, formatShardPrefix(s)+"vers", versionsKey(s), "shard %d", s)
		require.Equal(t, formatShardPrefix(s)+"inflight", inflightKey(s), "shard %d", s)
		require.Equal(t, formatShardPrefix(s)+"lease", leaseKey(s), "shard %d", s)
	}
}

// createdHash is the hash upsert.lua writes for a new schedule from next
// (UpsertSchedule's arguments): the definition's pairs but the fields the
// script owns, then the timing key, updated_at, created_at, anchor and
// next fire time (ver is not read back).
func createdHash(next *model.ScheduleRecord, nextMS string) map[string]string {
	all := encodeDef(next)
	h := map[string]string{}
	for i := 0; i < len(all); i += 2 {
		if !scriptOwned(all[i]) {
			h[all[i]] = all[i+1]
		}
	}
	nowMS := msString(next.CreatedAt)
	h[sfTiming], h[sfUpdated], h[sfCreated], h[sfAnchor] = timingHash(next), nowMS, nowMS, msString(next.Anchor)
	if nextMS != "" {
		h[sfNext] = nextMS
	}
	return h
}

// TestCreatedRecordIsWhatTheHashReads holds createdRecord, which builds a
// new schedule's record from what UpsertSchedule sent, to what
// scheduleFromHash reads from the hash the script wrote of it; and its
// reuse flag to records that compile to the same fire times.
func TestCreatedRecordIsWhatTheHashReads(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 29, 0, 30, 15, 123456789, time.UTC)
	at := func(t time.Time) *time.Time { return &t }
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	base := func(id string) model.ScheduleRecord {
		return model.ScheduleRecord{ID: id, Kind: model.KindCron, Target: model.TargetWorkflow, WorkflowID: "wf",
			Version: "3", UserID: "u", CronExpr: "*/5 * * * *", Timezone: "Europe/Berlin",
			OverlapPolicy: model.OverlapSkip, CatchupPolicy: model.CatchupNone}
	}
	var recs []model.ScheduleRecord
	recs = append(recs, base("plain"))
	r := base("everything")
	r.Owner, r.Dialect, r.CronExpr, r.JitterMs, r.PauseAfterFailures = "did:x", model.Dialect("posix"), "30 2 * * 0", 1500, 3
	r.StartAt, r.EndAt = at(now.Add(-time.Hour)), at(now.Add(48*time.Hour))
	r.DSTPolicy = model.DSTPolicy{SpringForward: model.SpringForwardShift, FallBack: model.FallBackFirst}
	r.OverlapPolicy, r.CatchupPolicy = model.OverlapAllow, model.CatchupLatest
	recs = append(recs, r)
	r = base("sub-millisecond window")
	r.StartAt, r.EndAt = at(now.Add(-time.Hour+123456)), at(now.Add(time.Hour).In(berlin))
	recs = append(recs, r)
	r = base("window in a zone")
	r.StartAt = at(time.Date(2026, 3, 1, 0, 0, 0, 0, berlin))
	recs = append(recs, r)
	r = base("canonical default policy spelt out")
	r.DSTPolicy = model.DSTPolicy{SpringForward: model.SpringForwardSkip, FallBack: model.FallBackBoth}
	recs = append(recs, r)
	r = base("once")
	r.Kind, r.CronExpr, r.Timezone, r.FireAt, r.DelaySeconds = model.KindOnce, "", "UTC", at(now.Add(90*time.Second+777)), 90
	recs = append(recs, r)
	r = base("every")
	r.Kind, r.CronExpr, r.EverySeconds = model.KindEvery, "", 3600
	recs = append(recs, r)
	r = base("no next")
	r.EndAt = at(now.Add(-time.Minute))
	recs = append(recs, r)
	r = base("alarm fields on a workflow target")
	r.Alarm = &model.Alarm{Label: "l", MaxFailures: 2}
	recs = append(recs, r)
	r = base("negative jitter")
	r.JitterMs = -5
	recs = append(recs, r)

	for _, rec := range recs {
		next := rec
		next.Anchor, next.CreatedAt, next.UpdatedAt = now.Truncate(time.Second), now, now
		sched, err := next.Compile()
		require.NoError(t, err, rec.ID)
		nextMS := ""
		if n := sched.Next(now); !n.IsZero() {
			nextMS = strconv.FormatInt(ms(n), 10)
		}
		want, err := scheduleFromHash(next.ID, createdHash(&next, nextMS))
		require.NoError(t, err, rec.ID)
		got, reuse, ok := createdRecord(&next, nextMS)
		require.True(t, ok, rec.ID)
		require.Equal(t, want, got, rec.ID)
		if reuse {
			stored, err := got.Compile()
			require.NoError(t, err, rec.ID)
			for after := now; after.Before(now.Add(72 * time.Hour)); after = after.Add(7 * time.Minute) {
				require.Equal(t, stored.Next(after), sched.Next(after), "%s: reused after %s", rec.ID, after)
			}
		}
	}

	// A DST policy that does not parse: no record, so the caller decodes
	// the hash, which says why.
	bad := base("bad policy")
	bad.DSTPolicy = model.DSTPolicy{SpringForward: "sideways"}
	bad.Anchor, bad.CreatedAt, bad.UpdatedAt = now.Truncate(time.Second), now, now
	_, _, ok := createdRecord(&bad, "")
	require.False(t, ok)
	_, err = scheduleFromHash(bad.ID, createdHash(&bad, ""))
	require.Error(t, err)

	// A time with sub-millisecond parts is not reused.
	sub := base("sub")
	sub.Anchor, sub.CreatedAt, sub.UpdatedAt = now.Truncate(time.Second), now, now
	sub.StartAt = at(now.Add(1))
	_, reuse, ok := createdRecord(&sub, "")
	require.True(t, ok)
	require.False(t, reuse)
}
