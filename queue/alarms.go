package queue

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronos-sched/chronos/model"
)

// An agent's alarm is a schedule record with Target model.TargetWake, an
// Owner (the agent's DID) and the alarm's fields (model.Alarm). It is
// stored, planned, committed and launched as every schedule is; this file
// adds what belongs to an owner: creating with the owner's idempotency key
// and active limit decided in one script, listing, reading and cancelling
// only the owner's own alarms.
//
// The owner's index is three keys in the owner's shard: the alarms by
// creation time, the idempotency keys, and the ids created active and not
// cancelled since. An alarm's id is drawn until it falls in that shard
// too, so each alarm script touches one Redis Cluster slot.

// AlarmListMax bounds ListAlarms's limit.
const AlarmListMax = 500

// alarmPendingRuns is how many of an alarm's newest runs a read looks at
// for one not yet delivered (loadAlarms): runs are queued ahead of
// their time and delivered in order, so the earliest undelivered one is
// among the newest.
const alarmPendingRuns = 16

// alarmIDTries bounds the ids CreateAlarm draws when one is taken by a
// schedule of the registrar (which may choose any id, a UUID too).
const alarmIDTries = 5

// NewAlarmID returns a new alarm id for owner: a random UUID (version 4,
// lowercase text) in the owner's shard, drawn again until it is. A draw
// lands in the shard with probability 1/Shards, so it takes Shards draws
// on average: microseconds.
func (s *Store) NewAlarmID(owner string) string {
	want := s.shard(owner)
	for {
		if id := newUUID(); s.shard(id) == want {
			return id
		}
	}
}

// newUUID returns a random UUID, version 4, as RFC 9562 writes it.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])  // never fails (crypto/rand)
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // variant 10
	var out [36]byte
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:], b[10:])
	return string(out[:])
}

