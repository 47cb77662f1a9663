package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof"
	"net/url"
	"strconv"
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

// run wires the parts a process runs, serves HTTP, and on ctx's end shuts
// down in order: stop ticking (leases released), finish runs in progress,
// stop serving.
func run(ctx context.Context, env *Env, p processSpec) error {
	logger := newLogger(p.common, env)
	if err := p.validate(); err != nil {
		return err
	}

	redisURL := p.common.RedisURL
	if p.embedded {
		mr := miniredis.NewMiniRedis()
		if err := mr.StartAddr("127.0.0.1:0"); err != nil {
			return fmt.Errorf("start embedded Redis: %w", err)
		}
		defer mr.Close()
		redisURL = "redis://" + mr.Addr()
		logger.Info("embedded Redis started (miniredis; data lives only as long as this process)", "addr", mr.Addr())
	}
	rdb, err := newRedis(redisURL)
	if err != nil {
		return err
	}
	defer rdb.Close()
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = rdb.Ping(pingCtx).Err()
	cancel()
	if err != nil {
		return fmt.Errorf("cannot reach Redis at REDIS_URL=%s: %w (is it running? check the address and password)", redactURL(redisURL), err)
	}

	if !p.embedded { // miniredis evicts nothing
		if err := checkEviction(ctx, rdb, p.common.AllowEviction, logger); err != nil {
			return err
		}
		evictCtx, stopEvict := context.WithCancel(ctx)
		defer stopEvict()
		go watchEviction(evictCtx, rdb, p.common.AllowEviction, logger)
	}

	clock := queue.NewRedisClock(rdb)
	if err := clock.Sync(ctx); err != nil {
		return fmt.Errorf("read Redis TIME: %w", err)
	}
	clockCtx, stopClock := context.WithCancel(context.WithoutCancel(ctx))
	defer stopClock()
	go clock.RunSync(clockCtx, 10*time.Second)

	store, err := queue.NewStore(ctx, rdb, clock, &queue.Config{
		Shards:        p.common.Shards,
		Lookahead:     time.Duration(p.common.LookaheadMS) * time.Millisecond,
		RunHistory:    p.common.RunHistory,
		TaskRetention: p.common.TaskRetention,
		QueueName:     p.common.Queue,
		TaskMaxRetry:  cmp.Or(p.common.TaskMaxRetry, queue.NoRetry), // TASK_MAX_RETRY=0: none, not the default
		TaskTimeout:   p.common.TaskTimeout,
	})
	if err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		store.Tasks().Collector())

	var e *echo.Echo
	if p.api != nil {
		apiCfg := &api.Config{
			DefaultOverlapPolicy: model.OverlapPolicy(p.api.DefaultOverlapPolicy),
			DefaultCatchupPolicy: model.CatchupPolicy(p.api.DefaultCatchupPolicy),
			DefaultJitterMs:      p.api.DefaultJitterMS,
		}
		if err := apiCfg.Validate(); err != nil {
			return err
		}
		e = api.New(store, apiCfg, logger, reg)
		if p.api.Monitoring {
			mon := asynqmon.New(asynqmon.Options{RootPath: "/monitoring", RedisConnOpt: clientConnOpt{rdb}, ReadOnly: !p.api.MonitoringWritable})
			e.Any("/monitoring", echo.WrapHandler(mon))
			e.Any("/monitoring/*", echo.WrapHandler(mon))
		}
	} else {
		e = api.Probes(store, nil, logger, reg)
	}
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	if p.common.Pprof {
		e.Any("/debug/pprof/*", echo.WrapHandler(http.DefaultServeMux)) // net/http/pprof registers there
	}

	var sched *scheduler.Scheduler
	if p.sched != nil {
		sched, err = scheduler.New(store, &scheduler.Config{
			TickInterval:      time.Duration(p.sched.TickMS) * time.Millisecond,
			MaxCatchupPerTick: p.sched.MaxCatchupPerTick,
			LeaseTTL:          p.sched.LeaseTTL,
			RunTimeout:        p.sched.RunTimeout,
			MisfireGrace:      time.Duration(p.sched.MisfireGraceMS) * time.Millisecond,
		}, logger.With("component", "scheduler"), reg)
		if err != nil {
			return err
		}
	}
	var launch *launcher.Launcher
	if p.launch != nil {
		var ex launcher.Executor = launcher.LogExecutor{Logger: logger.With("component", "executor")}
		if p.launch.Executor == "http" {
			ex = launcher.NewHTTPExecutor(p.launch.ExecutorURL, p.launch.ExecutorTimeout, p.launch.Concurrency)
		}
		launch, err = launcher.New(store, &launcher.Config{
			Concurrency: p.launch.Concurrency, ShutdownTimeout: p.launch.ShutdownTimeout, Executor: ex,
			ArchiveSweepInterval: p.launch.ArchiveSweep, LaunchGrace: p.launch.LaunchGrace,
		}, logger.With("component", "launcher"), reg)
		if err != nil {
			return err
		}
	}

	ln, err := net.Listen("tcp", p.common.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on HTTP_ADDR=%s: %w (is another process using it?)", p.common.HTTPAddr, err)
	}
	// An idle keep-alive connection is closed after 2 minutes. (No
	// ReadTimeout: net/http cancels a request's context when it expires,
	// which would cut /debug/pprof/profile and asynqmon's long calls.)
	// Connections are capped so that held sockets cannot take every file
	// descriptor; request bodies are bounded by the API (api.Config).
	lim := api.NewConnLimiter(p.common.MaxConns)
	srv := &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, ConnState: lim.ConnState}
	srvErr := make(chan error, 1)
	go func() { srvErr <- srv.Serve(lim.Listener(ln)) }()
	// The deferred stops run in reverse: scheduler, launcher, then HTTP,
	// on every way out of here, each with its own time budget (the
	// launcher's is SHUTDOWN_TIMEOUT), so a slow one can't eat the next
	// one's.
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), httpShutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(stopCtx); err != nil {
			logger.Warn("HTTP shutdown", "err", err)
		}
		logger.Info("stopped")
	}()
	logger.Info("chronos started", "http_addr", ln.Addr().String(), "api", p.api != nil,
		"scheduler", sched != nil, "launcher", launch != nil, "redis", redactURL(redisURL))
	if env.Ready != nil {
		env.Ready <- ln.Addr().String()
	}

	if launch != nil {
		if err := launch.Start(ctx); err != nil {
			return err
		}
		// Its own budget is SHUTDOWN_TIMEOUT (launcher.Config).
		defer func() {
			if err := launch.Stop(context.Background()); err != nil {
				logger.Warn("launcher stop", "err", err)
			}
		}()
	}
	if sched != nil {
		if err := sched.Start(ctx); err != nil {
			return err
		}
		defer func() {
			stopCtx, cancel := context.WithTimeout(context.Background(), schedulerStopTimeout)
			defer cancel()
			if err := sched.Stop(stopCtx); err != nil {
				logger.Warn("scheduler stop", "err", err)
			}
		}()
	}

	select {
	case <-ctx.Done():
		logger.Info("shutting down")
		return nil
	case err := <-srvErr:
		return fmt.Errorf("HTTP server: %w", err)
	}
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
	if !p.embedded && p.common.RedisURL == "" {
		return errors.New("REDIS_URL is required (e.g. redis://127.0.0.1:6379/0); 'chronos dev' runs without one")
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
	}
	if c.TaskMaxRetry < 0 {
		errs = append(errs, fmt.Errorf("TASK_MAX_RETRY must be 0 (no retries) or more, got %d", c.TaskMaxRetry))
	}
	if s := p.sched; s != nil {
		errs = append(errs, positive("TICK_MS", s.TickMS), positive("MAX_CATCHUP_PER_TICK", s.MaxCatchupPerTick),
			positive("LEASE_TTL", s.LeaseTTL), positive("RUN_TIMEOUT", s.RunTimeout), positive("MISFIRE_GRACE_MS", s.MisfireGraceMS))
	}
	if l := p.launch; l != nil {
		errs = append(errs, positive("LAUNCHER_CONCURRENCY", l.Concurrency),
			positive("EXECUTOR_TIMEOUT", l.ExecutorTimeout), positive("SHUTDOWN_TIMEOUT", l.ShutdownTimeout),
			positive("ARCHIVE_SWEEP_INTERVAL", l.ArchiveSweep), positive("LAUNCH_GRACE", l.LaunchGrace))
		// asynq cancels an attempt at the task's timeout, cutting a longer
		// executor call short (and the executor is called again).
		if l.ExecutorTimeout >= c.TaskTimeout {
			errs = append(errs, fmt.Errorf("EXECUTOR_TIMEOUT (%s) must be shorter than TASK_TIMEOUT (%s), which cancels a launch attempt: raise TASK_TIMEOUT where runs are enqueued (schedulers, API) and on launchers",
				l.ExecutorTimeout, c.TaskTimeout))
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

// newRedis opens a client for redis://, rediss:// or
// redis-sentinel://[:password@]host:port[,host:port...]/master[/db].
func newRedis(raw string) (redis.UniversalClient, error) {
	if rest, ok := strings.CutPrefix(raw, "redis-sentinel://"); ok {
		bad := fmt.Errorf("REDIS_URL %q: want redis-sentinel://[:password@]host:port[,host:port]/master-name[/db]", redactURL(raw))
		password := ""
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			password = strings.TrimPrefix(rest[:at], ":")
			rest = rest[at+1:]
		}
		hosts, path, _ := strings.Cut(rest, "/")
		master, dbText, hasDB := strings.Cut(path, "/")
		db := 0
		if hasDB {
			var err error
			if db, err = strconv.Atoi(dbText); err != nil || db < 0 {
				return nil, bad
			}
		}
		if hosts == "" || master == "" {
			return nil, bad
		}
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: master, SentinelAddrs: strings.Split(hosts, ","), Password: password, DB: db,
		}), nil
	}
	opt, err := redis.ParseURL(raw)
	if err != nil {
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = ue.Err // it repeats the URL, password and all
		}
		return nil, fmt.Errorf("REDIS_URL %q: %w", redactURL(raw), err)
	}
	// ContextTimeoutEnabled stays off: redsync bounds a lease acquire by
	// 5% of LEASE_TTL, and a deadline that cut the socket would leave a
	// lease taken in Redis but not by the caller behind a short stall.
	// Callers that must answer in time (probes, scrapes) bound their wait
	// themselves (queue.Store.Ping).
	return redis.NewClient(opt), nil
}

// redactURL hides the password of a Redis URL for logs and errors. It
// works on the text, not url.Parse, so a URL that doesn't parse (a
// sentinel list, a typo) doesn't leak its password either.
func redactURL(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return raw
	}
	user, _, hasPassword := strings.Cut(rest[:at], ":")
	if !hasPassword {
		return raw
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}

// clientConnOpt hands asynqmon our client instead of a second connection
// configuration, so every Redis flavour we support works there too.
type clientConnOpt struct{ c redis.UniversalClient }

// MakeRedisClient implements asynq.RedisConnOpt.
func (o clientConnOpt) MakeRedisClient() any { return o.c }
