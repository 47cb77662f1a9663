package api

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"golang.org/x/time/rate"

	"github.com/chronos-sched/chronos/api/auth"
	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
)

const (
	// OverlapPolicyDefault is the overlap policy of an upsert that omits
	// it: the cron specification's default, so a slow run is never joined
	// by the next one unless a schedule asks for it.
	OverlapPolicyDefault = model.OverlapSkip
	// CatchupPolicyDefault is the catch-up policy of an upsert that omits
	// it: the cron specification's default, so an outage does not end in a
	// burst of stale runs unless a schedule asks for them.
	CatchupPolicyDefault = model.CatchupNone
	// JitterMsDefault is the jitter of an upsert that omits jitter_ms.
	JitterMsDefault = 0
	// BodyLimitDefault bounds request bodies: 1 MiB.
	BodyLimitDefault = 1 << 20
	// ReadyTimeoutDefault bounds the Redis ping of GET /readyz.
	ReadyTimeoutDefault = 2 * time.Second
	// BodyReadTimeoutDefault bounds the reading of a request body.
	BodyReadTimeoutDefault = 30 * time.Second
	// RateLimitDefault is each client's sustained rate, in requests per
	// second.
	RateLimitDefault rate.Limit = 50
	// RateBurstDefault is each client's burst.
	RateBurstDefault = 100
	// AlarmMaxFailuresDefault is the max_failures of an alarm that omits
	// it (ALARM_MAX_FAILURES), as the alarms specification's default.
	AlarmMaxFailuresDefault = 5
	// AlarmPayloadMaxBytesDefault bounds an alarm's payload: 64 KiB.
	AlarmPayloadMaxBytesDefault = 64 << 10
	// AlarmLabelMaxBytesDefault bounds an alarm's label.
	AlarmLabelMaxBytesDefault = 200
	// AlarmWakeMessageMaxBytesDefault bounds an alarm's wake message: 16 KiB.
	AlarmWakeMessageMaxBytesDefault = 16 << 10
)

