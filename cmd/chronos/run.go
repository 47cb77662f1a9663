package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof"
	"net/url"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/hibiken/asynqmon"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/chronos-sched/chronos/api"
	"github.com/chronos-sched/chronos/launcher"
	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/scheduler"
)

// processSpec says which parts one process runs.
type processSpec struct {
	common   Common
	sched    *SchedulerOpts
	launch   *LauncherOpts
	api      *APIOpts
	embedded bool
	dev      bool // chronos dev: open on loopback without auth settings
}

func newLogger(c Common, env *Env) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(c.LogLevel))
	opts := &slog.HandlerOptions{Level: lvl}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(env.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(env.Stderr, opts))
}

// routeLibraryLogs sends what libraries log on their own through logger,
// so LOG_FORMAT=json yields JSON lines only: go-redis's messages (its own
// logger otherwise writes plain lines to stderr) and the standard log
// package's (asynqmon, net/http/pprof). Both are process-wide: the last
// process started in one binary wins.
func routeLibraryLogs(logger *slog.Logger) {
	redis.SetLogger(redisLogger{logger.With("component", "redis")})
	slog.SetDefault(logger)
}

// httpErrorLog is net/http's ErrorLog (accept errors, superfluous
// WriteHeader calls) as warnings through logger.
func httpErrorLog(logger *slog.Logger) *log.Logger {
	return slog.NewLogLogger(logger.With("component", "http").Handler(), slog.LevelWarn)
}

// redisLogger adapts slog to go-redis's logger. Its messages are about
// connections failing and being retried: warnings.
type redisLogger struct{ l *slog.Logger }

// Printf implements go-redis's internal.Logging.
func (r redisLogger) Printf(ctx context.Context, format string, v ...any) {
	r.l.WarnContext(ctx, strings.TrimSpace(fmt.Sprintf(format, v...)))
}

// run wires the parts a process runs, serves HTTP, and on ctx's end shuts
// down in order: stop ticking (leases released), finish runs in progress,
// stop serving.
func run(ctx context.Context, env *Env, p processSpec) error {
	logger := newLogger(p.common, env)
	routeLibraryLogs(logger)
	if err := p.validate(); err != nil {
		return err
	}
	acc, err := p.setupAccess(logger) // access.go
	if err != nil {
		return err
	}
	// What is opened or started is closed or stopped in reverse, on every
	// way out of here: scheduler, launcher, HTTP, then Redis.
	var pr process
	defer pr.close()
	rdb, redisURL, err := pr.openRedis(ctx, p, logger)
	if err != nil {
		return err
	}
	store, err := pr.openStore(ctx, rdb, p, logger)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		store.Tasks().Collector(), store.AutoPausedCollector())
	e, err := newHandler(store, rdb, p, acc, logger, reg, ctx.Done()) // /readyz is 503 once ctx ends
	if err != nil {
		return err
	}
	sched, launch, err := newParts(store, p, logger, reg)
	if err != nil {
		return err
	}
	addr, srvErr, err := pr.serve(e, p, acc, logger, reg)
	if err != nil {
		return err
	}
	if p.api != nil && acc.verifier == nil && p.common.Insecure {
		go warnInsecure(ctx, logger, addr)
	}
	logger.Info("chronos started", "http_addr", addr, "api", p.api != nil,
		"scheduler", sched != nil, "launcher", launch != nil, "redis", redactURL(redisURL))
	if acc.devToken != "" {
		printDevToken(env.Stdout, addr, acc.devToken)
	}
	if env.MetricsReady != nil && pr.metricsAddr != "" {
		env.MetricsReady <- pr.metricsAddr
	}
	if env.Ready != nil {
		env.Ready <- addr
	}
	if err := pr.start(ctx, sched, launch, logger); err != nil {
		return err
	}

	select {
	case <-ctx.Done():
		logger.Info("shutting down")
		return nil
	case err := <-srvErr:
		return fmt.Errorf("HTTP server: %w", err)
	}
}

// process holds what run opened and started, to close and stop it in
// reverse order.
type process struct {
	closers     []func()
	metricsAddr string // where METRICS_ADDR listens, "" without it
}

// onClose adds f to what close does, before everything added earlier.
func (pr *process) onClose(f func()) { pr.closers = append(pr.closers, f) }

func (pr *process) close() {
	for i := len(pr.closers) - 1; i >= 0; i-- {
		pr.closers[i]()
	}
}

