package queue

import "github.com/redis/go-redis/v9"

// Names of the stored layout for the external tests, which need
// queuetest (and so cannot be in package queue).
var (
	DueKey          = dueKey
	InflightKey     = inflightKey
	ScheduleKey     = scheduleKey
	HistoryKey      = historyKey
	RunKey          = runKey
	ManualKeyPrefix = manualKeyPrefix
	AlarmsKey       = alarmsKey
	AlarmsActiveKey = alarmsActiveKey
)

// Fields and values of schema.go the external tests read and write.
const (
	SfCreated  = sfCreated
	SfVer      = sfVer
	SfNext     = sfNext
	SfJitter   = sfJitter
	SfPaused   = sfPaused
	SfInflight = sfInflight
	SfHeld     = sfHeld
	SfReleased = sfReleased
	SfResumed  = sfResumed
	SfCron     = sfCron
	SfZone     = sfZone
	AfStatus   = afStatus

	RfSchedule = rfSchedule
	RfRunAt    = rfRunAt
	RfFireAt   = rfFireAt
	RfStatus   = rfStatus
	RfEnqueued = rfEnqueued
	RfCreated  = rfCreated
	RfUpdated  = rfUpdated
	RfError    = rfError
	RfReason   = rfReason
	RfSource   = rfSource
	RfAttempts = rfAttempts

	AfFailures  = afFailures
	AfLastErr   = afLastErr
	AfLastFired = afLastFired

	FlagSet = flagSet
)

// LoadedScripts returns every script the package loaded, by name, and
// whether each may write.
func LoadedScripts() map[string]LoadedScript {
	out := make(map[string]LoadedScript, len(scripts))
	for name, l := range scripts {
		out[name] = LoadedScript{Script: l.script, Source: l.src, Writes: l.writes, RunsWhenFull: l.runsWhenFull}
	}
	return out
}

// LoadedScript is a script of the package.
type LoadedScript struct {
	Script *redis.Script
	Source string
	Writes bool
	// RunsWhenFull: it only frees memory (allow-oom).
	RunsWhenFull bool
}

// ExpectState is the Expectation of a schedule whose hash holds next,
// inflight and ver.
func ExpectState(next, inflight, ver string) Expectation {
	return Expectation{next: next, inflight: inflight, ver: ver}
}

// FastPages is how many chunks of a page TickDue committed in its fast
// path.
func (s *Store) FastPages() int64 { return s.fastPages.Load() }

// FastChunk is how many schedules one WATCH of TickDue covers.
const FastChunk = fastChunk

// WatchSeesWrites says whether the store's compare-and-sets trust WATCH
// (watchprobe.go).
func (s *Store) WatchSeesWrites() bool { return s.watchSeesWrites }
