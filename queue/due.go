package queue

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronos-sched/chronos/model"
)

// DueSchedule is a schedule whose act time has come, decoded, with the
// state its plan is computed from.
type DueSchedule struct {
	ID string
	// Schedule is the schedule's definition and Compiled its compiled
	// form; both nil when the schedule vanished, or when Err. Schedules
	// with equal definitions share them (see defCache), so Schedule has
	// no ID, NextRunAt or Paused, and neither may be changed.
	Schedule *model.ScheduleRecord
	Compiled model.Schedule
	// Next is the next planned fire time not yet emitted; zero if none.
	Next time.Time
	// Inflight is the idempotency key of the schedule's run in flight; ""
	// when none is.
	Inflight string
	// Released marks a "queue" schedule whose in-flight run has ended: its
	// Next waited for that run, so it is due now, not missed.
	Released bool
	// ResumedAt is when the schedule was last resumed or changed its
	// jitter (zero if never). Its runs since then, like those since its
	// creation or last timing change (its record's Anchor), never fire
	// before it: jitter cannot make a run missed that the schedule could
	// never have fired.
	ResumedAt time.Time
	// Err says why the schedule cannot be planned from (a corrupt next
	// time, a definition that no longer decodes or compiles); the
	// scheduler retires it rather than failing its whole shard's tick on
	// every tick.
	Err error

	expect Expectation
	// paused and held: as read, for TickDue's fast path, which leaves
	// such a schedule's plan to commit.lua (it applies none).
	paused, held bool
}

// Expectation is the state of a schedule a plan was computed from: its
// next time, its run in flight and its definition's version. Commit
// applies a plan only while the schedule is still in that state.
type Expectation struct {
	next, inflight, ver string
	// owner is the schedule's owner ("" for a registrar's): a plan that
	// retires an alarm takes it out of its owner's active set, whose key
	// Commit passes in KEYS.
	owner string
}

// Plan returns the plan that retires d (drops it from the due set) if d
// is unchanged since ReadDue: the starting point of every plan, which the
// caller fills with the runs, the next time and its score.
func (d *DueSchedule) Plan() Plan {
	return Plan{ID: d.ID, Expect: d.expect, NewScore: math.Inf(1)}
}

// ReadDue returns up to limit schedules of shard whose act time is at or
// before until. It reads the page's ids first, then in one MULTI/EXEC
// their due scores (ZMSCORE) and their hashes (HGETALL): one snapshot, as
// a script would give, of native commands, which cost Redis far less than
// the same reads made from Lua (a cold burst's read fell from about 105k
// to 30k instructions per run: docs/perf/cold-burst.md). It leaves out a
// schedule no longer due by then; one whose hash is gone comes without a
// schedule (its plan drops the stray member).
func (s *Store) ReadDue(ctx context.Context, shard int, until time.Time, limit int) ([]DueSchedule, error) {
	ids, err := s.rdb.ZRangeByScore(ctx, dueKey(shard), &redis.ZRangeBy{
		Min: "-inf", Max: strconv.FormatInt(ms(until), 10), Count: int64(limit)}).Result()
	if err != nil {
		return nil, fmt.Errorf("read due schedules of shard %d: %w", shard, err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	return s.readDue(ctx, s.rdb, shard, until, ids, true)
}

// readDue reads the schedules ids of shard still due by until, with c: in
// a MULTI/EXEC when multi, else in a plain pipeline that first WATCHes
// their hashes (c is then a Tx: TickDue; an EXEC would end the WATCH).
// In that pipeline the hashes are read by DUMP while the server answers
// it (dumpread.go); a hash whose payload does not read is read again by
// HGETALL on c, still under the WATCH, so a change in between aborts the
// commit as any other would.
func (s *Store) readDue(ctx context.Context, c redis.Cmdable, shard int, until time.Time, ids []string, multi bool) ([]DueSchedule, error) {
	zms := make([]any, 0, len(ids)+2)
	zms = append(zms, "ZMSCORE", dueKey(shard))
	for _, id := range ids {
		zms = append(zms, id)
	}
	var scores *redis.Cmd
	hashes := make([]map[string]string, len(ids))
	hgetall := make([]*redis.MapStringStringCmd, len(ids))
	dumps := !multi && s.dumpReads.Load()
	var dumped []*redis.StringCmd
	if dumps {
		dumped = make([]*redis.StringCmd, len(ids))
	}
	skeys := make([]string, len(ids))
	for i, id := range ids {
		skeys[i] = scheduleKey(shard, id)
	}
	read := func(p redis.Pipeliner) error {
		if !multi {
			watch := make([]any, 0, len(ids)+1)
			watch = append(watch, "WATCH")
			for _, k := range skeys {
				watch = append(watch, k)
			}
			p.Do(ctx, watch...)
		}
		// ZMSCORE by Do: go-redis's ZMScore reads a missing member as 0,
		// which would look due.
		scores = p.Do(ctx, zms...)
		for i, k := range skeys {
			if dumps {
				dumped[i] = p.Dump(ctx, k)
			} else {
				hgetall[i] = p.HGetAll(ctx, k)
			}
		}
		return nil
	}
	var err error
	if multi {
		_, err = c.TxPipelined(ctx, read)
	} else {
		_, err = c.Pipelined(ctx, read)
	}
	if dumps && errors.Is(err, redis.Nil) {
		err = nil // DUMP of a hash that is gone
	}
	if dumps && err != nil && scores.Err() == nil && dumpRefused(dumped) {
		// An ACL that refuses DUMP, say: HGETALL from now on.
		s.dumpReads.Store(false)
		err = nil
	}
	if err != nil {
		return nil, fmt.Errorf("read due schedules of shard %d: %w", shard, err)
	}
	vals, err := scores.Slice()
	if err != nil || len(vals) != len(ids) {
		return nil, fmt.Errorf("read due schedules of shard %d: malformed ZMSCORE reply (%d scores for %d ids): %v", shard, len(vals), len(ids), err)
	}
	if dumps {
		var again []int // schedules whose DUMP does not read
		for i, d := range dumped {
			if d.Err() != nil { // redis.Nil: gone; or refused
				if d.Err() != redis.Nil {
					again = append(again, i)
				}
				continue
			}
			if h, ok := readHashDump(d.Val()); ok {
				hashes[i] = h
			} else {
				again = append(again, i)
			}
		}
		if len(again) > 0 {
			if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, i := range again {
					hgetall[i] = p.HGetAll(ctx, skeys[i])
				}
				return nil
			}); err != nil {
				return nil, fmt.Errorf("read due schedules of shard %d: %w", shard, err)
			}
		}
	}
	untilMS := float64(ms(until))
	out := make([]DueSchedule, 0, len(ids))
	for i, id := range ids {
		if score, ok := scoreOf(vals[i]); !ok || score > untilMS {
			continue // advanced, paused or removed since the ids were read
		}
		d := DueSchedule{ID: id}
		h := hashes[i]
		if hgetall[i] != nil {
			h = hgetall[i].Val()
		}
		if len(h) > 0 {
			s.decodeDue(&d, h)
		}
		out = append(out, d)
	}
	return out, nil
}

