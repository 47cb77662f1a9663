package main

import (
	"context"
	"io"
	"time"
)

// Env is what a command writes to; tests pass buffers.
type Env struct {
	Stdout io.Writer
	Stderr io.Writer
	// Ready, when set, receives the HTTP address once the server listens
	// (tests use it instead of polling).
	Ready chan<- string
	// MetricsReady, when set, receives the address METRICS_ADDR listens
	// on, before Ready, when METRICS_ADDR is set: with port 0 the
	// kernel chooses it, so a test needs no free port that another may
	// take first.
	MetricsReady chan<- string
}

// CLI is the command tree.
type CLI struct {
	Dev       DevCmd       `cmd:"" help:"Everything in one process on an embedded Redis (miniredis), with the demo log executor and asynqmon at /monitoring."`
	All       AllCmd       `cmd:"" help:"API, scheduler and launcher in one process on a real Redis (REDIS_URL)."`
	API       APICmd       `cmd:"" name:"api" help:"The HTTP API (registrar, preview, runs)."`
	Scheduler SchedulerCmd `cmd:"" help:"A scheduler replica: turns due schedules into asynq tasks."`
	Launcher  LauncherCmd  `cmd:"" help:"A launcher replica: takes run tasks off the asynq queues and starts runs through the executor."`
	Preview   PreviewCmd   `cmd:"" help:"Print the next fire times of a cron expression, one RFC 3339 time a line."`
	Token     TokenCmd     `cmd:"" help:"Mint an API token (a JWT) signed with AUTH_JWT_SECRET or AUTH_JWT_PRIVATE_KEY, printed on stdout."`
	MCP       MCPCmd       `cmd:"" name:"mcp" help:"Serve the cron tool (cron_add, cron_list, cron_remove) to an MCP client over stdio, through a chronos API (CHRONOS_URL, CHRONOS_TOKEN)."`
	Import    ImportCmd    `cmd:"" help:"Import jobs from another scheduler through a chronos API (CHRONOS_URL, CHRONOS_TOKEN)."`
	Export    ExportCmd    `cmd:"" help:"Export jobs for another scheduler through a chronos API (CHRONOS_URL, CHRONOS_TOKEN)."`

	Schedule   ScheduleCmd   `cmd:"" group:"client" help:"List, show, create, pause, resume, delete, trigger and backfill schedules through a chronos API (CHRONOS_URL, CHRONOS_TOKEN)."`
	Alarm      AlarmCmd      `cmd:"" group:"client" help:"Set, list and cancel an agent's alarms through a chronos API (CHRONOS_URL, and CHRONOS_TOKEN or --owner)."`
	Workflow   WorkflowCmd   `cmd:"" group:"client" help:"Store and read workflow versions' DAGs through a chronos API (CHRONOS_URL, CHRONOS_TOKEN)."`
	Completion CompletionCmd `cmd:"" help:"Print the shell's completion hook: source <(chronos completion bash), or zsh, or fish > ~/.config/fish/completions/chronos.fish."`
}

