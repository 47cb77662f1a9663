package queue

import (
	"cmp"
	"fmt"
	"log/slog"
	"time"
)

const (
	// RunHistoryDefault is how many run records are kept per schedule.
	RunHistoryDefault = 100
	// RunRetentionDefault is how long run records of deleted schedules and
	// manual runs stay readable.
	RunRetentionDefault = 7 * 24 * time.Hour
	// TaskRetentionDefault is how long asynq keeps a finished task, and so
	// how long its TaskID keeps rejecting a second enqueue of the same run.
	TaskRetentionDefault = 24 * time.Hour
	// QueueNameDefault is the base of the run queues' names (ShardQueue).
	QueueNameDefault = "chronos"
	// LookaheadDefault is how far ahead "allow" schedules are enqueued.
	LookaheadDefault = 60 * time.Second
	// TaskMaxRetryDefault is how often asynq retries a failing launch.
	TaskMaxRetryDefault = 5
	// WorkflowMaxBytesDefault bounds one stored workflow DAG: 256 KiB.
	WorkflowMaxBytesDefault = 256 << 10
	// WorkflowMaxVersionsDefault bounds the workflow versions stored.
	WorkflowMaxVersionsDefault = 10000
	// AlarmMaxActiveDefault bounds the active alarms of one owner.
	AlarmMaxActiveDefault = 10000
	// NoRetry as Config.TaskMaxRetry makes the first failed launch attempt
	// final (zero there means the default).
	NoRetry = -1
	// ForwardLeadMax bounds how long before its time a run enqueued ahead
	// may be made runnable (the scheduler's Config.ForwardLead). Launchers
	// hold a run that comes up to this early, plus the launchers' largest
	// clock skew and a second's margin, and start one that comes earlier
	// than that at once: it was moved on purpose (the dashboard's Run).
	ForwardLeadMax = time.Second
)

// Config configures a Store. The zero value of each field means its default.
type Config struct {
	// Shards is the number of due-set shards. Fixed for the life of a
	// Redis: the first process records it, later ones must agree.
	// Default ShardsDefault.
	Shards int
	// Lookahead is how far before its fire time an "allow" schedule is
	// acted on, so its task is in asynq on time. Zero means none (unlike
	// the other fields); chronos's LOOKAHEAD_MS defaults to LookaheadDefault.
	Lookahead time.Duration
	// RunHistory is how many run records are kept per schedule. Default
	// RunHistoryDefault.
	RunHistory int
	// RunRetention is how long records of manual runs (past their
	// scheduled time) and deleted schedules' runs stay. Default
	// RunRetentionDefault.
	RunRetention time.Duration
	// TaskRetention is how long asynq keeps finished tasks (dedup horizon).
	// Default TaskRetentionDefault.
	TaskRetention time.Duration
	// QueueName is the base of the names of the shards' asynq run queues
	// (ShardQueue), and the name of the single run queue of earlier
	// versions, which launchers drain. Default QueueNameDefault.
	QueueName string
	// TaskMaxRetry is asynq's retry count for a run task. Default
	// TaskMaxRetryDefault; NoRetry for none.
	TaskMaxRetry int
	// TaskTimeout bounds one launch attempt. Default 5 minutes.
	TaskTimeout time.Duration
	// WorkflowMaxBytes bounds the DAG of one workflow version; a larger
	// one is refused (ErrTooLarge). Default WorkflowMaxBytesDefault.
	WorkflowMaxBytes int
	// WorkflowMaxVersions bounds the workflow versions stored; a new one
	// past it is refused (ErrQuota) until some are deleted. Default
	// WorkflowMaxVersionsDefault.
	WorkflowMaxVersions int
	// AlarmMaxActive bounds the active alarms of one owner; CreateAlarm
	// refuses one more (ErrQuota) until some fire or are cancelled.
	// Default AlarmMaxActiveDefault.
	AlarmMaxActive int
	// WaitReplicas, when set, makes each commit (the runs a scheduler
	// plans, their tasks and their schedules' advance) wait until this
	// many replicas acknowledged it (Redis WAIT), so that a failover to
	// one of them keeps it; a commit they did not acknowledge within
	// WaitTimeout fails with ErrNotReplicated, though it stands on the
	// master. Default 0: no wait (Redis replicates asynchronously).
	WaitReplicas int
	// WaitTimeout bounds the wait of WaitReplicas. Default
	// WaitTimeoutDefault.
	WaitTimeout time.Duration
	// Logger receives what the store notices on its own, such as a
	// schedule pausing itself after failed runs (pause_after_failures).
	// Default nil: not logged.
	Logger *slog.Logger
}

