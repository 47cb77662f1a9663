package main

import (
	"context"
	"errors"
	"fmt"
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
		TaskMaxRetry:  p.common.TaskMaxRetry,
	})
	if err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		store.NewDepthCollector())

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
			mon := asynqmon.New(asynqmon.Options{RootPath: "/monitoring", RedisConnOpt: clientConnOpt{rdb}, ReadOnly: false})
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
		}, logger.With("component", "launcher"), reg)
		if err != nil {
			return err
		}
	}

	ln, err := net.Listen("tcp", p.common.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on HTTP_ADDR=%s: %w (is another process using it?)", p.common.HTTPAddr, err)
	}
	srv := &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second}
	srvErr := make(chan error, 1)
	go func() { srvErr <- srv.Serve(ln) }()
	logger.Info("chronos started", "http_addr", ln.Addr().String(), "api", p.api != nil,
		"scheduler", sched != nil, "launcher", launch != nil, "redis", redactURL(redisURL))
	if env.Ready != nil {
		env.Ready <- ln.Addr().String()
	}

	if launch != nil {
		if err := launch.Start(ctx); err != nil {
			return err
		}
	}
	if sched != nil {
		if err := sched.Start(ctx); err != nil {
			return err
		}
	}

	select {
	case <-ctx.Done():
	case err := <-srvErr:
		return fmt.Errorf("HTTP server: %w", err)
	}
	logger.Info("shutting down")
	stopCtx, cancelStop := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancelStop()
	if sched != nil {
		if err := sched.Stop(stopCtx); err != nil {
			logger.Warn("scheduler stop", "err", err)
		}
	}
	if launch != nil {
		launch.Stop()
	}
	if err := srv.Shutdown(stopCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Warn("HTTP shutdown", "err", err)
	}
	logger.Info("stopped")
	return nil
}

func (p processSpec) validate() error {
	if p.launch != nil && p.launch.Executor == "http" {
		u, err := url.Parse(p.launch.ExecutorURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("EXECUTOR=http needs EXECUTOR_URL=http(s)://host/path, got %q", p.launch.ExecutorURL)
		}
	}
	if !p.embedded && p.common.RedisURL == "" {
		return errors.New("REDIS_URL is required (e.g. redis://127.0.0.1:6379/0); 'chronos dev' runs without one")
	}
	return nil
}

// newRedis opens a client for redis://, rediss:// or
// redis-sentinel://[:password@]host:port[,host:port...]/master[/db].
func newRedis(raw string) (redis.UniversalClient, error) {
	if rest, ok := strings.CutPrefix(raw, "redis-sentinel://"); ok {
		password := ""
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			password = strings.TrimPrefix(rest[:at], ":")
			rest = rest[at+1:]
		}
		hosts, path, _ := strings.Cut(rest, "/")
		master, _, _ := strings.Cut(path, "/")
		if hosts == "" || master == "" {
			return nil, fmt.Errorf("REDIS_URL %q: want redis-sentinel://[:password@]host:port[,host:port]/master-name", raw)
		}
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: master, SentinelAddrs: strings.Split(hosts, ","), Password: password,
		}), nil
	}
	opt, err := redis.ParseURL(raw)
	if err != nil {
		return nil, fmt.Errorf("REDIS_URL %q: %w", redactURL(raw), err)
	}
	return redis.NewClient(opt), nil
}

func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// clientConnOpt hands asynqmon our client instead of a second connection
// configuration, so every Redis flavour we support works there too.
type clientConnOpt struct{ c redis.UniversalClient }

// MakeRedisClient implements asynq.RedisConnOpt.
func (o clientConnOpt) MakeRedisClient() any { return o.c }
