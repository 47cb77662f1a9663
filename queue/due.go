package queue

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronos-sched/chronos/model"
)

// DueSchedule is a schedule whose act time has come, with the state its
// plan is computed from.
type DueSchedule struct {
	ID string
	// Def is the stored definition; "" when the schedule vanished.
	Def string
	// Next is the next planned fire time not yet emitted; zero if none.
	Next time.Time
	// NextRaw and Inflight are compared by Commit.
	NextRaw  string
	Inflight string
}

// ReadDue returns up to limit schedules of shard whose act time is at or
// before until.
func (s *Store) ReadDue(ctx context.Context, shard int, until time.Time, limit int) ([]DueSchedule, error) {
	res, err := readDueScript.Run(ctx, s.rdb, []string{dueKey(shard)},
		ms(until), limit, shardPrefix(shard)+"sched:").StringSlice()
	if err != nil {
		return nil, fmt.Errorf("read due schedules of shard %d: %w", shard, err)
	}
	out := make([]DueSchedule, 0, len(res)/4)
	for i := 0; i+3 < len(res); i += 4 {
		d := DueSchedule{ID: res[i], Def: res[i+1], NextRaw: res[i+2], Inflight: res[i+3]}
		if d.NextRaw != "" {
			n, err := strconv.ParseInt(d.NextRaw, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("schedule %s: corrupt next %q", d.ID, d.NextRaw)
			}
			d.Next = fromMS(n)
		}
		out = append(out, d)
	}
	return out, nil
}

// PlannedRun is one run a plan creates.
type PlannedRun struct {
	Key    string
	RunAt  time.Time
	FireAt time.Time
	// Status is ENQUEUED (a task follows) or SKIPPED (recorded only).
	Status model.RunStatus
	Error  string
	// Payload is the encoded task; set for ENQUEUED runs.
	Payload string
	Task    TaskPayload
}

// Plan is what a scheduler decided for one due schedule.
type Plan struct {
	ID string
	// ExpectNext and ExpectInflight are the DueSchedule's NextRaw and
	// Inflight: the plan applies only if they are unchanged.
	ExpectNext     string
	ExpectInflight string
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
	Runs []PlannedRun
}

// Commit applies plans of one shard atomically per call and reports which
// applied; a stale plan (the schedule changed since ReadDue) writes nothing.
func (s *Store) Commit(ctx context.Context, shard int, now time.Time, plans []Plan) ([]bool, error) {
	args := make([]any, 0, 4+len(plans)*12)
	args = append(args, shardPrefix(shard), ms(now), s.cfg.RunHistory, len(plans))
	for _, p := range plans {
		next := ""
		if !p.NewNext.IsZero() {
			next = strconv.FormatInt(ms(p.NewNext), 10)
		}
		hold := ""
		if p.Hold {
			hold = "1"
		}
		args = append(args, p.ID, p.ExpectNext, p.ExpectInflight, next, scoreString(p.NewScore),
			p.Inflight, ms(p.InflightDeadline), hold, len(p.Runs))
		for _, r := range p.Runs {
			args = append(args, r.Key, ms(r.RunAt), ms(r.FireAt), string(r.Status), r.Error, r.Payload)
		}
	}
	res, err := commitScript.Run(ctx, s.rdb, []string{dueKey(shard), outboxKey(shard), inflightKey(shard)}, args...).Int64Slice()
	if err != nil {
		return nil, fmt.Errorf("commit %d plans of shard %d: %w", len(plans), shard, err)
	}
	out := make([]bool, len(res))
	for i, v := range res {
		out[i] = v == 1
	}
	return out, nil
}

// OutboxEntry is a run whose task may not be in asynq yet.
type OutboxEntry struct {
	Payload string
	Task    TaskPayload
}

// ReadOutbox returns up to limit entries of a shard's outbox.
func (s *Store) ReadOutbox(ctx context.Context, shard int, limit int) ([]OutboxEntry, error) {
	kv, _, err := s.rdb.HScan(ctx, outboxKey(shard), 0, "", int64(limit)).Result()
	if err != nil {
		return nil, fmt.Errorf("read outbox of shard %d: %w", shard, err)
	}
	out := make([]OutboxEntry, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		p, err := DecodeTaskPayload([]byte(kv[i+1]))
		if err != nil {
			return nil, fmt.Errorf("outbox entry %s of shard %d: %w", kv[i], shard, err)
		}
		out = append(out, OutboxEntry{Payload: kv[i+1], Task: *p})
	}
	return out, nil
}

// OutboxLen is the number of entries in a shard's outbox.
func (s *Store) OutboxLen(ctx context.Context, shard int) (int64, error) {
	return s.rdb.HLen(ctx, outboxKey(shard)).Result()
}

// AckOutbox removes entries that asynq now has.
func (s *Store) AckOutbox(ctx context.Context, shard int, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	if err := s.rdb.HDel(ctx, outboxKey(shard), keys...).Err(); err != nil {
		return fmt.Errorf("ack outbox of shard %d: %w", shard, err)
	}
	return nil
}

// ExpireInflight fails in-flight runs past their deadline and releases
// their schedules; it returns the failed runs' keys.
func (s *Store) ExpireInflight(ctx context.Context, shard int, now time.Time, limit int, reason string) ([]string, error) {
	keys, err := expireInflightScript.Run(ctx, s.rdb, []string{dueKey(shard), inflightKey(shard)},
		shardPrefix(shard), ms(now), limit, reason).StringSlice()
	if err != nil && err != redis.Nil {
		return nil, fmt.Errorf("expire in-flight runs of shard %d: %w", shard, err)
	}
	return keys, nil
}