// dumpRefused says whether the server answered any of dumped with an
// error of its own (not redis.Nil, not a connection's).
func dumpRefused(dumped []*redis.StringCmd) bool {
	for _, d := range dumped {
		var re redis.Error
		if err := d.Err(); err != nil && err != redis.Nil && errors.As(err, &re) {
			return true
		}
	}
	return false
}

// scoreOf reads a sorted set score as ZMSCORE answers it: a string in
// RESP2, a double in RESP3; nil (not a member) is not ok.
func scoreOf(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case string:
		f, err := strconv.ParseFloat(x, 64)
		return f, err == nil
	}
	return 0, false
}

// decodeDue fills d from its schedule's hash h.
func (s *Store) decodeDue(d *DueSchedule, h map[string]string) {
	d.expect = Expectation{next: h[sfNext], inflight: h[sfInflight], ver: h[sfVer], owner: h[sfOwner]}
	d.Inflight = h[sfInflight]
	d.Released = h[sfReleased] != ""
	d.paused, d.held = h[sfPaused] != "", h[sfHeld] != ""
	d.ResumedAt, _ = parseMS(h[sfResumed])
	if raw := h[sfNext]; raw != "" {
		var ok bool
		if d.Next, ok = parseMS(raw); !ok {
			d.Err = fmt.Errorf("schedule %s: corrupt next fire time %q in Redis", d.ID, raw)
			return
		}
	}
	c, err := s.defs.get(h)
	if err != nil {
		d.Err = fmt.Errorf("schedule %s: %w", d.ID, err)
		return
	}
	d.Schedule, d.Compiled = c.rec, c.sched
}

// defCache keeps decoded, compiled definitions by their canonical form
// (appendDefString), so a schedule firing every second is not parsed again
// every second. It is bounded; when full it starts over, which is cheap
// and keeps memory flat however many schedules there are.
type defCache struct {
	mu  sync.Mutex
	max int
	m   map[string]*compiledDef
}

// defBufs are the buffers defCache.get makes its keys in.
var defBufs = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

type compiledDef struct {
	rec   *model.ScheduleRecord
	sched model.Schedule
}

// defCacheSize bounds the definitions a store keeps compiled.
const defCacheSize = 10000

func newDefCache(max int) *defCache {
	return &defCache{max: max, m: make(map[string]*compiledDef)}
}

// get returns the compiled definition of a schedule's hash h. The key
// is made in a pooled buffer and looked up without a string of its own
// (Go's map index by string(b) does not allocate): only a miss keeps it.
func (c *defCache) get(h map[string]string) (*compiledDef, error) {
	bp := defBufs.Get().(*[]byte)
	b := appendDefString((*bp)[:0], h)
	c.mu.Lock()
	v, ok := c.m[string(b)]
	c.mu.Unlock()
	var def string
	if !ok {
		def = string(b)
	}
	*bp = b
	defBufs.Put(bp)
	if ok {
		return v, nil
	}
	// Schedules with equal definitions share an entry, so the record's ID
	// is left empty: planning takes the id from the due member.
	rec, err := decodeDef("", h)
	if err != nil {
		return nil, err
	}
	sched, err := rec.Compile()
	if err != nil {
		return nil, err
	}
	v = &compiledDef{rec: rec, sched: sched}
	c.mu.Lock()
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[def] = v
	c.mu.Unlock()
	return v, nil
}

