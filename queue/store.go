package queue

import (
	"context"
	"crypto/rand"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue/asynqwire"
)

// Store is the schedule store: schedules, their due sets, run records,
// workflows and the tasks of runs, in Redis.
type Store struct {
	rdb             redis.UniversalClient
	clock           Clock
	cfg             Config
	batch           *batcher           // upserts of concurrent API requests
	ends            *endGatherer       // launched runs' ends, written together (FinishLaunched)
	queues          []*asynqwire.Queue // each shard's run queue (ShardQueue)
	tasks           *asynqwire.Set     // the shards' run queues and the legacy one
	defs            *defCache          // compiled definitions of due schedules
	scriptFlags     bool               // Redis refuses a writing script whole when full
	watchSeesWrites bool               // compare-and-sets may trust WATCH (watchprobe.go)
	restoreRecords  atomic.Bool        // TickDue's fast path RESTOREs run records (recorddump.go)
	restoreProbe    sync.Once          // sets restoreRecords at the first fast commit (restoresRecords)
	dumpReads       atomic.Bool        // TickDue's fast path reads schedules by DUMP (dumpread.go)
	ledger          *ledgerMetrics     // SKIPPED and FAILED runs by reason (RegisterMetrics)
	fastPages       atomic.Int64       // chunks TickDue committed in its fast path (tests)
}