// openRedis connects to the process's Redis (starting the embedded one
// for chronos dev) and checks that it does not evict, at start and every
// evictionCheckInterval. It returns the client and its URL.
func (pr *process) openRedis(ctx context.Context, p processSpec, logger *slog.Logger) (redis.UniversalClient, string, error) {
	redisURL, err := p.common.redisURL()
	if err != nil {
		return nil, "", err
	}
	if p.embedded {
		mr := miniredis.NewMiniRedis()
		if err := mr.StartAddr("127.0.0.1:0"); err != nil {
			return nil, "", fmt.Errorf("start embedded Redis: %w", err)
		}
		pr.onClose(mr.Close)
		redisURL = "redis://" + mr.Addr()
		logger.Info("embedded Redis started (miniredis; data lives only as long as this process)", "addr", mr.Addr())
	}
	rdb, err := newRedis(redisURL)
	if err != nil {
		return nil, "", err
	}
	pr.onClose(func() { _ = rdb.Close() })
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = rdb.Ping(pingCtx).Err()
	cancel()
	if err != nil {
		return nil, "", fmt.Errorf("cannot reach Redis at REDIS_URL=%s: %w (is it running? check the address and password)", redactURL(redisURL), err)
	}
	if !p.embedded { // miniredis evicts nothing
		if err := checkEviction(ctx, rdb, p.common.AllowEviction, logger); err != nil {
			return nil, "", err
		}
		evictCtx, stopEvict := context.WithCancel(ctx)
		pr.onClose(stopEvict)
		go watchEviction(evictCtx, rdb, p.common.AllowEviction, logger)
	}
	return rdb, redisURL, nil
}

// openStore starts the shared clock (Redis's TIME, kept in sync) and
// opens the schedule store on it.
func (pr *process) openStore(ctx context.Context, rdb redis.UniversalClient, p processSpec, logger *slog.Logger) (*queue.Store, error) {
	clock := queue.NewRedisClock(rdb)
	if err := clock.Sync(ctx); err != nil {
		return nil, fmt.Errorf("read Redis TIME: %w", err)
	}
	clockCtx, stopClock := context.WithCancel(context.WithoutCancel(ctx))
	pr.onClose(stopClock)
	go clock.RunSync(clockCtx, 10*time.Second)
	cfg := storeConfig(p.common)
	cfg.Logger = logger
	store, err := queue.NewStore(ctx, rdb, clock, cfg)
	return store, inSettings(err)
}

// newHandler returns the process's HTTP handler: the API (with asynqmon
// at /monitoring) or only the probes, and /metrics, /debug/pprof.
func newHandler(store *queue.Store, rdb redis.UniversalClient, p processSpec, acc access, logger *slog.Logger, reg *prometheus.Registry,
	stopping <-chan struct{}) (*echo.Echo, error) {
	var e *echo.Echo
	var err error
	if p.api != nil {
		cfg := apiConfig(p.common, p.api)
		cfg.Stopping = stopping
		acc.apiConfig(cfg, p.common.AuthOpts)
		if e, err = api.New(store, cfg, logger, reg); err != nil {
			return nil, inSettings(err)
		}
		if p.api.Monitoring {
			mon := asynqmon.New(asynqmon.Options{RootPath: "/monitoring", RedisConnOpt: clientConnOpt{rdb}, ReadOnly: !p.api.MonitoringWritable})
			e.Any("/monitoring", echo.WrapHandler(mon))
			e.Any("/monitoring/*", echo.WrapHandler(mon))
		}
	} else if e, err = api.Probes(store, &api.Config{Stopping: stopping, Auth: acc.verifier}, logger, reg); err != nil {
		return nil, err
	}
	if p.common.MetricsAddr != "" { // serveMetrics serves them apart
		return e, nil
	}
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	if p.common.Pprof {
		e.Any("/debug/pprof/*", echo.WrapHandler(http.DefaultServeMux)) // net/http/pprof registers there
	}
	return e, nil
}

