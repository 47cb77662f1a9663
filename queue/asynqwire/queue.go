package asynqwire

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFiles embed.FS

func luaSource(name string) string {
	b, err := luaFiles.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic("asynqwire: missing embedded script " + name)
	}
	return string(b)
}

// EnqueueLua is a Lua library, not a script: the functions task_live,
// enqueue_task and enqueue_new_task (lua/enqueue_task.lua), for scripts that write a task in
// the same atomic step as their own keys. Put it before such a script.
var EnqueueLua = luaSource("enqueue_task")

// Each script's contract (KEYS, ARGV, output) heads its file in lua/.
// Each opens with a flags line ("#!lua", Redis 7 and later), so a full
// Redis refuses it whole rather than take part of its writes; on a server
// that does not read that line the client must cut it off, as
// queue.NewStore arranges. Then comes ScriptPrelude.
var (
	forwardScript     = newScript("forward")
	takeTasksScript   = newScript("take_tasks")
	finishTaskScript  = newScript("finish_task")
	trimArchiveScript = newScript("trim_archive")
)

const shebang = "#!lua\n"

// ScriptPrelude opens the body of every script of this package: each is
// given every key it touches in KEYS, none built inside Lua, so that a
// Redis Cluster routes it by its keys and a test can check it
// (queuetest.KeyGuard, which recognizes scripts by this line).
const ScriptPrelude = "-- asynqwire: every key in KEYS.\n"

func newScript(name string) *redis.Script {
	return redis.NewScript(shebang + ScriptPrelude + luaSource(name))
}

// RunScript runs a script and returns its reply.
type RunScript func(ctx context.Context, sc *redis.Script, keys []string, args ...any) *redis.Cmd

// Queue is one asynq queue, read and written in asynq's own layout.
type Queue struct {
	rdb       redis.UniversalClient
	keys      Keys
	finish    RunScript
	published atomic.Pointer[time.Time] // when Publish last listed the queue
	// byScript makes each forward compare and set in forward.lua alone
	// (ForwardByScript).
	byScript bool
}

// New returns the queue named name on rdb. Tasks are finished through
// finish, when not nil, so that a caller that pipelines its own scripts
// (the schedule store's batcher) sends a launcher's task ends together
// with its runs' status reports.
func New(rdb redis.UniversalClient, name string, finish RunScript) *Queue {
	q := &Queue{rdb: rdb, keys: Keys{Queue: name}, finish: finish}
	if q.finish == nil {
		q.finish = func(ctx context.Context, sc *redis.Script, keys []string, args ...any) *redis.Cmd {
			return sc.Run(ctx, rdb, keys, args...)
		}
	}
	return q
}

// ForwardByScript makes the queue's forwards move tasks through
// forward.lua alone, with no MULTI/EXEC tried first, for a server whose
// WATCH misses some writes: miniredis lets a transaction run after
// another connection removed a member of the watched set, so two
// forwarders would both push a task. Call it before the queue is used.
func (q *Queue) ForwardByScript() { q.byScript = true }

// Name returns the queue's name.
func (q *Queue) Name() string { return q.keys.Queue }

// Keys returns the queue's key layout.
func (q *Queue) Keys() Keys { return q.keys }

// Publish lists the queue in AllQueues, where asynq's server, Inspector
// and asynqmon find queues: at most once a second, so a Redis restarted
// empty lists it again. It is a command of its own because that set is
// not in the queue's hash slot.
func (q *Queue) Publish(ctx context.Context) error {
	if at := q.published.Load(); at != nil && time.Since(*at) < time.Second {
		return nil
	}
	if err := q.rdb.SAdd(ctx, AllQueues, q.keys.Queue).Err(); err != nil {
		return fmt.Errorf("register asynq queue %s: %w", q.keys.Queue, err)
	}
	now := time.Now()
	q.published.Store(&now)
	return nil
}