// PlannedRun is one run a plan creates.
type PlannedRun struct {
	Key    string
	RunAt  time.Time
	FireAt time.Time
	// Status is ENQUEUED (a task follows) or SKIPPED (recorded only).
	Status model.RunStatus
	Error  string
	// Reason says why a SKIPPED run is not started (model.ReasonOverlap,
	// model.ReasonCatchupDropped). A catchup_dropped run is a record of
	// the missed runs a catch-up dropped: it never ends a run planned
	// before.
	Reason model.RunReason
	// Task is the asynq payload of an ENQUEUED run.
	Task TaskPayload
	// CaughtUp marks a run planned late, by catch-up after it was
	// missed or released late from a hold (for metrics: its FireAt is
	// the time it was planned).
	CaughtUp bool
	// Written is set by Commit: the commit wrote the run's record (and
	// task). Not when the record was there already (the run was planned
	// before) nor when the commit cut the plan short before this run (it
	// is planned again: see commit.lua).
	Written bool
	// Taken is set by Commit: the run was to be ENQUEUED but a manual run
	// holds its idempotency key, so it was recorded SKIPPED
	// (model.ReasonManualKeyTaken) instead.
	Taken bool
}

// Plan is what a scheduler decided for one due schedule.
type Plan struct {
	ID string
	// Expect is the state the plan was computed from (DueSchedule.Plan
	// sets it): the plan applies only while the schedule is in it. The
	// version matters even when next is unchanged: a new timing can share
	// the old one's next fire time but not the times after it.
	Expect Expectation
	// NewNext is the next planned time after this plan; zero retires.
	NewNext time.Time
	// NewScore is the act time for NewNext.
	NewScore float64
	// Inflight, when set, becomes the schedule's in-flight run, failed if
	// it reports no final status by InflightDeadline.
	Inflight         string
	InflightDeadline time.Time
	// Hold parks the schedule until its in-flight run ends.
	Hold bool
	// RetireReason, on a plan that retires its schedule (NewNext zero)
	// for a reason that is an error (no fire time left for a cron alarm,
	// a definition that no longer compiles), fails an alarm with it as
	// its last_error; a registrar's schedule ignores it.
	RetireReason string
	Runs         []PlannedRun
}

// ExpireInflight fails in-flight runs past their deadline (reason
// model.ReasonRunTimeout) and releases their schedules; it returns the
// failed runs' keys.
//
// The schedules past their deadline and the runs they have in flight are
// read first, so the script gets every key it touches in KEYS; it checks
// them again, and leaves one that changed meanwhile to the next call.
func (s *Store) ExpireInflight(ctx context.Context, shard int, now time.Time, limit int, reason string) ([]string, error) {
	ids, err := s.rdb.ZRangeByScore(ctx, inflightKey(shard), &redis.ZRangeBy{
		Min: "-inf", Max: strconv.FormatInt(ms(now), 10), Count: int64(limit)}).Result()
	if err != nil {
		return nil, fmt.Errorf("expire in-flight runs of shard %d: %w", shard, err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	reads := make([]*redis.SliceCmd, len(ids))
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			reads[i] = p.HMGet(ctx, scheduleKey(shard, id), sfInflight, sfOwner)
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("expire in-flight runs of shard %d: %w", shard, err)
	}
	q := s.queue(shard).Keys()
	keys := []string{dueKey(shard), inflightKey(shard), autoPausedKey(shard), q.Scheduled()}
	args := []any{ms(now), reason, string(model.ReasonRunTimeout)}
	for i, id := range ids {
		v := reads[i].Val()
		inflight, _ := v[0].(string)
		owner, _ := v[1].(string)
		skey := scheduleKey(shard, id)
		rkey, tkey, akey := skey, skey, skey
		if inflight != "" {
			rkey, tkey = runKey(shard, inflight), q.Task(inflight)
		}
		if owner != "" {
			akey = alarmsActiveKey(shard, owner)
		}
		keys = append(keys, skey, rkey, tkey, akey, backfillQueueKey(shard, id))
		args = append(args, id, inflight, owner)
	}
	res, err := expireInflightScript.Run(ctx, s.rdb, keys, args...).Slice()
	if err != nil && err != redis.Nil {
		return nil, fmt.Errorf("expire in-flight runs of shard %d: %w", shard, err)
	}
	var failed []string
	if len(res) == 2 {
		failed = stringsOf(res[0])
		for _, id := range stringsOf(res[1]) {
			s.logAutoPaused(ctx, "", AutoPaused{ScheduleID: id, Error: reason})
		}
	}
	s.ledger.count(model.ReasonRunTimeout, len(failed))
	return failed, nil
}
