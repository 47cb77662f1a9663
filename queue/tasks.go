package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

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

// Enqueue hands one run to asynq with TaskID = its idempotency key. A
// TaskID conflict means asynq already has the run: success.
func (s *Store) Enqueue(ctx context.Context, payload string, p TaskPayload) error {
	t := asynq.NewTask(TaskTypeRun, []byte(payload))
	_, err := s.client.EnqueueContext(ctx, t,
		asynq.TaskID(p.IdempotencyKey),
		asynq.Queue(s.cfg.QueueName),
		asynq.ProcessAt(p.FireAt),
		asynq.Retention(s.cfg.TaskRetention),
		asynq.MaxRetry(s.cfg.TaskMaxRetry),
		asynq.Timeout(s.cfg.TaskTimeout),
	)
	if err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return fmt.Errorf("enqueue run %s: %w", p.IdempotencyKey, err)
	}
	return nil
}