// Common settings of every long-running command.
type Common struct {
	RedisURL string `name:"redis-url" env:"REDIS_URL" help:"Redis to use: redis://[user:pass@]host:port/db, rediss:// for TLS, redis-sentinel://[pass@]host:port[,host:port]/master-name[/db], redis-cluster://host:port[,host:port] for a Redis Cluster. In 'dev', empty means embedded."`
	// RedisClusterAddrs is the other way to name a Redis Cluster
	// (Common.redisURL, config.go).
	RedisClusterAddrs []string `name:"redis-cluster-addrs" env:"REDIS_CLUSTER_ADDRS" sep:"," placeholder:"HOST:PORT,..." help:"A Redis Cluster's nodes, host:port separated by commas (any few are enough as seeds): the same as REDIS_URL=redis-cluster://host:port,... Set one of the two."`
	HTTPAddr          string   `name:"http-addr" env:"HTTP_ADDR" default:"127.0.0.1:8080" help:"Address of the HTTP server (API, /metrics, /healthz)."`
	Shards            int      `name:"shards" env:"SHARDS" default:"16" help:"Number of due-set shards; fixed for the life of a Redis."`
	LogLevel          string   `name:"log-level" env:"LOG_LEVEL" default:"info" enum:"debug,info,warn,error" help:"Log level."`
	LogFormat         string   `name:"log-format" env:"LOG_FORMAT" default:"text" enum:"text,json" help:"Log format."`
	Pprof             bool     `name:"pprof" env:"PPROF" help:"Serve Go's profiler at /debug/pprof/ (for diagnosing; off by default)."`

	MaxConns      int  `name:"max-conns" env:"MAX_CONNS" default:"512" help:"Most HTTP connections held open at once; at the cap a new one closes the oldest without a request in progress. Keep it under the open-file limit."`
	AllowEviction bool `name:"allow-eviction" env:"ALLOW_EVICTION" help:"Start even when Redis's maxmemory-policy is not noeviction (or cannot be read), logging an error every minute: an evicting Redis deletes schedules, runs and tasks when full."`

	LookaheadMS   int64         `name:"lookahead-ms" env:"LOOKAHEAD_MS" default:"60000" help:"How far ahead 'allow' schedules are enqueued (asynq ProcessAt), so runs start on time."`
	RunHistory    int           `name:"run-history" env:"RUN_HISTORY" default:"100" help:"Run records kept per schedule."`
	TaskRetention time.Duration `name:"task-retention" env:"TASK_RETENTION" default:"24h" help:"How long asynq keeps finished tasks: the horizon of duplicate-enqueue protection."`
	Queue         string        `name:"queue" env:"QUEUE" default:"chronos" help:"Names the asynq run queues: shard NN's is sNN}<queue>."`
	TaskMaxRetry  int           `name:"task-max-retry" env:"TASK_MAX_RETRY" default:"5" help:"Launch attempts retried by asynq before a run is FAILED; 0 for none. While retried, the run shows attempts, last_error and next_attempt_at. Read where runs are enqueued (schedulers; the API for manual runs)."`
	AuthOpts

	WorkflowMaxBytes    int `name:"workflow-max-bytes" env:"WORKFLOW_MAX_BYTES" default:"262144" help:"Largest workflow DAG stored (PUT /workflows/...): 256 KiB by default."`
	WorkflowMaxVersions int `name:"workflow-max-versions" env:"WORKFLOW_MAX_VERSIONS" default:"10000" help:"Most workflow versions stored; a new one past it is refused (507) until some are deleted."`

	AlarmMaxActive int `name:"alarm-max-active" env:"ALARM_MAX_ACTIVE" default:"10000" help:"Most active alarms one agent (DID) may have; one more is refused (400 quota_exceeded) until some fire or are cancelled."`

	RedisWaitReplicas int           `name:"redis-wait-replicas" env:"REDIS_WAIT_REPLICAS" default:"0" help:"After each commit of planned runs, wait (Redis WAIT) until this many replicas have it, so a failover keeps it; 0 for no wait. A commit not acknowledged within REDIS_WAIT_TIMEOUT fails the tick, and stands on the master. Read by schedulers."`
	RedisWaitTimeout  time.Duration `name:"redis-wait-timeout" env:"REDIS_WAIT_TIMEOUT" default:"500ms" help:"How long a commit waits for REDIS_WAIT_REPLICAS replicas."`

	RunTimeout time.Duration `name:"run-timeout" env:"RUN_TIMEOUT" default:"1h" help:"A skip/queue schedule's run in flight (its own, or a skip/queue backfill's) this long without a final status is marked FAILED, releasing the schedule. Read by schedulers, and by the API for the backfill runs it puts in flight."`

	TaskTimeout time.Duration `name:"task-timeout" env:"TASK_TIMEOUT" default:"5m" help:"asynq cancels a launch attempt after this; must exceed EXECUTOR_TIMEOUT. Read where runs are enqueued (schedulers; the API for manual runs), and checked by launchers."`
}

