package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api"
)

// post serves a JSON POST with an Idempotency-Key header.
func (b *testBundle) post(path, key, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set(api.HeaderIdempotencyKey, key)
	}
	rec := httptest.NewRecorder()
	b.e.ServeHTTP(rec, req)
	return rec
}

// TestIdempotencyKey: a retried creation with the same key and body gets
// the first answer and creates nothing; another body is a 422; keys are
// per route; an error is not kept, so its retry runs again.
func TestIdempotencyKey(t *testing.T) {
	t.Parallel()

	t.Run("UpsertRetried", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		body := `{"workflow_id":"wf","version":1,"user_id":"u","cron_expr":"0 9 * * *"}`
		first := b.post("/schedules/upsert", "deploy-42", body)
		require.Equal(t, http.StatusOK, first.Code, first.Body.String())
		var res api.UpsertResponse
		require.NoError(t, json.Unmarshal(first.Body.Bytes(), &res))
		require.True(t, res.Created)

		again := b.post("/schedules/upsert", "deploy-42", "{\n  "+body[1:])
		require.Equal(t, http.StatusOK, again.Code)
		require.Equal(t, first.Body.String(), again.Body.String(), "the first answer, whitespace aside")
		require.Equal(t, "true", again.Header().Get(api.HeaderReplayed))
		list := ok[api.ScheduleList](t, b, http.StatusOK, http.MethodGet, "/schedules", nil)
		require.Len(t, list.Schedules, 1, "a generated schedule_id is not generated twice")

		other := b.post("/schedules/upsert", "deploy-42", strings.Replace(body, "0 9", "0 10", 1))
		require.Equal(t, http.StatusUnprocessableEntity, other.Code, other.Body.String())
		require.Contains(t, other.Body.String(), api.CodeKeyReused)

		without := b.post("/schedules/upsert", "", body)
		require.Equal(t, http.StatusOK, without.Code)
		require.Len(t, ok[api.ScheduleList](t, b, http.StatusOK, http.MethodGet, "/schedules", nil).Schedules, 2,
			"without the header each call creates")
	})

	t.Run("ErrorsAreNotKept", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		bad := b.post("/schedules/upsert", "k", `{"workflow_id":"wf","version":1,"user_id":"u","cron_expr":"61 * * * *"}`)
		require.Equal(t, http.StatusBadRequest, bad.Code)
		good := b.post("/schedules/upsert", "k", `{"workflow_id":"wf","version":1,"user_id":"u","cron_expr":"1 * * * *"}`)
		require.Equal(t, http.StatusOK, good.Code, "a refused request leaves its key free: %s", good.Body.String())
	})

	t.Run("ManualStartPerRoute", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		body := `{"workflow_id":"wf","version":1,"user_id":"u","scheduled_for":"2026-01-01T10:00:00Z"}`
		first := b.post("/run-launcher/start", "k", body)
		require.Equal(t, http.StatusOK, first.Code, first.Body.String())
		again := b.post("/run-launcher/start", "k", body)
		require.Equal(t, first.Body.String(), again.Body.String())
		require.Equal(t, "true", again.Header().Get(api.HeaderReplayed))
		up := b.post("/schedules/upsert", "k", `{"workflow_id":"wf","version":1,"user_id":"u","cron_expr":"0 9 * * *"}`)
		require.Equal(t, http.StatusOK, up.Code, "the same key on another route is another request: %s", up.Body.String())
	})

	t.Run("BadKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rec := b.post("/schedules/upsert", "has space", `{"workflow_id":"wf","version":1,"user_id":"u","cron_expr":"0 9 * * *"}`)
		require.Equal(t, http.StatusBadRequest, rec.Code)
		require.Contains(t, rec.Body.String(), "Idempotency-Key: ")
		require.Empty(t, ok[api.ScheduleList](t, b, http.StatusOK, http.MethodGet, "/schedules", nil).Schedules)
	})

	t.Run("Concurrent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		body := `{"workflow_id":"wf","version":1,"user_id":"u","cron_expr":"0 9 * * *"}`
		var wg sync.WaitGroup
		codes := make([]int, 20)
		for i := range codes {
			wg.Go(func() { codes[i] = b.post("/schedules/upsert", "race", body).Code })
		}
		wg.Wait()
		for _, c := range codes {
			require.Contains(t, []int{http.StatusOK, http.StatusConflict}, c)
		}
		require.Len(t, ok[api.ScheduleList](t, b, http.StatusOK, http.MethodGet, "/schedules", nil).Schedules, 1,
			"one script decides: one schedule however many raced")
	})
}
