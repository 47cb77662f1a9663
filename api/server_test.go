package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api"
	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
)

func TestHealthz(t *testing.T) {
	t.Parallel()
	b := setup(t)
	got := ok[map[string]string](t, b, http.StatusOK, http.MethodGet, "/healthz", nil)
	require.Equal(t, map[string]string{"status": "ok"}, got)
}

func TestReadyz(t *testing.T) {
	t.Parallel()

	t.Run("Ready", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		got := ok[map[string]string](t, b, http.StatusOK, http.MethodGet, "/readyz", nil)
		require.Equal(t, "ok", got["status"])
	})

	t.Run("RedisGone", func(t *testing.T) {
		t.Parallel()
		var logs bytes.Buffer
		b := setup(t, setupOpts{log: &logs})
		require.NoError(t, b.rdb.Close())
		msg := requireError(t, b.do(t, http.MethodGet, "/readyz", nil), http.StatusServiceUnavailable, api.CodeUnavailable, "Redis is not reachable")
		require.NotContains(t, msg.Message, "closed")
		require.Contains(t, logs.String(), "client is closed")
	})
}

// TestRedisUnavailableIs503 (issue 26 finding 7): a request that cannot
// reach Redis is a 503 with Retry-After, not a 500.
func TestRedisUnavailableIs503(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	b := setup(t, setupOpts{log: &logs})
	require.NoError(t, b.rdb.Close())

	for _, r := range []struct{ method, path string }{
		{http.MethodGet, "/schedules/s1"},
		{http.MethodPost, "/schedules/upsert"},
		{http.MethodGet, "/readyz"},
	} {
		var body any
		if r.method == http.MethodPost {
			body = schedule("s1")
		}
		rec := b.do(t, r.method, r.path, body)
		requireError(t, rec, http.StatusServiceUnavailable, api.CodeUnavailable, "Redis is")
		require.Equal(t, strconv.Itoa(api.RetryAfterSeconds), rec.Header().Get("Retry-After"), r.path)
	}
	require.Contains(t, logs.String(), "client is closed")
}

func TestInternalErrorIsLoggedNotLeaked(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	b := setup(t, setupOpts{log: &logs})
	ok[api.UpsertResponse](t, b, http.StatusOK, http.MethodPost, "/schedules/upsert", schedule("s1"))
	keys := b.rdb.Keys(context.Background(), "*:sched:s1").Val()
	require.Len(t, keys, 1)
	require.NoError(t, b.rdb.Set(context.Background(), keys[0], "not a hash", 0).Err()) // WRONGTYPE on read

	detail := requireError(t, b.do(t, http.MethodGet, "/schedules/s1", nil), http.StatusInternalServerError, api.CodeInternal, "internal error")
	require.Equal(t, "internal error", detail.Message)
	require.Contains(t, logs.String(), "http request failed")
	require.Contains(t, logs.String(), "WRONGTYPE")
}

func TestRoutingErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)

	requireError(t, b.do(t, http.MethodGet, "/nope", nil), http.StatusNotFound, api.CodeNotFound, "not found")
	requireError(t, b.do(t, http.MethodPatch, "/schedules/s1", nil), http.StatusMethodNotAllowed, api.CodeMethodNotAllowed, "method not allowed")
	// Static routes do not shadow schedule ids: GET falls through to /schedules/:id.
	requireError(t, b.do(t, http.MethodGet, "/schedules/upsert", nil), http.StatusNotFound, api.CodeNotFound, "schedule upsert: not found")
}