// ScheduledScore is the score in the Scheduled set of a task to run at
// t: asynq's scores are whole seconds, so a time within a second is
// rounded up and a task never starts before its time.
func ScheduledScore(t time.Time) int64 { return t.Add(time.Second - time.Nanosecond).Unix() }

// ForwardBatch is how many due tasks one forward moves at most: one
// MULTI/EXEC, or one script call when that falls back. Redis runs either
// whole and answers no one else meanwhile: 500 in the transaction take
// it about 1.5 ms, where calls of 4,000 in the script held a PING 22-37
// ms (p99, the warm burst at 100k). Smaller batches cost Redis no more
// per task (BenchmarkForwardRedisCost at 100k: 4.2-4.5 µs a task at 500
// and at 1,000, PING p99 4 ms against 8-9 ms); Set.Forward keeps a few
// in flight so Redis does not idle between them.
const ForwardBatch = 500

// Forward makes the tasks scheduled at or before now runnable (Scheduled
// set to Pending list), as asynq's forwarder does, and says how many it
// moved. Several callers at once are harmless: each call moves a task
// once. Pass the clock the tasks' times were scored by: chronos scores a
// run by its fire time on the shared clock.
func (q *Queue) Forward(ctx context.Context, now time.Time) (int, error) {
	return q.forward(ctx, q.keys.Scheduled(), now, now)
}

// ForwardRetries makes the tasks to retry at or before now runnable (Retry
// set to Pending list), as asynq's forwarder does. A retry's time is
// scored by the host that finished the failed attempt (Finish's retryAt)
// or recovered it (Recover), so now is the host's clock.
func (q *Queue) ForwardRetries(ctx context.Context, now time.Time) (int, error) {
	return q.forward(ctx, q.keys.Retry(), now, now)
}

// forward moves the tasks of from scored at or before due, batch by
// batch, stamping them pending since now.
func (q *Queue) forward(ctx context.Context, from string, due, now time.Time) (int, error) {
	total := 0
	for {
		n, read, err := q.forwardBatch(ctx, from, due, now)
		total += n
		if err != nil || read < ForwardBatch {
			return total, err
		}
	}
}

// forwardBatch moves up to ForwardBatch due tasks of from, and says how
// many it moved and how many it read due: by a transaction (forwardTx)
// and, when from changed since it was read, by forward.lua, which moves
// the ids read that are still due. A queue that forwards by script
// (ForwardByScript) reads the ids and calls the script alone.
func (q *Queue) forwardBatch(ctx context.Context, from string, due, now time.Time) (moved, read int, err error) {
	var (
		ids     []string
		changed bool
	)
	if q.byScript {
		ids, err = q.rdb.ZRangeByScore(ctx, from, dueRange(due)).Result()
		changed = len(ids) > 0
	} else {
		ids, changed, err = q.forwardTx(ctx, from, due, now)
	}
	if err != nil {
		return 0, len(ids), fmt.Errorf("forward due tasks of %s: %w", q.keys.Queue, err)
	}
	if !changed {
		return len(ids), len(ids), nil
	}
	moved, err = forwardScript.Run(ctx, q.rdb, q.forwardKeys(from, ids), forwardArgs(due, now, ids)...).Int()
	if err != nil {
		return moved, len(ids), fmt.Errorf("forward due tasks of %s: %w", q.keys.Queue, err)
	}
	return moved, len(ids), nil
}

