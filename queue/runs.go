package queue

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue/asynqwire"
)

// runFields are the fields of a run hash, short because there is one hash
// per run: sid (schedule id), at (run_at ms), fire (fire_at ms, after
// jitter), st (status), rid (run id), enq (enqueued_at ms), cr, up
// (created/updated ms), err, src (schedule | manual). A run the executor
// failed to start also has att (failed attempts, see RecordFailedAttempt)
// retry (when the last one's retry is due, ms) and lerr (why it failed),
// shown as attempts, next_attempt_at and last_error. A SKIPPED or FAILED
// run has rsn, why (model.RunReason).
var runFields = []string{rfSchedule, rfRunAt, rfFireAt, rfStatus, rfRunID, rfEnqueued, rfCreated, rfUpdated, rfError, rfSource,
	rfAttempts, rfRetryAt, rfLastErr, rfReason}

func runFromFields(key string, v []any) (*model.Run, error) {
	str := func(i int) string { s, _ := v[i].(string); return s }
	if str(3) == "" {
		return nil, fmt.Errorf("run %s: %w", key, ErrNotFound)
	}
	msTime := func(i int) time.Time {
		n, _ := strconv.ParseInt(str(i), 10, 64)
		return fromMS(n)
	}
	r := &model.Run{
		IdempotencyKey: key,
		ScheduleID:     str(0),
		RunAt:          msTime(1),
		FireAt:         msTime(2),
		Status:         model.RunStatus(str(3)),
		RunID:          str(4),
		CreatedAt:      msTime(6),
		UpdatedAt:      msTime(7),
		Error:          str(8),
		Source:         model.RunSource(str(9)),
	}
	if str(5) != "" {
		t := msTime(5)
		r.EnqueuedAt = &t
	}
	r.Attempts, _ = strconv.Atoi(str(10))
	r.LastError = str(12)
	r.Reason = model.RunReason(str(13))
	if str(11) != "" && r.Status == model.RunEnqueued {
		t := msTime(11)
		r.NextAttemptAt = &t
	}
	return r, nil
}

