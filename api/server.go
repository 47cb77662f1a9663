package api

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chronos-sched/chronos/queue"
)

//go:embed openapi.json
var openAPIDoc []byte

// OpenAPI returns the OpenAPI 3 document served at GET /openapi.json.
func OpenAPI() []byte { return append([]byte(nil), openAPIDoc...) }

// server holds what the handlers share.
type server struct {
	store   *queue.Store
	cfg     Config
	log     *slog.Logger
	metrics *httpMetrics
	echo    *echo.Echo
	routes  sync.Map // route pattern -> true, for patterns seen registered
	limiter *rateLimiter
}

// New returns the API as an *echo.Echo (an http.Handler) serving on store.
//
// cfg must choose its access: Auth (every route but /healthz and
// /readyz needs a bearer token with the route's scope, see access.go) or
// Open; nil chooses neither and is an error. A field that is wrong is
// New's error, naming it. logger may be nil (discard). reg receives the
// HTTP metrics (chronos_http_requests_total and
// chronos_http_request_duration_seconds); nil registers nothing, and
// metrics already registered on reg by an earlier New are shared. New
// mounts neither /metrics nor /monitoring: cmd adds those to the returned
// Echo (e.g. e.GET("/metrics", echo.WrapHandler(promhttp.Handler()))).
func New(store *queue.Store, cfg *Config, logger *slog.Logger, reg prometheus.Registerer) (*echo.Echo, error) {
	s, e, err := newServer(store, cfg, logger, reg)
	if err != nil {
		return nil, err
	}
	e.GET("/openapi.json", s.openapi)
	e.GET("/v1/preview", s.preview)
	// Wrapped here, not given as route middleware, which Echo applies
	// anew (an allocation) on every request.
	e.POST("/schedules/upsert", s.idempotent(s.upsertSchedule))
	e.POST("/schedules/pause", s.pauseSchedule)
	e.GET("/schedules", s.listSchedules)
	e.GET("/schedules/:id", s.getSchedule)
	e.DELETE("/schedules/:id", s.deleteSchedule)
	e.GET("/schedules/:id/runs", s.listRuns)
	e.POST("/schedules/:id/backfill", s.backfillSchedule)
	e.GET("/runs/:idempotency_key", s.getRun)
	e.POST("/runs/:idempotency_key/status", s.reportStatus)
	e.POST("/run-launcher/start", s.idempotent(s.startManualRun))
	e.PUT("/workflows/:id/versions/:version", s.putWorkflow)
	e.GET("/workflows/:id/versions/:version", s.getWorkflow)
	e.DELETE("/workflows/:id/versions/:version", s.deleteWorkflow)
	e.POST("/v1/alarms", s.createAlarm)
	e.GET("/v1/alarms", s.listAlarms)
	e.GET("/v1/alarms/:id", s.getAlarm)
	e.DELETE("/v1/alarms/:id", s.cancelAlarm)
	if err := s.mountCronTool(e); err != nil {
		return nil, err
	}
	if s.cfg.Auth != nil {
		s.mountLogin(e)
	}
	return e, nil
}

// Probes returns an Echo serving only GET /healthz and GET /readyz, with
// the API's error handling, logging and metrics: the HTTP surface of the
// scheduler and launcher processes. Its arguments are New's.
//
// Without cfg.Auth the probes' Echo runs open: what cmd adds to it
// (/metrics) needs admin only when cfg.Auth is set.
func Probes(store *queue.Store, cfg *Config, logger *slog.Logger, reg prometheus.Registerer) (*echo.Echo, error) {
	pc := cfg.WithDefaults()
	pc.Open = pc.Auth == nil
	_, e, err := newServer(store, &pc, logger, reg)
	return e, err
}

// newServer builds the handlers' shared state and an Echo with the probes.
func newServer(store *queue.Store, cfg *Config, logger *slog.Logger, reg prometheus.Registerer) (*server, *echo.Echo, error) {
	if store == nil {
		return nil, nil, errors.New("api: a store is required")
	}
	c := cfg.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	metrics, err := newHTTPMetrics(reg)
	if err != nil {
		return nil, nil, err
	}
	if err := store.RegisterMetrics(reg); err != nil {
		return nil, nil, err
	}
	s := &server{
		store:   store,
		cfg:     c,
		log:     logger,
		metrics: metrics,
	}
	s.limiter = newRateLimiter(s.cfg.RateLimit, s.cfg.RateBurst)
	e := echo.New()
	s.echo = e
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.handleError
	e.Use(s.observe, s.guardBody, s.guard, checkQuery) // guard (access.go): tokens, scopes, rate limits; guardBody first, so its refusals close an unread body too

	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	return s, e, nil
}