// newParts builds the scheduler and the launcher the process runs (nil
// for a part it does not run).
func newParts(store *queue.Store, p processSpec, logger *slog.Logger, reg prometheus.Registerer) (*scheduler.Scheduler, *launcher.Launcher, error) {
	var sched *scheduler.Scheduler
	var launch *launcher.Launcher
	var err error
	if p.sched != nil {
		if sched, err = scheduler.New(store, schedulerConfig(p.common, p.sched), logger.With("component", "scheduler"), reg); err != nil {
			return nil, nil, inSettings(err)
		}
	}
	if p.launch != nil {
		var ex launcher.Executor = launcher.LogExecutor{Logger: logger.With("component", "executor")}
		if p.launch.Executor == "http" {
			ex = launcher.NewHTTPExecutor(p.launch.ExecutorURL, p.launch.ExecutorTimeout, p.launch.Concurrency)
		}
		cfg := launcherConfig(p.launch, ex)
		cfg.Waker = newWaker(p, logger)
		if launch, err = launcher.New(store, cfg, logger.With("component", "launcher"), reg); err != nil {
			return nil, nil, inSettings(err)
		}
	}
	return sched, launch, nil
}

// newWaker returns the launcher's wake executor: HTTP to WAKE_URL when it
// is set, else in chronos dev the log waker (a newcomer sees alarms
// fire), else none (alarms' runs fail, saying to set WAKE_URL).
func newWaker(p processSpec, logger *slog.Logger) launcher.Waker {
	l := p.launch
	switch {
	case l.WakeURL != "":
		return launcher.NewHTTPWaker(l.WakeURL, []byte(l.WakeSecret), l.WakeTimeout, l.Concurrency)
	case p.dev:
		return launcher.LogWaker{Logger: logger.With("component", "waker")}
	}
	logger.With("component", "launcher").Warn("WAKE_URL is not set: alarms' wakes will not be delivered, their runs fail; set WAKE_URL and WAKE_SECRET (docs/wake.md)")
	return nil
}

// serve listens on HTTP_ADDR and serves e; it returns the address and
// the channel the server's error comes on.
func (pr *process) serve(e *echo.Echo, p processSpec, acc access, logger *slog.Logger, reg *prometheus.Registry) (string, <-chan error, error) {
	ln, err := net.Listen("tcp", p.common.HTTPAddr)
	if err != nil {
		return "", nil, fmt.Errorf("listen on HTTP_ADDR=%s: %w (is another process using it?)", p.common.HTTPAddr, err)
	}
	// An idle keep-alive connection is closed after 2 minutes. (No
	// ReadTimeout: net/http cancels a request's context when it expires,
	// which would cut /debug/pprof/profile and asynqmon's long calls.)
	// Connections are capped so that held sockets cannot take every file
	// descriptor; request bodies are bounded by the API (api.Config).
	lim := api.NewConnLimiter(p.common.MaxConns)
	srv := &http.Server{Handler: acc.handler(e), TLSConfig: acc.tls, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, ConnState: lim.ConnState,
		ErrorLog: httpErrorLog(logger)}
	srvErr := make(chan error, 2)
	go func() { srvErr <- acc.serve(srv, lim.Listener(ln)) }()
	// Each stop has its own time budget (the launcher's is
	// SHUTDOWN_TIMEOUT), so a slow one can't eat the next one's.
	pr.onClose(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), httpShutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(stopCtx); err != nil {
			logger.Warn("HTTP shutdown", "err", err)
		}
		logger.Info("stopped")
	})
	stopMetrics, metricsAddr, err := serveMetrics(p.common, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), srvErr) // access.go
	if err != nil {
		return "", nil, err
	}
	pr.onClose(stopMetrics)
	pr.metricsAddr = metricsAddr
	return ln.Addr().String(), srvErr, nil
}

// start starts the launcher, then the scheduler (either may be nil).
func (pr *process) start(ctx context.Context, sched *scheduler.Scheduler, launch *launcher.Launcher, logger *slog.Logger) error {
	if launch != nil {
		if err := launch.Start(ctx); err != nil {
			return err
		}
		// Its own budget is SHUTDOWN_TIMEOUT (launcher.Config).
		pr.onClose(func() {
			if err := launch.Stop(context.Background()); err != nil {
				logger.Warn("launcher stop", "err", err)
			}
		})
	}
	if sched != nil {
		if err := sched.Start(ctx); err != nil {
			return err
		}
		pr.onClose(func() {
			stopCtx, cancel := context.WithTimeout(context.Background(), schedulerStopTimeout)
			defer cancel()
			if err := sched.Stop(stopCtx); err != nil {
				logger.Warn("scheduler stop", "err", err)
			}
		})
	}
	return nil
}

