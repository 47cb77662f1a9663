package api_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/chronos-sched/chronos/api"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// benchUpsertBody is the body scripts/bench's API scenario sends (api.go's
// upsertBody): a new schedule each time, its workflow not registered.
const benchUpsertBody = `{"schedule_id":"api-%s","workflow_id":"wf","version":"1","user_id":"bench","cron_expr":"*/5 * * * *","timezone":"Europe/Berlin"}`

// BenchmarkUpsertNewSchedule serves POST /schedules/upsert of new
// schedules through the whole Echo stack (middleware, handler, store, a
// redis-server of its own), one request at a time, as `chronos api` is
// configured in scripts/bench (open access, no rate limit, warnings
// only logged). Its allocs/op are the same on every machine, unlike the
// time (issue 28: the API's CPU per upsert against an echo baseline).
//
//	go test ./api -run '^$' -bench UpsertNewSchedule -benchmem -count 3
func BenchmarkUpsertNewSchedule(b *testing.B) {
	r := queuetest.StartRedis(b)
	if r.Cluster() != nil {
		b.Skipf("%s=cluster: this benchmark is of one Redis node, as scripts/bench runs it", queuetest.TopologyEnv)
	}
	// A plain client, as `chronos api` has: queuetest's key guard rewrites
	// the scripts and would be measured too.
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	b.Cleanup(func() { _ = rdb.Close() })
	store, err := queue.NewStore(context.Background(), rdb, queue.RealClock{}, nil)
	require.NoError(b, err)
	e, err := api.New(store, &api.Config{Open: true, RateLimit: rate.Inf},
		slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	require.NoError(b, err)
	bodies := make([]string, b.N)
	for i := range bodies {
		bodies[i] = strings.Replace(benchUpsertBody, "%s", "b-"+strconv.Itoa(i), 1)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		req := httptest.NewRequest(http.MethodPost, "/schedules/upsert", strings.NewReader(bodies[i]))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK || !bytes.Contains(rec.Body.Bytes(), []byte(`"created":true`)) {
			b.Fatalf("upsert %d: %d %s", i, rec.Code, rec.Body)
		}
	}
}
