package scheduler_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
	"github.com/chronos-sched/chronos/scheduler"
)

// A scheduler makes the runs enqueued ahead runnable Config.ForwardLead
// before their second, never earlier, and with NoForwardLead at their
// second. No launcher runs here, so the scheduler's forward alone moves
// them, and each task's pending_since (the shared clock at the move)
// tells when.
func TestSchedulerForwardsRunsTheirLeadBeforeTheirSecond(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a scheduler for a few seconds of real time")
	}
	t.Parallel()
	for _, tc := range []struct {
		name    string
		lead    time.Duration // Config.ForwardLead
		applied time.Duration // the lead it means
	}{
		{"default", 0, scheduler.ForwardLeadDefault},
		{"none", scheduler.NoForwardLead, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			rdb := queuetest.StartRedis(t).Universal(t)
			clock := queue.NewRedisClock(rdb)
			require.NoError(t, clock.Sync(ctx))
			store, err := queue.NewStore(ctx, rdb, clock, &queue.Config{Shards: 2, Lookahead: queue.LookaheadDefault})
			require.NoError(t, err)
			rec := model.ScheduleRecord{ID: "every-second", CronExpr: "* * * * * *", Target: model.TargetWorkflow,
				WorkflowID: "wf", Version: "1", UserID: "u",
				OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupFireImmediately}
			require.NoError(t, rec.Validate())
			_, err = store.UpsertSchedule(ctx, &rec)
			require.NoError(t, err)

			s, err := scheduler.New(store, &scheduler.Config{ForwardLead: tc.lead}, nil, nil)
			require.NoError(t, err)
			require.NoError(t, s.Start(ctx))
			// Real time must pass: the runs of a few seconds are forwarded
			// as their seconds come.
			<-time.After(3500 * time.Millisecond)
			require.NoError(t, s.Stop(ctx))

			runs, err := store.ListRuns(ctx, rec.ID, 1000)
			require.NoError(t, err)
			forwarded, early := 0, 0
			for _, r := range runs {
				info := queuetest.RequireTask(t, rdb, queue.QueueNameDefault, r.IdempotencyKey)
				if info.State != asynq.TaskStatePending {
					require.Equal(t, asynq.TaskStateScheduled, info.State, r.IdempotencyKey)
					continue
				}
				ns, err := strconv.ParseInt(rdb.HGet(ctx, queuetest.TaskKey(t, rdb, queue.QueueNameDefault, r.IdempotencyKey), "pending_since").Val(), 10, 64)
				require.NoError(t, err)
				since := time.Unix(0, ns)
				forwarded++
				require.False(t, since.Before(r.FireAt.Add(-tc.applied)),
					"run %s due %s made runnable at %s, more than the lead %s early", r.IdempotencyKey, r.FireAt, since, tc.applied)
				if since.Before(r.FireAt) {
					early++
				}
			}
			require.GreaterOrEqual(t, forwarded, 2, "runs made runnable in 3.5 s")
			if tc.applied == 0 {
				require.Zero(t, early, "runs made runnable before their second without a lead")
			} else {
				require.Positive(t, early, "no run was made runnable ahead of its second")
			}
		})
	}
}

// A lead past queue.ForwardLeadMax is refused: launchers would start the
// runs that come that early at once.
func TestForwardLeadIsBounded(t *testing.T) {
	t.Parallel()
	store, err := queue.NewStore(context.Background(), queuetest.StartRedis(t).Universal(t), queue.NewSimClock(time.Now()), nil)
	require.NoError(t, err)
	_, err = scheduler.New(store, &scheduler.Config{ForwardLead: queue.ForwardLeadMax + time.Millisecond}, nil, nil)
	require.ErrorContains(t, err, "scheduler: Config.ForwardLead must be at most 1s")
	for lead, want := range map[time.Duration]time.Duration{0: scheduler.ForwardLeadDefault, scheduler.NoForwardLead: 0, queue.ForwardLeadMax: queue.ForwardLeadMax} {
		c := scheduler.Config{ForwardLead: lead}
		require.Equal(t, want, c.WithDefaults().ForwardLead, "ForwardLead %s", lead)
	}
}