// CreateAlarm stores a new alarm and returns it as GetAlarm would, with
// deduped false; or, when rec's owner already has an alarm created with
// the same non-empty idempotency key (whatever its status), returns that
// alarm with deduped true and writes nothing. One script decides, so
// concurrent creates with one key make one alarm.
//
// rec must have passed Validate with Target model.TargetWake, an Owner,
// a UserID and an Alarm. rec.ID should come from NewAlarmID(rec.Owner);
// any other id (or one a registrar's schedule took meanwhile) is replaced
// by a new one. The alarm is created active: its Status, FailureCount,
// LastError and LastFiredAt are not read, and its created, updated and
// anchor times are now ("every" and "@every" count from creation).
//
// An owner with Config.AlarmMaxActive active alarms is refused with an
// error wrapping ErrQuota; an idempotent repeat of an existing alarm is
// not. A timing with no fire time after now (a once alarm whose time has
// passed) is refused with a *model.FieldError.
func (s *Store) CreateAlarm(ctx context.Context, rec *model.ScheduleRecord) (alarm *model.ScheduleRecord, deduped bool, err error) {
	if rec.Target != model.TargetWake || rec.Alarm == nil || rec.Owner == "" {
		return nil, false, errors.New("queue: CreateAlarm needs a record with target wake, an owner and the alarm's fields")
	}
	now := s.clock.Now().UTC()
	next := *rec
	a := *rec.Alarm
	a.Status, a.FailureCount, a.LastError, a.LastFiredAt = model.AlarmActive, 0, "", nil
	next.Alarm = &a
	next.Paused, next.NextRunAt = false, nil
	next.Anchor, next.CreatedAt, next.UpdatedAt = now.Truncate(time.Second), now, now
	sched, err := next.Compile()
	if err != nil {
		return nil, false, err
	}
	first := sched.Next(now)
	nextMS, score := "", "+inf"
	if !first.IsZero() {
		nextMS = strconv.FormatInt(ms(first), 10)
		score = strconv.FormatInt(ms(first.Add(-s.ActLead(&next))), 10)
	} else if next.Kind == model.KindOnce {
		return nil, false, &model.FieldError{Field: "fire_at", Message: fmt.Sprintf("fire_at %s is not in the future", next.FireAt.UTC().Format(time.RFC3339))}
	} else {
		return nil, false, &model.FieldError{Field: "cron_expr", Message: fmt.Sprintf("cron %q yields no future time", next.CronExpr)}
	}
	sh := s.shard(next.Owner)
	if next.ID == "" || s.shard(next.ID) != sh {
		next.ID = s.NewAlarmID(next.Owner)
	}
	pairs := encodeDef(&next)
	// The alarm the owner's key names now, read so the script gets its key
	// in KEYS; the script checks it and answers alarmCreateStale if it
	// changed.
	prev := ""
	if a.IdempotencyKey != "" {
		var err error
		if prev, err = s.rdb.HGet(ctx, alarmKeysKey(sh, next.Owner), a.IdempotencyKey).Result(); err != nil && !errors.Is(err, redis.Nil) {
			return nil, false, fmt.Errorf("create alarm of %s: %w", next.Owner, err)
		}
	}
	pruned := false
	for range alarmIDTries {
		prevKey := scheduleKey(sh, next.ID)
		if prev != "" {
			prevKey = scheduleKey(sh, prev)
		}
		keys := []string{scheduleKey(sh, next.ID), dueKey(sh), versionsKey(sh),
			alarmsKey(sh, next.Owner), alarmKeysKey(sh, next.Owner), alarmsActiveKey(sh, next.Owner), prevKey}
		args := []any{next.ID, ms(now), nextMS, score, timingHash(&next), a.IdempotencyKey,
			s.cfg.AlarmMaxActive, prev}
		if len(args) != alarmCreateHeaderArgs {
			// alarm_create.lua finds the definition's pairs after these.
			return nil, false, fmt.Errorf("create alarm of %s: %d fixed arguments, not the %d alarm_create.lua reads", next.Owner, len(args), alarmCreateHeaderArgs)
		}
		for _, p := range pairs {
			args = append(args, p)
		}
		res, err := s.batch.runScript(ctx, alarmCreateScript, keys, args...).Slice()
		if err != nil {
			return nil, false, fmt.Errorf("create alarm of %s: %w", next.Owner, err)
		}
		code, _ := res[0].(int64)
		switch code {
		case alarmCreateNew, alarmCreateDeduped:
			id, _ := res[1].(string)
			got, err := s.GetAlarm(ctx, next.Owner, id)
			return got, code == alarmCreateDeduped, err
		case alarmCreateStale:
			prev, _ = res[1].(string)
			continue
		case alarmCreateTooMany:
			if !pruned {
				// Ids left over from alarms no longer active may fill the
				// set: drop them and ask once more.
				pruned = true
				if err := s.pruneActive(ctx, sh, next.Owner); err != nil {
					return nil, false, err
				}
				continue
			}
			return nil, false, fmt.Errorf("%s has %v active alarms, the most allowed (ALARM_MAX_ACTIVE): cancel some or wait until they fire: %w",
				next.Owner, res[1], ErrQuota)
		case alarmCreateIDTaken:
			next.ID = s.NewAlarmID(next.Owner)
			pairs = encodeDef(&next)
			continue
		}
		return nil, false, fmt.Errorf("create alarm of %s: unexpected answer %v", next.Owner, res)
	}
	return nil, false, fmt.Errorf("create alarm of %s: %d drawn ids were all taken", next.Owner, alarmIDTries)
}

// pruneActive drops from owner's active set (of shard sh) the ids whose
// alarm is no longer active, which alarm_prune.lua checks again: the set
// is read first so the script gets each alarm's key in KEYS.
func (s *Store) pruneActive(ctx context.Context, sh int, owner string) error {
	ids, err := s.rdb.SMembers(ctx, alarmsActiveKey(sh, owner)).Result()
	if err != nil {
		return fmt.Errorf("prune active alarms of %s: %w", owner, err)
	}
	for len(ids) > 0 {
		page := ids[:min(len(ids), alarmPrunePage)]
		ids = ids[len(page):]
		keys := []string{alarmsActiveKey(sh, owner)}
		args := make([]any, len(page))
		for i, id := range page {
			keys = append(keys, scheduleKey(sh, id))
			args[i] = id
		}
		if err := alarmPruneScript.Run(ctx, s.rdb, keys, args...).Err(); err != nil {
			return fmt.Errorf("prune active alarms of %s: %w", owner, err)
		}
	}
	return nil
}

