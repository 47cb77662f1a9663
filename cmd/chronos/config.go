package main

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/chronos-sched/chronos/api"
	"github.com/chronos-sched/chronos/launcher"
	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/scheduler"
)

// This file is where the packages' Config fields meet this binary's
// settings (environment variables, each with a flag of the same meaning:
// cli.go). The builders below fill the packages' configs from the
// settings; settingNames words the packages' errors, which name their Go
// fields, in the settings a user of the binary knows.

// settingNames maps each Config field the builders set, as the packages'
// errors spell it, to its setting. TestEveryFieldTheBinarySetsIsNamed
// holds it and the builders together.
var settingNames = []struct{ field, setting string }{
	{"Config.Shards", "SHARDS"},
	{"Config.Lookahead", "LOOKAHEAD_MS"},
	{"Config.RunHistory", "RUN_HISTORY"},
	{"Config.TaskRetention", "TASK_RETENTION"},
	{"Config.QueueName", "QUEUE"},
	{"Config.TaskMaxRetry", "TASK_MAX_RETRY"},
	{"Config.TaskTimeout", "TASK_TIMEOUT"},
	{"Config.WorkflowMaxBytes", "WORKFLOW_MAX_BYTES"},
	{"Config.WorkflowMaxVersions", "WORKFLOW_MAX_VERSIONS"},
	{"Config.AlarmMaxActive", "ALARM_MAX_ACTIVE"},
	{"Config.WaitReplicas", "REDIS_WAIT_REPLICAS"},
	{"Config.WaitTimeout", "REDIS_WAIT_TIMEOUT"},

	{"Config.TickInterval", "TICK_MS"},
	{"Config.MaxCatchupPerTick", "MAX_CATCHUP_PER_TICK"},
	{"Config.LeaseTTL", "LEASE_TTL"},
	{"Config.RunTimeout", "RUN_TIMEOUT"},
	{"Config.MisfireGrace", "MISFIRE_GRACE_MS"},
	{"Config.ForwardLead", "FORWARD_LEAD_MS"},

	{"Config.Concurrency", "LAUNCHER_CONCURRENCY"},
	{"Config.ShutdownTimeout", "SHUTDOWN_TIMEOUT"},
	{"Config.Executor", "EXECUTOR"},
	{"Config.ArchiveSweepInterval", "ARCHIVE_SWEEP_INTERVAL"},
	{"Config.LaunchGrace", "LAUNCH_GRACE"},
	{"Config.RecoverInterval", "RECOVER_INTERVAL"},

	{"Config.DefaultOverlapPolicy", "DEFAULT_OVERLAP_POLICY"},
	{"Config.DefaultCatchupPolicy", "DEFAULT_CATCHUP_POLICY"},
	{"Config.DefaultJitterMs", "DEFAULT_JITTER_MS"},
	{"Config.AlarmMaxFailures", "ALARM_MAX_FAILURES"},
	{"Config.AlarmPayloadMaxBytes", "ALARM_PAYLOAD_MAX_BYTES"},
	{"Config.AlarmLabelMaxBytes", "ALARM_LABEL_MAX_BYTES"},
	{"Config.AlarmWakeMessageMaxBytes", "ALARM_WAKE_MESSAGE_MAX_BYTES"},
	{"Config.BackfillMaxRuns", "BACKFILL_MAX_RUNS"},
	{"Config.BackfillRate", "BACKFILL_RATE"},
}

var settingReplacer = func() *strings.Replacer {
	var pairs []string
	for _, n := range settingNames {
		pairs = append(pairs, n.field, n.setting)
	}
	return strings.NewReplacer(pairs...)
}()

// settingsError is a package's error worded in the binary's settings.
type settingsError struct {
	msg string
	err error
}

func (e *settingsError) Error() string { return e.msg }
func (e *settingsError) Unwrap() error { return e.err }

// inSettings words err, from a package's constructor, in this binary's
// settings: "scheduler: Config.TickInterval must be ..." reads
// "scheduler: TICK_MS must be ...".
func inSettings(err error) error {
	if err == nil {
		return nil
	}
	msg := settingReplacer.Replace(err.Error())
	if msg == err.Error() {
		return err
	}
	return &settingsError{msg: msg, err: err}
}

