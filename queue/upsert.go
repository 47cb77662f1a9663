package queue

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronos-sched/chronos/model"
)

// UpsertResult says what an upsert did.
type UpsertResult struct {
	Schedule *model.ScheduleRecord
	Created  bool
	Changed  bool
	// WorkflowMissing says the schedule's workflow version was not
	// registered when it was upserted (read in the same round trip: the
	// API warns of it). False when the target is not a workflow.
	WorkflowMissing bool
}

// defIndex is each definition field's place in defFields.
var defIndex = func() map[string]int {
	m := make(map[string]int, len(defFields))
	for i, f := range defFields {
		m[f] = i
	}
	return m
}()

// defFieldArgs are defFields as script arguments: boxed once here, since
// boxing a string for each upsert is an allocation per field.
var defFieldArgs = func() []any {
	a := make([]any, len(defFields))
	for i, f := range defFields {
		a[i] = f
	}
	return a
}()

// maxDefFields bounds defFields, so an upsert marks the fields it sends
// in the bits of a uint64.
const maxDefFields = 64

// omittedArgs caches omittedArg's answers by the fields sent: bodies
// come in few shapes.
var omittedArgs sync.Map // uint64 -> any (a string)

// omittedArg is upsert.lua's ARGV[upsertHeaderArgs]: the names of the
// definition fields not in given (bit i for defFields[i]), but for those
// the script owns, joined by spaces.
func omittedArg(given uint64) any {
	if v, ok := omittedArgs.Load(given); ok {
		return v
	}
	var names []string
	for i, f := range defFields {
		if given&(1<<i) == 0 && !scriptOwned(f) {
			names = append(names, f)
		}
	}
	v, _ := omittedArgs.LoadOrStore(given, any(strings.Join(names, " ")))
	return v
}

// scriptOwned are the definition fields upsert.lua decides, from what is
// stored: they are never sent.
func scriptOwned(f string) bool { return f == sfAnchor || f == sfCreated || f == sfUpdated }

// UpsertSchedule creates the schedule or updates it in place, keeping its
// run history, in one round trip. rec must have passed Validate. An upsert
// whose body equals the stored one changes nothing (not even updated_at).
// When the timing changes, the next fire time is recomputed from now;
// @every and "every" schedules re-anchor at now.
func (s *Store) UpsertSchedule(ctx context.Context, rec *model.ScheduleRecord) (*UpsertResult, error) {
	sh := s.shard(rec.ID)
	now := s.clock.Now().UTC()
	next := *rec
	next.Anchor, next.CreatedAt, next.UpdatedAt = now.Truncate(time.Second), now, now
	sched, err := next.Compile()
	if err != nil {
		return nil, err
	}
	lead := s.ActLead(&next).Milliseconds()
	nextMS, actMS := "", ""
	if t := sched.Next(now); !t.IsZero() {
		nextMS, actMS = strconv.FormatInt(ms(t), 10), strconv.FormatInt(ms(t)-lead, 10)
	}
	all := encodeDef(&next)
	if len(defFields) > maxDefFields {
		return nil, fmt.Errorf("upsert schedule %s: %d definition fields, more than maxDefFields", rec.ID, len(defFields))
	}
	// The arguments are built in one slice of the size they take: this
	// function's appends and maps were a third of the API's allocations
	// under load, and the garbage collector's work grows with them. The
	// strings go as pointers (go-redis writes a *string as the string),
	// into hdr and all: boxing each string in an interface was an
	// allocation, sixteen an upsert.
	nowMS, timing := strconv.FormatInt(ms(now), 10), timingHash(&next)
	anchorMS := strconv.FormatInt(ms(next.Anchor), 10)
	hdr := &[...]string{rec.ID, nowMS, anchorMS, nextMS, timing, actMS}
	args := make([]any, upsertHeaderArgs, upsertHeaderArgs+len(all))
	copy(args, []any{&hdr[0], &hdr[1], &hdr[2], &hdr[3], &hdr[4], lead, &hdr[5], "", "", nil})
	var given uint64 // bit i: defFields[i] is sent
	for i := 0; i < len(all); i += 2 {
		f := defIndex[all[i]]
		given |= 1 << f
		if !scriptOwned(all[i]) {
			args = append(args, defFieldArgs[f], &all[i+1])
		}
	}
	args[upsertHeaderArgs-1] = omittedArg(given)
	// The workflow version is looked up in the same pipeline as the
	// script: a GET of its own was a second round trip per upsert, 12% of
	// the API's CPU under load.
	var wf *redis.IntCmd
	withWorkflow := func(p redis.Pipeliner) {
		if next.Target == model.TargetWorkflow && next.WorkflowID != "" {
			wf = p.Exists(ctx, workflowKey(next.WorkflowID, string(next.Version)))
		}
	}
	// A new schedule settles the runs a deleted one of its id left in its
	// history, whose keys the script gets in KEYS. The first call sends
	// none, as almost every id has no such history; the script answers
	// upsertStale when it has one, and the history read is sent with the
	// next.
	q := s.queue(sh).Keys()
	var history []string
	var res []any
	for try := 1; ; try++ {
		// The asynq lists only with a history: only settling it
		// touches them.
		keys := []string{scheduleKey(sh, rec.ID), dueKey(sh), historyKey(sh, rec.ID), versionsKey(sh)}
		callArgs := args
		if len(history) > 0 {
			keys = append(keys, q.Pending(), q.Scheduled(), q.Retry(), q.Archived(), q.Completed())
			callArgs = append(slices.Clip(args), make([]any, 0, len(history))...)
			for _, k := range history {
				keys = append(keys, runKey(sh, k), q.Task(k), manualKeyPrefix(sh)+k)
				callArgs = append(callArgs, k)
			}
		}
		var err error
		if res, err = s.batch.runScriptWith(ctx, withWorkflow, upsertScript, keys, callArgs...).Slice(); err != nil {
			return nil, fmt.Errorf("upsert schedule %s: %w", rec.ID, err)
		}
		if code, _ := res[0].(int64); code != upsertStale {
			break
		}
		if try == historyTries {
			return nil, fmt.Errorf("upsert schedule %s: the run history of its id changed %d times while it was created: %w", rec.ID, try, ErrConflict)
		}
		if history, err = s.rdb.ZRange(ctx, historyKey(sh, rec.ID), 0, -1).Result(); err != nil {
			return nil, fmt.Errorf("upsert schedule %s: %w", rec.ID, err)
		}
	}
	missing := wf != nil && wf.Err() == nil && wf.Val() == 0
	code, _ := res[0].(int64)
	if code == upsertIsAlarm {
		return nil, fmt.Errorf("schedule_id %s is an agent's alarm, which only its owner changes (through /v1/alarms): choose another id: %w", rec.ID, ErrConflict)
	}
	if len(res) > 1 {
		n, _ := res[1].(int64)
		s.ledger.count(model.ReasonDeleted, int(n))
	}
	if code == upsertCreated && next.Target != model.TargetWake {
		// The script wrote the new hash whole from what was sent, and
		// answers without it: reading 40 strings back cost Redis the
		// reply and this process its parsing, for values known here.
		if got, reuse, ok := createdRecord(&next, nextMS); ok {
			if !reuse {
				if sched, err = got.Compile(); err != nil {
					sched = nil // as recordFromHash: a record that does not compile is shown as stored
				}
			}
			if sched != nil {
				s.showNext(got, sched)
			}
			return &UpsertResult{Schedule: got, Created: true, Changed: true, WorkflowMissing: missing}, nil
		}
	}
	var h map[string]string
	if code == upsertCreated {
		h = make(map[string]string, len(all)/2+3)
		for i := 0; i < len(all); i += 2 {
			if !scriptOwned(all[i]) {
				h[all[i]] = all[i+1]
			}
		}
		h[sfTiming], h[sfUpdated], h[sfCreated], h[sfAnchor] = timing, nowMS, nowMS, anchorMS
		if nextMS != "" {
			h[sfNext] = nextMS
		}
	} else {
		if len(res) < 3 {
			return nil, fmt.Errorf("upsert schedule %s: upsert.lua answered %v, without the hash", rec.ID, res)
		}
		raw, _ := res[2].([]any)
		h = make(map[string]string, len(raw)/2)
		for i := 0; i+1 < len(raw); i += 2 {
			k, _ := raw[i].(string)
			v, _ := raw[i+1].(string)
			h[k] = v
		}
	}
	got, err := s.recordFromHash(rec.ID, h)
	return &UpsertResult{Schedule: got, Created: code == upsertCreated, Changed: code != upsertUnchanged, WorkflowMissing: missing}, err
}

