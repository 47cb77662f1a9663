// Command bench is chronos's load harness (issue 4). In one run against a
// redis-server it starts itself, it measures raw asynq (the limit),
// chronos's scheduler bursts, asynq's own Scheduler (the peer), a steady
// load, Redis and process footprints, the launchers and the API, and prints
// one markdown table with each figure's ratio to the limit or the peer.
//
//	go run ./scripts/bench                 # default sizes, ~13 minutes
//	go run ./scripts/bench -quick          # small sizes, short waits
//	go run ./scripts/bench -only burst,api # some scenarios
//	go run ./scripts/bench -million        # adds 1M-schedule burst and footprint
//	go run ./scripts/bench -profile        # adds an in-process pprof burst
//
// Every chronos process is the real binary (built from ./cmd/chronos) with
// its own HTTP port; asynq.Scheduler replicas are child processes of this
// program. All traffic stays on 127.0.0.1; every process is stopped and the
// temp dir removed at the end, also on error or interrupt.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronos-sched/chronos/launcher"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

const lookaheadDefault = queue.LookaheadDefault

// scenarios in the order they run.
var scenarios = []string{"limit", "burst", "warm", "catchup", "dup", "peer", "steady", "footprint", "launch", "idle", "api", "cluster", "profile"}

type config struct {
	quick, million bool
	only           map[string]bool

	burstSizes, burstReplicas []int
	settle                    time.Duration
	warmSizes                 []int
	catchupN, catchupMissed   int
	dupN, dupReplicas         int

	peerSizes []int
	peerSpec  string
	peerWait  time.Duration

	steadyN, steadyPeriods              int
	steadyPeriod                        time.Duration
	steadyLaunchers, steadyLauncherConc int

	footprintSizes []int
	footprintRuns  int
	idle           time.Duration

	limitN       int
	limitClients []int

	launchN        int
	launchReplicas []int
	launchConc     int
	launchRounds   int

	idleLaunchers []int         // idle: launcher processes (0: Redis alone)
	idleWindow    time.Duration // idle: measured window

	clusterN int // cluster: burst size on one Redis and on a 3-master cluster (cluster.go)

	apiN, apiClients int
	apiMax           time.Duration
	apiLoad          string
	apiDuration      time.Duration

	profileN   int
	profileDir string
	// launchProfile: where a CPU and an allocations profile of the first
	// launcher of each launch round are written ("": none).
	launchProfile string

	tickMS, shards int
	chronosBin     string
	verbose        bool
}

// bench holds the environment, the configuration and the results.
type bench struct {
	e   *env
	cfg config
	reg regRate
	res results
}

type results struct {
	limit      *limitResult
	bursts     []*burstResult
	warms      []*burstResult
	catchup    *catchupResult
	dup        *burstResult
	peerDup    *peerResult
	peers      []*peerResult
	steady     *steadyResult
	footprints []*footprintResult
	launches   []*launchSeries
	idles      []*idleResult
	clusters   []*clusterResult
	api        *apiResult
	profile    *profileResult
	errs       []string
	durations  map[string]time.Duration
	loads      map[string]string // load average when each scenario started
}

