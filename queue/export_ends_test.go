package queue

import (
	"context"
	"time"

	"github.com/chronos-sched/chronos/queue/asynqwire"
)

// Answers of status.lua the external tests read.
const (
	StatusChanged = statusChanged
	StatusRetry   = statusRetry
)

// EndResult is what one run's end answered in a status_done_many.lua
// call: status.lua's code, whether its task was finished, the error.
type EndResult struct {
	Code     int64
	Finished bool
	Err      error
}

// EndTogether writes the ends of the launched runs of tasks ts (status u
// each) in one endGatherer send, as if they had come together.
func (s *Store) EndTogether(ctx context.Context, ts []*asynqwire.Task, u StatusUpdate) ([]EndResult, error) {
	var batch []*launchEnd
	for _, t := range ts {
		p, err := DecodeTaskPayload(t.Payload)
		if err != nil {
			return nil, err
		}
		fk, fa, err := t.FinishCall(asynqwire.Done, time.Time{}, "", time.Now())
		if err != nil {
			return nil, err
		}
		batch = append(batch, &launchEnd{ctx: ctx, sh: s.taskShard(p), key: p.IdempotencyKey, sid: p.ScheduleID,
			u: u, keys: fk, args: fa})
	}
	s.ends.send(batch)
	out := make([]EndResult, len(batch))
	for i, e := range batch {
		out[i].Finished, out[i].Err = e.finished, e.err
		if len(e.res) > 0 {
			out[i].Code, _ = e.res[0].(int64)
		}
	}
	return out, nil
}