// httpMetrics are the request metrics.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newHTTPMetrics(reg prometheus.Registerer) (*httpMetrics, error) {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chronos_http_requests_total",
			Help: "HTTP requests served by the chronos API, by method, route pattern and status code.",
		}, []string{"method", "route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "chronos_http_request_duration_seconds",
			Help:    "Latency of HTTP requests served by the chronos API, by method and route pattern.",
			Buckets: prometheus.DefBuckets,
		}, []string{"method", "route"}),
	}
	if reg != nil {
		var err error
		if m.requests, err = register(reg, m.requests); err != nil {
			return nil, err
		}
		if m.duration, err = register(reg, m.duration); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// register registers c on reg, or returns the collector already there.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, fmt.Errorf("api: register metrics: %w", err)
	}
	return c, nil
}

// knownMethods bounds the method label.
var knownMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true,
}

// observe recovers panics, turns a handler's error into its response (so
// the status is known here), then logs and counts the request.
func (s *server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := s.call(next, c)
		if err != nil {
			c.Error(err)
		}
		elapsed := time.Since(start)

		req := c.Request()
		status := c.Response().Status
		route := c.Path()
		if !s.registered(route) {
			route = "unmatched"
		}
		method := req.Method
		if !knownMethods[method] {
			method = "OTHER"
		}
		s.metrics.requests.WithLabelValues(method, route, strconv.Itoa(status)).Inc()
		s.metrics.duration.WithLabelValues(method, route).Observe(elapsed.Seconds())

		level := slog.LevelDebug
		switch {
		case route == "/healthz" || route == "/readyz":
			// Probed every few seconds: only a failure is news.
			if status >= 400 {
				level = slog.LevelWarn
			}
		case status >= 500:
			level = slog.LevelError
		case s.cfg.AccessLog:
			level = slog.LevelInfo
		}
		s.log.LogAttrs(req.Context(), level, "http request",
			slog.String("method", req.Method),
			slog.String("path", req.URL.Path),
			slog.String("route", route),
			slog.Int("status", status),
			slog.Float64("duration_ms", float64(elapsed.Microseconds())/1000),
		)
		return nil
	}
}

// registered reports whether pattern is a route of the Echo, including
// routes the caller added after New (such as /metrics); so the route label
// only takes registered patterns, never raw paths.
func (s *server) registered(pattern string) bool {
	if pattern == "" {
		return false
	}
	if _, ok := s.routes.Load(pattern); ok {
		return true
	}
	for _, r := range s.echo.Routes() {
		if r.Path == pattern && r.Method != echo.RouteNotFound {
			s.routes.Store(pattern, true)
			return true
		}
	}
	return false
}

// call runs h, turning a panic into an error (http.ErrAbortHandler is
// re-raised, as net/http expects).
func (s *server) call(h echo.HandlerFunc, c echo.Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if r == http.ErrAbortHandler {
				panic(r)
			}
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	return h(c)
}

// status is the body of /healthz and /readyz.
type status struct {
	Status string `json:"status"`
}

func (s *server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, status{"ok"})
}

func (s *server) readyz(c echo.Context) error {
	select {
	case <-s.cfg.Stopping:
		return &statusError{status: http.StatusServiceUnavailable, code: CodeUnavailable,
			message: "stopping: finishing the work in progress"}
	default:
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), s.cfg.ReadyTimeout)
	defer cancel()
	// A write probe, not a ping: a full Redis answers pings but refuses
	// every write, and a process that cannot write is not ready.
	if err := s.store.CheckWritable(ctx); err != nil {
		if queue.IsFull(err) {
			return &statusError{status: http.StatusServiceUnavailable, code: CodeRedisFull, message: msgRedisFull, cause: err}
		}
		return &statusError{status: http.StatusServiceUnavailable, code: CodeUnavailable,
			message: "Redis is not reachable or not taking writes", cause: err}
	}
	return c.JSON(http.StatusOK, status{"ok"})
}

func (s *server) openapi(c echo.Context) error {
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, openAPIDoc)
}