// forwardTx WATCHes from, reads the ids due, and moves them with native
// commands in one MULTI/EXEC: per task HSET of state and pending_since,
// then one ZREMRANGEBYRANK and one LPUSH, what forward.lua does. Redis runs the EXEC
// only if from is as it was read, so the ids read are still there and
// due, and none was moved by another forwarder since: that is the
// script's per-id check, made once for the batch. Without Lua, a task
// costs Redis about half the script's instructions
// (BenchmarkForwardRedisCost). changed says the EXEC wrote nothing
// because from changed (another forwarder, a task written ahead or a
// retry meanwhile).
func (q *Queue) forwardTx(ctx context.Context, from string, due, now time.Time) (ids []string, changed bool, err error) {
	nowNS := now.UnixNano()
	err = q.rdb.Watch(ctx, func(tx *redis.Tx) error {
		var err error
		if ids, err = tx.ZRangeByScore(ctx, from, dueRange(due)).Result(); err != nil || len(ids) == 0 {
			return err
		}
		members := make([]any, len(ids))
		for i, id := range ids {
			members[i] = id
		}
		cmds, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			for _, id := range ids {
				p.HSet(ctx, q.keys.Task(id), "state", "pending", "pending_since", nowNS)
			}
			// The ids read are the set's first len(ids) by rank (due
			// first, and the set is as it was read), so one range by rank
			// removes them: no member to parse and find, 1.3k Redis
			// instructions a task fewer than a ZREM of each
			// (BenchmarkForwardRedisCost, callgrind).
			p.ZRemRangeByRank(ctx, from, 0, int64(len(ids)-1))
			p.LPush(ctx, q.keys.Pending(), members...)
			return nil
		})
		if errors.Is(err, redis.TxFailedErr) {
			changed = true
			return nil
		}
		if redis.IsExecAbortError(err) {
			// A command was refused as it was queued (a full Redis:
			// OOM), so nothing was written; say why.
			for _, c := range cmds {
				if e := c.Err(); e != nil && !redis.IsExecAbortError(e) {
					return e
				}
			}
		}
		return err
	}, from)
	return ids, changed, err
}

// dueRange selects the first ForwardBatch tasks due at due in a
// scheduled or retry set (scored in unix s).
func dueRange(due time.Time) *redis.ZRangeBy {
	return &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(due.Unix(), 10), Count: ForwardBatch}
}

// forwardKeys are the forward script's keys for the ids read due in from.
func (q *Queue) forwardKeys(from string, ids []string) []string {
	keys := make([]string, 0, 2+len(ids))
	keys = append(keys, from, q.keys.Pending())
	for _, id := range ids {
		keys = append(keys, q.keys.Task(id))
	}
	return keys
}

func forwardArgs(due, now time.Time, ids []string) []any {
	args := make([]any, 0, 2+len(ids))
	args = append(args, due.Unix(), now.UnixNano())
	for _, id := range ids {
		args = append(args, id)
	}
	return args
}

// LeaseDuration is how long a taken task is held before it may be
// recovered (Recover; LeaseSlack later): asynq's own lease. Whoever takes tasks extends their
// leases well within it (ExtendLeases).
const LeaseDuration = 30 * time.Second

// defaultTaskTimeout bounds an attempt of a task with neither a timeout
// nor a deadline, as asynq's server does.
const defaultTaskTimeout = 30 * time.Minute

// Task is a task taken off the queue (Take) and held until Finish.
type Task struct {
	// ID is the task's id.
	ID string
	// Type and Payload are the task's, as asynq.NewTask was given them.
	Type    string
	Payload []byte
	// Err says why the task's message could not be read; then only ID
	// is set.
	Err error
	// Retried counts the attempts that failed before; MaxRetry is how
	// many retries the task has.
	Retried, MaxRetry int
	// Deadline ends this attempt, as asynq's server would end it.
	Deadline time.Time

	msg       []byte
	retention int64  // seconds the task is kept completed
	queue     *Queue // the queue it was taken from
}

// Queue returns the name of the queue the task was taken from.
func (t *Task) Queue() string { return t.queue.keys.Queue }

