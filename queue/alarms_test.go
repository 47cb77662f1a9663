package queue_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

const (
	ownerA = "did:matrix:user-a:fpA"
	ownerB = "did:matrix:user-b:fpB"
)

// alarmBundle is a store on a redis-server of its own.
type alarmBundle struct {
	store *queue.Store
	rdb   redis.UniversalClient
	clock *queue.SimClock
}

// setupAlarms returns a store with cfg on a redis-server of its own.
func setupAlarms(t *testing.T, cfg *queue.Config) *alarmBundle {
	t.Helper()
	r := queuetest.StartRedis(t)
	rdb := r.Universal(t)
	clock := queue.NewSimClock(methodNow)
	store, err := queue.NewStore(context.Background(), rdb, clock, cfg)
	require.NoError(t, err)
	return &alarmBundle{store: store, rdb: rdb, clock: clock}
}

// onceAlarm is a valid once alarm of owner firing in d.
func (b *alarmBundle) onceAlarm(t *testing.T, owner string, d time.Duration, key string) *model.ScheduleRecord {
	t.Helper()
	at := b.clock.Now().Add(d).UTC()
	rec := &model.ScheduleRecord{
		ID: b.store.NewAlarmID(owner), Owner: owner, UserID: "u", Kind: model.KindOnce, Target: model.TargetWake,
		FireAt: &at, Timezone: "UTC", OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupLatest,
		Alarm: &model.Alarm{Label: "l", WakeMessage: "wake up", Payload: json.RawMessage(`{"n": 1}`),
			IdempotencyKey: key, MaxFailures: 5},
	}
	require.NoError(t, rec.Validate())
	return rec
}

func (b *alarmBundle) cronAlarm(t *testing.T, owner, expr string) *model.ScheduleRecord {
	t.Helper()
	rec := &model.ScheduleRecord{
		ID: b.store.NewAlarmID(owner), Owner: owner, UserID: "u", Kind: model.KindCron, Target: model.TargetWake,
		CronExpr: expr, Timezone: "UTC", OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupLatest,
		Alarm: &model.Alarm{MaxFailures: 5},
	}
	require.NoError(t, rec.Validate())
	return rec
}

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestNewAlarmIDIsAUUIDInTheOwnersShard(t *testing.T) {
	t.Parallel()
	b := setupAlarms(t, &queue.Config{Shards: 64})
	seen := map[string]bool{}
	for i := range 200 {
		owner := fmt.Sprintf("did:matrix:user%d:fp", i)
		id := b.store.NewAlarmID(owner)
		require.Regexp(t, uuidV4, id)
		require.Equal(t, queue.ShardOf(owner, 64), queue.ShardOf(id, 64))
		require.False(t, seen[id])
		seen[id] = true
	}
}

func TestCreateAlarmStoresAScheduleAndIndexesIt(t *testing.T) {
	t.Parallel()
	b := setupAlarms(t, &queue.Config{Lookahead: time.Minute})
	ctx := context.Background()
	rec := b.onceAlarm(t, ownerA, 10*time.Minute, "")
	got, deduped, err := b.store.CreateAlarm(ctx, rec)
	require.NoError(t, err)
	require.False(t, deduped)
	require.Equal(t, rec.ID, got.ID)
	require.Equal(t, model.TargetWake, got.Target)
	require.Equal(t, ownerA, got.Owner)
	require.Equal(t, model.AlarmActive, got.Alarm.Status)
	require.Equal(t, `{"n": 1}`, string(got.Alarm.Payload), "payload byte for byte")
	require.Equal(t, "wake up", got.Alarm.WakeMessage)
	require.Equal(t, methodNow, got.CreatedAt)
	require.NotNil(t, got.NextRunAt)
	require.Equal(t, methodNow.Add(10*time.Minute), *got.NextRunAt)

	sh := queue.ShardOf(ownerA, queue.ShardsDefault)
	// allow: acted on a lookahead before its time, as every schedule.
	score := b.rdb.ZScore(ctx, queue.DueKey(sh), rec.ID).Val()
	require.Equal(t, float64(methodNow.Add(10*time.Minute-b.store.ActLead(got)).UnixMilli()), score)
	require.Equal(t, []string{rec.ID}, b.rdb.ZRange(ctx, queue.AlarmsKey(sh, ownerA), 0, -1).Val())
	require.Equal(t, []string{rec.ID}, b.rdb.SMembers(ctx, queue.AlarmsActiveKey(sh, ownerA)).Val())

	// The planner reads it as any schedule.
	due, err := b.store.ReadDue(ctx, sh, methodNow.Add(time.Hour), 10)
	require.NoError(t, err)
	require.Len(t, due, 1)
	require.Equal(t, rec.ID, due[0].ID)
	require.Equal(t, model.TargetWake, due[0].Schedule.Target)
}

