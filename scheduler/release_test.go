package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
)

// A "queue" schedule held behind its in-flight run whose timing changes
// (upsert) or that is paused and resumed meanwhile has a new next time, in
// the future: no run waits behind the one in flight any more. When that run
// ends, the schedule must plan its next run at the run's act time (its
// jittered fire time), as any queue run; it must not be "released" (rel) and
// planned at once, up to 2·jitter before its fire time.
func TestANewTimingsRunIsNotReleasedBeforeItsTime(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"upsert", "resume"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			const jitter = 20 * time.Second
			ctx := context.Background()
			b := setup(t, nil, nil)
			newAt := start.Add(2*time.Minute + 30*time.Second) // next fire time after the change
			cron := "30 * * * * *"
			if how == "resume" {
				newAt = start.Add(3 * time.Minute)
				cron = "0 * * * * *"
			}
			var id string
			for i := 0; ; i++ { // newAt jittered at least 10 s late
				id = fmt.Sprintf("rq%d", i)
				if model.JitterOffset(model.IdempotencyKey(id, newAt), jitter) > 10*time.Second {
					break
				}
			}
			rec := model.ScheduleRecord{ID: id, CronExpr: "0 * * * * *", OverlapPolicy: model.OverlapQueue}
			if how == "resume" {
				rec.JitterMs = jitter.Milliseconds()
				// 00:01's offset is irrelevant: it only has to be in flight
				// at 00:02 + jitter.
			}
			b.upsert(t, rec)
			b.runUntil(t, start.Add(time.Minute+25*time.Second), time.Second) // 00:01 in flight
			first := model.IdempotencyKey(id, start.Add(time.Minute))
			b.report(t, id, first, model.RunStarted)
			b.runUntil(t, start.Add(2*time.Minute+25*time.Second), time.Second) // 00:02 held behind it
			runs, err := b.store.ListRuns(ctx, id, 10)
			require.NoError(t, err)
			require.Len(t, runs, 1, "00:02 is held")

			switch how {
			case "upsert": // a new timing (and jitter) while held
				rec.CronExpr, rec.JitterMs = cron, jitter.Milliseconds()
				b.upsert(t, rec)
			case "resume": // paused and resumed while held
				_, err := b.store.SetPaused(ctx, id, true)
				require.NoError(t, err)
				b.clock.Set(start.Add(2*time.Minute + 40*time.Second))
				_, err = b.store.SetPaused(ctx, id, false)
				require.NoError(t, err)
			}
			b.clock.Advance(time.Second)
			b.report(t, id, first, model.RunSuccess) // the run in flight ends
			fire := newAt.Add(model.JitterOffset(model.IdempotencyKey(id, newAt), jitter))
			for b.clock.Now().Before(fire.Add(-time.Second)) {
				b.clock.Advance(time.Second)
				b.tickAll(t)
				runs, err := b.store.ListRuns(ctx, id, 10)
				require.NoError(t, err)
				for _, r := range runs {
					require.False(t, r.RunAt.Equal(newAt),
						"the run at %s (fire %s) was planned at %s, %s before its fire time, as if it had waited behind the run in flight",
						newAt.Format(time.TimeOnly), r.FireAt.Format(time.TimeOnly), r.CreatedAt.Format(time.TimeOnly), r.FireAt.Sub(r.CreatedAt))
				}
			}
			b.runUntil(t, fire.Add(2*time.Second), time.Second)
			runs, err = b.store.ListRuns(ctx, id, 10)
			require.NoError(t, err)
			require.Len(t, runs, 2)
			require.Equal(t, newAt, runs[0].RunAt.UTC())
			require.Equal(t, fire, runs[0].FireAt.UTC())
		})
	}
}