// Take takes up to n tasks off the Pending list, as asynq's server
// takes one: each moves to the Active list with a lease until
// LeaseDuration from now, so it is recovered (Recover) if the taker dies
// holding it. None are taken while the queue is paused. It reads
// the ids at the list's end first, then takes them (take_tasks.lua);
// when others changed the list's end in between it reads again, up to
// takeTries times.
func (q *Queue) Take(ctx context.Context, n int) ([]*Task, error) {
	for try := 1; ; try++ {
		ids, err := q.rdb.LRange(ctx, q.keys.Pending(), int64(-(n + idsSlack(n))), -1).Result()
		if err != nil {
			return nil, fmt.Errorf("read pending tasks of %s: %w", q.keys.Queue, err)
		}
		if len(ids) == 0 {
			return nil, nil
		}
		ids = popOrder(ids)
		now := time.Now() // leases go by host clocks, as asynq's servers' do
		v, err := takeTasksScript.Run(ctx, q.rdb, q.takeKeys(ids), takeArgs(n, now, ids)...).StringSlice()
		if err != nil {
			return nil, fmt.Errorf("take tasks of %s: %w", q.keys.Queue, err)
		}
		tasks, _, stale := q.taken(v, now)
		if !stale || try == takeTries {
			return tasks, nil
		}
	}
}

// takeTries bounds the reads of one Take whose ids others took first.
const takeTries = 3

// popOrder returns the ids of an LRANGE at a pending list's end in the
// order asynq pops them: the last one first.
func popOrder(ids []string) []string {
	slices.Reverse(ids)
	return ids
}

// takeKeys are the take script's keys for the ids read at the end of the
// pending list, in pop order.
func (q *Queue) takeKeys(ids []string) []string {
	k := q.keys
	keys := make([]string, 0, 4+len(ids))
	keys = append(keys, k.Pending(), k.Paused(), k.Active(), k.Lease())
	for _, id := range ids {
		keys = append(keys, k.Task(id))
	}
	return keys
}

func takeArgs(n int, now time.Time, ids []string) []any {
	args := make([]any, 0, 2+len(ids))
	args = append(args, now.Add(LeaseDuration).Unix(), n)
	for _, id := range ids {
		args = append(args, id)
	}
	return args
}

// taken reads the take script's reply: the tasks taken at now, how many
// of the ids read others had taken first, and whether the list's end was
// none of them (stale: nothing taken, read again).
func (q *Queue) taken(v []string, now time.Time) (tasks []*Task, skipped int, stale bool) {
	if len(v) == 0 {
		return nil, 0, false
	}
	skipped, _ = strconv.Atoi(v[0])
	if skipped < 0 {
		return nil, 0, true
	}
	v = v[1:]
	tasks = make([]*Task, 0, len(v)/2)
	for i := 0; i+1 < len(v); i += 2 {
		t := &Task{ID: v[i], msg: []byte(v[i+1]), Deadline: now.Add(defaultTaskTimeout), queue: q}
		tasks = append(tasks, t)
		m, err := DecodeMessage(t.msg)
		if err != nil {
			t.Err = fmt.Errorf("task %s: %w", t.ID, err)
			continue
		}
		t.Type, t.Payload = m.Type, m.Payload
		t.Retried, t.MaxRetry, t.retention = int(m.Retried), int(m.Retry), m.Retention
		switch {
		case m.Timeout > 0 && m.Deadline > 0:
			t.Deadline = time.Unix(min(now.Unix()+m.Timeout, m.Deadline), 0)
		case m.Timeout > 0:
			t.Deadline = now.Add(time.Duration(m.Timeout) * time.Second)
		case m.Deadline > 0:
			t.Deadline = time.Unix(m.Deadline, 0)
		}
	}
	return tasks, skipped, false
}

// ExtendLeases extends the leases of taken tasks still held to
// LeaseDuration from now, as asynq's server does every few seconds for
// the tasks it runs. A task no longer leased is left alone.
func (q *Queue) ExtendLeases(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	exp := float64(time.Now().Add(LeaseDuration).Unix())
	zs := make([]redis.Z, len(ids))
	for i, id := range ids {
		zs[i] = redis.Z{Member: id, Score: exp}
	}
	if err := q.rdb.ZAddXX(ctx, q.keys.Lease(), zs...).Err(); err != nil {
		return fmt.Errorf("extend leases of %d tasks: %w", len(ids), err)
	}
	return nil
}

