package queue

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/chronos-sched/chronos/model"
)

// commitHeaderKeys is how many keys commit.lua takes before the plans'.
const commitHeaderKeys = 6

// commitCall is one call of commit.lua: Commit for plans carrying at
// most CommitRunsMax runs between them (or one plan), atomically. Every
// key the script touches goes in KEYS (Redis Cluster routes by them);
// the ids the script writes as values are read back from those keys, so
// the call carries each key string once and no id twice.
func (s *Store) commitCall(ctx context.Context, shard int, now time.Time, plans []Plan) ([]bool, error) {
	if err := s.tasks.Publish(ctx); err != nil {
		return nil, err
	}
	q := s.queue(shard).Keys()
	runs := 0
	for i := range plans {
		runs += len(plans[i].Runs)
	}
	spfx, tpfx, mpfx := shardPrefix(shard)+segSched, q.TaskPrefix(), manualKeyPrefix(shard)
	rpfx, hpfx := shardPrefix(shard)+segRun, shardPrefix(shard)+segRuns
	keys := make([]string, 0, commitHeaderKeys+3*len(plans)+3*runs)
	keys = append(keys, dueKey(shard), inflightKey(shard), q.Pending(), q.Scheduled(), q.Archived(), q.Completed())
	args := make([]any, 0, commitHeaderArgs+len(plans)*commitPlanArgs+runs*commitRunArgs)
	args = append(args, ms(now), s.cfg.RunHistory, now.UnixNano(), len(spfx), len(tpfx), len(plans))
	wantArgs, wantKeys := commitHeaderArgs, commitHeaderKeys
	for _, p := range plans {
		next := ""
		if !p.NewNext.IsZero() {
			next = strconv.FormatInt(ms(p.NewNext), 10)
		}
		hold := ""
		if p.Hold {
			hold = flagSet
		}
		retire := cut(p.RetireReason, model.MaxRunErrorLen)
		keys = append(keys, spfx+p.ID, hpfx+p.ID)
		wantKeys += 2 + 3*len(p.Runs)
		if retire != "" {
			// The owner's active-alarm set, which retiring an alarm leaves.
			keys = append(keys, alarmsActiveKey(shard, p.Expect.owner))
			wantKeys++
		}
		wantArgs += commitPlanArgs + commitRunArgs*len(p.Runs)
		args = append(args, p.Expect.next, p.Expect.inflight, p.Expect.ver, next, scoreString(p.NewScore),
			p.Inflight, ms(p.InflightDeadline), hold, retire, len(p.Runs))
		for i := range p.Runs {
			r := &p.Runs[i]
			var msg []byte
			var processAt int64
			if r.Status == model.RunEnqueued {
				var err error
				if msg, processAt, err = s.asynqTask(shard, &r.Task, now); err != nil {
					return nil, err
				}
			}
			keys = append(keys, rpfx+r.Key, tpfx+r.Key, mpfx+r.Key)
			args = append(args, ms(r.RunAt), ms(r.FireAt), string(r.Status), r.Error, msg, processAt, string(r.Reason))
		}
	}
	if len(args) != wantArgs || len(keys) != wantKeys {
		// commit.lua reads its arguments and keys by these strides: a
		// mismatch would misread every plan after it.
		return nil, fmt.Errorf("commit %d plans of shard %d: %d arguments and %d keys, not the %d and %d commit.lua reads",
			len(plans), shard, len(args), len(keys), wantArgs, wantKeys)
	}
	cmd, err := s.runCommit(ctx, keys, args...)
	var res []any
	if err == nil {
		res, err = cmd.Slice()
	}
	if err != nil {
		return nil, fmt.Errorf("commit %d plans of shard %d: %w", len(plans), shard, err)
	}
	if len(res) != len(plans)+1 {
		return nil, fmt.Errorf("commit %d plans of shard %d: %d answers", len(plans), shard, len(res))
	}
	var trim map[string]int // schedule id -> runs its plan added
	if nums, ok := res[len(plans)].([]any); ok {
		for _, v := range nums {
			if n, ok := v.(int64); ok && n >= 1 && int(n) <= len(plans) {
				if trim == nil {
					trim = map[string]int{}
				}
				trim[plans[n-1].ID] = len(plans[n-1].Runs)
			}
		}
	}
	res = res[:len(plans)]
	out := make([]bool, len(res))
	for i, v := range res {
		made, ok := v.(string)
		if out[i] = ok && strings.HasPrefix(made, commitApplied); !out[i] {
			continue
		}
		marks := made[len(commitApplied):]
		for j := range plans[i].Runs {
			r := &plans[i].Runs[j]
			mark := ""
			if j < len(marks) {
				mark = marks[j : j+1]
			}
			r.Written, r.Taken = mark == runWritten, mark == runTaken
			switch {
			case r.Taken:
				s.ledger.count(model.ReasonManualKeyTaken, 1)
			case r.Written && r.Status == model.RunSkipped:
				s.ledger.count(r.Reason, 1)
			}
		}
	}
	if len(trim) > 0 {
		// The runs are committed: a failed trim leaves a history longer
		// than kept for a while, and the schedule's next commit asks again.
		_ = s.trimHistories(ctx, shard, trim)
	}
	return out, nil
}