func storeConfig(c Common) *queue.Config {
	return &queue.Config{
		Shards:        c.Shards,
		Lookahead:     time.Duration(c.LookaheadMS) * time.Millisecond,
		RunHistory:    c.RunHistory,
		TaskRetention: c.TaskRetention,
		QueueName:     c.Queue,
		TaskMaxRetry:  cmp.Or(c.TaskMaxRetry, queue.NoRetry), // TASK_MAX_RETRY=0: none, not the default
		TaskTimeout:   c.TaskTimeout,

		WorkflowMaxBytes:    c.WorkflowMaxBytes,
		WorkflowMaxVersions: c.WorkflowMaxVersions,
		AlarmMaxActive:      c.AlarmMaxActive,

		WaitReplicas: c.RedisWaitReplicas,
		WaitTimeout:  c.RedisWaitTimeout,
	}
}

func schedulerConfig(c Common, o *SchedulerOpts) *scheduler.Config {
	return &scheduler.Config{
		TickInterval:      time.Duration(o.TickMS) * time.Millisecond,
		MaxCatchupPerTick: o.MaxCatchupPerTick,
		LeaseTTL:          o.LeaseTTL,
		RunTimeout:        c.RunTimeout,
		MisfireGrace:      time.Duration(o.MisfireGraceMS) * time.Millisecond,
		// FORWARD_LEAD_MS=0: none, not the default.
		ForwardLead: cmp.Or(time.Duration(o.ForwardLeadMS)*time.Millisecond, scheduler.NoForwardLead),
	}
}

func launcherConfig(o *LauncherOpts, ex launcher.Executor) *launcher.Config {
	return &launcher.Config{
		Concurrency:          o.Concurrency,
		ShutdownTimeout:      o.ShutdownTimeout,
		Executor:             ex,
		ArchiveSweepInterval: o.ArchiveSweep,
		LaunchGrace:          o.LaunchGrace,
		RecoverInterval:      o.RecoverInterval,
	}
}

func apiConfig(c Common, o *APIOpts) *api.Config {
	return &api.Config{
		DefaultOverlapPolicy: model.OverlapPolicy(o.DefaultOverlapPolicy),
		DefaultCatchupPolicy: model.CatchupPolicy(o.DefaultCatchupPolicy),
		DefaultJitterMs:      o.DefaultJitterMS,
		AccessLog:            o.LogHTTP,
		CronToolTZ:           o.CronToolTZ,

		AlarmMaxFailures:         o.AlarmMaxFailures,
		AlarmPayloadMaxBytes:     o.AlarmPayloadMaxBytes,
		AlarmLabelMaxBytes:       o.AlarmLabelMaxBytes,
		AlarmWakeMessageMaxBytes: o.AlarmWakeMessageMaxBytes,
		BackfillMaxRuns:          o.BackfillMaxRuns,
		BackfillRate:             o.BackfillRate,
		RunTimeout:               c.RunTimeout,
	}
}

// redisURL is the Redis the process opens (queue.OpenRedis): REDIS_URL,
// or the redis-cluster:// URL of the nodes REDIS_CLUSTER_ADDRS lists.
// Setting both is an error rather than a silent choice, and so is a
// list entry that is not host:port. A cluster that needs a password is
// named by REDIS_URL (redis-cluster://[user]:pass@host:port,...): the
// list carries no secret.
func (c Common) redisURL() (string, error) {
	if len(c.RedisClusterAddrs) == 0 {
		return c.RedisURL, nil
	}
	if c.RedisURL != "" {
		return "", errors.New("REDIS_URL and REDIS_CLUSTER_ADDRS are both set: set one (REDIS_CLUSTER_ADDRS=h1:p1,h2:p2 is REDIS_URL=redis-cluster://h1:p1,h2:p2)")
	}
	addrs := make([]string, 0, len(c.RedisClusterAddrs))
	for _, a := range c.RedisClusterAddrs {
		a = strings.TrimSpace(a)
		host, port, err := net.SplitHostPort(a)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("REDIS_CLUSTER_ADDRS %q: want host:port[,host:port...], got %q", strings.Join(c.RedisClusterAddrs, ","), a)
		}
		addrs = append(addrs, a)
	}
	return "redis-cluster://" + strings.Join(addrs, ","), nil
}