func TestCreateAlarmRefusesATimeThatHasPassed(t *testing.T) {
	t.Parallel()
	b := setupAlarms(t, nil)
	rec := b.onceAlarm(t, ownerA, time.Minute, "")
	b.clock.Advance(2 * time.Minute)
	_, _, err := b.store.CreateAlarm(context.Background(), rec)
	var fe *model.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "fire_at", fe.Field)
	require.Contains(t, fe.Message, "is not in the future")
}

func TestCreateAlarmDedupesPerOwner(t *testing.T) {
	t.Parallel()
	b := setupAlarms(t, nil)
	ctx := context.Background()
	first, deduped, err := b.store.CreateAlarm(ctx, b.onceAlarm(t, ownerA, time.Hour, "k1"))
	require.NoError(t, err)
	require.False(t, deduped)

	again, deduped, err := b.store.CreateAlarm(ctx, b.onceAlarm(t, ownerA, 2*time.Hour, "k1"))
	require.NoError(t, err)
	require.True(t, deduped)
	require.Equal(t, first.ID, again.ID)
	require.Equal(t, *first.FireAt, *again.FireAt, "the existing alarm, not the repeat's body")

	// Cancelled, the key still names it.
	_, err = b.store.CancelAlarm(ctx, ownerA, first.ID)
	require.NoError(t, err)
	again, deduped, err = b.store.CreateAlarm(ctx, b.onceAlarm(t, ownerA, time.Hour, "k1"))
	require.NoError(t, err)
	require.True(t, deduped)
	require.Equal(t, model.AlarmCancelled, again.Alarm.Status)

	other, deduped, err := b.store.CreateAlarm(ctx, b.onceAlarm(t, ownerB, time.Hour, "k1"))
	require.NoError(t, err)
	require.False(t, deduped, "another owner's equal key is independent")
	require.NotEqual(t, first.ID, other.ID)

	list, err := b.store.ListAlarms(ctx, ownerA, "", 500)
	require.NoError(t, err)
	require.Len(t, list, 1)
}

func TestCreateAlarmConcurrentSameKeyMakesOne(t *testing.T) {
	t.Parallel()
	b := setupAlarms(t, nil)
	ctx := context.Background()
	var wg sync.WaitGroup
	ids := make(chan string, 50)
	created := make(chan bool, 50)
	for range 50 {
		rec := b.onceAlarm(t, ownerA, time.Hour, "same")
		wg.Go(func() {
			got, deduped, err := b.store.CreateAlarm(ctx, rec)
			if err != nil {
				t.Error(err)
				return
			}
			ids <- got.ID
			created <- !deduped
		})
	}
	wg.Wait()
	close(ids)
	close(created)
	distinct := map[string]bool{}
	for id := range ids {
		distinct[id] = true
	}
	n := 0
	for c := range created {
		if c {
			n++
		}
	}
	require.Len(t, distinct, 1)
	require.Equal(t, 1, n, "exactly one post created it")
	list, err := b.store.ListAlarms(ctx, ownerA, "", 500)
	require.NoError(t, err)
	require.Len(t, list, 1)
}

