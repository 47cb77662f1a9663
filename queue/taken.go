package queue

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// A launcher takes run tasks off asynq's queue many at a time, with their
// run records, schedules and DAGs read in one more round trip, and
// finishes them through the store's batcher: asynq's server would take
// and finish them one at a time, two round trips per run, which on a small
// machine cost more than the run itself (README, "Where the time goes").
// Every task is taken and finished exactly as asynq's server would do it
// (take_tasks.lua, finish_task.lua), so asynq's servers recover the tasks
// of a launcher that dies, forward retries, and asynqmon shows it all.

// LeaseDuration is how long a taken task is held before an asynq server
// may recover it: asynq's own lease. A launcher extends the leases of the
// tasks it holds well within it (ExtendTaskLeases).
const LeaseDuration = 30 * time.Second

// defaultTaskTimeout bounds an attempt of a task with neither a timeout
// nor a deadline, as asynq's server does.
const defaultTaskTimeout = 30 * time.Minute

// TakenTask is a run task a launcher took and holds until it finishes it.
type TakenTask struct {
	// ID is the task's id: the run's idempotency key.
	ID string
	// Payload is the task's payload (DecodeTaskPayload), nil when it does
	// not decode.
	Payload *TaskPayload
	// State is the run's launch state, read with the task; nil when Err.
	State *LaunchState
	// Err says why the payload or the state could not be read.
	Err error
	// Retried counts the attempts that failed before; MaxRetry is how
	// many retries the task has (asynq's counts).
	Retried, MaxRetry int
	// Deadline ends this attempt, as asynq's server would end it.
	Deadline time.Time

	msg       []byte
	retention int64 // seconds the task is kept completed
}

// TakeRunTasks takes up to n run tasks off the pending list, leased
// until LeaseDuration from now, and reads their launch state. None are
// taken while the queue is paused.
func (s *Store) TakeRunTasks(ctx context.Context, n int) ([]*TakenTask, error) {
	q := s.cfg.QueueName
	now := time.Now() // asynq's servers lease and recover by their host clock
	v, err := takeTasksScript.Run(ctx, s.rdb, []string{asynqPendingKey(q), asynqPausedKey(q), asynqActiveKey(q), asynqLeaseKey(q)},
		now.Add(LeaseDuration).Unix(), asynqTaskKeyPrefix(q), n).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("take run tasks: %w", err)
	}
	tasks := make([]*TakenTask, 0, len(v)/2)
	var ok []*TaskPayload
	for i := 0; i+1 < len(v); i += 2 {
		t := &TakenTask{ID: v[i], msg: []byte(v[i+1]), Deadline: now.Add(defaultTaskTimeout)}
		tasks = append(tasks, t)
		m, err := decodeAsynqMessage(t.msg)
		if err != nil {
			t.Err = fmt.Errorf("task %s: %w", t.ID, err)
			continue
		}
		t.Retried, t.MaxRetry, t.retention = int(m.Retried), int(m.Retry), m.Retention
		switch {
		case m.Timeout > 0 && m.Deadline > 0:
			t.Deadline = time.Unix(min(now.Unix()+m.Timeout, m.Deadline), 0)
		case m.Timeout > 0:
			t.Deadline = now.Add(time.Duration(m.Timeout) * time.Second)
		case m.Deadline > 0:
			t.Deadline = time.Unix(m.Deadline, 0)
		}
		if t.Payload, t.Err = DecodeTaskPayload(m.Payload); t.Err == nil {
			ok = append(ok, t.Payload)
		}
	}
	if len(ok) == 0 {
		return tasks, nil
	}
	states, errs := s.loadLaunches(ctx, ok)
	for _, t := range tasks {
		if t.Err == nil {
			t.State, t.Err = states[0], errs[0]
			states, errs = states[1:], errs[1:]
		}
	}
	return tasks, nil
}