// createdRecord is the schedule upsert.lua created from next, as
// scheduleFromHash reads it back from the hash the script wrote (see
// decodeDef): the definition with its times in whole milliseconds, the
// next fire time nextMS ("" = none), neither paused nor failing. It is
// built without the hash: a map of what was sent, decoded again, was the
// most of what an upsert allocates (issue 28). reuse says that the record
// compiles to the same schedule as next (no time lost its sub-millisecond
// part, the DST policy was canonical), so next's compiled schedule may
// stand for it. ok is false when the hash would not decode (a DST policy
// that does not parse): the caller then decodes the hash, which says why.
// next's target must not be wake (an alarm's fields are decoded from the
// hash). TestCreatedRecordIsWhatTheHashReads holds it to scheduleFromHash.
func createdRecord(next *model.ScheduleRecord, nextMS string) (rec *model.ScheduleRecord, reuse, ok bool) {
	reuse = true
	same := func(a, b time.Time) bool { return a.Equal(b) && a.Location() == b.Location() }
	stored := func(t *time.Time) *time.Time {
		if t == nil {
			return nil
		}
		v := fromMS(ms(*t))
		reuse = reuse && same(v, *t)
		return &v
	}
	rec = &model.ScheduleRecord{
		ID: next.ID, Owner: next.Owner, Kind: next.Kind, Target: next.Target, WorkflowID: next.WorkflowID,
		Version: next.Version, UserID: next.UserID, CronExpr: next.CronExpr, Dialect: next.Dialect, Timezone: next.Timezone,
		EverySeconds: next.EverySeconds, FireAt: stored(next.FireAt), DelaySeconds: next.DelaySeconds,
		StartAt: stored(next.StartAt), EndAt: stored(next.EndAt), JitterMs: next.JitterMs,
		OverlapPolicy: next.OverlapPolicy, CatchupPolicy: next.CatchupPolicy, PauseAfterFailures: next.PauseAfterFailures,
		Anchor: fromMS(ms(next.Anchor)), CreatedAt: fromMS(ms(next.CreatedAt)), UpdatedAt: fromMS(ms(next.UpdatedAt)),
	}
	reuse = reuse && same(rec.Anchor, next.Anchor)
	if p := next.DSTPolicy.String(); p != "" {
		// As decodeDef reads it: a policy is stored as its string.
		var err error
		if rec.DSTPolicy, err = model.ParseDSTPolicy("dst_policy", p); err != nil {
			return nil, false, false
		}
	}
	reuse = reuse && rec.DSTPolicy == next.DSTPolicy
	if t, ok := parseMS(nextMS); ok {
		rec.NextRunAt = &t
	}
	return rec, reuse, true
}