func TestCreateAlarmActiveLimit(t *testing.T) {
	t.Parallel()
	b := setupAlarms(t, &queue.Config{AlarmMaxActive: 3})
	ctx := context.Background()
	var ids []string
	for range 3 {
		got, _, err := b.store.CreateAlarm(ctx, b.onceAlarm(t, ownerA, time.Hour, ""))
		require.NoError(t, err)
		ids = append(ids, got.ID)
	}
	_, _, err := b.store.CreateAlarm(ctx, b.onceAlarm(t, ownerA, time.Hour, ""))
	require.ErrorIs(t, err, queue.ErrQuota)
	require.Contains(t, err.Error(), "ALARM_MAX_ACTIVE")
	_, _, err = b.store.CreateAlarm(ctx, b.onceAlarm(t, ownerB, time.Hour, ""))
	require.NoError(t, err, "the limit is per owner")

	// A cancelled alarm frees its place.
	_, err = b.store.CancelAlarm(ctx, ownerA, ids[0])
	require.NoError(t, err)
	_, _, err = b.store.CreateAlarm(ctx, b.onceAlarm(t, ownerA, time.Hour, ""))
	require.NoError(t, err)

	// A fired one too, though the run lifecycle leaves the active set alone.
	sh := queue.ShardOf(ownerA, queue.ShardsDefault)
	require.NoError(t, b.rdb.HSet(ctx, queue.ScheduleKey(sh, ids[1]), queue.AfStatus, string(model.AlarmFired)).Err())
	_, _, err = b.store.CreateAlarm(ctx, b.onceAlarm(t, ownerA, time.Hour, ""))
	require.NoError(t, err)
	_, _, err = b.store.CreateAlarm(ctx, b.onceAlarm(t, ownerA, time.Hour, ""))
	require.ErrorIs(t, err, queue.ErrQuota)

	// A repeat of an existing key is answered at the limit.
	keyed := b.onceAlarm(t, ownerB, time.Hour, "k")
	_, _, err = b.store.CreateAlarm(ctx, keyed)
	require.NoError(t, err)
	_, _, err = b.store.CreateAlarm(ctx, b.onceAlarm(t, ownerB, time.Hour, ""))
	require.NoError(t, err)
	_, _, err = b.store.CreateAlarm(ctx, b.onceAlarm(t, ownerB, time.Hour, ""))
	require.ErrorIs(t, err, queue.ErrQuota)
	_, deduped, err := b.store.CreateAlarm(ctx, b.onceAlarm(t, ownerB, time.Hour, "k"))
	require.NoError(t, err)
	require.True(t, deduped)
}