// SchedulerOpts are the scheduler replica's settings.
type SchedulerOpts struct {
	TickMS            int64         `name:"tick-ms" env:"TICK_MS" default:"1000" help:"Period of each shard's tick."`
	MaxCatchupPerTick int           `name:"max-catchup-per-tick" env:"MAX_CATCHUP_PER_TICK" default:"100" help:"Most runs one schedule emits per tick (bounds catch-up after downtime), at most 1000."`
	LeaseTTL          time.Duration `name:"lease-ttl" env:"LEASE_TTL" default:"5s" help:"Shard lease lifetime: a dead replica's shards move within it."`
	MisfireGraceMS    int64         `name:"misfire-grace-ms" env:"MISFIRE_GRACE_MS" default:"10000" help:"A run found later than this is 'missed' and follows the catch-up policy; must exceed LEASE_TTL*4/3 + TICK_MS (a shard takeover)."`
	ForwardLeadMS     int64         `name:"forward-lead-ms" env:"FORWARD_LEAD_MS" default:"750" help:"How long before their second runs enqueued ahead become runnable (launchers hold them until their time), 0 to 1000; 0 makes them runnable at their second."`
}

// LauncherOpts are the launcher replica's settings.
type LauncherOpts struct {
	Concurrency     int           `name:"launcher-concurrency" env:"LAUNCHER_CONCURRENCY" default:"10" help:"Runs one launcher carries out at once."`
	Executor        string        `name:"executor" env:"EXECUTOR" default:"log" enum:"log,http" help:"How runs start: 'log' logs and succeeds (demo); 'http' POSTs {dag, meta} to EXECUTOR_URL."`
	ExecutorURL     string        `name:"executor-url" env:"EXECUTOR_URL" help:"URL the http executor POSTs runs to."`
	ExecutorTimeout time.Duration `name:"executor-timeout" env:"EXECUTOR_TIMEOUT" default:"30s" help:"Timeout of one executor call."`
	WakeURL         string        `name:"wake-url" env:"WAKE_URL" help:"URL alarms' wakes are POSTed to, signed with WAKE_SECRET (docs/wake.md). Unset: 'dev' logs wakes, other commands fail alarms' runs."`
	WakeSecret      string        `name:"wake-secret" env:"WAKE_SECRET" help:"HMAC-SHA256 key of the wakes' Chronos-Signature header, at least 32 bytes; required with WAKE_URL."`
	WakeTimeout     time.Duration `name:"wake-timeout" env:"WAKE_TIMEOUT" default:"30s" help:"Timeout of one wake delivery to WAKE_URL."`
	ShutdownTimeout time.Duration `name:"shutdown-timeout" env:"SHUTDOWN_TIMEOUT" default:"30s" help:"How long shutdown waits for runs in progress."`
	ArchiveSweep    time.Duration `name:"archive-sweep-interval" env:"ARCHIVE_SWEEP_INTERVAL" default:"1m" help:"How often runs whose tasks asynq archived before they launched (a launcher killed on the last attempt) are marked FAILED."`
	RecoverInterval time.Duration `name:"recover-interval" env:"RECOVER_INTERVAL" default:"1m" help:"How often a launcher retries the run tasks of launchers that died or froze: those whose lease ended 30s before."`
	LaunchGrace     time.Duration `name:"launch-grace" env:"LAUNCH_GRACE" default:"10m" help:"A scheduled run that would start later than this after it was due (every launcher was down) follows its schedule's catch-up policy: none skips it, latest skips all but the latest due run."`
}

