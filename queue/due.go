package queue

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronos-sched/chronos/model"
)

// DueSchedule is a schedule whose act time has come, with the state its
// plan is computed from.
type DueSchedule struct {
	ID string
	// Hash is the schedule's hash (definition and state); nil when the
	// schedule vanished. Def is its definition in canonical form, a key
	// for caching what is derived from it.
	Hash map[string]string
	Def  string
	// Next is the next planned fire time not yet emitted; zero if none.
	Next time.Time
	// NextRaw, Inflight and Ver (the definition's version) are compared
	// by Commit.
	NextRaw  string
	Inflight string
	Ver      string
	// Released marks a "queue" schedule whose in-flight run has ended: its
	// Next waited for that run, so it is due now, not missed.
	Released bool
	// ResumedAt is when the schedule was last resumed or changed its
	// jitter (zero if never). Its runs since then, like those since its
	// creation or last timing change (its record's Anchor), never fire
	// before it: jitter cannot make a run missed that the schedule could
	// never have fired.
	ResumedAt time.Time
	// Err says why the schedule's state cannot be planned from (a
	// corrupt next time); the scheduler retires it rather than failing
	// its whole shard's tick on every tick.
	Err error
}

// Plan returns the plan that retires d (drops it from the due set) if d
// is unchanged since ReadDue: the starting point of every plan, which the
// caller fills with the runs, the next time and its score.
func (d *DueSchedule) Plan() Plan {
	return Plan{ID: d.ID, ExpectNext: d.NextRaw, ExpectInflight: d.Inflight, ExpectVer: d.Ver, NewScore: math.Inf(1)}
}

// ReadDue returns up to limit schedules of shard whose act time is at or
// before until.
func (s *Store) ReadDue(ctx context.Context, shard int, until time.Time, limit int) ([]DueSchedule, error) {
	res, err := readDueScript.Run(ctx, s.rdb, []string{dueKey(shard)},
		ms(until), limit, shardPrefix(shard)+segSched).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("read due schedules of shard %d: %w", shard, err)
	}
	var out []DueSchedule
	for i := 0; i+1 < len(res); {
		n, err := strconv.Atoi(res[i+1])
		if err != nil || i+2+n > len(res) {
			return nil, fmt.Errorf("read due schedules of shard %d: malformed reply", shard)
		}
		d := DueSchedule{ID: res[i]}
		if n > 0 {
			d.Hash = pairsToMap(res[i+2 : i+2+n])
			d.Def = defString(d.Hash)
			d.NextRaw, d.Inflight, d.Ver = d.Hash[sfNext], d.Hash[sfInflight], d.Hash[sfVer]
			d.Released = d.Hash[sfReleased] != ""
			d.ResumedAt, _ = parseMS(d.Hash[sfResumed])
		}
		i += 2 + n
		if d.NextRaw != "" {
			var ok bool
			if d.Next, ok = parseMS(d.NextRaw); !ok {
				d.Err = fmt.Errorf("schedule %s: corrupt next fire time %q in Redis", d.ID, d.NextRaw)
			}
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
	// Task is the asynq payload of an ENQUEUED run.
	Task TaskPayload
	// CaughtUp marks a run planned late, by catch-up after it was
	// missed or released late from a hold (for metrics: its FireAt is
	// the time it was planned).
	CaughtUp bool
	// Written is set by Commit: the commit wrote the run's record (and
	// task). Not when the record was there already (the run was planned
	// before) nor when the commit cut the plan short before this run (it
	// is planned again: see commit.lua).
	Written bool
}

// Plan is what a scheduler decided for one due schedule.
type Plan struct {
	ID string
	// ExpectNext, ExpectInflight and ExpectVer are the DueSchedule's
	// NextRaw, Inflight and Ver (see DueSchedule.Plan): the plan applies
	// only if they are unchanged. The version matters even when next is: a
	// new timing can share the old one's next fire time but not the times
	// after it.
	ExpectNext     string
	ExpectInflight string
	ExpectVer      string
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

// Commit applies plans of one shard — run records, asynq tasks, the
// schedules' advance — atomically per call and reports which applied; a
// stale plan (the schedule changed since ReadDue) writes nothing. In an
// applied plan it marks the runs it wrote (Written).
func (s *Store) Commit(ctx context.Context, shard int, now time.Time, plans []Plan) ([]bool, error) {
	if err := s.tasks.Publish(ctx); err != nil {
		return nil, err
	}
	q := s.tasks.Keys()
	args := make([]any, 0, commitHeaderArgs+len(plans)*(commitPlanArgs+commitRunArgs))
	args = append(args, shardPrefix(shard), ms(now), s.cfg.RunHistory, q.TaskPrefix(), now.UnixNano(), manualKeyPrefix(q.Queue), len(plans))
	want := commitHeaderArgs
	for _, p := range plans {
		next := ""
		if !p.NewNext.IsZero() {
			next = strconv.FormatInt(ms(p.NewNext), 10)
		}
		hold := ""
		if p.Hold {
			hold = flagSet
		}
		want += commitPlanArgs + commitRunArgs*len(p.Runs)
		args = append(args, p.ID, p.ExpectNext, p.ExpectInflight, p.ExpectVer, next, scoreString(p.NewScore),
			p.Inflight, ms(p.InflightDeadline), hold, len(p.Runs))
		for i := range p.Runs {
			r := &p.Runs[i]
			var msg []byte
			var processAt int64
			if r.Status == model.RunEnqueued {
				var err error
				if msg, processAt, err = s.asynqTask(&r.Task, now); err != nil {
					return nil, err
				}
			}
			args = append(args, r.Key, ms(r.RunAt), ms(r.FireAt), string(r.Status), r.Error, msg, processAt)
		}
	}
	if len(args) != want {
		// commit.lua reads its arguments by these strides: a mismatch
		// would misread every plan after it.
		return nil, fmt.Errorf("commit %d plans of shard %d: %d arguments, not the %d commit.lua reads", len(plans), shard, len(args), want)
	}
	res, err := commitScript.Run(ctx, s.rdb,
		[]string{dueKey(shard), inflightKey(shard), q.Pending(), q.Scheduled(), q.Archived(), q.Completed()}, args...).Slice()
	if err != nil {
		return nil, fmt.Errorf("commit %d plans of shard %d: %w", len(plans), shard, err)
	}
	if len(res) != len(plans) {
		return nil, fmt.Errorf("commit %d plans of shard %d: %d answers", len(plans), shard, len(res))
	}
	out := make([]bool, len(res))
	for i, v := range res {
		made, ok := v.(string)
		if out[i] = ok && strings.HasPrefix(made, commitApplied); !out[i] {
			continue
		}
		marks := made[len(commitApplied):]
		for j := range plans[i].Runs {
			plans[i].Runs[j].Written = j < len(marks) && marks[j:j+1] == runWritten
		}
	}
	return out, nil
}

// ExpireInflight fails in-flight runs past their deadline and releases
// their schedules; it returns the failed runs' keys.
func (s *Store) ExpireInflight(ctx context.Context, shard int, now time.Time, limit int, reason string) ([]string, error) {
	keys, err := expireInflightScript.Run(ctx, s.rdb, []string{dueKey(shard), inflightKey(shard)},
		shardPrefix(shard), ms(now), limit, reason, s.tasks.Keys().TaskPrefix()).StringSlice()
	if err != nil && err != redis.Nil {
		return nil, fmt.Errorf("expire in-flight runs of shard %d: %w", shard, err)
	}
	return keys, nil
}