// NewStore returns a Store on rdb. It checks the recorded shard count so
// that processes configured differently cannot split one keyspace two ways.
func NewStore(ctx context.Context, rdb redis.UniversalClient, clock Clock, cfg *Config) (*Store, error) {
	c := cfg.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	flags, err := adaptScriptFlags(ctx, rdb)
	if err != nil {
		return nil, err
	}
	if err := rdb.HSetNX(ctx, metaKey, metaShards, c.Shards).Err(); err != nil {
		return nil, fmt.Errorf("record shard count in %s: %w", metaKey, err)
	}
	got, err := rdb.HGet(ctx, metaKey, metaShards).Int()
	if err != nil {
		return nil, fmt.Errorf("read shard count from %s: %w", metaKey, err)
	}
	if got != c.Shards {
		return nil, fmt.Errorf("SHARDS=%d but this Redis was set up with %d shards: use SHARDS=%d (changing it needs a migration)", c.Shards, got, got)
	}
	watch, err := watchSeesWrites(ctx, rdb)
	if err != nil {
		return nil, err
	}
	b := &batcher{rdb: rdb}
	s := &Store{rdb: rdb, clock: clock, cfg: c, batch: b, defs: newDefCache(defCacheSize), scriptFlags: flags,
		watchSeesWrites: watch, ledger: newLedgerMetrics()}
	s.dumpReads.Store(watch)
	s.ends = &endGatherer{s: s}
	newQueue := func(name string) *asynqwire.Queue {
		q := asynqwire.New(rdb, name, b.runScript)
		if !watch {
			q.ForwardByScript()
		}
		return q
	}
	s.queues = make([]*asynqwire.Queue, c.Shards)
	for i := range s.queues {
		s.queues[i] = newQueue(ShardQueue(c.QueueName, i))
	}
	s.tasks = asynqwire.NewSet(rdb, s.queues, newQueue(c.QueueName))
	if err := s.tasks.Publish(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Tasks returns the run queues: asynq's queue of run tasks of each shard
// (ShardQueue), and the single queue (Config.QueueName) where runs were
// enqueued before, which launchers drain. Task ends go through the
// store's batcher with the runs' status reports.
func (s *Store) Tasks() *asynqwire.Set { return s.tasks }

// RunQueue returns shard sh's run queue (ShardQueue).
func (s *Store) RunQueue(sh int) *asynqwire.Queue { return s.queues[sh] }

// queue is shard sh's run queue.
func (s *Store) queue(sh int) *asynqwire.Queue { return s.queues[sh] }

// Config returns the store's effective configuration.
func (s *Store) Config() Config { return s.cfg }

// Clock returns the store's clock.
func (s *Store) Clock() Clock { return s.clock }

// Redis returns the underlying client.
func (s *Store) Redis() redis.UniversalClient { return s.rdb }

// Ping checks that Redis answers, giving up when ctx ends.
func (s *Store) Ping(ctx context.Context) error {
	return bounded(ctx, func(ctx context.Context) error { return s.rdb.Ping(ctx).Err() })
}

// ScriptFlags reports whether Redis understands script flags (Redis 7
// and later), and so refuses each writing script as a whole when it is
// full. Without them (miniredis, Redis 6) a script on a full Redis may
// write part of its work.
func (s *Store) ScriptFlags() bool { return s.scriptFlags }

// CheckWritable checks that Redis answers and takes writes: it runs a
// script that declares writes and writes nothing, which a full Redis
// refuses (IsFull) and a read-only replica too. It gives up when ctx
// ends.
func (s *Store) CheckWritable(ctx context.Context) error {
	return bounded(ctx, func(ctx context.Context) error { return writableProbe.Run(ctx, s.rdb, nil).Err() })
}

// writableProbe writes nothing but is refused where a write would be.
var writableProbe = redis.NewScript(shebangWrites + "\nreturn 1")

// bounded runs fn, a Redis call, and returns its error, or ctx's as soon
// as ctx ends: go-redis waits for its own socket timeouts and retries
// (seconds) whatever the context's deadline (see newRedis in
// cmd/chronos), and a probe or a scrape must answer within its own. fn
// goes on in the background until go-redis gives up.
func bounded(ctx context.Context, fn func(context.Context) error) error {
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Store) shard(id string) int { return ShardOf(id, s.cfg.Shards) }

// ms is the store's time encoding: Unix milliseconds.
func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

// parseMS reads a time stored as Unix milliseconds; false when s is
// empty or not a number.
func parseMS(s string) (time.Time, bool) {
	if s == "" {
		return time.Time{}, false // most optional fields are absent: no error to make
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return fromMS(n), true
}

// ActLead is how long before a fire time a scheduler acts on it: the
// lookahead for "allow" (its task is enqueued ahead), nothing for "skip"
// and "queue" (their overlap is decided when the run is due), plus the
// jitter so a negative offset can still be honoured.
func (s *Store) ActLead(rec *model.ScheduleRecord) time.Duration {
	lead := time.Duration(rec.JitterMs) * time.Millisecond
	if rec.OverlapPolicy == model.OverlapAllow {
		lead += s.cfg.Lookahead
	}
	return lead
}

// timingHash is a short digest of the record's TimingKey.
func timingHash(r *model.ScheduleRecord) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(r.TimingKey()))
	return strconv.FormatUint(h.Sum64(), 36)
}

// boolArg passes a flag to a script: flagSet, or "0".
func boolArg(b bool) string {
	if b {
		return flagSet
	}
	return "0"
}

// GetSchedule loads one schedule of the registrar. An agent's alarm is
// ErrNotFound, as if it did not exist: its owner reads it with GetAlarm.
func (s *Store) GetSchedule(ctx context.Context, id string) (*model.ScheduleRecord, error) {
	h, err := s.rdb.HGetAll(ctx, scheduleKey(s.shard(id), id)).Result()
	if err != nil {
		return nil, fmt.Errorf("load schedule %s: %w", id, err)
	}
	if h[sfTarget] == targetWake {
		return nil, fmt.Errorf("schedule %s: %w", id, ErrNotFound)
	}
	return s.recordFromHash(id, h)
}

// scheduleFromHash builds a record from its hash as stored: NextRunAt is
// the next time not yet planned.
func scheduleFromHash(id string, h map[string]string) (*model.ScheduleRecord, error) {
	if h[sfCreated] == "" {
		return nil, fmt.Errorf("schedule %s: %w", id, ErrNotFound)
	}
	rec, err := decodeDef(id, h)
	if err != nil {
		return nil, err
	}
	if t, ok := parseMS(h[sfNext]); ok {
		rec.NextRunAt = &t
	}
	rec.Paused = h[sfPaused] != ""
	decodePauseState(rec, h)
	return rec, nil
}

// recordFromHash builds a record from its hash for users: NextRunAt is the
// earlier of the next time not yet planned and the next fire time after
// now, runs within the act lead (lookahead, jitter) being planned already
// but not fired. So a schedule whose last run is planned but has not
// fired is not shown completed yet.
func (s *Store) recordFromHash(id string, h map[string]string) (*model.ScheduleRecord, error) {
	rec, err := scheduleFromHash(id, h)
	if err != nil {
		return rec, err
	}
	if sched, err := rec.Compile(); err == nil {
		s.showNext(rec, sched)
	}
	return rec, nil
}

// showNext sets rec.NextRunAt to what users are shown (see
// recordFromHash); sched is rec compiled.
func (s *Store) showNext(rec *model.ScheduleRecord, sched model.Schedule) {
	now := s.clock.Now()
	n := sched.Next(now)
	switch {
	case n.IsZero():
	case rec.NextRunAt != nil && n.Before(*rec.NextRunAt),
		rec.NextRunAt == nil && !n.After(now.Add(s.ActLead(rec))):
		rec.NextRunAt = &n
	}
}

// SetPaused pauses or resumes a schedule. Resuming continues at the next
// fire time after now: paused time is not caught up. An agent's alarm is
// ErrNotFound: its owner cancels it.
func (s *Store) SetPaused(ctx context.Context, id string, paused bool) (*model.ScheduleRecord, error) {
	rec, _, err := s.ChangePause(ctx, id, PauseChange{Paused: paused})
	return rec, err
}

// ChangePause pauses or resumes a schedule as c says (SetPaused with a
// note, or a resume's replay: see PauseChange). The replay's answer is
// nil unless c.Replay.
func (s *Store) ChangePause(ctx context.Context, id string, c PauseChange) (*model.ScheduleRecord, *BackfillResult, error) {
	// Resuming computes the next time from the definition read first; an
	// upsert in between would leave the new definition with the old one's
	// next time, so the script checks the version and a change is retried.
	for range setPausedTries {
		res, err := s.setPaused(ctx, id, c)
		if err != nil {
			return nil, nil, err
		}
		switch res {
		case pauseNotFound:
			return nil, nil, fmt.Errorf("schedule %s: %w", id, ErrNotFound)
		case pauseStale:
			continue
		}
		var replayed *BackfillResult
		if !c.Paused && c.Replay != nil {
			if replayed, err = s.replay(ctx, id, *c.Replay); err != nil {
				return nil, nil, err
			}
		}
		rec, err := s.GetSchedule(ctx, id)
		return rec, replayed, err
	}
	return nil, nil, fmt.Errorf("schedule %s changed %d times while it was being resumed: %w", id, setPausedTries, ErrConflict)
}

// setPausedTries bounds SetPaused's retries when upserts keep changing the
// schedule under it.
const setPausedTries = 10

// setPaused runs the pause script once and returns its answer
// (pauseNotFound, pauseStale, pauseSame or pauseChanged).
func (s *Store) setPaused(ctx context.Context, id string, c PauseChange) (int, error) {
	paused := c.Paused
	sh := s.shard(id)
	// The history too, in the same round trip: a pause settles its runs,
	// whose keys the script gets in KEYS (it answers pauseStale if the
	// history changed since).
	var hc *redis.MapStringStringCmd
	var runs *redis.StringSliceCmd
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		hc = p.HGetAll(ctx, scheduleKey(sh, id))
		runs = p.ZRange(ctx, historyKey(sh, id), 0, -1)
		return nil
	}); err != nil {
		return 0, fmt.Errorf("load schedule %s: %w", id, err)
	}
	h := hc.Val()
	if h[sfTarget] == targetWake {
		return pauseNotFound, nil // the script says so too, should it become one in between
	}
	rec, err := scheduleFromHash(id, h)
	if err != nil {
		return 0, err
	}
	nextMS, score, replay := "", "+inf", ""
	now := s.clock.Now()
	if !paused && c.Replay != nil && rec.Paused {
		if replay, err = replayRange(rec, now, c.Replay.MaxRuns); err != nil {
			return 0, err
		}
	}
	if !paused {
		sched, err := rec.Compile()
		if err != nil {
			return 0, err
		}
		if t := sched.Next(now); !t.IsZero() {
			nextMS = strconv.FormatInt(ms(t), 10)
			score = strconv.FormatInt(ms(t.Add(-s.ActLead(rec))), 10)
		}
	}
	q := s.queue(sh).Keys()
	keys := []string{scheduleKey(sh, id), dueKey(sh), inflightKey(sh), historyKey(sh, id), q.Pending(), q.Scheduled(),
		backfillQueueKey(sh, id)}
	args := []any{id, boolArg(paused), nextMS, score, h[sfVer], ms(now), "", "", cut(c.Note, model.MaxRunErrorLen), replay}
	if paused {
		keys, args = withHistory(sh, q, keys, args, runs.Val())
	}
	v, err := pauseScript.Run(ctx, s.rdb, keys, args...).Result()
	if err != nil {
		return 0, fmt.Errorf("pause schedule %s: %w", id, err)
	}
	res, skipped := codeAndCount(v)
	s.ledger.count(model.ReasonPaused, skipped)
	return res, nil
}