// alarmPrunePage bounds the alarms one alarm_prune.lua call looks at, as
// asynq bounds its scripts.
const alarmPrunePage = 1000

// GetAlarm returns owner's alarm id: its record with Alarm set, and
// NextRunAt the time it wakes next while it is active (nil otherwise):
// for a once alarm its fire time; for a recurring one the run time of
// its earliest run not yet delivered, else the next time not yet
// planned. An alarm of another owner is ErrNotFound, as a missing one
// is, so the two cannot be told apart.
func (s *Store) GetAlarm(ctx context.Context, owner, id string) (*model.ScheduleRecord, error) {
	recs, err := s.loadAlarms(ctx, s.shard(id), []string{id})
	if err != nil {
		return nil, err
	}
	if recs[0] == nil || recs[0].Owner != owner {
		return nil, fmt.Errorf("alarm %s: %w", id, ErrNotFound)
	}
	return recs[0], nil
}

// ListAlarms returns up to limit of owner's alarms (at most
// AlarmListMax), newest first, as GetAlarm shows them; status, when not
// empty, keeps only the alarms in that status.
func (s *Store) ListAlarms(ctx context.Context, owner string, status model.AlarmStatus, limit int) ([]*model.ScheduleRecord, error) {
	limit = min(max(limit, 1), AlarmListMax)
	sh := s.shard(owner)
	if status == model.AlarmActive {
		return s.listActiveAlarms(ctx, owner, sh, limit)
	}
	page := int64(limit)
	if status != "" {
		page = AlarmListMax
	}
	out := make([]*model.ScheduleRecord, 0, min(limit, 64))
	for start := int64(0); len(out) < limit; start += page {
		ids, err := s.rdb.ZRevRange(ctx, alarmsKey(sh, owner), start, start+page-1).Result()
		if err != nil {
			return nil, fmt.Errorf("list alarms of %s: %w", owner, err)
		}
		if len(ids) == 0 {
			break
		}
		recs, err := s.loadAlarms(ctx, sh, ids)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			if r != nil && r.Owner == owner && (status == "" || r.Alarm.Status == status) && len(out) < limit {
				out = append(out, r)
			}
		}
		if int64(len(ids)) < page {
			break
		}
	}
	return out, nil
}

// listActiveAlarms is ListAlarms of the active alarms: it reads the
// owner's active set, which is bounded by Config.AlarmMaxActive (the run
// lifecycle and cancel take ended alarms out of it), rather than
// walking every alarm the owner ever had.
func (s *Store) listActiveAlarms(ctx context.Context, owner string, sh, limit int) ([]*model.ScheduleRecord, error) {
	ids, err := s.rdb.SMembers(ctx, alarmsActiveKey(sh, owner)).Result()
	if err != nil || len(ids) == 0 {
		return []*model.ScheduleRecord{}, err
	}
	created, err := s.rdb.ZMScore(ctx, alarmsKey(sh, owner), ids...).Result()
	if err != nil {
		return nil, fmt.Errorf("list alarms of %s: %w", owner, err)
	}
	order := make([]int, len(ids))
	for i := range order {
		order[i] = i
	}
	// Newest first, ties as ZREVRANGE breaks them (by id, descending).
	slices.SortFunc(order, func(a, b int) int {
		if c := cmp.Compare(created[b], created[a]); c != 0 {
			return c
		}
		return strings.Compare(ids[b], ids[a])
	})
	out := make([]*model.ScheduleRecord, 0, min(limit, len(ids)))
	for start := 0; start < len(order) && len(out) < limit; start += AlarmListMax {
		page := make([]string, 0, AlarmListMax)
		for _, i := range order[start:min(start+AlarmListMax, len(order))] {
			page = append(page, ids[i])
		}
		recs, err := s.loadAlarms(ctx, sh, page)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			if r != nil && r.Owner == owner && r.Alarm.Status == model.AlarmActive && len(out) < limit {
				out = append(out, r)
			}
		}
	}
	return out, nil
}