// Config configures the HTTP API. The zero value of each field means its
// default; a nil *Config means all defaults.
type Config struct {
	// DefaultOverlapPolicy applies when an upsert omits overlap_policy
	// (DEFAULT_OVERLAP_POLICY). Default OverlapPolicyDefault (skip).
	DefaultOverlapPolicy model.OverlapPolicy
	// DefaultCatchupPolicy applies when an upsert omits catchup_policy
	// (DEFAULT_CATCHUP_POLICY). Default CatchupPolicyDefault (none).
	DefaultCatchupPolicy model.CatchupPolicy
	// DefaultJitterMs applies when an upsert omits jitter_ms
	// (DEFAULT_JITTER_MS), between 0 and model.MaxJitterMs. Default
	// JitterMsDefault (0).
	DefaultJitterMs int64
	// BodyLimit is the largest request body accepted, in bytes; larger
	// ones get 413. Default BodyLimitDefault (1 MiB).
	BodyLimit int64
	// ReadyTimeout bounds the Redis ping of GET /readyz. Default
	// ReadyTimeoutDefault (2s).
	ReadyTimeout time.Duration
	// BodyReadTimeout bounds the reading of a request body, from when the
	// handler starts on it; a slower client gets 408. Default
	// BodyReadTimeoutDefault (30s).
	BodyReadTimeout time.Duration
	// AccessLog logs every request at info level. Otherwise a request is
	// logged at debug, and only a server error (5xx) at error, so a
	// busy API does not drown what its log is for. Default false.
	AccessLog bool
	// Stopping, when closed, makes GET /readyz answer 503, so a load
	// balancer stops sending requests to a process that is shutting
	// down while it finishes those in progress. Default nil (never).
	Stopping <-chan struct{}

	// Auth verifies the bearer token every route but the probes needs;
	// each route needs a scope (access.go, package auth). One of Auth and
	// Open is required: New refuses a Config with neither.
	Auth *auth.Verifier
	// Open serves every route without authentication: for chronos dev on
	// loopback and an explicit --insecure only; but for the alarms,
	// which always need an owner's token (see OwnerAuth). Default false.
	Open bool
	// CronToolTZ is the IANA zone the cron tool reads a cron_expr given
	// without tz in, and a local `at` given without tz (CRON_TOOL_TZ).
	// Default crontool.DefaultTZ (UTC).
	CronToolTZ string
	// OwnerAuth verifies the tokens of the alarms' routes when the API
	// runs Open (with Auth, Auth does): an alarm belongs to the DID of a
	// verified token, even on an open API. Nil on an open API refuses
	// every alarm request with 401. Default nil.
	OwnerAuth *auth.Verifier

	// AlarmMaxFailures is the max_failures of an alarm that omits it
	// (ALARM_MAX_FAILURES), between 1 and model.MaxAlarmFailures.
	// Default AlarmMaxFailuresDefault (5).
	AlarmMaxFailures int
	// AlarmPayloadMaxBytes bounds an alarm's payload, as posted; a larger
	// one gets 413 (ALARM_PAYLOAD_MAX_BYTES). Default
	// AlarmPayloadMaxBytesDefault (64 KiB).
	AlarmPayloadMaxBytes int
	// AlarmLabelMaxBytes bounds an alarm's label (ALARM_LABEL_MAX_BYTES).
	// Default AlarmLabelMaxBytesDefault (200).
	AlarmLabelMaxBytes int
	// AlarmWakeMessageMaxBytes bounds an alarm's wake message
	// (ALARM_WAKE_MESSAGE_MAX_BYTES). Default
	// AlarmWakeMessageMaxBytesDefault (16 KiB).
	AlarmWakeMessageMaxBytes int
	// RateLimit is each client's sustained rate in requests per second:
	// a client is its token's subject, or its IP address before it is
	// authenticated (and when Open). rate.Inf turns the limit off.
	// Default RateLimitDefault (50).
	RateLimit rate.Limit
	// RateBurst is how many requests a client may send at once above
	// RateLimit. Default RateBurstDefault (100).
	RateBurst int
	// BackfillMaxRuns bounds the planned times one backfill, or a
	// resume's replay, may hold; more is a 400 (BACKFILL_MAX_RUNS).
	// Default BackfillMaxRunsDefault (1000).
	BackfillMaxRuns int
	// BackfillRate is how many of a backfill's runs become runnable per
	// second (BACKFILL_RATE). Default BackfillRateDefault (10).
	BackfillRate int
	// RunTimeout bounds how long a skip or queue backfill's run stays in
	// flight without a final status before it is FAILED (run_timeout)
	// and releases its schedule: the schedulers' RUN_TIMEOUT, read by the
	// API too. Default queue.BackfillRunTimeoutDefault (1h).
	RunTimeout time.Duration
}

// WithDefaults returns a copy with zero fields set to their defaults.
func (c *Config) WithDefaults() Config {
	var v Config
	if c != nil {
		v = *c
	}
	v.DefaultOverlapPolicy = cmp.Or(v.DefaultOverlapPolicy, OverlapPolicyDefault)
	v.DefaultCatchupPolicy = cmp.Or(v.DefaultCatchupPolicy, CatchupPolicyDefault)
	v.DefaultJitterMs = cmp.Or(v.DefaultJitterMs, JitterMsDefault)
	v.BodyLimit = cmp.Or(v.BodyLimit, BodyLimitDefault)
	v.ReadyTimeout = cmp.Or(v.ReadyTimeout, ReadyTimeoutDefault)
	v.BodyReadTimeout = cmp.Or(v.BodyReadTimeout, BodyReadTimeoutDefault)
	v.RateLimit = cmp.Or(v.RateLimit, RateLimitDefault)
	v.RateBurst = cmp.Or(v.RateBurst, RateBurstDefault)
	v.BackfillMaxRuns = cmp.Or(v.BackfillMaxRuns, BackfillMaxRunsDefault)
	v.BackfillRate = cmp.Or(v.BackfillRate, BackfillRateDefault)
	v.RunTimeout = cmp.Or(v.RunTimeout, queue.BackfillRunTimeoutDefault)
	v.AlarmMaxFailures = cmp.Or(v.AlarmMaxFailures, AlarmMaxFailuresDefault)
	v.AlarmPayloadMaxBytes = cmp.Or(v.AlarmPayloadMaxBytes, AlarmPayloadMaxBytesDefault)
	v.AlarmLabelMaxBytes = cmp.Or(v.AlarmLabelMaxBytes, AlarmLabelMaxBytesDefault)
	v.AlarmWakeMessageMaxBytes = cmp.Or(v.AlarmWakeMessageMaxBytes, AlarmWakeMessageMaxBytesDefault)
	return v
}