// DeleteSchedule removes a schedule; its runs stay readable for the run
// retention. An agent's alarm is ErrNotFound: its owner cancels it.
func (s *Store) DeleteSchedule(ctx context.Context, id string) error {
	sh := s.shard(id)
	q := s.queue(sh).Keys()
	nonce := rand.Text()
	var v any
	// The history is read first, so the script gets its runs' keys in
	// KEYS; it answers deleteStale if the history changed since.
	for try := 1; ; try++ {
		runs, err := s.rdb.ZRange(ctx, historyKey(sh, id), 0, -1).Result()
		if err != nil {
			return fmt.Errorf("delete schedule %s: %w", id, err)
		}
		keys, args := withHistory(sh, q,
			[]string{scheduleKey(sh, id), dueKey(sh), inflightKey(sh), historyKey(sh, id), deletedKey(sh, id), q.Pending(), q.Scheduled(),
				backfillQueueKey(sh, id)},
			[]any{id, "", int64(s.cfg.RunRetention / time.Second), nonce, ms(s.clock.Now()), ""}, runs)
		if v, err = deleteScript.Run(ctx, s.rdb, keys, args...).Result(); err != nil {
			return fmt.Errorf("delete schedule %s: %w", id, err)
		}
		if n, ok := v.(int64); !ok || n != deleteStale {
			break
		}
		if try == historyTries {
			return fmt.Errorf("delete schedule %s: its run history changed %d times while it was deleted: %w", id, try, ErrConflict)
		}
	}
	n, skipped := codeAndCount(v)
	s.ledger.count(model.ReasonDeleted, skipped)
	if n == deleteNotFound {
		return fmt.Errorf("schedule %s: %w", id, ErrNotFound)
	}
	return nil
}

// scoreString formats a due-set score for ZADD.
func scoreString(f float64) string {
	if math.IsInf(f, 1) {
		return "+inf"
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// historyTries bounds the calls of a script that gets a run history's
// keys (delete.lua, upsert.lua) when commits keep changing the history
// between the read and the script.
const historyTries = 10

// withHistory appends to a script's keys and args the run history its
// caller read (runs, in order): per run its hash and its asynq task hash
// in keys; the count, then the members, in args. The script checks the
// history is still runs (run_history_keys, run_record.lua).
func withHistory(sh int, q asynqwire.Keys, keys []string, args []any, runs []string) ([]string, []any) {
	args = append(args, len(runs))
	for _, k := range runs {
		keys = append(keys, runKey(sh, k), q.Task(k))
		args = append(args, k)
	}
	return keys, args
}