// CancelAlarm cancels owner's alarm id and returns it: an active alarm
// becomes cancelled and paused, so no scheduler plans it again and a
// launcher skips its runs already queued (their wakes are never
// delivered). An alarm already fired, failed or cancelled is returned
// unchanged. Another owner's alarm is ErrNotFound, as a missing one is.
func (s *Store) CancelAlarm(ctx context.Context, owner, id string) (*model.ScheduleRecord, error) {
	sh := s.shard(id)
	res, err := s.batch.runScript(ctx, alarmCancelScript,
		[]string{scheduleKey(sh, id), dueKey(sh), alarmsActiveKey(sh, owner)},
		id, owner, ms(s.clock.Now())).Int()
	if err != nil {
		return nil, fmt.Errorf("cancel alarm %s: %w", id, err)
	}
	if res == alarmCancelNotFound {
		return nil, fmt.Errorf("alarm %s: %w", id, ErrNotFound)
	}
	return s.GetAlarm(ctx, owner, id)
}

// loadAlarms reads the alarms of ids, all of shard sh; an id that is
// missing or not an alarm is nil in the result. Two pipelines, no
// script: each alarm's hash and newest runs, then those runs' status. An
// alarm's view need not be one snapshot, and run keys read from the
// history could not be a script's KEYS before it is read.
func (s *Store) loadAlarms(ctx context.Context, sh int, ids []string) ([]*model.ScheduleRecord, error) {
	hashes := make([]*redis.MapStringStringCmd, len(ids))
	histories := make([]*redis.ZSliceCmd, len(ids))
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			hashes[i] = p.HGetAll(ctx, scheduleKey(sh, id))
			histories[i] = p.ZRevRangeWithScores(ctx, historyKey(sh, id), 0, alarmPendingRuns-1)
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read alarms: %w", err)
	}
	out := make([]*model.ScheduleRecord, len(ids))
	statuses := make([][]*redis.StringCmd, len(ids))
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			h := hashes[i].Val()
			if h[sfTarget] != targetWake || h[sfCreated] == "" {
				continue
			}
			rec, err := scheduleFromHash(id, h)
			if err != nil {
				return err
			}
			out[i] = rec
			// An active alarm that recurs wakes next at its earliest run
			// among its newest not yet delivered (ENQUEUED or STARTED):
			// the stored next time has moved past the runs queued ahead.
			if rec.Alarm.Status != model.AlarmActive || rec.Kind == model.KindOnce {
				continue
			}
			for _, z := range histories[i].Val() {
				key, _ := z.Member.(string)
				statuses[i] = append(statuses[i], p.HGet(ctx, runKey(sh, key), rfStatus))
			}
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read alarms: %w", err)
	}
	for i, rec := range out {
		if rec == nil {
			continue
		}
		pending := ""
		for j, st := range statuses[i] {
			if v := st.Val(); v == stEnqueued || v == stStarted {
				pending = strconv.FormatFloat(histories[i].Val()[j].Score, 'f', -1, 64)
			}
		}
		rec.NextRunAt = alarmNext(rec, pending)
	}
	return out, nil
}

// alarmNext is when an alarm wakes next, nil unless it is active: a once
// alarm at its fire time until delivered; a recurring one at its
// earliest run not yet delivered (pending, ms, "" for none), else at the
// next time not yet planned (rec.NextRunAt as stored; nil when retired).
func alarmNext(rec *model.ScheduleRecord, pending string) *time.Time {
	if rec.Alarm.Status != model.AlarmActive {
		return nil
	}
	if rec.Kind == model.KindOnce {
		return rec.FireAt
	}
	// A score comes back as Redis prints a double.
	if f, err := strconv.ParseFloat(pending, 64); err == nil {
		t := fromMS(int64(f))
		return &t
	}
	return rec.NextRunAt
}