// End is how a taken task is finished.
type End string

const (
	// Done: the task succeeded; it is kept completed for its retention.
	Done End = "done"
	// Retry: the attempt failed; asynq runs it again at a time.
	Retry End = "retry"
	// Archive: the task failed for good.
	Archive End = "archive"
	// Requeue: the taker is stopping; the task goes back to the head of
	// the queue, not counted as an attempt.
	Requeue End = "requeue"
)

// asynq's limits on its archive: tasks archived this long ago, and
// beyond this many, are deleted.
const (
	archiveMaxAge  = 90 * 24 * time.Hour
	archiveMaxSize = 10000
)

// statsTTL is how long asynq keeps a day's processed and failed counts.
const statsTTL = 90 * 24 * time.Hour

// Finish finishes a taken task as asynq's server finishes the tasks it
// runs, with the same states and dashboard counters: end says how;
// errMsg is the failed attempt's error (Retry, Archive) and retryAt when
// a retry is due. It says false when the task was no longer held: its
// lease expired and it was recovered (Recover).
func (q *Queue) Finish(ctx context.Context, t *Task, end End, retryAt time.Time, errMsg string) (bool, error) {
	now := time.Now()
	keys, args, err := t.FinishCall(end, retryAt, errMsg, now)
	if err != nil {
		return false, err
	}
	n, err := q.finish(ctx, finishTaskScript, keys, args...).Int()
	if err != nil {
		return false, fmt.Errorf("finish task %s (%s): %w", t.ID, end, err)
	}
	if n == 1 && end == Archive {
		if err := q.trimArchive(ctx, now); err != nil {
			return true, fmt.Errorf("finish task %s (%s): %w", t.ID, end, err)
		}
	}
	return n == 1, nil
}

// FinishLua is lua/finish_task.lua, for a script of another package that
// finishes a task in the same atomic step as its own writes (the schedule
// store's status and task end of a launched run): it is a script's body,
// to be wrapped as a function of KEYS and ARGV. Its KEYS and ARGV are
// FinishCall's. It does not trim the archive (Archive needs Finish).
var FinishLua = luaSource("finish_task")

// FinishCall returns the keys and arguments of the script that finishes
// t as end at now (lua/finish_task.lua), for Finish and for FinishLua's
// callers.
func (t *Task) FinishCall(end End, retryAt time.Time, errMsg string, now time.Time) ([]string, []any, error) {
	k := t.queue.keys
	var (
		dest  string
		score string
		msg   []byte
	)
	switch end {
	case Done:
		if t.retention > 0 {
			dest, score = k.Completed(), strconv.FormatInt(now.Unix()+t.retention, 10)
			msg = withFields(t.msg, field{num: completedAtField, v: now.Unix()})
		}
	case Retry:
		dest, score = k.Retry(), strconv.FormatInt(retryAt.Unix(), 10)
		msg = withFields(t.msg, field{num: retriedField, v: int64(t.Retried) + 1},
			field{num: errorMsgField, s: errMsg, str: true}, field{num: lastFailedAtField, v: now.Unix()})
	case Archive:
		dest, score = k.Archived(), strconv.FormatInt(now.Unix(), 10)
		msg = withFields(t.msg, field{num: errorMsgField, s: errMsg, str: true},
			field{num: lastFailedAtField, v: now.Unix()})
	case Requeue:
		dest = k.Pending()
	default:
		return nil, nil, fmt.Errorf("finish task %s: unknown end %q", t.ID, end)
	}
	if dest == "" {
		dest = k.Completed() // unused: a done task without retention is deleted
	}
	return []string{k.Active(), k.Lease(), k.Task(t.ID), dest, k.Processed(now), k.Failed(now), k.ProcessedTotal(), k.FailedTotal()},
		[]any{t.ID, string(end), score, msg, now.Add(statsTTL).Unix()}, nil
}

