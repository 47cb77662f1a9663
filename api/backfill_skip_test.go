package api_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api"
	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// overlap_policy skip through the API: the dry run and the backfill say
// the same, one run starts, the others are recorded skipped.
func TestBackfillSkipThroughTheAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.hourlyAt(t, "v", t0)
	body := `{"from": "2025-12-31T20:00:00Z", "to": "2026-01-01T00:00:00Z", "overlap_policy": "skip"%s}`
	want := func(first, rest queue.BackfillOutcome) []queue.BackfillOutcome {
		return []queue.BackfillOutcome{first, rest, rest, rest}
	}
	outcomesOf := func(res api.BackfillResponse) []queue.BackfillOutcome {
		var out []queue.BackfillOutcome
		for _, r := range res.Runs {
			out = append(out, r.Outcome)
		}
		return out
	}
	dry := ok[api.BackfillResponse](t, b, http.StatusOK, http.MethodPost, backfillPath("v"), fmt.Sprintf(body, `, "dry_run": true`))
	require.Equal(t, want(queue.BackfillWouldCreate, queue.BackfillWouldSkip), outcomesOf(dry))
	res := ok[api.BackfillResponse](t, b, http.StatusOK, http.MethodPost, backfillPath("v"), fmt.Sprintf(body, ""))
	require.Equal(t, want(queue.BackfillCreated, queue.BackfillSkipped), outcomesOf(res))
	require.Equal(t, 1, res.Created)
	require.Equal(t, 1, queuetest.CountTasks(t, b.rdb, queue.QueueNameDefault))
	skipped, _, err := b.store.GetRun(t.Context(), res.Runs[1].IdempotencyKey)
	require.NoError(t, err)
	require.Equal(t, model.ReasonOverlap, skipped.Reason)
}