func main() {
	switch os.Getenv(childEnv) {
	case "peer":
		os.Exit(peerChild())
	case "echo":
		os.Exit(echoChild())
	}
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// run sets up Redis and the binary, runs the selected scenarios and prints
// the table. Everything it starts is stopped before it returns, panics
// included.
func run(ctx context.Context, cfg config, stdout, stderr io.Writer) (err error) {
	started := time.Now()
	dir, err := os.MkdirTemp("", "chronos-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	logf := func(format string, args ...any) {
		fmt.Fprintf(stderr, "%s  %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	}
	e := &env{dir: dir, shards: cfg.shards, tickMS: cfg.tickMS, logf: logf, procs: map[*proc]struct{}{}}
	defer e.close()
	defer func() {
		if p := recover(); p != nil {
			e.close()
			panic(p)
		}
	}()
	if e.self, err = os.Executable(); err != nil {
		return err
	}
	e.bin = cfg.chronosBin
	if e.bin == "" {
		logf("building ./cmd/chronos")
		if e.bin, err = queuetest.BuildChronos(ctx, dir); err != nil {
			return err
		}
	}
	if _, err := e.startRedis(ctx); err != nil {
		return err
	}
	e.rdb = redis.NewClient(&redis.Options{Addr: e.redisAddr, PoolSize: 128})
	defer e.rdb.Close()
	logf("redis-server on %s, logs in %s", e.redisAddr, dir)

	b := &bench{e: e, cfg: cfg, res: results{durations: map[string]time.Duration{}, loads: map[string]string{}}}
	header := machineInfo(ctx, e.rdb)
	for _, name := range scenarios {
		if !cfg.only[name] {
			continue
		}
		t := time.Now()
		b.res.loads[name] = loadAverage()
		if err := b.runScenario(ctx, name); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			logf("%s failed: %v", name, err)
			b.res.errs = append(b.res.errs, fmt.Sprintf("%s: %v", name, err))
		}
		b.res.durations[name] = time.Since(t)
	}
	printReport(stdout, b, header, time.Since(started))
	return nil
}

func (b *bench) runScenario(ctx context.Context, name string) error {
	cfg := b.cfg
	switch name {
	case "limit":
		r, err := b.limit(ctx)
		b.res.limit = r
		return err
	case "burst":
		for _, n := range cfg.burstSizes {
			for _, k := range cfg.burstReplicas {
				r, err := b.burst(ctx, burstOpts{n: n, replicas: k, settle: cfg.settle, verify: true})
				if err != nil {
					return fmt.Errorf("%d×%d: %w", n, k, err)
				}
				b.res.bursts = append(b.res.bursts, r)
			}
		}
	case "warm":
		for _, n := range cfg.warmSizes {
			r, err := b.burst(ctx, burstOpts{n: n, replicas: 1, settle: warmSettle(cfg.settle, n), verify: true, warm: true})
			if err != nil {
				return fmt.Errorf("%d: %w", n, err)
			}
			b.res.warms = append(b.res.warms, r)
		}
	case "catchup":
		r, err := b.catchup(ctx, cfg.catchupN, cfg.catchupMissed)
		b.res.catchup = r
		return err
	case "dup":
		r, err := b.burst(ctx, burstOpts{n: cfg.dupN, replicas: cfg.dupReplicas, settle: cfg.settle, verify: true})
		if err != nil {
			return fmt.Errorf("chronos ×%d: %w", cfg.dupReplicas, err)
		}
		b.res.dup = r
		p, err := b.peer(ctx, cfg.dupN, cfg.dupReplicas, cfg.peerSpec)
		if err != nil {
			return fmt.Errorf("asynq.Scheduler ×%d: %w", cfg.dupReplicas, err)
		}
		b.res.peerDup = p
	case "peer":
		for _, n := range cfg.peerSizes {
			r, err := b.peer(ctx, n, 1, cfg.peerSpec)
			if err != nil {
				return fmt.Errorf("%d: %w", n, err)
			}
			b.res.peers = append(b.res.peers, r)
		}
	case "steady":
		r, err := b.steady(ctx)
		b.res.steady = r
		return err
	case "footprint":
		for _, n := range cfg.footprintSizes {
			r, err := b.footprint(ctx, n)
			if err != nil {
				return fmt.Errorf("%d: %w", n, err)
			}
			b.res.footprints = append(b.res.footprints, r)
		}
	case "launch":
		clients := 32
		if b.res.limit != nil {
			clients = b.res.limit.bestClients
		}
		for _, k := range cfg.launchReplicas {
			r, err := b.launchRounds(ctx, cfg.launchN, k, cfg.launchRounds, clients)
			if err != nil {
				return fmt.Errorf("%d launchers: %w", k, err)
			}
			b.res.launches = append(b.res.launches, r)
		}
	case "idle":
		for _, k := range cfg.idleLaunchers {
			r, err := b.idle(ctx, k, cfg.idleWindow)
			if err != nil {
				return fmt.Errorf("%d launchers: %w", k, err)
			}
			b.res.idles = append(b.res.idles, r)
		}
	case "cluster":
		r, err := b.clusterBursts(ctx, cfg.clusterN)
		b.res.clusters = r
		return err
	case "api":
		r, err := b.api(ctx)
		b.res.api = r
		return err
	case "profile":
		r, err := b.profile(ctx, cfg.profileN)
		b.res.profile = r
		return err
	}
	return nil
}

// parseFlags reads the flags; -quick changes the default of every size
// flag not given explicitly.
func parseFlags(args []string) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	only := fs.String("only", "", "comma-separated scenarios to run (default all but profile): "+strings.Join(scenarios, ","))
	fs.BoolVar(&cfg.quick, "quick", false, "small sizes and short waits (about a minute); flags given explicitly still win")
	fs.BoolVar(&cfg.million, "million", false, "add 1,000,000 schedules to the burst and footprint sizes")
	profile := fs.Bool("profile", false, "add the in-process CPU-profiled burst (scenario 'profile')")
	cluster := fs.Bool("cluster", false, "add the cold and warm bursts on one Redis beside a 3-master Redis Cluster, with each master's CPU per run (scenario 'cluster')")
	fs.IntVar(&cfg.clusterN, "cluster-n", 100000, "cluster: schedules due in the same second, on each topology")

	burstSizes := fs.String("burst-sizes", "10000,100000", "burst: schedules due in the same second")
	burstReplicas := fs.String("burst-replicas", "1,2", "burst: scheduler processes")
	fs.DurationVar(&cfg.settle, "settle", 7*time.Second, "burst: time from the end of registration to the due second (processes start, shards settle)")
	warmSizes := fs.String("warm-sizes", "10000,100000", "warm: schedules due in the same second with the default lookahead (runs known ahead)")
	fs.IntVar(&cfg.catchupN, "catchup-n", 1000, "catchup: per-second schedules whose scheduler was down")
	fs.IntVar(&cfg.catchupMissed, "catchup-missed", 100, "catchup: seconds down, runs each schedule missed (MAX_CATCHUP_PER_TICK caught up in the first tick)")
	fs.IntVar(&cfg.dupN, "dup-n", 10000, "dup: schedules/entries fired by replicated schedulers (chronos and asynq.Scheduler)")
	fs.IntVar(&cfg.dupReplicas, "dup-replicas", 3, "dup: replicas of each scheduler")

	peerSizes := fs.String("peer-sizes", "10000,100000", "peer: asynq.Scheduler entries")
	fs.StringVar(&cfg.peerSpec, "peer-spec", "* * * * *", "peer: cron spec of every asynq.Scheduler entry (robfig standard parser)")
	fs.DurationVar(&cfg.peerWait, "peer-wait", 45*time.Second, "peer: how long after the boundary to wait for all enqueues, plus a second per 1,000 entries")

	fs.IntVar(&cfg.steadyN, "steady-n", 10000, "steady: schedules")
	fs.DurationVar(&cfg.steadyPeriod, "steady-period", time.Minute, "steady: the schedules' period (1m = `* * * * *`)")
	fs.IntVar(&cfg.steadyPeriods, "steady-minutes", 5, "steady: periods measured (minutes at the default period)")
	fs.IntVar(&cfg.steadyLaunchers, "steady-launchers", 1, "steady: launcher processes (http executor to an in-process no-op server)")
	fs.IntVar(&cfg.steadyLauncherConc, "steady-launcher-concurrency", 50, "steady: LAUNCHER_CONCURRENCY of those launchers")

	footprintSizes := fs.String("footprint-sizes", "100000", "footprint: registered schedules")
	fs.IntVar(&cfg.footprintRuns, "footprint-runs", 10, "footprint: run records kept per schedule (RUN_HISTORY)")
	fs.DurationVar(&cfg.idle, "idle", 20*time.Second, "footprint: window of the idle-CPU measurement")

	fs.IntVar(&cfg.limitN, "limit-n", 100000, "limit: raw asynq tasks per enqueue run (and drained)")
	limitClients := fs.String("limit-clients", "8,32,64", "limit: concurrent clients tried")

	fs.IntVar(&cfg.launchN, "launch-n", 20000, "launch: runs drained")
	launchReplicas := fs.String("launch-replicas", "1,2", "launch: launcher processes")
	fs.IntVar(&cfg.launchRounds, "launch-rounds", 3, "launch: rounds of a raw drain then a launch, each with launch-n tasks (the median ratio is reported)")
	fs.IntVar(&cfg.launchConc, "launch-concurrency", launcher.ConcurrencyDefault, "launch: LAUNCHER_CONCURRENCY (default: the launcher's), also each raw drain server's concurrency")

	idleLaunchers := fs.String("idle-launchers", "0,1,2", "idle: idle launcher processes measured in turn (0: Redis alone)")
	fs.DurationVar(&cfg.idleWindow, "idle-window", 30*time.Second, "idle: window of the idle launchers' Redis CPU and commands")

	fs.IntVar(&cfg.apiN, "api-n", 50000, "api: upserts")
	fs.IntVar(&cfg.apiClients, "api-clients", 32, "api: concurrent clients")
	fs.DurationVar(&cfg.apiMax, "api-max", 30*time.Second, "api: time cap of the Go load loop")
	fs.StringVar(&cfg.apiLoad, "api-load", "auto", "api: load generator: wrk, go (a Go load loop of -api-n requests), or auto (wrk when installed)")
	fs.DurationVar(&cfg.apiDuration, "api-duration", 6*time.Second, "api: how long wrk runs (whole seconds)")

	fs.IntVar(&cfg.profileN, "profile-n", 100000, "profile: burst size")
	fs.StringVar(&cfg.launchProfile, "launch-profile", "", "launch: write a CPU profile (2 s) and the allocations of the first launcher of each round here (PPROF=true)")
	fs.StringVar(&cfg.profileDir, "profile-dir", "", "profile: where profiles are written (default a chronos-bench-profile dir in the temp dir; kept)")

	fs.IntVar(&cfg.tickMS, "tick-ms", 1000, "TICK_MS of the scheduler processes")
	fs.IntVar(&cfg.shards, "shards", queue.ShardsDefault, "SHARDS of every process")
	fs.StringVar(&cfg.chronosBin, "chronos-bin", "", "prebuilt chronos binary (default: go build ./cmd/chronos)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if cfg.quick {
		quick := map[string]string{
			"burst-sizes": "2000", "settle": "4s", "dup-n": "2000", "warm-sizes": "2000", "catchup-n": "100",
			"peer-sizes": "2000", "peer-spec": "@every 3s", "peer-wait": "8s",
			"steady-n": "2000", "steady-period": "5s", "steady-minutes": "2", "steady-launcher-concurrency": "20",
			"footprint-sizes": "2000", "idle": "3s",
			"limit-n": "5000", "launch-n": "2000", "launch-rounds": "1", "idle-window": "5s", "cluster-n": "2000", "api-n": "2000", "api-max": "10s", "api-duration": "2s", "profile-n": "2000",
		}
		for name, v := range quick {
			if !set[name] {
				if err := fs.Set(name, v); err != nil {
					return cfg, err
				}
			}
		}
	}
	var err error
	parse := func(s string) []int {
		var out []int
		for _, f := range strings.Split(s, ",") {
			if f = strings.TrimSpace(f); f == "" {
				continue
			}
			n, e := strconv.Atoi(f)
			if e != nil || n < 1 {
				err = fmt.Errorf("bad size %q in %q", f, s)
			}
			out = append(out, n)
		}
		return out
	}
	cfg.burstSizes, cfg.burstReplicas, cfg.warmSizes = parse(*burstSizes), parse(*burstReplicas), parse(*warmSizes)
	cfg.peerSizes, cfg.footprintSizes = parse(*peerSizes), parse(*footprintSizes)
	cfg.limitClients, cfg.launchReplicas = parse(*limitClients), parse(*launchReplicas)
	for _, f := range strings.Split(*idleLaunchers, ",") {
		n, e := strconv.Atoi(strings.TrimSpace(f))
		if e != nil || n < 0 {
			return cfg, fmt.Errorf("bad -idle-launchers %q", *idleLaunchers)
		}
		cfg.idleLaunchers = append(cfg.idleLaunchers, n)
	}
	if err != nil {
		return cfg, err
	}
	if cfg.million {
		if !slices.Contains(cfg.burstSizes, 1000000) {
			cfg.burstSizes = append(cfg.burstSizes, 1000000)
		}
		if !slices.Contains(cfg.footprintSizes, 1000000) {
			cfg.footprintSizes = append(cfg.footprintSizes, 1000000)
		}
	}
	cfg.only = map[string]bool{}
	if *only == "" {
		for _, s := range scenarios {
			cfg.only[s] = s != "profile" && s != "cluster"
		}
	} else {
		for _, s := range strings.Split(*only, ",") {
			s = strings.TrimSpace(s)
			if !slices.Contains(scenarios, s) {
				return cfg, fmt.Errorf("unknown scenario %q (want %s)", s, strings.Join(scenarios, ","))
			}
			cfg.only[s] = true
		}
	}
	if *profile {
		cfg.only["profile"] = true
	}
	if *cluster {
		cfg.only["cluster"] = true
	}
	if cfg.profileDir == "" {
		cfg.profileDir = os.TempDir() + "/chronos-bench-profile"
	}
	if _, err := steadySpec(cfg.steadyPeriod); err != nil {
		return cfg, err
	}
	if cfg.apiLoad != "auto" && cfg.apiLoad != "wrk" && cfg.apiLoad != "go" {
		return cfg, fmt.Errorf("-api-load must be auto, wrk or go, got %q", cfg.apiLoad)
	}
	if cfg.tickMS < 10 || cfg.shards < 1 || cfg.dupReplicas < 1 || cfg.apiClients < 1 || cfg.launchConc < 1 || cfg.launchRounds < 1 {
		return cfg, fmt.Errorf("-tick-ms, -shards, -dup-replicas, -api-clients, -launch-concurrency and -launch-rounds must be positive")
	}
	return cfg, nil
}

// machineInfo describes where the run happened.
func machineInfo(ctx context.Context, rdb *redis.Client) string {
	model, cores := "", 0
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(line, ":")
			k = strings.TrimSpace(k)
			if k == "model name" && model == "" {
				model = strings.TrimSpace(v)
			}
			if k == "processor" {
				cores++
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				mem = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
			}
		}
	}
	load := loadAverage()
	kernel := ""
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = strings.TrimSpace(string(b))
	}
	goVer := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVer = bi.GoVersion
	}
	asynqVer := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/hibiken/asynq" {
				asynqVer = d.Version
			}
		}
	}
	if v := os.Getenv("GOMAXPROCS"); v != "" {
		goVer += " (GOMAXPROCS=" + v + " for this harness and every process it starts)"
	}
	return fmt.Sprintf("machine: %s, nproc %d, %s RAM, Linux %s · %s · redis %s · asynq %s · chronos %s · load average at start %s",
		model, cores, mem, kernel, goVer, redisInfo(ctx, rdb, "server", "redis_version"), asynqVer, gitDescribe(ctx), load)
}

// loadAverage is the 1, 5 and 15 minute load average.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// gitDescribe names the commit the chronos binary was built from, and
// whether the work tree had uncommitted changes (read-only git commands).
func gitDescribe(ctx context.Context) string {
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "(not a git checkout)"
	}
	s := strings.TrimSpace(string(out))
	if st, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
		s += " + uncommitted changes"
	}
	return s
}

// warmSettle is the settle time of a warm burst of n runs: the runs are
// known ahead, and the scheduler writes them to asynq's scheduled set in
// that time, before the due second. It allows 2,000 a second (a loaded
// hour), up to the lookahead itself: runs are known no earlier.
func warmSettle(settle time.Duration, n int) time.Duration {
	return min(lookaheadDefault, settle+time.Duration(n/2000)*time.Second)
}