// trimArchive trims the archived set as asynq does after each task it
// archives (archiveMaxAge, archiveMaxSize): it reads the ids to drop,
// then drops them with their task hashes (trim_archive.lua), and reads
// again while tasks archived meanwhile are left to drop, up to
// takeTries times; the next archive trims the rest.
func (q *Queue) trimArchive(ctx context.Context, now time.Time) error {
	k := q.keys
	cutoff := now.Add(-archiveMaxAge).Unix()
	for try := 1; try <= takeTries; try++ {
		var old, over *redis.StringSliceCmd
		if _, err := q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			old = p.ZRangeByScore(ctx, k.Archived(), &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(cutoff, 10)})
			over = p.ZRange(ctx, k.Archived(), 0, -archiveMaxSize-1)
			return nil
		}); err != nil {
			return fmt.Errorf("read archived tasks to trim in %s: %w", k.Queue, err)
		}
		ids := slices.Compact(slices.Sorted(slices.Values(append(old.Val(), over.Val()...))))
		if len(ids) == 0 {
			return nil
		}
		keys := []string{k.Archived()}
		args := []any{cutoff, archiveMaxSize}
		for _, id := range ids {
			keys, args = append(keys, k.Task(id)), append(args, id)
		}
		left, err := q.finish(ctx, trimArchiveScript, keys, args...).Int()
		if err != nil {
			return fmt.Errorf("trim archived tasks of %s: %w", k.Queue, err)
		}
		if left == 0 {
			return nil
		}
	}
	return nil
}

// ArchivedTask is a task asynq archived: it will not be tried again.
type ArchivedTask struct {
	ID         string
	Type       string
	Payload    []byte
	LastErr    string
	ArchivedAt time.Time
}

// archivedPage is how many archived tasks Archived reads per round trip.
const archivedPage = 500

// Archived returns the tasks archived at or after since, and the since
// to pass next time. asynq keeps at most 10,000 archived tasks, so the
// answer is bounded; those archived within since's second come again
// next time. Tasks are read in pipelined pages (asynq's Inspector reads
// one task per call); one whose message does not decode is left out.
func (q *Queue) Archived(ctx context.Context, since time.Time) ([]ArchivedTask, time.Time, error) {
	k := q.keys
	zs, err := q.rdb.ZRangeByScoreWithScores(ctx, k.Archived(), &redis.ZRangeBy{
		Min: strconv.FormatInt(since.Unix(), 10), Max: "+inf",
	}).Result()
	if err != nil {
		return nil, since, fmt.Errorf("read archived tasks of %s: %w", k.Queue, err)
	}
	var out []ArchivedTask
	next := since
	for page := range slices.Chunk(zs, archivedPage) {
		cmds := make([]*redis.SliceCmd, len(page))
		if _, err := q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, z := range page {
				cmds[i] = p.HMGet(ctx, k.Task(z.Member.(string)), "state", "msg")
			}
			return nil
		}); err != nil {
			return nil, since, fmt.Errorf("read archived tasks of %s: %w", k.Queue, err)
		}
		for i, z := range page {
			at := time.Unix(int64(z.Score), 0)
			next = at
			v := cmds[i].Val()
			state, _ := v[0].(string)
			raw, _ := v[1].(string)
			if state != "archived" {
				continue // deleted or re-queued since
			}
			m, err := DecodeMessage([]byte(raw))
			if err != nil {
				continue
			}
			out = append(out, ArchivedTask{ID: z.Member.(string), Type: m.Type, Payload: m.Payload, LastErr: m.ErrorMsg, ArchivedAt: at})
		}
	}
	return out, next, nil
}
