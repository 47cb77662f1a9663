package api_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api"
	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

func backfillPath(id string) string { return "/schedules/" + id + "/backfill" }

// hourlyAt registers an hourly schedule with the clock at t.
func (b *testBundle) hourlyAt(t *testing.T, id string, at time.Time) {
	t.Helper()
	b.clock.Set(at)
	body := schedule(id)
	body["cron_expr"], body["timezone"] = "0 * * * *", "UTC"
	ok[api.UpsertResponse](t, b, http.StatusOK, http.MethodPost, "/schedules/upsert", body)
}

func TestBackfillEndpoint(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.hourlyAt(t, "bf", t0)
	// The scheduler really runs 01:00 and 02:00.
	first := b.commitRun(t, "bf")
	second := b.commitRun(t, "bf")
	b.clock.Set(t0.Add(2*time.Hour + 30*time.Minute))
	from := t0.Add(-3 * time.Hour) // 21:00 the day before .. 02:00
	body := map[string]any{"from": from.Format(time.RFC3339), "to": b.clock.Now().Format(time.RFC3339)}

	dry := map[string]any{"dry_run": true}
	for k, v := range body {
		dry[k] = v
	}
	keys := len(b.keys(t))
	res := ok[api.BackfillResponse](t, b, http.StatusOK, http.MethodPost, backfillPath("bf"), dry)
	require.True(t, res.DryRun)
	require.Zero(t, res.Created)
	require.Len(t, res.Runs, 6)
	for i, r := range res.Runs {
		at := from.Add(time.Duration(i) * time.Hour)
		require.Equal(t, at, r.RunAt.UTC())
		require.Equal(t, model.IdempotencyKey("bf", at), r.IdempotencyKey)
		want := queue.BackfillWouldCreate
		if i >= 4 { // 01:00 and 02:00 ran
			want = queue.BackfillExists
		}
		require.Equal(t, want, r.Outcome, "run at %s", at)
	}
	require.Equal(t, first, res.Runs[4].IdempotencyKey)
	require.Equal(t, second, res.Runs[5].IdempotencyKey)
	require.Equal(t, model.SourceSchedule, res.Runs[5].Source)
	require.Len(t, b.keys(t), keys, "a dry run wrote keys")

	res = ok[api.BackfillResponse](t, b, http.StatusOK, http.MethodPost, backfillPath("bf"), body)
	require.Equal(t, 4, res.Created) // 21:00 .. 00:00
	again := ok[api.BackfillResponse](t, b, http.StatusOK, http.MethodPost, backfillPath("bf"), body)
	require.Zero(t, again.Created)
	for _, r := range again.Runs {
		require.Equal(t, queue.BackfillExists, r.Outcome)
	}
	runs := ok[api.RunList](t, b, http.StatusOK, http.MethodGet, "/schedules/bf/runs?limit=100", nil)
	require.Len(t, runs.Runs, 6)
	src := map[model.RunSource]int{}
	for _, r := range runs.Runs {
		src[r.Source]++
	}
	require.Equal(t, map[model.RunSource]int{model.SourceBackfill: 4, model.SourceSchedule: 2}, src)
	require.Equal(t, 6, queuetest.CountTasks(t, b.rdb, queue.QueueNameDefault))
}

// Two API servers on one Redis take the same backfill at once: every run
// is created once.
func TestBackfillTwoAPIServersAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.hourlyAt(t, "two", t0)
	store2, err := queue.NewStore(context.Background(), b.rdb, b.clock, nil)
	require.NoError(t, err)
	e2, err := api.New(store2, openUnlessAuth(nil), slog.New(slog.DiscardHandler), nil)
	require.NoError(t, err)
	body := `{"from": "2025-12-20T00:00:00Z", "to": "2026-01-01T00:00:00Z"}` // 288 hours
	var wg sync.WaitGroup
	created := make([]int, 6)
	for i := range created {
		h := b.e
		if i%2 == 1 {
			h = e2
		}
		wg.Go(func() {
			req := httptest.NewRequest(http.MethodPost, backfillPath("two"), strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code == http.StatusOK {
				var res api.BackfillResponse
				if jsonErr := json.Unmarshal(rec.Body.Bytes(), &res); jsonErr == nil {
					created[i] = res.Created
				}
			}
		})
	}
	wg.Wait()
	total := 0
	for _, n := range created {
		total += n
	}
	require.Equal(t, 288, total)
	require.Equal(t, 288, queuetest.CountTasks(t, b.rdb, queue.QueueNameDefault))
	runs, err := b.store.ListRuns(context.Background(), "two", 1000)
	require.NoError(t, err)
	require.Len(t, runs, 288)
}

func TestBackfillRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{cfg: &api.Config{BackfillMaxRuns: 5}})
	b.hourlyAt(t, "v", t0)
	for _, c := range []struct {
		name string
		body any
		code int
		msg  string
	}{
		{"to in the future", `{"from": "2025-12-31T20:00:00Z", "to": "2026-01-01T01:00:00Z"}`, http.StatusBadRequest, "to: is in the future"},
		{"from not before to", `{"from": "2025-12-31T20:00:00Z", "to": "2025-12-31T20:00:00Z"}`, http.StatusBadRequest, "from: must be before to"},
		{"from missing", `{"to": "2025-12-31T20:00:00Z"}`, http.StatusBadRequest, "from: is required"},
		{"overlap unknown", `{"from": "2025-12-31T20:00:00Z", "to": "2026-01-01T00:00:00Z", "overlap_policy": "sometimes"}`, http.StatusBadRequest, "overlap_policy: unknown overlap policy \"sometimes\" (want allow, skip or queue)"},
		{"unknown field", `{"from": "2025-12-31T20:00:00Z", "to": "2026-01-01T00:00:00Z", "limit": 3}`, http.StatusBadRequest, ""},
		{"over the max", `{"from": "2025-12-31T00:00:00Z", "to": "2026-01-01T00:00:00Z"}`, http.StatusBadRequest,
			"to: the range plans more than 5 runs, the most one backfill may enqueue (BACKFILL_MAX_RUNS): narrow it, e.g. to 2025-12-31T05:00:00Z"},
	} {
		rec := b.do(t, http.MethodPost, backfillPath("v"), c.body)
		requireError(t, rec, c.code, api.CodeInvalidArgument, c.msg)
	}
	requireError(t, b.do(t, http.MethodPost, backfillPath("none"), `{"from": "2025-12-31T20:00:00Z", "to": "2026-01-01T00:00:00Z"}`),
		http.StatusNotFound, api.CodeNotFound, "")
	require.Zero(t, queuetest.CountTasks(t, b.rdb, queue.QueueNameDefault))
	// Within the bound it runs.
	res := ok[api.BackfillResponse](t, b, http.StatusOK, http.MethodPost, backfillPath("v"), `{"from": "2025-12-31T20:00:00Z", "to": "2026-01-01T00:00:00Z", "overlap_policy": "allow"}`)
	require.Equal(t, 4, res.Created)
}