func TestConcurrentCreatesCannotPassTheLimit(t *testing.T) {
	t.Parallel()
	b := setupAlarms(t, &queue.Config{AlarmMaxActive: 5})
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 30 {
		rec := b.onceAlarm(t, ownerA, time.Hour, "")
		wg.Go(func() {
			_, _, err := b.store.CreateAlarm(ctx, rec)
			if err != nil && !errors.Is(err, queue.ErrQuota) {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	list, err := b.store.ListAlarms(ctx, ownerA, model.AlarmActive, 500)
	require.NoError(t, err)
	require.Len(t, list, 5)
}

func TestAlarmsOfAnotherOwnerAreNotFound(t *testing.T) {
	t.Parallel()
	b := setupAlarms(t, nil)
	ctx := context.Background()
	a, _, err := b.store.CreateAlarm(ctx, b.onceAlarm(t, ownerA, time.Hour, "k"))
	require.NoError(t, err)

	_, err = b.store.GetAlarm(ctx, ownerB, a.ID)
	require.ErrorIs(t, err, queue.ErrNotFound)
	_, missing := b.store.GetAlarm(ctx, ownerB, "00000000-0000-4000-8000-000000000000")
	require.Equal(t, "alarm "+a.ID+": not found", err.Error())
	require.Equal(t, "alarm 00000000-0000-4000-8000-000000000000: not found", missing.Error())
	_, err = b.store.CancelAlarm(ctx, ownerB, a.ID)
	require.ErrorIs(t, err, queue.ErrNotFound)
	list, err := b.store.ListAlarms(ctx, ownerB, "", 500)
	require.NoError(t, err)
	require.Empty(t, list)

	got, err := b.store.GetAlarm(ctx, ownerA, a.ID)
	require.NoError(t, err)
	require.Equal(t, model.AlarmActive, got.Alarm.Status, "B's cancel changed nothing")
}

func TestCancelAlarm(t *testing.T) {
	t.Parallel()
	b := setupAlarms(t, nil)
	ctx := context.Background()
	a, _, err := b.store.CreateAlarm(ctx, b.onceAlarm(t, ownerA, time.Hour, ""))
	require.NoError(t, err)
	b.clock.Advance(time.Second)
	got, err := b.store.CancelAlarm(ctx, ownerA, a.ID)
	require.NoError(t, err)
	require.Equal(t, model.AlarmCancelled, got.Alarm.Status)
	require.True(t, got.Paused, "paused: commit plans nothing of it, a launcher skips its queued runs")
	require.Nil(t, got.NextRunAt, "next_fire_at only while active")
	require.Equal(t, methodNow.Add(time.Second), got.UpdatedAt)
	sh := queue.ShardOf(ownerA, queue.ShardsDefault)
	require.True(t, math.IsInf(b.rdb.ZScore(ctx, queue.DueKey(sh), a.ID).Val(), 1))
	due, err := b.store.ReadDue(ctx, sh, methodNow.Add(48*time.Hour), 10)
	require.NoError(t, err)
	require.Empty(t, due)

	b.clock.Advance(time.Second)
	again, err := b.store.CancelAlarm(ctx, ownerA, a.ID)
	require.NoError(t, err)
	require.Equal(t, got.UpdatedAt, again.UpdatedAt, "terminal already: unchanged")

	// A fired alarm stays fired.
	f, _, err := b.store.CreateAlarm(ctx, b.onceAlarm(t, ownerA, time.Hour, ""))
	require.NoError(t, err)
	require.NoError(t, b.rdb.HSet(ctx, queue.ScheduleKey(sh, f.ID), queue.AfStatus, string(model.AlarmFired)).Err())
	fired, err := b.store.CancelAlarm(ctx, ownerA, f.ID)
	require.NoError(t, err)
	require.Equal(t, model.AlarmFired, fired.Alarm.Status)
	require.False(t, fired.Paused)
}

func TestListAlarmsNewestFirstFilteredAndCapped(t *testing.T) {
	t.Parallel()
	b := setupAlarms(t, nil)
	ctx := context.Background()
	var ids []string
	for i := range 7 {
		got, _, err := b.store.CreateAlarm(ctx, b.onceAlarm(t, ownerA, time.Hour, ""))
		require.NoError(t, err)
		ids = append(ids, got.ID)
		if i%2 == 0 {
			_, err = b.store.CancelAlarm(ctx, ownerA, got.ID)
			require.NoError(t, err)
		}
		b.clock.Advance(time.Millisecond)
	}
	list, err := b.store.ListAlarms(ctx, ownerA, "", 500)
	require.NoError(t, err)
	require.Len(t, list, 7)
	for i, r := range list {
		require.Equal(t, ids[6-i], r.ID, "newest first")
	}
	list, err = b.store.ListAlarms(ctx, ownerA, "", 3)
	require.NoError(t, err)
	require.Equal(t, []string{ids[6], ids[5], ids[4]}, alarmIDs(list))
	list, err = b.store.ListAlarms(ctx, ownerA, model.AlarmActive, 500)
	require.NoError(t, err)
	require.Equal(t, []string{ids[5], ids[3], ids[1]}, alarmIDs(list))
	list, err = b.store.ListAlarms(ctx, ownerA, model.AlarmCancelled, 2)
	require.NoError(t, err)
	require.Equal(t, []string{ids[6], ids[4]}, alarmIDs(list))
	list, err = b.store.ListAlarms(ctx, ownerA, model.AlarmFired, 500)
	require.NoError(t, err)
	require.Empty(t, list)

	// One that fired leaves the active list, though it stays in the
	// active set until the next prune.
	sh := queue.ShardOf(ownerA, queue.ShardsDefault)
	require.NoError(t, b.rdb.HSet(ctx, queue.ScheduleKey(sh, ids[3]), queue.AfStatus, string(model.AlarmFired)).Err())
	list, err = b.store.ListAlarms(ctx, ownerA, model.AlarmActive, 500)
	require.NoError(t, err)
	require.Equal(t, []string{ids[5], ids[1]}, alarmIDs(list))
	list, err = b.store.ListAlarms(ctx, ownerA, model.AlarmFired, 500)
	require.NoError(t, err)
	require.Equal(t, []string{ids[3]}, alarmIDs(list))
	list, err = b.store.ListAlarms(ctx, ownerB, model.AlarmActive, 500)
	require.NoError(t, err)
	require.Empty(t, list)
	require.NotNil(t, list, "an empty list, not nil")
}

func TestListAlarmsCapsAt500(t *testing.T) {
	t.Parallel()
	b := setupAlarms(t, nil)
	ctx := context.Background()
	for range 503 {
		_, _, err := b.store.CreateAlarm(ctx, b.onceAlarm(t, ownerA, time.Hour, ""))
		require.NoError(t, err)
	}
	list, err := b.store.ListAlarms(ctx, ownerA, "", 1000)
	require.NoError(t, err)
	require.Len(t, list, queue.AlarmListMax)
}

func alarmIDs(recs []*model.ScheduleRecord) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

// A recurring alarm wakes next at its earliest run not yet delivered:
// runs are enqueued a lookahead ahead, past which the stored next moves.
func TestCronAlarmNextIsItsEarliestUndeliveredRun(t *testing.T) {
	t.Parallel()
	b := setupAlarms(t, nil)
	ctx := context.Background()
	a, _, err := b.store.CreateAlarm(ctx, b.cronAlarm(t, ownerA, "*/5 * * * *"))
	require.NoError(t, err)
	first := methodNow.Add(5 * time.Minute)
	require.Equal(t, first, *a.NextRunAt)

	sh := queue.ShardOf(ownerA, queue.ShardsDefault)
	seedRun := func(key string, at time.Time, st model.RunStatus) {
		require.NoError(t, b.rdb.HSet(ctx, queue.RunKey(sh, key), queue.RfSchedule, a.ID,
			queue.RfRunAt, at.UnixMilli(), queue.RfStatus, string(st)).Err())
		require.NoError(t, b.rdb.ZAdd(ctx, queue.HistoryKey(sh, a.ID), redis.Z{Score: float64(at.UnixMilli()), Member: key}).Err())
	}
	seedRun("r1", first, model.RunEnqueued)
	require.NoError(t, b.rdb.HSet(ctx, queue.ScheduleKey(sh, a.ID), queue.SfNext, first.Add(5*time.Minute).UnixMilli()).Err())
	got, err := b.store.GetAlarm(ctx, ownerA, a.ID)
	require.NoError(t, err)
	require.Equal(t, first, *got.NextRunAt, "the queued run, not the stored next")

	require.NoError(t, b.rdb.HSet(ctx, queue.RunKey(sh, "r1"), queue.RfStatus, string(model.RunSuccess)).Err())
	got, err = b.store.GetAlarm(ctx, ownerA, a.ID)
	require.NoError(t, err)
	require.Equal(t, first.Add(5*time.Minute), *got.NextRunAt, "delivered: the stored next")
}

func TestRegistrarRoutesDoNotTouchAlarms(t *testing.T) {
	t.Parallel()
	b := setupAlarms(t, nil)
	ctx := context.Background()
	a, _, err := b.store.CreateAlarm(ctx, b.onceAlarm(t, ownerA, time.Hour, ""))
	require.NoError(t, err)
	reg := &model.ScheduleRecord{ID: "plain", CronExpr: "* * * * *", Timezone: "UTC", WorkflowID: "wf", Version: "1",
		UserID: "u", OverlapPolicy: model.OverlapSkip, CatchupPolicy: model.CatchupNone}
	require.NoError(t, reg.Validate())
	_, err = b.store.UpsertSchedule(ctx, reg)
	require.NoError(t, err)

	_, err = b.store.GetSchedule(ctx, a.ID)
	require.ErrorIs(t, err, queue.ErrNotFound)
	_, err = b.store.SetPaused(ctx, a.ID, true)
	require.ErrorIs(t, err, queue.ErrNotFound)
	_, err = b.store.SetPaused(ctx, a.ID, false)
	require.ErrorIs(t, err, queue.ErrNotFound)
	require.ErrorIs(t, b.store.DeleteSchedule(ctx, a.ID), queue.ErrNotFound)
	over := *reg
	over.ID = a.ID
	_, err = b.store.UpsertSchedule(ctx, &over)
	require.ErrorIs(t, err, queue.ErrConflict)
	recs, next, err := b.store.ListSchedules(ctx, "", 100)
	require.NoError(t, err)
	require.Empty(t, next)
	require.Equal(t, []string{"plain"}, alarmIDs(recs))

	got, err := b.store.GetAlarm(ctx, ownerA, a.ID)
	require.NoError(t, err)
	require.Equal(t, model.TargetWake, got.Target)
	require.False(t, got.Paused)
	require.Equal(t, model.AlarmActive, got.Alarm.Status)
	require.Equal(t, a.UpdatedAt, got.UpdatedAt, "untouched")

	// An alarm is not a registrar's schedule by GetAlarm either.
	_, err = b.store.GetAlarm(ctx, "", "plain")
	require.ErrorIs(t, err, queue.ErrNotFound)
}

// Alarms created in the same millisecond list in one order, with or
// without the active filter.
func TestListAlarmsTiesInOneOrder(t *testing.T) {
	t.Parallel()
	b := setupAlarms(t, nil)
	ctx := context.Background()
	for range 20 {
		_, _, err := b.store.CreateAlarm(ctx, b.onceAlarm(t, ownerA, time.Hour, ""))
		require.NoError(t, err)
	}
	all, err := b.store.ListAlarms(ctx, ownerA, "", 500)
	require.NoError(t, err)
	active, err := b.store.ListAlarms(ctx, ownerA, model.AlarmActive, 500)
	require.NoError(t, err)
	require.Len(t, all, 20)
	require.Equal(t, alarmIDs(all), alarmIDs(active))
	some, err := b.store.ListAlarms(ctx, ownerA, model.AlarmActive, 7)
	require.NoError(t, err)
	require.Equal(t, alarmIDs(all)[:7], alarmIDs(some))
}
