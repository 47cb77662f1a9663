package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronos-sched/chronos/model"
)

// LaunchState is what a launcher reads before starting a run, in one round
// trip.
type LaunchState struct {
	// Status is the run record's status; "" when the record is gone
	// (trimmed or expired).
	Status model.RunStatus
	// Schedule is the run's schedule now; nil for manual runs and for a
	// schedule deleted since the run was planned.
	Schedule *model.ScheduleRecord
	// DAG is the workflow version's DAG; nil when it is not registered.
	DAG []byte
}

// LoadLaunch reads a run's status, its schedule and its workflow's DAG in
// one pipeline.
func (s *Store) LoadLaunch(ctx context.Context, p *TaskPayload) (*LaunchState, error) {
	sh := s.taskShard(p)
	var (
		st    *redis.StringCmd
		sched *redis.MapStringStringCmd
		dag   *redis.StringCmd
	)
	_, err := s.rdb.Pipelined(ctx, func(pl redis.Pipeliner) error {
		st = pl.HGet(ctx, runKey(sh, p.IdempotencyKey), "st")
		if p.ScheduleID != "" {
			sched = pl.HGetAll(ctx, scheduleKey(sh, p.ScheduleID))
		}
		dag = pl.Get(ctx, workflowKey(p.WorkflowID, p.Version))
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("load run %s for launch: %w", p.IdempotencyKey, err)
	}
	var ls LaunchState
	ls.Status = model.RunStatus(st.Val())
	if sched != nil {
		rec, err := scheduleFromHash(p.ScheduleID, sched.Val())
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, err
		}
		ls.Schedule = rec
	}
	if dag.Err() == nil {
		ls.DAG = []byte(dag.Val())
	}
	return &ls, nil
}

// ArchivedRun is a run task asynq archived: it will not be tried again.
type ArchivedRun struct {
	Payload    *TaskPayload
	LastErr    string
	ArchivedAt time.Time
}

// archivedPage is how many archived tasks ArchivedRuns reads per round
// trip.
const archivedPage = 500

// ArchivedRuns returns the run tasks asynq archived at or after since,
// and the since to pass next time. asynq keeps at most 10,000 archived
// tasks, so the answer is bounded; those archived within since's second
// come again next time. Tasks are read in pipelined pages.
func (s *Store) ArchivedRuns(ctx context.Context, since time.Time) ([]ArchivedRun, time.Time, error) {
	q := s.cfg.QueueName
	zs, err := s.rdb.ZRangeByScoreWithScores(ctx, asynqArchivedKey(q), &redis.ZRangeBy{
		Min: strconv.FormatInt(since.Unix(), 10), Max: "+inf",
	}).Result()
	if err != nil {
		return nil, since, fmt.Errorf("read archived run tasks: %w", err)
	}
	var out []ArchivedRun
	next := since
	for page := range slices.Chunk(zs, archivedPage) {
		cmds := make([]*redis.SliceCmd, len(page))
		if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, z := range page {
				cmds[i] = p.HMGet(ctx, asynqTaskKeyPrefix(q)+z.Member.(string), "state", "msg")
			}
			return nil
		}); err != nil {
			return nil, since, fmt.Errorf("read archived run tasks: %w", err)
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
			m, err := decodeAsynqMessage([]byte(raw))
			if err != nil || m.Type != TaskTypeRun {
				continue
			}
			p, err := DecodeTaskPayload(m.Payload)
			if err != nil {
				continue // the handler dropped it already, nothing to record
			}
			out = append(out, ArchivedRun{Payload: p, LastErr: m.ErrorMsg, ArchivedAt: at})
		}
	}
	return out, next, nil
}