// WithDefaults returns a copy with zero fields set to their defaults.
func (c *Config) WithDefaults() Config {
	var v Config
	if c != nil {
		v = *c
	}
	v.Shards = cmp.Or(v.Shards, ShardsDefault)
	v.RunHistory = cmp.Or(v.RunHistory, RunHistoryDefault)
	v.RunRetention = cmp.Or(v.RunRetention, RunRetentionDefault)
	v.TaskRetention = cmp.Or(v.TaskRetention, TaskRetentionDefault)
	v.QueueName = cmp.Or(v.QueueName, QueueNameDefault)
	v.TaskMaxRetry = cmp.Or(v.TaskMaxRetry, TaskMaxRetryDefault)
	v.TaskTimeout = cmp.Or(v.TaskTimeout, 5*time.Minute)
	v.WorkflowMaxBytes = cmp.Or(v.WorkflowMaxBytes, WorkflowMaxBytesDefault)
	v.WorkflowMaxVersions = cmp.Or(v.WorkflowMaxVersions, WorkflowMaxVersionsDefault)
	v.AlarmMaxActive = cmp.Or(v.AlarmMaxActive, AlarmMaxActiveDefault)
	v.WaitTimeout = cmp.Or(v.WaitTimeout, WaitTimeoutDefault)
	return v
}

// validate names the first field of c (after defaults) that is wrong.
func (c Config) validate() error {
	switch {
	case c.Shards < 1 || c.Shards > ShardsMax:
		return fmt.Errorf("queue: Config.Shards must be between 1 and %d, got %d", ShardsMax, c.Shards)
	case c.Lookahead < 0:
		return fmt.Errorf("queue: Config.Lookahead must not be negative, got %s", c.Lookahead)
	case c.RunHistory < 1:
		return fmt.Errorf("queue: Config.RunHistory must be at least 1, got %d", c.RunHistory)
	case c.RunRetention < 0:
		return fmt.Errorf("queue: Config.RunRetention must not be negative, got %s", c.RunRetention)
	case c.TaskRetention < time.Minute:
		return fmt.Errorf("queue: Config.TaskRetention must be at least 1m: it is the horizon of duplicate-enqueue protection, got %s", c.TaskRetention)
	case c.TaskMaxRetry < NoRetry:
		return fmt.Errorf("queue: Config.TaskMaxRetry must be NoRetry (-1) or more, got %d", c.TaskMaxRetry)
	case c.TaskTimeout < 0:
		return fmt.Errorf("queue: Config.TaskTimeout must not be negative, got %s", c.TaskTimeout)
	case c.WorkflowMaxBytes < 1:
		return fmt.Errorf("queue: Config.WorkflowMaxBytes must be positive, got %d", c.WorkflowMaxBytes)
	case c.WorkflowMaxVersions < 1:
		return fmt.Errorf("queue: Config.WorkflowMaxVersions must be positive, got %d", c.WorkflowMaxVersions)
	case c.AlarmMaxActive < 1:
		return fmt.Errorf("queue: Config.AlarmMaxActive must be positive, got %d", c.AlarmMaxActive)
	case c.WaitReplicas < 0 || c.WaitReplicas > WaitReplicasMax:
		return fmt.Errorf("queue: Config.WaitReplicas must be between 0 and %d, got %d", WaitReplicasMax, c.WaitReplicas)
	case c.WaitTimeout < time.Millisecond:
		return fmt.Errorf("queue: Config.WaitTimeout must be at least 1ms, got %s", c.WaitTimeout)
	}
	return nil
}