// APIOpts are the API's settings.
type APIOpts struct {
	DefaultOverlapPolicy string `name:"default-overlap-policy" env:"DEFAULT_OVERLAP_POLICY" default:"skip" enum:"allow,skip,queue" help:"Overlap policy of schedules that name none."`
	DefaultCatchupPolicy string `name:"default-catchup-policy" env:"DEFAULT_CATCHUP_POLICY" default:"none" enum:"none,latest,fire_immediately,spread" help:"Catch-up policy of schedules that name none."`
	DefaultJitterMS      int64  `name:"default-jitter-ms" env:"DEFAULT_JITTER_MS" default:"0" help:"Jitter of schedules that name none."`
	Monitoring           bool   `name:"monitoring" env:"MONITORING" default:"true" negatable:"" help:"Serve the asynqmon dashboard at /monitoring (read-only unless MONITORING_WRITABLE). On by default."`
	LogHTTP              bool   `name:"log-http" env:"LOG_HTTP" help:"Log every HTTP request at info level. Otherwise requests are logged at debug, server errors at error."`
	CronToolTZ           string `name:"cron-tool-tz" env:"CRON_TOOL_TZ" default:"UTC" help:"IANA zone in which the cron tool reads a cron_expr without tz and an ISO 'at' time without offset or tz."`
	MonitoringWritable   bool   `name:"monitoring-writable" env:"MONITORING_WRITABLE" help:"Let the dashboard delete, run, archive and pause tasks and queues. Writes also need a token of scope admin."`

	AlarmMaxFailures         int `name:"alarm-max-failures" env:"ALARM_MAX_FAILURES" default:"5" help:"max_failures of an alarm that names none: failed wake deliveries before a once alarm is failed (1 to 25)."`
	AlarmPayloadMaxBytes     int `name:"alarm-payload-max-bytes" env:"ALARM_PAYLOAD_MAX_BYTES" default:"65536" help:"Largest alarm payload, as posted; larger is a 413."`
	AlarmLabelMaxBytes       int `name:"alarm-label-max-bytes" env:"ALARM_LABEL_MAX_BYTES" default:"200" help:"Longest alarm label; longer is a 400."`
	AlarmWakeMessageMaxBytes int `name:"alarm-wake-message-max-bytes" env:"ALARM_WAKE_MESSAGE_MAX_BYTES" default:"16384" help:"Longest alarm wake_message; longer is a 400."`

	BackfillMaxRuns int `name:"backfill-max-runs" env:"BACKFILL_MAX_RUNS" default:"1000" help:"Most planned runs one backfill (POST /schedules/:id/backfill) or a resume's replay may enqueue; a larger range is a 400 saying where to cut it."`
	BackfillRate    int `name:"backfill-rate" env:"BACKFILL_RATE" default:"10" help:"Runs of one backfill made runnable per second, in order."`
}

// DevCmd runs everything on an embedded Redis.
type DevCmd struct {
	Common
	SchedulerOpts
	LauncherOpts
	APIOpts
}

// Run runs chronos dev.
func (c *DevCmd) Run(ctx context.Context, env *Env) error { return run(ctx, env, c.spec()) }

func (c *DevCmd) spec() processSpec {
	return processSpec{common: c.Common, sched: &c.SchedulerOpts, launch: &c.LauncherOpts, api: &c.APIOpts, embedded: c.RedisURL == "" && len(c.RedisClusterAddrs) == 0, dev: true}
}

// AllCmd runs API, scheduler and launcher in one process.
type AllCmd struct {
	Common
	SchedulerOpts
	LauncherOpts
	APIOpts
}

// Run runs chronos all.
func (c *AllCmd) Run(ctx context.Context, env *Env) error { return run(ctx, env, c.spec()) }

func (c *AllCmd) spec() processSpec {
	return processSpec{common: c.Common, sched: &c.SchedulerOpts, launch: &c.LauncherOpts, api: &c.APIOpts}
}

// APICmd runs the API.
type APICmd struct {
	Common
	APIOpts
}

// Run runs chronos api.
func (c *APICmd) Run(ctx context.Context, env *Env) error { return run(ctx, env, c.spec()) }

func (c *APICmd) spec() processSpec {
	return processSpec{common: c.Common, api: &c.APIOpts}
}

// SchedulerCmd runs a scheduler replica.
type SchedulerCmd struct {
	Common
	SchedulerOpts
}

// Run runs chronos scheduler.
func (c *SchedulerCmd) Run(ctx context.Context, env *Env) error { return run(ctx, env, c.spec()) }

func (c *SchedulerCmd) spec() processSpec {
	return processSpec{common: c.Common, sched: &c.SchedulerOpts}
}

// LauncherCmd runs a launcher replica.
type LauncherCmd struct {
	Common
	LauncherOpts
}

// Run runs chronos launcher.
func (c *LauncherCmd) Run(ctx context.Context, env *Env) error { return run(ctx, env, c.spec()) }

func (c *LauncherCmd) spec() processSpec {
	return processSpec{common: c.Common, launch: &c.LauncherOpts}
}