// evictionCheckInterval is how often a running process reads Redis's
// maxmemory-policy again: someone may change it under a running fleet.
const evictionCheckInterval = time.Minute

// checkEviction refuses an evicting Redis (its maxmemory-policy is not
// noeviction, or cannot be read) unless allow, when it logs an error.
func checkEviction(ctx context.Context, rdb redis.UniversalClient, allow bool, logger *slog.Logger) error {
	checkCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := queue.CheckEvictionPolicy(checkCtx, rdb)
	switch {
	case err == nil:
		return nil
	case allow:
		logger.Error("Redis may evict chronos's keys; running anyway (ALLOW_EVICTION)", "err", err)
		return nil
	case errors.Is(err, queue.ErrPolicyUnknown):
		return fmt.Errorf("%w: chronos needs maxmemory-policy noeviction; if it is, start with ALLOW_EVICTION=true (--allow-eviction)", err)
	}
	return fmt.Errorf("%w; or start with ALLOW_EVICTION=true (--allow-eviction) to run anyway", err)
}

// watchEviction logs an error each evictionCheckInterval while Redis's
// maxmemory-policy is not noeviction.
func watchEviction(ctx context.Context, rdb redis.UniversalClient, allow bool, logger *slog.Logger) {
	t := time.NewTicker(evictionCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		checkCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := queue.CheckEvictionPolicy(checkCtx, rdb)
		cancel()
		switch {
		case err == nil, queue.IsUnavailable(err):
		case errors.Is(err, queue.ErrPolicyUnknown) && allow:
		default:
			logger.Error("Redis may evict chronos's keys", "err", err)
		}
	}
}

const (
	// httpShutdownTimeout bounds the wait for API requests in progress;
	// they are short (one or two Redis round trips).
	httpShutdownTimeout = 10 * time.Second
	// schedulerStopTimeout bounds the wait for the tick in progress to end
	// (it stops between pages) and the leases to be released.
	schedulerStopTimeout = 10 * time.Second
)

func (p processSpec) validate() error {
	if err := p.validateNumbers(); err != nil {
		return err
	}
	if p.launch != nil && p.launch.Executor == "http" {
		u, err := url.Parse(p.launch.ExecutorURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("EXECUTOR=http needs EXECUTOR_URL=http(s)://host/path, got %q", p.launch.ExecutorURL)
		}
	} else if p.launch != nil && p.launch.ExecutorURL != "" {
		// Most likely EXECUTOR was forgotten: the demo executor would
		// record every run SUCCESS without calling the URL.
		return fmt.Errorf("EXECUTOR_URL is set (%q) but EXECUTOR=%s, which would not call it: set EXECUTOR=http, or unset EXECUTOR_URL",
			p.launch.ExecutorURL, p.launch.Executor)
	}
	if p.launch != nil && p.launch.WakeURL != "" {
		u, err := url.Parse(p.launch.WakeURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("WAKE_URL must be http(s)://host/path, got %q", p.launch.WakeURL)
		}
		if n := len(p.launch.WakeSecret); n < launcher.WakeSecretMinLen {
			return fmt.Errorf("WAKE_SECRET must be at least %d bytes when WAKE_URL is set, got %d: make one with 'openssl rand -hex 32' and give it to the wake receiver too",
				launcher.WakeSecretMinLen, n)
		}
	}
	redisURL, err := p.common.redisURL()
	if err != nil {
		return err
	}
	if !p.embedded && redisURL == "" {
		return errors.New("REDIS_URL is required (e.g. redis://127.0.0.1:6379/0, or REDIS_CLUSTER_ADDRS for a Redis Cluster); 'chronos dev' runs without one")
	}
	return nil
}