// ExtendTaskLeases extends the leases of taken tasks the launcher still
// holds to LeaseDuration from now, as asynq's server does every few
// seconds for the tasks it runs.
func (s *Store) ExtendTaskLeases(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	exp := float64(time.Now().Add(LeaseDuration).Unix())
	zs := make([]redis.Z, len(ids))
	for i, id := range ids {
		zs[i] = redis.Z{Member: id, Score: exp}
	}
	if err := s.rdb.ZAddXX(ctx, asynqLeaseKey(s.cfg.QueueName), zs...).Err(); err != nil {
		return fmt.Errorf("extend leases of %d run tasks: %w", len(ids), err)
	}
	return nil
}

// TaskEnd is how a launcher finishes a task it took.
type TaskEnd string

const (
	// TaskDone: the task succeeded; it is kept completed for its
	// retention.
	TaskDone TaskEnd = "done"
	// TaskRetry: the attempt failed; asynq runs it again at a time.
	TaskRetry TaskEnd = "retry"
	// TaskArchive: the task failed for good.
	TaskArchive TaskEnd = "archive"
	// TaskRequeue: the launcher is stopping; the task goes back to the
	// head of the queue, not counted as an attempt.
	TaskRequeue TaskEnd = "requeue"
)

// asynq's limits on its archive: tasks archived this long ago, and
// beyond this many, are deleted.
const (
	archiveMaxAge  = 90 * 24 * time.Hour
	archiveMaxSize = 10000
)

// statsTTL is how long asynq keeps a day's processed and failed counts.
const statsTTL = 90 * 24 * time.Hour

// FinishTask finishes a taken task: end says how; errMsg is the failed
// attempt's error (retry, archive) and retryAt when a retry is due. It
// says false when the task was no longer the launcher's: its lease
// expired and an asynq server recovered it.
func (s *Store) FinishTask(ctx context.Context, t *TakenTask, end TaskEnd, retryAt time.Time, errMsg string) (bool, error) {
	q := s.cfg.QueueName
	now := time.Now()
	var (
		dest  string
		score string
		msg   []byte
	)
	switch end {
	case TaskDone:
		if t.retention > 0 {
			dest, score = asynqCompletedKey(q), strconv.FormatInt(now.Unix()+t.retention, 10)
			msg = withAsynqFields(t.msg, asynqField{num: asynqCompletedAtField, v: now.Unix()})
		}
	case TaskRetry:
		dest, score = asynqRetryKey(q), strconv.FormatInt(retryAt.Unix(), 10)
		msg = withAsynqFields(t.msg, asynqField{num: asynqRetriedField, v: int64(t.Retried) + 1},
			asynqField{num: asynqErrorMsgField, s: errMsg, str: true}, asynqField{num: asynqLastFailedAtField, v: now.Unix()})
	case TaskArchive:
		dest, score = asynqArchivedKey(q), strconv.FormatInt(now.Unix(), 10)
		msg = withAsynqFields(t.msg, asynqField{num: asynqErrorMsgField, s: errMsg, str: true},
			asynqField{num: asynqLastFailedAtField, v: now.Unix()})
	case TaskRequeue:
		dest = asynqPendingKey(q)
	default:
		return false, fmt.Errorf("finish task %s: unknown end %q", t.ID, end)
	}
	if dest == "" {
		dest = asynqCompletedKey(q) // unused: a done task without retention is deleted
	}
	n, err := s.batch.runScript(ctx, finishTaskScript, []string{asynqActiveKey(q), asynqLeaseKey(q), asynqTaskKeyPrefix(q) + t.ID, dest,
		asynqProcessedKey(q, now), asynqFailedKey(q, now), asynqProcessedTotalKey(q), asynqFailedTotalKey(q)},
		t.ID, string(end), score, msg, now.Add(statsTTL).Unix(), now.Add(-archiveMaxAge).Unix(), archiveMaxSize, asynqTaskKeyPrefix(q)).Int()
	if err != nil {
		return false, fmt.Errorf("finish run task %s (%s): %w", t.ID, end, err)
	}
	return n == 1, nil
}