// ListRuns returns the newest runs of a schedule, newest first.
func (s *Store) ListRuns(ctx context.Context, scheduleID string, limit int) ([]*model.Run, error) {
	sh := s.shard(scheduleID)
	keys, err := s.rdb.ZRevRange(ctx, historyKey(sh, scheduleID), 0, int64(limit-1)).Result()
	if err != nil {
		return nil, fmt.Errorf("list runs of %s: %w", scheduleID, err)
	}
	cmds := make([]*redis.SliceCmd, len(keys))
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.HMGet(ctx, runKey(sh, k), runFields...)
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("list runs of %s: %w", scheduleID, err)
	}
	out := make([]*model.Run, 0, len(keys))
	for i, k := range keys {
		r, err := runFromFields(k, cmds[i].Val())
		if errors.Is(err, ErrNotFound) {
			continue // trimmed between the two reads
		}
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// RunQuery selects a schedule's runs for QueryRuns.
type RunQuery struct {
	// Upcoming selects the runs whose time has not come (run_at after
	// Now), soonest first; otherwise those whose time has come, newest
	// first.
	Upcoming bool
	// Status keeps only runs with this status; "" keeps all.
	Status model.RunStatus
	// Reason keeps only runs recorded with this reason (model.RunReason);
	// "" keeps all.
	Reason model.RunReason
	// Now divides past from upcoming.
	Now time.Time
	// Limit is the most runs returned, at least 1.
	Limit int
}

// runPage is how many history entries QueryRuns reads per round trip
// while a status filter drops some.
const runPage = 200

// QueryRuns returns a schedule's runs as q selects them. The history is
// scored by run time, so each side of Now is one range read; a status or
// reason filter reads on, a page at a time, until Limit runs match or the
// history ends (it is trimmed, so that is bounded).
func (s *Store) QueryRuns(ctx context.Context, scheduleID string, q RunQuery) ([]*model.Run, error) {
	sh := s.shard(scheduleID)
	hkey := historyKey(sh, scheduleID)
	now := strconv.FormatInt(ms(q.Now), 10)
	page := int64(q.Limit)
	if q.Status != "" || q.Reason != "" {
		page = max(page, runPage)
	}
	out := make([]*model.Run, 0, q.Limit)
	for offset := int64(0); ; offset += page {
		var keys []string
		var err error
		if q.Upcoming {
			keys, err = s.rdb.ZRangeByScore(ctx, hkey, &redis.ZRangeBy{Min: "(" + now, Max: "+inf", Offset: offset, Count: page}).Result()
		} else {
			keys, err = s.rdb.ZRevRangeByScore(ctx, hkey, &redis.ZRangeBy{Min: "-inf", Max: now, Offset: offset, Count: page}).Result()
		}
		if err != nil {
			return nil, fmt.Errorf("list runs of %s: %w", scheduleID, err)
		}
		runs, err := s.loadRuns(ctx, sh, keys)
		if err != nil {
			return nil, fmt.Errorf("list runs of %s: %w", scheduleID, err)
		}
		for _, r := range runs {
			if (q.Status == "" || r.Status == q.Status) && (q.Reason == "" || r.Reason == q.Reason) {
				out = append(out, r)
				if len(out) == q.Limit {
					return out, nil
				}
			}
		}
		if int64(len(keys)) < page {
			return out, nil
		}
	}
}

// loadRuns loads the runs of keys from shard sh in one pipeline, leaving
// out those trimmed since their keys were read.
func (s *Store) loadRuns(ctx context.Context, sh int, keys []string) ([]*model.Run, error) {
	cmds := make([]*redis.SliceCmd, len(keys))
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.HMGet(ctx, runKey(sh, k), runFields...)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	out := make([]*model.Run, 0, len(keys))
	for i, k := range keys {
		r, err := runFromFields(k, cmds[i].Val())
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// GetRun loads a run by its idempotency key alone. Scheduled runs live in
// their schedule's shard and manual runs in their key's, so it asks every
// shard in one pipeline, the key's first: a manual run started with a key
// a schedule's run would have owns the key's task, and that scheduled run
// is only a SKIPPED mark in its schedule's history (see commit.lua).
func (s *Store) GetRun(ctx context.Context, key string) (*model.Run, int, error) {
	cmds := make([]*redis.SliceCmd, s.cfg.Shards)
	first := s.shard(key)
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range s.cfg.Shards {
			cmds[i] = p.HMGet(ctx, runKey((first+i)%s.cfg.Shards, key), runFields...)
		}
		return nil
	}); err != nil {
		return nil, 0, fmt.Errorf("load run %s: %w", key, err)
	}
	for i, c := range cmds {
		if r, err := runFromFields(key, c.Val()); err == nil {
			return r, (first + i) % s.cfg.Shards, nil
		}
	}
	return nil, 0, fmt.Errorf("run %s: %w", key, ErrNotFound)
}

// GetScheduleRun loads a run of a known schedule (one round trip).
func (s *Store) GetScheduleRun(ctx context.Context, scheduleID, key string) (*model.Run, error) {
	return s.runOnShard(ctx, s.shard(scheduleID), key)
}

// runOnShard loads a run from the shard that holds it.
func (s *Store) runOnShard(ctx context.Context, sh int, key string) (*model.Run, error) {
	v, err := s.rdb.HMGet(ctx, runKey(sh, key), runFields...).Result()
	if err != nil {
		return nil, fmt.Errorf("load run %s: %w", key, err)
	}
	return runFromFields(key, v)
}

// StatusUpdate is a reported change of a run's status.
type StatusUpdate struct {
	Status model.RunStatus
	RunID  string
	Error  string
	// From, when set, applies the update only to a run in this status;
	// any other, Status itself included, is ErrConflict.
	From model.RunStatus
	// Release is how a final status releases a "queue" run held behind
	// this one (model.AtRelease; release.lua's ran() in Lua).
	Release ReleaseRule
	// Reason says why a SKIPPED or FAILED run ended so (model.RunReason);
	// "" leaves none.
	Reason model.RunReason
	// DeliveryFailed marks a FAILED run whose last executor call failed:
	// an alarm counts it among its failed deliveries (failure_count), as
	// RecordFailedAttempt counts the ones before it.
	DeliveryFailed bool
}

// ReleaseRule is how a final status report releases the "queue" run held
// behind its run: it tells whether its run ran (model.EndedRun), so
// whether the held run waited for it and starts now, however late, or
// was missed with it and follows its catch-up policy.
type ReleaseRule string

const (
	// ReleaseByStatus judges by the new status: SUCCESS and FAILED ran,
	// SKIPPED did not (the held run was missed too: its catch-up policy
	// applies).
	ReleaseByStatus ReleaseRule = ""
	// ReleaseUnplanned is for a SKIPPED run that was not late but is no
	// longer one its schedule plans (paused, deleted, timing changed):
	// the held run waited for it, and starts at once, as behind a run
	// that ran.
	ReleaseUnplanned ReleaseRule = "unplanned"
	// ReleaseAbandoned is for a FAILED run whose task was archived before
	// any launcher tried it: judged by its status before, as for a run
	// RUN_TIMEOUT fails: it ran only if a launcher had tried the executor.
	ReleaseAbandoned ReleaseRule = "abandoned"
)

// UpdateRunStatus records a reported status of the run with this
// idempotency key (scheduled or manual: its shard is found by asking all)
// and returns the run. A final status (SUCCESS, FAILED, SKIPPED) is
// final: reporting the same one again is a no-op, reporting a different
// one is ErrConflict. A final status releases the schedule's overlap hold.
func (s *Store) UpdateRunStatus(ctx context.Context, key string, u StatusUpdate) (*model.Run, error) {
	r, sh, err := s.GetRun(ctx, key)
	if err != nil {
		return nil, err
	}
	if err := s.reportStatus(ctx, sh, key, r.ScheduleID, u); err != nil {
		return nil, err
	}
	return s.runOnShard(ctx, sh, key)
}

// ReportTaskStatus records the status of the run a task carries; its
// shard is known from the task, so no search is needed.
func (s *Store) ReportTaskStatus(ctx context.Context, p *TaskPayload, u StatusUpdate) error {
	return s.reportStatus(ctx, s.taskShard(p), p.IdempotencyKey, p.ScheduleID, u)
}

// taskShard is the shard of a task's run record: its schedule's, or for a
// manual run its key's, or the schedule's whose run it stands for
// (ShardOf).
func (s *Store) taskShard(p *TaskPayload) int {
	switch {
	case p.ScheduleID != "":
		return s.shard(p.ScheduleID)
	case p.ShardOf != "":
		return s.shard(p.ShardOf)
	}
	return s.shard(p.IdempotencyKey)
}

// statusTries bounds the status script's calls for one report: the
// first names the schedule the caller knows (the task's, or the record's
// it read) and no owner; an alarm's run needs a second call with its
// owner's active set, and a third covers a schedule id the caller had
// wrong.
const statusTries = 3

// reportStatus runs the status script on the run's shard. Error text is
// cut to model.MaxRunErrorLen bytes and a run id to model.MaxIDLen,
// whoever reports (the API, or an executor's answer through a launcher).
// sid is the run's schedule id as the caller knows it; the script checks
// it and the owner, whose keys it gets in KEYS, and answers statusRetry
// with the right ones when they differ, having written nothing.
func (s *Store) reportStatus(ctx context.Context, sh int, key, sid string, u StatusUpdate) error {
	return s.reportStatusAnd(ctx, sh, key, sid, u, nil)
}

// doneCall is a task end sent with a status report, in the same script
// (status_done.lua): finish_task's keys and arguments, and its answer.
type doneCall struct {
	keys     []string
	args     []any
	finished bool
}

// FinishLaunched records the status u of a run a launcher started, as
// ReportTaskStatus does, and finishes its task t as done, in one script
// call with the other runs of its shard that end at the same time
// (status_done_many.lua): the two writes that end a launched run. It
// says whether the task was finished (false: it was no longer held; a
// launcher recovered it when its lease expired). An ErrConflict or
// ErrNotFound says the
// status was not recorded, as ReportTaskStatus's; the task is finished
// all the same, as it would be after such a report.
func (s *Store) FinishLaunched(ctx context.Context, t *asynqwire.Task, p *TaskPayload, u StatusUpdate) (bool, error) {
	return s.finishLaunchedTogether(ctx, t, p, u)
}

// reportStatusAnd is reportStatus, with the task end done (nil: none)
// in the same script call.
func (s *Store) reportStatusAnd(ctx context.Context, sh int, key, sid string, u StatusUpdate, done *doneCall) error {
	return s.reportStatusFrom(ctx, sh, key, sid, "", u, done)
}

// reportStatusFrom is reportStatusAnd naming owner's active set first
// ("": none), as a call that was answered statusRetry knows it.
func (s *Store) reportStatusFrom(ctx context.Context, sh int, key, sid, owner string, u StatusUpdate, done *doneCall) error {
	u.Error, u.RunID = cut(u.Error, model.MaxRunErrorLen), cut(u.RunID, model.MaxIDLen)
	failed := ""
	if u.DeliveryFailed {
		failed = flagSet
	}
	var res []any
	for try := 1; ; try++ {
		skey, bfq := runKey(sh, key), runKey(sh, key) // declared keys of the slot when there is no schedule
		if sid != "" {
			skey, bfq = scheduleKey(sh, sid), backfillQueueKey(sh, sid)
		}
		// Through the batcher: the runs a launcher took together report
		// together.
		sc := statusScript
		keys := []string{runKey(sh, key), dueKey(sh), inflightKey(sh), skey, alarmsActiveKey(sh, owner), autoPausedKey(sh),
			bfq, s.queue(sh).Keys().Scheduled()}
		args := []any{releasedChannel(sh), key, string(u.Status), u.RunID, u.Error, ms(s.clock.Now()), string(u.From), string(u.Release), failed,
			string(u.Reason), sid, owner}
		if done != nil {
			sc, keys, args = statusDoneScript, append(keys, done.keys...), append(args, done.args...)
		}
		var err error
		res, err = s.batch.runScript(ctx, sc, keys, args...).Slice()
		if err != nil {
			return fmt.Errorf("update run %s: %w", key, err)
		}
		if done != nil && len(res) > 1 {
			fin, _ := res[0].(int64)
			done.finished, res = fin == 1, res[1:]
		}
		if code, _ := res[0].(int64); code != statusRetry {
			break
		}
		if try == statusTries {
			return fmt.Errorf("update run %s: its schedule or owner changed %d times while it was reported: %w", key, try, ErrConflict)
		}
		sid, _ = res[1].(string)
		owner, _ = res[2].(string)
	}
	return s.statusAnswer(ctx, sh, key, u, res)
}

// statusAnswer turns status.lua's answer res to the report u of run key
// on shard sh into its error, and counts what the run's end did.
func (s *Store) statusAnswer(ctx context.Context, sh int, key string, u StatusUpdate, res []any) error {
	code, _ := res[0].(int64)
	cur, _ := res[1].(string)
	switch {
	case code == statusNotFound:
		return fmt.Errorf("run %s: %w", key, ErrNotFound)
	case code == statusUnchanged && (cur != string(u.Status) || u.From != ""):
		return fmt.Errorf("run %s is already %s: %w", key, cur, ErrConflict)
	case code == statusChanged && (u.Status == model.RunSkipped || u.Status == model.RunFailed):
		s.ledger.countStatus(u.Status, u.Reason)
	}
	if len(res) > 2 { // the run's end paused its schedule (autopause.lua)
		n, _ := res[2].(int64)
		s.noteAutoPaused(ctx, sh, key, int(n))
	}
	return nil
}

// maxRecordTTL bounds a manual run's record TTL: Redis takes any, but
// some emulations (miniredis, which chronos dev embeds) keep a TTL as
// time.Duration, which overflows past 292 years, and the record would
// vanish at once. A run this far ahead loses its record after 250
// years, not before it is due.
const maxRecordTTL = 250 * 365 * 24 * time.Hour

// recordTTL is how long a manual run's record lives, seconds: the
// retention past its time, at most maxRecordTTL.
func recordTTL(retention time.Duration, at, now time.Time) int64 {
	ahead := max(at.Unix()-now.Unix(), 0) // Sub would saturate centuries ahead
	return min(int64(retention/time.Second)+ahead, int64(maxRecordTTL/time.Second))
}

// cut shortens s to at most n bytes of valid UTF-8.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}

// ManualRun asks for a run outside any schedule (POST /run-launcher/start).
type ManualRun struct {
	WorkflowID     string
	Version        string
	UserID         string
	ScheduledFor   time.Time
	IdempotencyKey string
	// ScheduleID names the schedule whose run this manual run stands for,
	// when IdempotencyKey is that run's key
	// (model.IdempotencyKey(ScheduleID, ScheduledFor); any other key with
	// it is refused). The run then lives in the schedule's shard, where
	// the schedule's commit looks for it, so starting it is one script on
	// one hash slot. Empty for a run of the caller's own key.
	ScheduleID string
}

// StartManualRun records and enqueues a manual run unless a run with its
// idempotency key exists (scheduled or manual). It returns the run and
// whether this call started it. The key is trusted: the API refuses a
// caller's key of the form of a scheduled run's (model.ValidateManualKey).
// The run, its task and its mark live in the key's shard, or in the
// schedule's shard when m names the schedule whose run it stands for
// (ScheduleID); without it, a key that may be a schedule's run's (see
// markEveryShard) is marked in every shard first.
func (s *Store) StartManualRun(ctx context.Context, m ManualRun) (run *model.Run, started bool, err error) {
	now := s.clock.Now()
	sh := s.shard(m.IdempotencyKey)
	if m.ScheduleID != "" {
		if want := model.IdempotencyKey(m.ScheduleID, m.ScheduledFor); m.IdempotencyKey != want {
			return nil, false, fmt.Errorf("manual run of schedule %s at %s: idempotency key %s is not that run's (%s): %w",
				m.ScheduleID, m.ScheduledFor.UTC().Format(time.RFC3339), m.IdempotencyKey, want, ErrInvalidManualRun)
		}
		sh = s.shard(m.ScheduleID)
	}
	ttl := recordTTL(s.cfg.RunRetention, m.ScheduledFor, now)
	if m.ScheduleID == "" && maybeScheduledKey(m) {
		marked, held, err := s.markEveryShard(ctx, m.IdempotencyKey, sh, ttl)
		if err != nil {
			return nil, false, err
		}
		defer func() {
			if !started {
				s.unmark(m.IdempotencyKey, marked)
			}
		}()
		if held {
			return s.keyHeld(ctx, m.IdempotencyKey)
		}
	}
	if r, _, err := s.GetRun(ctx, m.IdempotencyKey); err == nil {
		return r, false, nil
	} else if !errors.Is(err, ErrNotFound) {
		return nil, false, err
	}
	p := TaskPayload{
		IdempotencyKey: m.IdempotencyKey, RunAt: m.ScheduledFor.UTC(), FireAt: m.ScheduledFor.UTC(),
		WorkflowID: m.WorkflowID, Version: m.Version, UserID: m.UserID, Source: model.SourceManual,
		ShardOf: m.ScheduleID,
	}
	if err := s.tasks.Publish(ctx); err != nil {
		return nil, false, err
	}
	msg, processAt, err := s.asynqTask(sh, &p, now)
	if err != nil {
		return nil, false, err
	}
	q := s.queue(sh).Keys()
	n, err := manualRunScript.Run(ctx, s.rdb,
		[]string{runKey(sh, m.IdempotencyKey), q.Pending(), q.Scheduled(), q.Archived(), q.Completed(),
			manualKeyPrefix(sh) + m.IdempotencyKey, q.Task(m.IdempotencyKey), runsMadeKey(sh)},
		m.IdempotencyKey, ms(m.ScheduledFor), ms(now), ttl,
		"", now.UnixNano(), msg, processAt, rand.Text()).Int()
	if err != nil {
		return nil, false, fmt.Errorf("start manual run %s: %w", m.IdempotencyKey, err)
	}
	if n == manualCreated {
		r, err := s.runOnShard(ctx, sh, m.IdempotencyKey)
		return r, true, err
	}
	if n == manualKeyHeld {
		return s.keyHeld(ctx, m.IdempotencyKey)
	}
	r, _, err := s.GetRun(ctx, m.IdempotencyKey) // created meanwhile, maybe by a scheduler
	return r, false, err
}

// keyHeld answers a manual run whose key a live task holds: the run of
// that task, or a conflict when its record is gone.
func (s *Store) keyHeld(ctx context.Context, key string) (*model.Run, bool, error) {
	r, _, err := s.GetRun(ctx, key)
	if errors.Is(err, ErrNotFound) {
		// A schedule's run whose record was trimmed while its task waits.
		return nil, false, fmt.Errorf("idempotency key %s is held by a queued task of a run whose record is gone: use another key: %w",
			key, ErrConflict)
	}
	return r, false, err
}
