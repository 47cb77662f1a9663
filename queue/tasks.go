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

// Encode serializes the payload.
func (p *TaskPayload) Encode() (string, error) {
	b, err := json.Marshal(p)
	return string(b), err
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

// EnqueueBatchMax bounds the tasks of one enqueue script call.
const EnqueueBatchMax = 500

// EnqueueTask is one run for EnqueueBatch: its payload encoded and decoded.
type EnqueueTask struct {
	Payload string
	Task    TaskPayload
}

// EnqueueBatch hands runs to asynq with TaskID = idempotency key, in one
// script call per EnqueueBatchMax tasks. A task asynq already has is
// skipped: that run was enqueued before. Runs whose fire time is ahead go
// to asynq's scheduled set, the others straight to pending.
func (s *Store) EnqueueBatch(ctx context.Context, tasks []EnqueueTask) error {
	if len(tasks) == 0 {
		return nil
	}
	if !s.queuePublished.Load() {
		// asynq lists queues in one set (not in the queue's hash slot).
		if err := s.rdb.SAdd(ctx, asynqAllQueues, s.cfg.QueueName).Err(); err != nil {
			return fmt.Errorf("register asynq queue %s: %w", s.cfg.QueueName, err)
		}
		s.queuePublished.Store(true)
	}
	q := s.cfg.QueueName
	keys := []string{asynqPendingKey(q), asynqScheduledKey(q)}
	now := s.clock.Now()
	for len(tasks) > 0 {
		chunk := tasks[:min(len(tasks), EnqueueBatchMax)]
		tasks = tasks[len(chunk):]
		args := make([]any, 0, 2+3*len(chunk))
		args = append(args, asynqTaskKeyPrefix(q), now.UnixNano())
		for _, t := range chunk {
			msg := asynqMessage{
				Type: TaskTypeRun, Payload: []byte(t.Payload), ID: t.Task.IdempotencyKey, Queue: q,
				Retry: int32(s.cfg.TaskMaxRetry), Timeout: int64(s.cfg.TaskTimeout / time.Second),
				Retention: int64(s.cfg.TaskRetention / time.Second),
			}
			processAt := int64(0)
			if t.Task.FireAt.After(now) {
				processAt = t.Task.FireAt.Unix()
			}
			args = append(args, t.Task.IdempotencyKey, msg.encode(), processAt)
		}
		if err := enqueueScript.Run(ctx, s.rdb, keys, args...).Err(); err != nil {
			return fmt.Errorf("enqueue %d runs: %w", len(chunk), err)
		}
	}
	return nil
}