// validate names the first field of c (after defaults) that is wrong.
func (c Config) validate() error {
	if _, err := model.ParseOverlapPolicy(string(c.DefaultOverlapPolicy)); err != nil {
		return fmt.Errorf("api: Config.DefaultOverlapPolicy: %w", err)
	}
	if _, err := model.ParseCatchupPolicy(string(c.DefaultCatchupPolicy)); err != nil {
		return fmt.Errorf("api: Config.DefaultCatchupPolicy: %w", err)
	}
	switch {
	case c.DefaultJitterMs < 0 || c.DefaultJitterMs > model.MaxJitterMs:
		return fmt.Errorf("api: Config.DefaultJitterMs must be between 0 and %d, got %d", model.MaxJitterMs, c.DefaultJitterMs)
	case c.BodyLimit < 1:
		return fmt.Errorf("api: Config.BodyLimit must be positive, got %d", c.BodyLimit)
	case c.ReadyTimeout < 0:
		return fmt.Errorf("api: Config.ReadyTimeout must not be negative, got %s", c.ReadyTimeout)
	case c.BodyReadTimeout < 0:
		return fmt.Errorf("api: Config.BodyReadTimeout must not be negative, got %s", c.BodyReadTimeout)
	case c.RateLimit < 0:
		return fmt.Errorf("api: Config.RateLimit must not be negative, got %v", c.RateLimit)
	case c.RateBurst < 1:
		return fmt.Errorf("api: Config.RateBurst must be positive, got %d", c.RateBurst)
	case c.BackfillMaxRuns < 1:
		return fmt.Errorf("api: Config.BackfillMaxRuns must be positive, got %d", c.BackfillMaxRuns)
	case c.BackfillRate < 1:
		return fmt.Errorf("api: Config.BackfillRate must be positive, got %d", c.BackfillRate)
	case c.RunTimeout < 0:
		return fmt.Errorf("api: Config.RunTimeout must not be negative, got %s", c.RunTimeout)
	case c.Auth == nil && !c.Open:
		return errors.New("api: Config needs Auth (a token verifier) or Open (no authentication: chronos dev, --insecure)")
	case c.Auth != nil && c.Open:
		return errors.New("api: Config sets both Auth and Open; choose one")
	case c.Auth != nil && c.OwnerAuth != nil:
		return errors.New("api: Config sets both Auth and OwnerAuth; Auth verifies the owners' tokens too")
	case c.AlarmMaxFailures < 1 || c.AlarmMaxFailures > model.MaxAlarmFailures:
		return fmt.Errorf("api: Config.AlarmMaxFailures must be between 1 and %d, got %d", model.MaxAlarmFailures, c.AlarmMaxFailures)
	case c.AlarmPayloadMaxBytes < 2:
		return fmt.Errorf("api: Config.AlarmPayloadMaxBytes must be at least 2 (the default payload {}), got %d", c.AlarmPayloadMaxBytes)
	case c.AlarmLabelMaxBytes < 1:
		return fmt.Errorf("api: Config.AlarmLabelMaxBytes must be positive, got %d", c.AlarmLabelMaxBytes)
	case c.AlarmWakeMessageMaxBytes < 1:
		return fmt.Errorf("api: Config.AlarmWakeMessageMaxBytes must be positive, got %d", c.AlarmWakeMessageMaxBytes)
	}
	return nil
}
