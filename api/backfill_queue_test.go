package api_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api"
	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
)

// inflightDeadline reads the schedule's run in flight and its deadline.
func (b *testBundle) inflightDeadline(t *testing.T, id string) (string, time.Time) {
	t.Helper()
	sh := queue.ShardOf(id, b.store.Config().Shards)
	ctx := context.Background()
	key, err := b.rdb.HGet(ctx, fmt.Sprintf("chronos:{s%02d}:sched:%s", sh, id), "inflight").Result()
	require.NoError(t, err)
	ms, err := b.rdb.ZScore(ctx, fmt.Sprintf("chronos:{s%02d}:inflight", sh), id).Result()
	require.NoError(t, err)
	return key, time.UnixMilli(int64(ms)).UTC()
}

// overlap_policy queue through the API: the dry run and the backfill say
// the same, the first run starts with the API's RUN_TIMEOUT as its
// deadline, the others wait; each end starts the next, with that
// deadline too.
func TestBackfillQueueThroughTheAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{cfg: &api.Config{RunTimeout: 7 * time.Minute}})
	b.hourlyAt(t, "v", t0)
	body := `{"from": "2025-12-31T21:00:00Z", "to": "2026-01-01T00:00:00Z", "overlap_policy": "queue"%s}`
	outcomesOf := func(res api.BackfillResponse) []queue.BackfillOutcome {
		var out []queue.BackfillOutcome
		for _, r := range res.Runs {
			out = append(out, r.Outcome)
		}
		return out
	}
	dry := ok[api.BackfillResponse](t, b, http.StatusOK, http.MethodPost, backfillPath("v"), fmt.Sprintf(body, `, "dry_run": true`))
	require.Equal(t, []queue.BackfillOutcome{queue.BackfillWouldCreate, queue.BackfillWouldQueue, queue.BackfillWouldQueue}, outcomesOf(dry))
	res := ok[api.BackfillResponse](t, b, http.StatusOK, http.MethodPost, backfillPath("v"), fmt.Sprintf(body, ""))
	require.Equal(t, []queue.BackfillOutcome{queue.BackfillCreated, queue.BackfillQueued, queue.BackfillQueued}, outcomesOf(res))
	require.Equal(t, 3, res.Created)

	key, deadline := b.inflightDeadline(t, "v")
	require.Equal(t, res.Runs[0].IdempotencyKey, key)
	require.Equal(t, t0.Add(7*time.Minute), deadline, "RUN_TIMEOUT as the API read it")

	b.clock.Set(t0.Add(time.Minute))
	_, err := b.store.UpdateRunStatus(context.Background(), key, queue.StatusUpdate{Status: model.RunSuccess})
	require.NoError(t, err)
	key, deadline = b.inflightDeadline(t, "v")
	require.Equal(t, res.Runs[1].IdempotencyKey, key, "the first run's end started the second")
	require.Equal(t, t0.Add(8*time.Minute), deadline)
	run, _, err := b.store.GetRun(context.Background(), key)
	require.NoError(t, err)
	require.Equal(t, model.SourceBackfill, run.Source)
}

// A skip backfill's run gets the API's RUN_TIMEOUT too, and without one
// the default hour.
func TestBackfillSkipRunTimeoutIsTheAPIs(t *testing.T) {
	t.Parallel()
	body := `{"from": "2025-12-31T22:00:00Z", "to": "2026-01-01T00:00:00Z", "overlap_policy": "skip"}`
	for _, c := range []struct {
		cfg  *api.Config
		want time.Duration
	}{{&api.Config{RunTimeout: 90 * time.Second}, 90 * time.Second}, {nil, time.Hour}} {
		b := setup(t, setupOpts{cfg: c.cfg})
		b.hourlyAt(t, "s", t0)
		ok[api.BackfillResponse](t, b, http.StatusOK, http.MethodPost, backfillPath("s"), body)
		_, deadline := b.inflightDeadline(t, "s")
		require.Equal(t, t0.Add(c.want), deadline)
	}
}
