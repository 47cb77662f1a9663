package queue

import (
	"context"
	"fmt"
	"time"
)

// CommitRunsMax bounds the runs one commit script call carries, as asynq
// bounds its own scripts (100 tasks per call): Redis runs nothing else
// while a script runs, so a page of 500 schedules catching up 100 runs
// each would hold every other client for the 50,000 runs' time. A plan
// is never split (its runs and its schedule's advance apply together), so
// it must carry no more runs than this; the scheduler's
// MaxCatchupPerTick is bounded by it.
const CommitRunsMax = 1000

// Commit applies plans of one shard — run records, asynq tasks, the
// schedules' advance — and reports which applied; a stale plan (the
// schedule changed since ReadDue) writes nothing. In an applied plan it
// marks the runs it wrote (Written).
//
// The plans go in calls of at most CommitRunsMax runs (a plan without
// runs counts as one), in order. Each plan applies atomically and on its
// own (it checks its schedule is as it was planned from), so the split
// changes no outcome: when a call fails, or this process dies between
// two calls, the plans of the calls before it are applied and the others
// are not — their schedules are still due at the same next time, planned
// again and committed at the next tick, the same runs with the same
// idempotency keys.
func (s *Store) Commit(ctx context.Context, shard int, now time.Time, plans []Plan) ([]bool, error) {
	out := make([]bool, 0, len(plans))
	for len(plans) > 0 {
		n := commitCallSize(plans)
		applied, err := s.commitCall(ctx, shard, now, plans[:n])
		if err != nil {
			if len(out) > 0 {
				err = fmt.Errorf("%w (the %d plans before it were committed)", err, len(out))
			}
			return nil, err
		}
		out = append(out, applied...)
		plans = plans[n:]
	}
	return out, nil
}

// commitCallSize is how many of plans (at least one) the next call
// carries: as many as fit in CommitRunsMax runs.
func commitCallSize(plans []Plan) int {
	n, runs := 0, 0
	for n < len(plans) {
		w := max(len(plans[n].Runs), 1)
		if n > 0 && runs+w > CommitRunsMax {
			break
		}
		runs += w
		n++
	}
	return n
}
