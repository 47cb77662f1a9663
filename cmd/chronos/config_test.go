package main

import (
	"context"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/launcher"
	"github.com/chronos-sched/chronos/queue"
)

// Every Config field the binary sets has its setting in settingNames, and
// every setting named there is one the binary reads (an env tag of the
// command line): so a package's error about any field it sets reads in
// this binary's words.
func TestEveryFieldTheBinarySetsIsNamed(t *testing.T) {
	t.Parallel()
	named := map[string]string{}
	for _, n := range settingNames {
		require.NotContains(t, named, n.field, "%s named twice", n.field)
		named[n.field] = n.setting
	}
	// Settings all set, to non-zero values.
	common := Common{Shards: 1, LookaheadMS: 1, RunHistory: 1, TaskRetention: time.Hour, Queue: "q", TaskMaxRetry: 1, TaskTimeout: time.Minute,
		WorkflowMaxBytes: 1, WorkflowMaxVersions: 1, AlarmMaxActive: 1, RedisWaitReplicas: 1, RedisWaitTimeout: time.Second, RunTimeout: time.Second}
	sched := SchedulerOpts{TickMS: 1, MaxCatchupPerTick: 1, LeaseTTL: time.Second, MisfireGraceMS: 1}
	launch := LauncherOpts{Concurrency: 1, ShutdownTimeout: time.Second, ArchiveSweep: time.Second, LaunchGrace: time.Second, RecoverInterval: time.Second}
	apiOpts := APIOpts{DefaultOverlapPolicy: "skip", DefaultCatchupPolicy: "none", DefaultJitterMS: 1,
		AlarmMaxFailures: 1, AlarmPayloadMaxBytes: 1, AlarmLabelMaxBytes: 1, AlarmWakeMessageMaxBytes: 1,
		BackfillMaxRuns: 1, BackfillRate: 1}
	set := map[string]bool{}
	for _, cfg := range []any{storeConfig(common), schedulerConfig(common, &sched), launcherConfig(&launch, launcher.LogExecutor{}), apiConfig(common, &apiOpts)} {
		v := reflect.ValueOf(cfg).Elem()
		for i := range v.NumField() {
			if !v.Field(i).IsZero() {
				field := "Config." + v.Type().Field(i).Name
				set[field] = true
				require.Contains(t, named, field, "%s sets %s, which settingNames does not name", v.Type(), field)
			}
		}
	}
	envs := map[string]bool{}
	for _, typ := range []reflect.Type{reflect.TypeFor[Common](), reflect.TypeFor[SchedulerOpts](), reflect.TypeFor[LauncherOpts](), reflect.TypeFor[APIOpts]()} {
		for i := range typ.NumField() {
			envs[typ.Field(i).Tag.Get("env")] = true
		}
	}
	for field, setting := range named {
		require.True(t, set[field], "settingNames names %s, which no builder sets", field)
		require.True(t, envs[setting], "settingNames maps %s to %s, which the command line does not read", field, setting)
	}
}

// A package's error about a field reads in the binary's settings.
func TestAPackagesErrorNamesTheSetting(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	store, err := queue.NewStore(context.Background(), rdb, queue.NewSimClock(time.Now()), nil)
	require.NoError(t, err)
	sched := SchedulerOpts{TickMS: 1000, MaxCatchupPerTick: 100, LeaseTTL: 5 * time.Second, MisfireGraceMS: 5000}
	_, _, err = newParts(store, processSpec{common: Common{RunTimeout: time.Hour}, sched: &sched}, slog.New(slog.DiscardHandler), nil)
	require.ErrorContains(t, err, "scheduler: MISFIRE_GRACE_MS (5s) must exceed")
	require.ErrorContains(t, err, "(LEASE_TTL + LEASE_TTL/3 + TICK_MS = 7.667s)")
	require.NotContains(t, err.Error(), "Config.")

	_, err = queue.NewStore(context.Background(), rdb, queue.NewSimClock(time.Now()), storeConfig(Common{Shards: queue.ShardsMax + 1}))
	require.Equal(t, strings.Replace(err.Error(), "Config.Shards", "SHARDS", 1), inSettings(err).Error())
	require.ErrorIs(t, inSettings(err), err, "the package's error stays in the chain")
}
