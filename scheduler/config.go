package scheduler

import (
	"cmp"
	"fmt"
	"time"

	"github.com/chronos-sched/chronos/queue"
)

const (
	// TickIntervalDefault is how often each held shard is worked.
	TickIntervalDefault = time.Second
	// MaxCatchupPerTickDefault bounds the runs one schedule emits per tick.
	MaxCatchupPerTickDefault = 100
	// MaxCatchupPerTickMax is the largest MaxCatchupPerTick: one
	// schedule's runs of a tick go to Redis in one script call, which
	// carries at most queue.CommitRunsMax runs.
	MaxCatchupPerTickMax = queue.CommitRunsMax
	// LeaseTTLDefault is a shard lease's lifetime; a dead replica's shards
	// are taken over within it.
	LeaseTTLDefault = 5 * time.Second
	// PageSizeDefault is how many due schedules one commit handles.
	PageSizeDefault = 500
	// RunTimeoutDefault is how long a run may stay in flight without a
	// final status before it is marked FAILED.
	RunTimeoutDefault = time.Hour
	// MisfireGraceDefault is how late a run may be found and still count
	// as on time; later ones are "missed" and follow the catch-up policy.
	// It exceeds the default takeover bound (see Config.takeover, 7.7 s),
	// so a replica that dies never makes its runs "missed" by itself.
	MisfireGraceDefault = 10 * time.Second
	// SpreadWindowDefault is the window the "spread" catch-up policy
	// spreads missed runs over.
	SpreadWindowDefault = time.Minute
	// ForwardLeadDefault is how long before their second the runs enqueued
	// ahead are made runnable. Forwarding costs Redis 4-7 us a run
	// (docs/perf/warm-burst.md), so 100,000 runs due in one second take 0.5 to
	// 1 s to move: with this lead they are runnable by their second, or
	// soon after on a busy Redis, where they would trickle in over the
	// second after it. The forward of the next second then runs a quarter
	// second after the tick that commits this one's runs, not beside it.
	ForwardLeadDefault = 750 * time.Millisecond
	// NoForwardLead as Config.ForwardLead forwards runs at their second.
	NoForwardLead time.Duration = -1
)

// Config configures a Scheduler. The zero value of each field means its
// default.
type Config struct {
	// ReplicaID names this replica in the live set. Default: random.
	ReplicaID string
	// TickInterval is the period of each shard loop. Default
	// TickIntervalDefault.
	TickInterval time.Duration
	// MaxCatchupPerTick bounds the runs one schedule emits per tick, at
	// most MaxCatchupPerTickMax. Default MaxCatchupPerTickDefault.
	MaxCatchupPerTick int
	// LeaseTTL is a shard lease's lifetime. Default LeaseTTLDefault.
	LeaseTTL time.Duration
	// PageSize is how many due schedules one commit handles. Default
	// PageSizeDefault.
	PageSize int
	// RunTimeout fails runs that stay in flight longer. Default
	// RunTimeoutDefault.
	RunTimeout time.Duration
	// MisfireGrace is how late a run may be found and still count as on
	// time. Default MisfireGraceDefault.
	MisfireGrace time.Duration
	// SpreadWindow is where "spread" catch-up places missed runs. Default
	// SpreadWindowDefault.
	SpreadWindow time.Duration
	// ForwardLead is how long before their second the runs enqueued ahead
	// are moved to asynq's pending list, at most queue.ForwardLeadMax.
	// Launchers hold a run taken early until its time on the shared
	// clock, so none starts early. Default ForwardLeadDefault;
	// NoForwardLead forwards at the second.
	ForwardLead time.Duration
}

// WithDefaults returns a copy with zero fields set to their defaults.
func (c *Config) WithDefaults() Config {
	var v Config
	if c != nil {
		v = *c
	}
	v.TickInterval = cmp.Or(v.TickInterval, TickIntervalDefault)
	v.MaxCatchupPerTick = cmp.Or(v.MaxCatchupPerTick, MaxCatchupPerTickDefault)
	v.LeaseTTL = cmp.Or(v.LeaseTTL, LeaseTTLDefault)
	v.PageSize = cmp.Or(v.PageSize, PageSizeDefault)
	v.RunTimeout = cmp.Or(v.RunTimeout, RunTimeoutDefault)
	v.MisfireGrace = cmp.Or(v.MisfireGrace, MisfireGraceDefault)
	v.SpreadWindow = cmp.Or(v.SpreadWindow, SpreadWindowDefault)
	v.ForwardLead = max(cmp.Or(v.ForwardLead, ForwardLeadDefault), 0)
	return v
}

// validate names the first field of c (after defaults) that is wrong.
func (c Config) validate() error {
	switch {
	case c.TickInterval < 10*time.Millisecond:
		return fmt.Errorf("scheduler: Config.TickInterval must be at least 10ms, got %s", c.TickInterval)
	case c.MaxCatchupPerTick <= c.firesPerTick():
		// A schedule firing every second must make up a backlog faster
		// than it grows, or it never catches up.
		return fmt.Errorf("scheduler: Config.MaxCatchupPerTick (%d) must exceed %d, twice the runs a schedule firing every second makes per tick at Config.TickInterval %s, or a catch-up never finishes",
			c.MaxCatchupPerTick, c.firesPerTick(), c.TickInterval)
	case c.MaxCatchupPerTick > MaxCatchupPerTickMax:
		return fmt.Errorf("scheduler: Config.MaxCatchupPerTick must be at most %d, the runs one commit script call carries, got %d",
			MaxCatchupPerTickMax, c.MaxCatchupPerTick)
	case c.LeaseTTL < time.Second:
		return fmt.Errorf("scheduler: Config.LeaseTTL must be at least 1s, got %s", c.LeaseTTL)
	case c.PageSize < 1 || c.PageSize > 10000:
		return fmt.Errorf("scheduler: Config.PageSize must be between 1 and 10000, got %d", c.PageSize)
	case c.RunTimeout < 0, c.SpreadWindow < 0:
		return fmt.Errorf("scheduler: Config.RunTimeout and Config.SpreadWindow must not be negative, got %s and %s", c.RunTimeout, c.SpreadWindow)
	case c.ForwardLead > queue.ForwardLeadMax:
		return fmt.Errorf("scheduler: Config.ForwardLead must be at most %s (launchers start a run that comes earlier than that at once, as one moved from the dashboard), got %s",
			queue.ForwardLeadMax, c.ForwardLead)
	case c.MisfireGrace <= c.takeover():
		return fmt.Errorf("scheduler: Config.MisfireGrace (%s) must exceed the time other replicas may take to "+
			"take over a dead replica's shards (Config.LeaseTTL + Config.LeaseTTL/3 + Config.TickInterval = %s), or runs due "+
			"meanwhile would count as missed and follow the catch-up policy: raise Config.MisfireGrace or lower Config.LeaseTTL",
			c.MisfireGrace, c.takeover().Round(time.Millisecond))
	}
	return nil
}

// firesPerTick is twice the most runs one schedule can come due for in a
// tick (fire times are whole seconds apart at least).
func (c Config) firesPerTick() int {
	return 2 * int((c.TickInterval+time.Second-1)/time.Second)
}

// takeover bounds how late a dead replica's shard is worked again: its
// lease outlives it by up to LeaseTTL, the others try to take free shards
// every LeaseTTL/3, and the first tick comes within a tick interval.
func (c Config) takeover() time.Duration {
	return c.LeaseTTL + c.LeaseTTL/3 + c.TickInterval
}