func TestRequestLog(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	b := setup(t, setupOpts{log: &logs, jsonLog: true})

	b.do(t, http.MethodGet, "/schedules/missing", nil)
	var entry map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "http request" {
			entry = m
		}
	}
	require.NotNil(t, entry, "logs: %s", logs.String())
	require.Equal(t, "GET", entry["method"])
	require.Equal(t, "/schedules/missing", entry["path"])
	require.Equal(t, "/schedules/:id", entry["route"])
	require.EqualValues(t, 404, entry["status"])
	require.Contains(t, entry, "duration_ms")
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.do(t, http.MethodGet, "/healthz", nil)
	b.do(t, http.MethodGet, "/healthz", nil)
	b.do(t, http.MethodGet, "/schedules/missing", nil)
	b.do(t, http.MethodGet, "/no/such/route", nil)
	b.do(t, "BREW", "/healthz", nil)
	// Routes the caller adds after New are labelled by their pattern too.
	b.e.GET("/extra/:x", func(c echo.Context) error { return c.NoContent(http.StatusNoContent) })
	b.do(t, http.MethodGet, "/extra/1", nil)
	b.do(t, http.MethodGet, "/extra/2", nil)

	families, err := b.reg.Gather()
	require.NoError(t, err)
	counts := map[string]float64{}
	histograms := map[string]uint64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetName() {
			case "chronos_http_requests_total":
				counts[labels(m, "method", "route", "code")] = m.GetCounter().GetValue()
			case "chronos_http_request_duration_seconds":
				histograms[labels(m, "method", "route")] = m.GetHistogram().GetSampleCount()
			}
		}
	}
	require.Equal(t, map[string]float64{
		"GET /healthz 200":       2,
		"GET /schedules/:id 404": 1,
		"GET unmatched 404":      1,
		"OTHER /healthz 405":     1,
		"GET /extra/:x 204":      2,
	}, counts)
	require.Equal(t, map[string]uint64{
		"GET /healthz":       2,
		"GET /schedules/:id": 1,
		"GET unmatched":      1,
		"OTHER /healthz":     1,
		"GET /extra/:x":      2,
	}, histograms)

	// A second API on the same registry shares the metrics.
	e2, err := api.New(b.store, openUnlessAuth(nil), nil, b.reg)
	require.NoError(t, err)
	b.e = e2
	b.do(t, http.MethodGet, "/healthz", nil)
	families, err = b.reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "chronos_http_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if labels(m, "method", "route", "code") == "GET /healthz 200" {
				require.Equal(t, 3.0, m.GetCounter().GetValue())
			}
		}
	}
}

// labels joins the values of the named labels of m.
func labels(m *dto.Metric, names ...string) string {
	var out []string
	for _, n := range names {
		for _, l := range m.GetLabel() {
			if l.GetName() == n {
				out = append(out, l.GetValue())
			}
		}
	}
	return strings.Join(out, " ")
}

func TestConfig(t *testing.T) {
	t.Parallel()

	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		var c *api.Config
		d := c.WithDefaults()
		require.Equal(t, model.OverlapSkip, d.DefaultOverlapPolicy)
		require.Equal(t, model.CatchupNone, d.DefaultCatchupPolicy)
		require.Zero(t, d.DefaultJitterMs)
		require.EqualValues(t, 1<<20, d.BodyLimit)
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			cfg  api.Config
			want string
		}{
			{api.Config{DefaultOverlapPolicy: "sometimes"}, "api: Config.DefaultOverlapPolicy: unknown overlap_policy"},
			{api.Config{DefaultCatchupPolicy: "all"}, "api: Config.DefaultCatchupPolicy: unknown catchup_policy"},
			{api.Config{DefaultJitterMs: -1}, "api: Config.DefaultJitterMs must be between"},
			{api.Config{DefaultJitterMs: model.MaxJitterMs + 1}, "api: Config.DefaultJitterMs must be between"},
			{api.Config{BodyLimit: -1}, "api: Config.BodyLimit"},
			{api.Config{Open: true, RateBurst: -1}, "api: Config.RateBurst must be positive"},
			{api.Config{Open: true, RateLimit: -1}, "api: Config.RateLimit must not be negative"},
		} {
			for name, build := range map[string]func(*queue.Store, *api.Config, *slog.Logger, prometheus.Registerer) (*echo.Echo, error){
				"New": api.New, "Probes": api.Probes,
			} {
				e, err := build(&queue.Store{}, &tc.cfg, nil, nil)
				require.ErrorContains(t, err, tc.want, name)
				require.Nil(t, e, name)
			}
		}
		_, err := api.New(nil, nil, nil, nil)
		require.ErrorContains(t, err, "api: a store is required")
	})

	t.Run("DefaultsApplyToUpsert", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{cfg: &api.Config{
			DefaultOverlapPolicy: model.OverlapSkip,
			DefaultCatchupPolicy: model.CatchupNone,
			DefaultJitterMs:      1500,
		}})
		ok[api.UpsertResponse](t, b, http.StatusOK, http.MethodPost, "/schedules/upsert", schedule("d1"))
		got := ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/d1", nil)
		require.Equal(t, model.OverlapSkip, got.OverlapPolicy)
		require.Equal(t, model.CatchupNone, got.CatchupPolicy)
		require.EqualValues(t, 1500, got.JitterMs)

		// Given values win over the defaults.
		body := schedule("d2")
		body["overlap_policy"], body["catchup_policy"], body["jitter_ms"] = "queue", "latest", 0
		ok[api.UpsertResponse](t, b, http.StatusOK, http.MethodPost, "/schedules/upsert", body)
		got = ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/d2", nil)
		require.Equal(t, model.OverlapQueue, got.OverlapPolicy)
		require.Equal(t, model.CatchupLatest, got.CatchupPolicy)
		require.Zero(t, got.JitterMs)
	})
}

func TestBodyLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{cfg: &api.Config{BodyLimit: 256}})
	body := schedule("big")
	body["padding"] = strings.Repeat("x", 300)
	before := b.keys(t)
	requireError(t, b.do(t, http.MethodPost, "/schedules/upsert", body), http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge, "body: larger than 256 bytes")
	requireError(t, b.do(t, http.MethodPut, "/workflows/wf/versions/1", `{"x":"`+strings.Repeat("y", 300)+`"}`), http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge, "body:")
	require.ElementsMatch(t, before, b.keys(t))
}

// A client that sends its body slowly gets 408 once BodyReadTimeout has
// passed, and the connection's next request is served: the server itself
// has no ReadTimeout, so nothing else would free the handler.
func TestSlowBodyTimesOut(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{cfg: &api.Config{BodyReadTimeout: 200 * time.Millisecond}})
	srv := httptest.NewServer(b.e)
	defer srv.Close()
	before := b.keys(t)

	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	raw, err := json.Marshal(schedule("slow"))
	require.NoError(t, err)
	body := string(raw)
	_, err = fmt.Fprintf(conn, "POST /schedules/upsert HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body[:10])
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	raw, err = io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestTimeout, resp.StatusCode, "body: %s", raw)
	var eb api.ErrorBody
	require.NoError(t, json.Unmarshal(raw, &eb))
	require.Equal(t, api.CodeRequestTimeout, eb.Error.Code)
	require.Equal(t, "body: not received within 200ms", eb.Error.Message)
	require.ElementsMatch(t, before, b.keys(t))

	// A body sent in time, on a connection of its own, is served.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	rec, err := client.Post(srv.URL+"/schedules/upsert", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	rec.Body.Close()
	require.Equal(t, http.StatusOK, rec.StatusCode)
}

func TestOpenAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	doc := ok[map[string]any](t, b, http.StatusOK, http.MethodGet, "/openapi.json", nil)
	require.Equal(t, "3.0.3", doc["openapi"])

	// Every route is documented, and every documented operation is a route.
	paths := doc["paths"].(map[string]any)
	documented := map[string]bool{}
	for p, item := range paths {
		for m := range item.(map[string]any) {
			if m != "parameters" {
				documented[strings.ToUpper(m)+" "+p] = true
			}
		}
	}
	served := map[string]bool{}
	for _, r := range b.e.Routes() {
		p := r.Path
		for seg := range strings.SplitSeq(r.Path, "/") {
			if strings.HasPrefix(seg, ":") {
				p = strings.Replace(p, seg, "{"+seg[1:]+"}", 1)
			}
		}
		served[r.Method+" "+p] = true
	}
	require.Equal(t, served, documented)

	// Every $ref resolves.
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	raw, err := json.Marshal(doc)
	require.NoError(t, err)
	for _, part := range strings.Split(string(raw), `"$ref":"#/components/schemas/`)[1:] {
		name := part[:strings.IndexByte(part, '"')]
		require.Contains(t, schemas, name)
	}
	require.Equal(t, api.OpenAPI(), b.do(t, http.MethodGet, "/openapi.json", nil).Body.Bytes())
}