// validateNumbers rejects settings of zero or less where zero means
// nothing. The packages read a zero as "use the default", which would
// quietly turn SHARDS=0 into 16 or LAUNCHER_CONCURRENCY=0 into 10.
func (p processSpec) validateNumbers() error {
	c := p.common
	errs := []error{
		positive("SHARDS", c.Shards), positive("RUN_HISTORY", c.RunHistory), positive("TASK_RETENTION", c.TaskRetention),
		positive("TASK_TIMEOUT", c.TaskTimeout), positive("MAX_CONNS", c.MaxConns),
		positive("WORKFLOW_MAX_BYTES", c.WorkflowMaxBytes), positive("WORKFLOW_MAX_VERSIONS", c.WorkflowMaxVersions),
		positive("ALARM_MAX_ACTIVE", c.AlarmMaxActive), positive("RUN_TIMEOUT", c.RunTimeout),
	}
	if a := p.api; a != nil {
		errs = append(errs, positive("ALARM_MAX_FAILURES", a.AlarmMaxFailures), positive("ALARM_PAYLOAD_MAX_BYTES", a.AlarmPayloadMaxBytes),
			positive("ALARM_LABEL_MAX_BYTES", a.AlarmLabelMaxBytes), positive("ALARM_WAKE_MESSAGE_MAX_BYTES", a.AlarmWakeMessageMaxBytes))
		if a.AlarmMaxFailures > model.MaxAlarmFailures {
			errs = append(errs, fmt.Errorf("ALARM_MAX_FAILURES must be between 1 and %d, got %d", model.MaxAlarmFailures, a.AlarmMaxFailures))
		}
	}
	if c.TaskMaxRetry < 0 {
		errs = append(errs, fmt.Errorf("TASK_MAX_RETRY must be 0 (no retries) or more, got %d", c.TaskMaxRetry))
	}
	if s := p.sched; s != nil {
		errs = append(errs, positive("TICK_MS", s.TickMS), positive("MAX_CATCHUP_PER_TICK", s.MaxCatchupPerTick),
			positive("LEASE_TTL", s.LeaseTTL), positive("MISFIRE_GRACE_MS", s.MisfireGraceMS))
		if s.ForwardLeadMS < 0 || s.ForwardLeadMS > queue.ForwardLeadMax.Milliseconds() {
			errs = append(errs, fmt.Errorf("FORWARD_LEAD_MS must be between 0 (runnable at their second) and %d, got %d",
				queue.ForwardLeadMax.Milliseconds(), s.ForwardLeadMS))
		}
	}
	if l := p.launch; l != nil {
		errs = append(errs, positive("LAUNCHER_CONCURRENCY", l.Concurrency),
			positive("EXECUTOR_TIMEOUT", l.ExecutorTimeout), positive("WAKE_TIMEOUT", l.WakeTimeout), positive("SHUTDOWN_TIMEOUT", l.ShutdownTimeout),
			positive("ARCHIVE_SWEEP_INTERVAL", l.ArchiveSweep), positive("LAUNCH_GRACE", l.LaunchGrace),
			positive("RECOVER_INTERVAL", l.RecoverInterval))
		// asynq cancels an attempt at the task's timeout, cutting a longer
		// executor call short (and the executor is called again).
		if l.ExecutorTimeout >= c.TaskTimeout {
			errs = append(errs, fmt.Errorf("EXECUTOR_TIMEOUT (%s) must be shorter than TASK_TIMEOUT (%s), which cancels a launch attempt: raise TASK_TIMEOUT where runs are enqueued (schedulers, API) and on launchers",
				l.ExecutorTimeout, c.TaskTimeout))
		}
		if l.WakeTimeout >= c.TaskTimeout {
			errs = append(errs, fmt.Errorf("WAKE_TIMEOUT (%s) must be shorter than TASK_TIMEOUT (%s), which cancels a launch attempt: raise TASK_TIMEOUT where runs are enqueued (schedulers, API) and on launchers",
				l.WakeTimeout, c.TaskTimeout))
		}
	}
	return errors.Join(errs...)
}

func positive[T int | int64 | time.Duration](name string, v T) error {
	if v <= 0 {
		return fmt.Errorf("%s must be greater than 0, got %v", name, v)
	}
	return nil
}

// newRedis opens the client REDIS_URL names (queue.OpenRedis): redis://,
// rediss://, redis-sentinel:// or redis-cluster://.
func newRedis(raw string) (redis.UniversalClient, error) { return queue.OpenRedis(raw) }

// redactURL hides the password of a Redis URL for logs and errors
// (queue.RedactURL).
func redactURL(raw string) string { return queue.RedactURL(raw) }

// clientConnOpt hands asynqmon our client instead of a second connection
// configuration, so every Redis flavour we support works there too.
type clientConnOpt struct{ c redis.UniversalClient }

// MakeRedisClient implements asynq.RedisConnOpt.
func (o clientConnOpt) MakeRedisClient() any { return o.c }
