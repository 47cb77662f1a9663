package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/chronos-sched/chronos/model"
)

// TaskTypeRun is the asynq task type of a run.
const TaskTypeRun = "chronos:run"

// TaskPayload is the asynq payload of a run: what a launcher needs to start
// it without another read, plus what it needs to check it is still wanted.
type TaskPayload struct {
	IdempotencyKey string          `json:"idempotency_key"`
	ScheduleID     string          `json:"schedule_id,omitempty"`
	RunAt          time.Time       `json:"run_at"`
	FireAt         time.Time       `json:"fire_at"`
	WorkflowID     string          `json:"workflow_id"`
	Version        string          `json:"version"`
	UserID         string          `json:"user_id"`
	Source         model.RunSource `json:"source"`
}

// DecodeTaskPayload parses a task payload.
func DecodeTaskPayload(b []byte) (*TaskPayload, error) {
	var p TaskPayload
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("decode run task payload: %w", err)
	}
	if p.IdempotencyKey == "" {
		return nil, errors.New("decode run task payload: no idempotency_key")
	}
	return &p, nil
}

// asynqTask is how a run is written into asynq: its encoded message and
// when it may start (0: now; ahead: asynq's scheduled set, whose scores
// are whole seconds, so a fire time within a second is rounded up: a run
// never starts before its time).
func (s *Store) asynqTask(p *TaskPayload, now time.Time) (msg []byte, processAt int64, err error) {
	payload, err := json.Marshal(p)
	if err != nil {
		return nil, 0, fmt.Errorf("encode run %s: %w", p.IdempotencyKey, err)
	}
	m := asynqMessage{
		Type: TaskTypeRun, Payload: payload, ID: p.IdempotencyKey, Queue: s.cfg.QueueName,
		Retry: int32(max(s.cfg.TaskMaxRetry, 0)), Timeout: int64(s.cfg.TaskTimeout / time.Second),
		Retention: int64(s.cfg.TaskRetention / time.Second),
	}
	if p.FireAt.After(now) {
		processAt = p.FireAt.Add(time.Second - time.Nanosecond).Unix()
	}
	return m.encode(), processAt, nil
}

// publishQueue lists the run queue in asynq's set of queues, where asynq's
// server, Inspector and asynqmon find queues: at most once a second, not
// once per store, so a Redis restarted empty lists it again. It is a
// separate command because that set is not in the queue's hash slot.
func (s *Store) publishQueue(ctx context.Context) error {
	if at := s.queuePublished.Load(); at != nil && time.Since(*at) < time.Second {
		return nil
	}
	if err := s.rdb.SAdd(ctx, asynqAllQueues, s.cfg.QueueName).Err(); err != nil {
		return fmt.Errorf("register asynq queue %s: %w", s.cfg.QueueName, err)
	}
	now := time.Now()
	s.queuePublished.Store(&now)
	return nil
}

// forwardBatch is how many due tasks one forward call moves: a few
// milliseconds of Redis's time, so a second's worth of runs is not left
// queued behind the commit scripts that plan the next ones at the same
// boundary (and under Lua's limit of ~8000 values to unpack).
const forwardBatch = 4000

// ForwardDueTasks makes the run tasks whose time has come on the shared
// clock runnable (asynq's scheduled set → pending list), as asynq's
// servers do on their own, and says how many it moved. Several callers at
// once are harmless: each script call moves a task once.
func (s *Store) ForwardDueTasks(ctx context.Context) (int, error) {
	q := s.cfg.QueueName
	total := 0
	for {
		now := s.clock.Now()
		n, err := forwardScript.Run(ctx, s.rdb, []string{asynqScheduledKey(q), asynqPendingKey(q)},
			now.Unix(), asynqTaskKeyPrefix(q), now.UnixNano(), forwardBatch).Int()
		if err != nil {
			return total, fmt.Errorf("forward due run tasks: %w", err)
		}
		total += n
		if n < forwardBatch {
			return total, nil
		}
	}
}
