package queue

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue/asynqwire"
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
	// ShardOf is the id whose shard holds a manual run that stands for a
	// schedule's run (ManualRun.ScheduleID): that schedule's. Empty when
	// the run is in its schedule's shard or, manual, in its key's.
	ShardOf string `json:"shard_of,omitempty"`
	// Target is what the run starts: empty for a workflow, wake for an
	// alarm's wake.
	Target model.Target `json:"target,omitempty"`
	// MaxAttempts bounds the run's executor calls (asynq's retry count is
	// one less); 0 means the store's TaskMaxRetry+1. An alarm's run takes
	// its max_failures: its last failed delivery fails it.
	MaxAttempts int `json:"max_attempts,omitempty"`
}

// DecodeTaskPayload parses a task payload.
func DecodeTaskPayload(b []byte) (*TaskPayload, error) {
	var p TaskPayload
	if !decodeTaskPayload(b, &p) { // taskjson.go: the payloads chronos writes, without reflection
		if err := json.Unmarshal(b, &p); err != nil {
			return nil, fmt.Errorf("decode run task payload: %w", err)
		}
	}
	if p.IdempotencyKey == "" {
		return nil, errors.New("decode run task payload: no idempotency_key")
	}
	return &p, nil
}

// asynqTask is how a run of shard sh is written into asynq, in the
// shard's queue: its encoded message and
// when it may start (0: now; ahead: asynq's scheduled set at
// asynqwire.ScheduledScore, so a run never starts before its time).
func (s *Store) asynqTask(sh int, p *TaskPayload, now time.Time) (msg []byte, processAt int64, err error) {
	payload, err := encodeTaskPayload(p)
	if err != nil {
		return nil, 0, fmt.Errorf("encode run %s: %w", p.IdempotencyKey, err)
	}
	retry := max(s.cfg.TaskMaxRetry, 0)
	if p.MaxAttempts > 0 {
		retry = p.MaxAttempts - 1
	}
	m := asynqwire.Message{
		Type: TaskTypeRun, Payload: payload, ID: p.IdempotencyKey, Queue: s.queue(sh).Name(),
		Retry: int32(retry), Timeout: int64(s.cfg.TaskTimeout / time.Second),
		Retention: int64(s.cfg.TaskRetention / time.Second),
	}
	if p.FireAt.After(now) {
		processAt = asynqwire.ScheduledScore(p.FireAt)
	}
	return m.Encode(), processAt, nil
}
