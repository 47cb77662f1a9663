package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"golang.org/x/time/rate"

	"github.com/chronos-sched/chronos/api"
	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
	"github.com/chronos-sched/chronos/scheduler"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// t0 is the simulated now every test starts at.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type testBundle struct {
	e     *echo.Echo
	store *queue.Store
	rdb   *redis.Client
	clock *queue.SimClock
	reg   *prometheus.Registry
}

type setupOpts struct {
	cfg   *api.Config
	queue *queue.Config
	log   io.Writer // default: t.Log
	// jsonLog logs JSON instead of text.
	jsonLog bool
	// redisArgs are more redis-server arguments.
	redisArgs []string
}

// setup starts a redis-server and serves the API on it, with the clock at t0.
func setup(t *testing.T, opts ...setupOpts) *testBundle {
	t.Helper()
	var o setupOpts
	if len(opts) > 0 {
		o = opts[0]
	}
	rdb := queuetest.StartRedis(t, o.redisArgs...).Client(t)
	clock := queue.NewSimClock(t0)
	store, err := queue.NewStore(context.Background(), rdb, clock, o.queue)
	require.NoError(t, err)
	w := o.log
	if w == nil {
		w = testLogWriter{t}
	}
	reg := prometheus.NewRegistry()
	hopts := &slog.HandlerOptions{Level: slog.LevelDebug}
	var h slog.Handler = slog.NewTextHandler(w, hopts)
	if o.jsonLog {
		h = slog.NewJSONHandler(w, hopts)
	}
	e, err := api.New(store, openUnlessAuth(o.cfg), slog.New(h), reg)
	require.NoError(t, err)
	return &testBundle{e: e, store: store, rdb: rdb, clock: clock, reg: reg}
}

// openUnlessAuth returns cfg, or all defaults, running open and without
// a rate limit unless cfg chooses otherwise: tests of handlers send no
// token (access_test.go tests the tokens).
func openUnlessAuth(cfg *api.Config) *api.Config {
	var c api.Config
	if cfg != nil {
		c = *cfg
	}
	c.Open = c.Auth == nil
	if c.RateLimit == 0 {
		c.RateLimit = rate.Inf
	}
	return &c
}

// testLogWriter routes log lines to t.Log.
type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// do serves one request; body is sent as is when a string, else as JSON.
func (b *testBundle) do(t *testing.T, method, path string, body any) *httptest.ResponseRecorder {
	t.Helper()
	var r io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(v)
	default:
		buf, err := json.Marshal(v)
		require.NoError(t, err)
		r = bytes.NewReader(buf)
	}
	req := httptest.NewRequest(method, path, r)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	b.e.ServeHTTP(rec, req)
	return rec
}

// ok serves a request and requires status want, decoding the body into T.
func ok[T any](t *testing.T, b *testBundle, want int, method, path string, body any) T {
	t.Helper()
	rec := b.do(t, method, path, body)
	require.Equal(t, want, rec.Code, "body: %s", rec.Body.String())
	var v T
	if want != http.StatusNoContent {
		require.Equal(t, "application/json", strings.Split(rec.Header().Get("Content-Type"), ";")[0])
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &v), "body: %s", rec.Body.String())
	}
	return v
}

// requireError requires an error response with status, code and a message
// starting with msgPrefix.
func requireError(t *testing.T, rec *httptest.ResponseRecorder, status int, code, msgPrefix string) api.ErrorDetail {
	t.Helper()
	require.Equal(t, status, rec.Code, "body: %s", rec.Body.String())
	var body api.ErrorBody
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), "body: %s", rec.Body.String())
	require.Equal(t, code, body.Error.Code, "body: %s", rec.Body.String())
	require.True(t, strings.HasPrefix(body.Error.Message, msgPrefix),
		"message %q does not start with %q", body.Error.Message, msgPrefix)
	return body.Error
}

// keys lists every Redis key.
func (b *testBundle) keys(t *testing.T) []string {
	t.Helper()
	k, err := b.rdb.Keys(context.Background(), "*").Result()
	require.NoError(t, err)
	return k
}

// schedule is a valid upsert body; callers change what they test.
func schedule(id string) map[string]any {
	return map[string]any{
		"schedule_id": id,
		"workflow_id": "wf-1",
		"version":     3,
		"user_id":     "u-1",
		"cron_expr":   "0 9 * * *",
		"timezone":    "America/New_York",
	}
}

// detail is GET /schedules/:id decoded.
type detail struct {
	model.ScheduleRecord
	State      string       `json:"state"`
	Preview    []time.Time  `json:"preview"`
	LastRun    *api.LastRun `json:"last_run"`
	RecentRuns []*model.Run `json:"recent_runs"`
}

// commitRun moves the clock to the schedule's next fire time and lets a
// scheduler tick its shard, which records that run; it returns the run's
// key.
func (b *testBundle) commitRun(t *testing.T, id string) string {
	t.Helper()
	ctx := context.Background()
	rec, err := b.store.GetSchedule(ctx, id)
	require.NoError(t, err)
	require.NotNil(t, rec.NextRunAt, "schedule %s has no next run", id)
	at := *rec.NextRunAt
	b.clock.Set(at)
	s, err := scheduler.New(b.store, nil, nil, nil)
	require.NoError(t, err)
	require.NoError(t, s.TickShard(ctx, queue.ShardOf(id, b.store.Config().Shards)))
	key := model.IdempotencyKey(id, at)
	_, err = b.store.GetScheduleRun(ctx, id, key)
	require.NoError(t, err, "the tick recorded no run at %s", at)
	return key
}
