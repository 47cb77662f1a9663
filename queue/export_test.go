package queue

// Names of the stored layout for the external tests, which need
// queuetest (and so cannot be in package queue).
var (
	DueKey          = dueKey
	InflightKey     = inflightKey
	ScheduleKey     = scheduleKey
	HistoryKey      = historyKey
	RunKey          = runKey
	ManualKeyPrefix = manualKeyPrefix
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

	RfSchedule = rfSchedule
	RfRunAt    = rfRunAt
	RfFireAt   = rfFireAt
	RfStatus   = rfStatus
	RfEnqueued = rfEnqueued
	RfCreated  = rfCreated
	RfUpdated  = rfUpdated
	RfError    = rfError
	RfSource   = rfSource
	RfAttempts = rfAttempts

	FlagSet = flagSet
)
