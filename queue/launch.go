package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
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
	// EnqueuedAt is when the run was enqueued (zero if unknown).
	EnqueuedAt time.Time
	// FailedAttempts counts executor calls that failed before this one
	// (see RecordFailedAttempt).
	FailedAttempts int
	// RetryAt is when the retry after the last failed attempt was due
	// (zero when none failed).
	RetryAt time.Time
	// Schedule is the run's schedule now; nil for manual runs and for a
	// schedule deleted since the run was planned.
	Schedule *model.ScheduleRecord
	// DAG is the workflow version's DAG; nil when it is not registered.
	DAG []byte
}

// LoadLaunch reads a run's status, its schedule and its workflow's DAG in
// one pipeline.
func (s *Store) LoadLaunch(ctx context.Context, p *TaskPayload) (*LaunchState, error) {
	ls, errs := s.LoadLaunches(ctx, []*TaskPayload{p})
	return ls[0], errs[0]
}

// LoadLaunches reads the launch state of many runs in one pipeline: each
// run's state, or its error (Redis unreachable, a record that does not
// read). One run's bad key fails only that run.
func (s *Store) LoadLaunches(ctx context.Context, ps []*TaskPayload) (states []*LaunchState, errs []error) {
	type reads struct {
		run   *redis.StringSliceCmd
		sched *redis.MapStringStringCmd
		dag   *redis.StringCmd
	}
	rs := make([]reads, len(ps))
	// The commands are built on one slice of arguments whose constant
	// parts are boxed once (launchRunArgs): go-redis's HMGet, HGetAll and
	// Get box every argument of every call, and HMGet's reply boxes every
	// value; a StringSliceCmd reads the values as strings (a missing field
	// as "", as the status and times read it). docs/perf/launchers.md,
	// "Launch: allocations per run".
	args := make([]any, 0, len(ps)*(len(launchRunArgs)+4))
	cmdArgs := func(parts ...any) []any {
		args = append(args, parts...)
		return args[len(args)-len(parts) : len(args) : len(args)]
	}
	// The runs of one workflow version read its DAG once: a take's runs
	// are mostly of one, and a GET per run cost Redis a command and the
	// launcher a reply each. One GET in the pipeline reads what the runs'
	// GETs, one after the other in it, would have read.
	dags := map[string]*redis.StringCmd{}
	// Each command carries its own error, checked below: Pipelined's is
	// the first of them, whichever run it belongs to.
	_, _ = s.rdb.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for i, p := range ps {
			sh := s.taskShard(p)
			run := cmdArgs(launchRunArgs[:]...)
			run[1] = runKey(sh, p.IdempotencyKey)
			rs[i].run = redis.NewStringSliceCmd(ctx, run...)
			_ = pl.Process(ctx, rs[i].run)
			if p.ScheduleID != "" {
				rs[i].sched = redis.NewMapStringStringCmd(ctx, cmdArgs("hgetall", scheduleKey(sh, p.ScheduleID))...)
				_ = pl.Process(ctx, rs[i].sched)
			}
			wk := workflowKey(p.WorkflowID, p.Version)
			if rs[i].dag = dags[wk]; rs[i].dag == nil {
				rs[i].dag = redis.NewStringCmd(ctx, cmdArgs("get", wk)...)
				dags[wk] = rs[i].dag
				_ = pl.Process(ctx, rs[i].dag)
			}
		}
		return nil
	})
	states, errs = make([]*LaunchState, len(ps)), make([]error, len(ps))
	for i, p := range ps {
		err := rs[i].run.Err()
		if err == nil && rs[i].sched != nil {
			err = rs[i].sched.Err()
		}
		if err == nil && !errors.Is(rs[i].dag.Err(), redis.Nil) {
			err = rs[i].dag.Err()
		}
		if err != nil {
			errs[i] = fmt.Errorf("load run %s for launch: %w", p.IdempotencyKey, err)
			continue
		}
		var ls LaunchState
		if v := rs[i].run.Val(); len(v) == 5 {
			ls.Status = model.RunStatus(v[0])
			ls.EnqueuedAt, _ = parseMS(v[1])
			if v[2] != "" { // strconv.Atoi("") allocates its error
				ls.FailedAttempts, _ = strconv.Atoi(v[2])
			}
			if ls.FailedAttempts > 0 {
				// A record written before retries were timed has the failed
				// attempt's time, which the retry follows within its backoff.
				ls.RetryAt, _ = parseMS(cmp.Or(v[3], v[4]))
			}
		}
		if rs[i].sched != nil {
			rec, err := scheduleFromHash(p.ScheduleID, rs[i].sched.Val())
			if err != nil && !errors.Is(err, ErrNotFound) {
				errs[i] = err
				continue
			}
			ls.Schedule = rec
		}
		if rs[i].dag.Err() == nil {
			ls.DAG = []byte(rs[i].dag.Val())
		}
		states[i] = &ls
	}
	return states, errs
}

// launchRunArgs is the HMGET of a run's launch state, its key (index 1)
// to be set: boxed once, as the command's constant arguments.
var launchRunArgs = [...]any{"hmget", "", rfStatus, rfEnqueued, rfAttempts, rfRetryAt, rfUpdated}

// RecordFailedAttempt counts a failed executor call of a run that has
// not started, before asynq retries its task at retryAt. The call's
// reason is shown with the run (last_error) beside the attempts, so a
// run being retried says why; an alarm's run counts it as a failed
// delivery of the alarm too (failure_count, last_error). A launcher judges
// a run's lateness from its due time on its first attempt and from
// retryAt on a retry (a retry is late by its backoff, not missed).
// asynq's retry count cannot tell them apart: a task can be retried
// without an executor call (a failed status report) or recovered from a
// launcher that died, and those are first attempts still.
func (s *Store) RecordFailedAttempt(ctx context.Context, p *TaskPayload, retryAt time.Time, reason string) error {
	sh := s.taskShard(p)
	keys := []string{runKey(sh, p.IdempotencyKey)}
	if p.ScheduleID != "" {
		keys = append(keys, scheduleKey(sh, p.ScheduleID)) // an alarm counts the failed delivery
	}
	err := attemptScript.Run(ctx, s.rdb, keys, ms(s.clock.Now()), ms(retryAt), reason).Err()
	if err != nil {
		return fmt.Errorf("record failed attempt of run %s: %w", p.IdempotencyKey, err)
	}
	return nil
}
