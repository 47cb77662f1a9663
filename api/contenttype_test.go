package api_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api"
)

// TestWritesNeedJSONContentType (issue 26 finding 3): a web page can make
// a browser post text/plain, form and multipart bodies anywhere without a
// CORS preflight, so every endpoint that reads a body refuses anything
// but application/json with a 415, and writes nothing.
func TestWritesNeedJSONContentType(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ok[api.UpsertResponse](t, b, http.StatusOK, http.MethodPost, "/schedules/upsert", schedule("s1"))
	before := b.keys(t)

	endpoints := []struct{ method, path, body string }{
		{http.MethodPost, "/schedules/upsert", `{"schedule_id":"s2","workflow_id":"w","version":1,"user_id":"u","cron_expr":"* * * * *"}`},
		{http.MethodPost, "/schedules/pause", `{"schedule_id":"s1","paused":true}`},
		{http.MethodPost, "/run-launcher/start", `{"workflow_id":"w","version":1,"user_id":"u","scheduled_for":"2026-01-01T00:00:00Z"}`},
		{http.MethodPost, "/runs/k1/status", `{"status":"SUCCESS"}`},
		{http.MethodPut, "/workflows/w/versions/1", `{"nodes":[]}`},
	}
	for _, ct := range []string{"", "text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded",
		"multipart/form-data; boundary=x", "text/json", "application/jsonp", "application/json-patch+json", "json", ";;"} {
		for _, e := range endpoints {
			req := httptest.NewRequest(e.method, e.path, strings.NewReader(e.body))
			if ct != "" {
				req.Header.Set("Content-Type", ct)
			}
			rec := httptest.NewRecorder()
			b.e.ServeHTTP(rec, req)
			d := requireError(t, rec, http.StatusUnsupportedMediaType, api.CodeUnsupportedMedia, "Content-Type: must be application/json")
			if ct == "" {
				require.Contains(t, d.Message, "got none")
			}
		}
	}
	require.ElementsMatch(t, before, b.keys(t), "a refused request writes nothing")

	// Parameters and case do not matter.
	for _, ct := range []string{"application/json; charset=utf-8", "Application/JSON"} {
		req := httptest.NewRequest(http.MethodPost, "/schedules/pause", strings.NewReader(`{"schedule_id":"s1","paused":true}`))
		req.Header.Set("Content-Type", ct)
		rec := httptest.NewRecorder()
		b.e.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code, "%s: %s", ct, rec.Body.String())
	}
}
