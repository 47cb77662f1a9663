package queue

import (
	"github.com/chronos-sched/chronos/model"
)

// This file names every field of the hashes chronos keeps and every key
// segment, once. Go uses the constants; the Lua scripts use locals of the
// same names, which loadScript declares before each script that uses them.
// So a field is spelled in one place, and a misspelt name fails in Go at
// compile time and in Lua at once (an undefined local reads nil, and
// TestScriptsSpellNoField rejects a bare literal). Names are short on
// purpose: there is one hash per schedule and per run, and short fields
// keep Redis's compact encoding (see defFields).

// Fields of a schedule hash (chronos:{sNN}:sched:<id>). The definition
// (defFields), one field per record field, each left out when empty.
// Times are Unix milliseconds.
const (
	sfOwner      = "o"  // owner's DID; empty for a registrar's schedule
	sfKind       = "k"  // kind: cron, once or every
	sfTarget     = "t"  // target: workflow or wake
	sfWorkflow   = "w"  // workflow id
	sfVersion    = "v"  // workflow version
	sfUser       = "u"  // user id the runs act for
	sfCron       = "c"  // cron expression
	sfDialect    = "d"  // cron dialect
	sfZone       = "z"  // IANA time zone
	sfEvery      = "e"  // interval of an "every" schedule, seconds
	sfFireAt     = "f"  // fire time of a "once" schedule
	sfDelay      = "ds" // delay_seconds a "once" schedule's fire time was resolved from
	sfStartAt    = "s"  // no run before this time
	sfEndAt      = "x"  // no run after this time
	sfJitter     = "j"  // jitter, ms: also the act lead of a held schedule
	sfOverlap    = "op" // overlap policy: skip, queue or allow
	sfCatchup    = "cp" // catch-up policy
	sfPauseAfter = "pf" // pause_after_failures: consecutive FAILED runs that pause it
	sfDST        = "dp" // DST policy other than the default, as model.DSTPolicy.String
	sfAnchor     = "a"  // anchor of @every and "every" timings
	sfCreated    = "cr" // created at
	sfUpdated    = "up" // updated at
)

// Fields of a schedule hash that are its state, not its definition.
const (
	sfTiming   = "tk"       // digest of the timing: an upsert keeps next while it is equal
	sfVer      = "ver"      // definition version, from the shard's counter (vers)
	sfNext     = "next"     // next fire time not yet planned; absent when retired
	sfPaused   = "paused"   // "1" while paused
	sfInflight = "inflight" // idempotency key of the run in flight
	sfHeld     = "held"     // "1" while a "queue" schedule waits for its run in flight
	sfReleased = "rel"      // "1": next waited for a run that ended, so it is due however late
	sfResumed  = "rs"       // last resumed, or its jitter changed; no run of next fires before it
	// sfBackfillTimeout is the run timeout, ms, of the runs a queue
	// backfill chained behind the run in flight (backfillQueueKey): the
	// release that starts one gives it this deadline.
	sfBackfillTimeout = "bqt"
)

// Fields of a schedule hash kept by auto-pause (autopause.lua) and pause.lua.
const (
	sfFailStreak   = "fs" // consecutive FAILED runs since the last SUCCESS or resume
	sfFailErr      = "fe" // error of the last FAILED run
	sfPausedWhy    = "pw" // why it is paused: pausedManual or pausedFailures
	sfPausedNote   = "pn" // the pause's note: the caller's, or what failed
	sfPausedAt     = "pa" // when it paused, ms
	sfReplay       = "rp" // "from:to" ms: a resume's replay not yet enqueued (catchup replay)
	pausedManual   = string(model.PausedManual)
	pausedFailures = string(model.PausedFailures)
)

// segAutoPaused is the key after a shard's prefix counting the schedules
// of the shard auto-pause paused (chronos_schedules_auto_paused_total).
const segAutoPaused = "autopaused"

// backfill.lua's answers, KEYS and ARGV strides (see its header).
const (
	backfillNotFound = -1 // no such schedule (or an alarm)
	backfillStale    = -2 // the definition changed since the times were computed
	backfillPaused   = -3 // the schedule is paused

	replayKept      = 0 // forget_replay.lua: another replay is pending, kept
	replayForgotten = 1 // forget_replay.lua: forgotten

	runTaken         = "t" // a manual run or a live task holds the key: not written (backfill.lua), or written SKIPPED, reasonManualKeyTaken (commit.lua)
	runBeforeHistory = "h" // not written: older than the oldest record of a full history
	runOverlapped    = "o" // backfill.lua, overlap_policy skip: recorded SKIPPED, another run of the schedule in flight
	runQueued        = "q" // backfill.lua, overlap_policy queue: written, its task parked until the run before it ends

	backfillHeaderKeys = 9
	backfillRunKeys    = 3
	backfillHeaderArgs = 11
	backfillRunArgs    = 5
)

// Fields of an alarm's schedule hash (target wake) beside its schedule's.
// Definition fields (defFields) are set when the alarm is created;
// afFailures, afLastErr, afLastFired and afStatus are its state, written by
// the run lifecycle (attempt.lua, status.lua) and by cancel.
const (
	afLabel        = "al" // label
	afConversation = "cv" // conversation id
	afWakeMessage  = "wm" // wake message, byte for byte
	afPayload      = "pl" // payload JSON, byte for byte
	afIdempotency  = "ik" // the owner's idempotency key
	afMaxFailures  = "mf" // failed deliveries before the alarm fails
	afStatus       = "as" // active, fired, cancelled or failed
	afFailures     = "fc" // failed deliveries, running count
	afLastErr      = "le" // why the last delivery failed
	afLastFired    = "lf" // last delivered wake, ms
)

// Values of afStatus, sfTarget and sfKind the scripts compare, from model.
const (
	alarmActive    = string(model.AlarmActive)
	alarmFired     = string(model.AlarmFired)
	alarmCancelled = string(model.AlarmCancelled)
	alarmFailed    = string(model.AlarmFailed)
	targetWake     = string(model.TargetWake)
	kindOnce       = string(model.KindOnce)
)

// asynq's task hash field the scripts read, and the state of a task a
// server holds (asynq v0.26's layout; see queue/asynqwire).
const (
	taskState     = "state"
	taskActive    = "active"
	taskPending   = "pending"   // runnable, in the queue's pending list
	taskScheduled = "scheduled" // waiting for its time in the scheduled set
	// taskParked is the scheduled set's score (Unix seconds, 9999-12-31)
	// of a queue backfill's task that waits for the run before it: asynq
	// never forwards it; release.lua moves it to now when its turn comes.
	taskParked = 253402300799
)

// Fields of a run hash (chronos:{sNN}:run:<idempotency key>). Times are
// Unix milliseconds.
const (
	rfSchedule = "sid"   // schedule id; empty for a manual run
	rfRunAt    = "at"    // planned run time, before jitter
	rfFireAt   = "fire"  // fire time, after jitter
	rfStatus   = "st"    // status: ENQUEUED, STARTED, SUCCESS, FAILED or SKIPPED
	rfRunID    = "rid"   // the executor's run id
	rfEnqueued = "enq"   // enqueued at
	rfCreated  = "cr"    // created at
	rfUpdated  = "up"    // last status change
	rfError    = "err"   // why the run failed or was skipped
	rfSource   = "src"   // schedule or manual
	rfAttempts = "att"   // failed executor attempts before it started
	rfRetryAt  = "retry" // when the retry after the last failed attempt was due
	rfLastErr  = "lerr"  // why the last failed attempt failed
	rfRequest  = "req"   // nonce of the manual-run call that created it
	rfReason   = "rsn"   // why a SKIPPED or FAILED run ended so (model.RunReason)
)

// Fields of a request-idempotency hash (chronos:req:<digest>): the first
// answer to a request sent with an Idempotency-Key header.
const (
	qfBody     = "body"   // digest of the first request's body
	qfStatus   = "status" // its HTTP status; absent while it is being answered
	qfResponse = "resp"   // its response body
)

// metaShards is the field of chronos:meta holding the shard count.
const metaShards = "shards"

// Key segments after a shard's prefix (chronos:{sNN}:), Lua builds keys
// from them too.
const (
	segSched   = "sched:"   // + schedule id: the schedule hash
	segRuns    = "runs:"    // + schedule id: its run history zset
	segRun     = "run:"     // + idempotency key: a run hash
	segDeleted = "deleted:" // + schedule id: the mark of the call that deleted it
	segManual  = "manual:"  // + idempotency key: a manual run's mark on its key
)

// Key segments of an owner's alarm index, after the prefix of the owner's
// shard (ShardOf the owner's DID), followed by the DID. An alarm's id is
// drawn until it falls in the same shard, so every alarm script touches
// one Redis Cluster slot.
const (
	segAlarms       = "alarms:"       // ZSET alarm id -> created at, ms
	segAlarmKeys    = "alarmkeys:"    // HASH idempotency key -> alarm id
	segAlarmsActive = "alarmsactive:" // SET ids of alarms still active: cancel and the run lifecycle remove them
)

// chanReleased is the Pub/Sub channel after a shard's prefix
// (chronos:{sNN}:released) on which status.lua publishes the id of a
// schedule it made due at once (Store.WatchReleased). A channel, not a
// key, but spelt once all the same: a launcher and a scheduler of
// different versions must agree on it.
const chanReleased = "released"

// Values of fields the scripts compare or write, from model.
const (
	stEnqueued   = string(model.RunEnqueued)    // rfStatus: the task waits for a launcher
	stStarted    = string(model.RunStarted)     // rfStatus: the executor started it
	stSuccess    = string(model.RunSuccess)     // rfStatus: final
	stFailed     = string(model.RunFailed)      // rfStatus: final
	stSkipped    = string(model.RunSkipped)     // rfStatus: final, never started
	srcSchedule  = string(model.SourceSchedule) // rfSource: planned by a scheduler
	srcManual    = string(model.SourceManual)   // rfSource: POST /run-launcher/start
	srcBackfill  = string(model.SourceBackfill) // rfSource: POST /schedules/:id/backfill, a resume's replay
	overlapQueue = string(model.OverlapQueue)   // sfOverlap: runs wait for the one in flight
)

// Reasons (rfReason) the scripts decide themselves; the others come from
// Go, as arguments.
const (
	reasonPaused         = string(model.ReasonPaused)         // pause.lua settles a run
	reasonDeleted        = string(model.ReasonDeleted)        // delete.lua, upsert.lua settle a run
	reasonManualKeyTaken = string(model.ReasonManualKeyTaken) // commit.lua: a manual run took the key
	reasonCatchupDropped = string(model.ReasonCatchupDropped) // plan.go's record of dropped runs, under a key of its own
)

// How status.lua releases a run held behind the one it ends (ARGV[8]).
const (
	releaseUnplanned = string(ReleaseUnplanned) // the run was SKIPPED as no longer planned: it ran
	releaseAbandoned = string(ReleaseAbandoned) // judged by its status before FAILED
)

// flagSet is the value of a flag field (sfPaused, sfHeld, sfReleased)
// that is set; a flag that is not set is absent.
const flagSet = "1"

// What the scripts answer, named once for the script and its caller.
const (
	upsertUnchanged = 0 // upsert.lua: the body equals the stored one
	upsertUpdated   = 1 // upsert.lua: an existing schedule changed
	upsertCreated   = 2 // upsert.lua: a new schedule

	pauseNotFound = -1 // pause.lua: no such schedule
	pauseStale    = -2 // pause.lua: the definition changed since it was read
	pauseSame     = 0  // pause.lua: already paused, or already running
	pauseChanged  = 1  // pause.lua: paused or resumed

	deleteNotFound = 0 // delete.lua: no such schedule
	deleteDone     = 1 // delete.lua: deleted, by this call
	deleteStale    = 2 // delete.lua: the history changed since it was read: read it again

	upsertIsAlarm = 3 // upsert.lua: the id is an agent's alarm, which the registrar does not touch
	upsertStale   = 4 // upsert.lua: a new schedule's id has a history other than the caller read: read it again

	alarmCreateNew      = 1  // alarm_create.lua: created
	alarmCreateDeduped  = 2  // alarm_create.lua: the owner's idempotency key names an existing alarm
	alarmCreateIDTaken  = 3  // alarm_create.lua: a schedule has this id: draw another
	alarmCreateTooMany  = 4  // alarm_create.lua: the owner has the most active alarms allowed
	alarmCreateStale    = 5  // alarm_create.lua: the owner's idempotency key names another alarm than the caller read
	alarmCancelNotFound = -1 // alarm_cancel.lua: no such alarm of this owner
	alarmCancelSame     = 0  // alarm_cancel.lua: terminal already, left unchanged
	alarmCancelDone     = 1  // alarm_cancel.lua: cancelled, by this call

	statusNotFound  = -1 // status.lua: no such run
	statusUnchanged = 0  // status.lua: final already, or not in the status asked
	statusChanged   = 1  // status.lua: the new status is recorded
	statusRetry     = 2  // status.lua: the schedule or owner named was not the run's: call again with those it answers

	statusDoneNotFinished = -1 // status_done.lua: the status script answered statusRetry, so the task's end was not called

	// status_done_many.lua's layout: the keys and arguments all its runs
	// share, then each run's.
	endsSharedKeys = 11
	endsRunKeys    = 5
	endsSharedArgs = 3
	endsRunArgs    = 13

	manualExists  = 0 // manual_run.lua: a run has this key
	manualCreated = 1 // manual_run.lua: created, by this call
	manualKeyHeld = 2 // manual_run.lua: another run's live task has this key

	attemptNotEnqueued = -1 // attempt.lua: the run is gone or past ENQUEUED

	commitStale = 0 // commit.lua, per plan: the schedule changed, nothing written

	requestNotClaimed = 0 // request_answer.lua: the claim is no longer this request's
	requestAnswered   = 1 // request_answer.lua: answer recorded, or claim given up
)

// commit.lua answers an applied plan with commitApplied followed by one
// mark per run.
const (
	commitApplied = "+" // the plan applied
	runWritten    = "1" // the run's record (and task) were written
	runKept       = "0" // not written: its record existed
	runCut        = "-" // not applied: the plan was cut short before it
)

// commit.lua's ARGV: commitHeaderArgs fixed arguments, then per plan
// commitPlanArgs arguments followed by commitRunArgs per run (see the
// script's header; its KEYS: commitHeaderKeys in commit_call.go). Commit
// checks what it sends against them.
const (
	commitHeaderArgs = 6
	commitPlanArgs   = 10
	commitRunArgs    = 7
)

// upsert.lua's and alarm_create.lua's ARGV: these many fixed arguments,
// then a part of variable length (see each script's header). Their callers
// check what they send against them.
const (
	upsertHeaderArgs      = 10
	alarmCreateHeaderArgs = 8
)

// luaNames are the constants the prelude declares for Lua, each under its
// Go name. TestLuaPreludeNamesEveryConstant holds this list and the
// constants of this file together.
var luaNames = []struct {
	name  string
	value any
}{
	{"sfOwner", sfOwner}, {"sfKind", sfKind}, {"sfTarget", sfTarget}, {"sfWorkflow", sfWorkflow},
	{"sfVersion", sfVersion}, {"sfUser", sfUser}, {"sfCron", sfCron}, {"sfDialect", sfDialect},
	{"sfZone", sfZone}, {"sfEvery", sfEvery}, {"sfFireAt", sfFireAt}, {"sfDelay", sfDelay}, {"sfStartAt", sfStartAt},
	{"sfEndAt", sfEndAt}, {"sfJitter", sfJitter}, {"sfOverlap", sfOverlap}, {"sfCatchup", sfCatchup}, {"sfDST", sfDST},
	{"sfAnchor", sfAnchor}, {"sfCreated", sfCreated}, {"sfUpdated", sfUpdated},
	{"sfTiming", sfTiming}, {"sfVer", sfVer}, {"sfNext", sfNext}, {"sfPaused", sfPaused},
	{"sfInflight", sfInflight}, {"sfHeld", sfHeld}, {"sfReleased", sfReleased}, {"sfResumed", sfResumed}, {"sfBackfillTimeout", sfBackfillTimeout},
	{"afLabel", afLabel}, {"afConversation", afConversation}, {"afWakeMessage", afWakeMessage},
	{"afPayload", afPayload}, {"afIdempotency", afIdempotency}, {"afMaxFailures", afMaxFailures},
	{"afStatus", afStatus}, {"afFailures", afFailures}, {"afLastErr", afLastErr}, {"afLastFired", afLastFired},
	{"alarmActive", alarmActive}, {"alarmFired", alarmFired}, {"alarmCancelled", alarmCancelled},
	{"alarmFailed", alarmFailed}, {"targetWake", targetWake}, {"kindOnce", kindOnce}, {"taskState", taskState}, {"taskActive", taskActive}, {"taskPending", taskPending}, {"taskScheduled", taskScheduled}, {"taskParked", taskParked},
	{"rfSchedule", rfSchedule}, {"rfRunAt", rfRunAt}, {"rfFireAt", rfFireAt}, {"rfStatus", rfStatus},
	{"rfRunID", rfRunID}, {"rfEnqueued", rfEnqueued}, {"rfCreated", rfCreated}, {"rfUpdated", rfUpdated},
	{"rfError", rfError}, {"rfSource", rfSource}, {"rfAttempts", rfAttempts}, {"rfRetryAt", rfRetryAt},
	{"rfLastErr", rfLastErr}, {"rfRequest", rfRequest}, {"rfReason", rfReason},
	{"qfBody", qfBody}, {"qfStatus", qfStatus}, {"qfResponse", qfResponse},
	{"metaShards", metaShards},
	{"segSched", segSched}, {"segRuns", segRuns}, {"segRun", segRun}, {"segDeleted", segDeleted}, {"segManual", segManual},
	{"segAlarms", segAlarms}, {"segAlarmKeys", segAlarmKeys}, {"segAlarmsActive", segAlarmsActive},
	{"chanReleased", chanReleased},
	{"stEnqueued", stEnqueued}, {"stStarted", stStarted}, {"stSuccess", stSuccess}, {"stFailed", stFailed},
	{"stSkipped", stSkipped}, {"srcSchedule", srcSchedule}, {"srcManual", srcManual}, {"overlapQueue", overlapQueue},
	{"flagSet", flagSet},
	{"releaseUnplanned", releaseUnplanned}, {"releaseAbandoned", releaseAbandoned},
	{"upsertUnchanged", upsertUnchanged}, {"upsertUpdated", upsertUpdated}, {"upsertCreated", upsertCreated},
	{"pauseNotFound", pauseNotFound}, {"pauseStale", pauseStale}, {"pauseSame", pauseSame}, {"pauseChanged", pauseChanged},
	{"deleteNotFound", deleteNotFound}, {"deleteDone", deleteDone}, {"deleteStale", deleteStale}, {"upsertIsAlarm", upsertIsAlarm}, {"upsertStale", upsertStale},
	{"alarmCreateNew", alarmCreateNew}, {"alarmCreateDeduped", alarmCreateDeduped}, {"alarmCreateIDTaken", alarmCreateIDTaken},
	{"alarmCreateTooMany", alarmCreateTooMany}, {"alarmCreateStale", alarmCreateStale}, {"alarmCancelNotFound", alarmCancelNotFound},
	{"alarmCancelSame", alarmCancelSame}, {"alarmCancelDone", alarmCancelDone},
	{"statusNotFound", statusNotFound}, {"statusUnchanged", statusUnchanged}, {"statusChanged", statusChanged}, {"statusRetry", statusRetry},
	{"statusDoneNotFinished", statusDoneNotFinished},
	{"endsSharedKeys", endsSharedKeys}, {"endsRunKeys", endsRunKeys}, {"endsSharedArgs", endsSharedArgs}, {"endsRunArgs", endsRunArgs},
	{"manualExists", manualExists}, {"manualCreated", manualCreated}, {"manualKeyHeld", manualKeyHeld},
	{"attemptNotEnqueued", attemptNotEnqueued},
	{"commitStale", commitStale}, {"requestNotClaimed", requestNotClaimed}, {"requestAnswered", requestAnswered}, {"commitApplied", commitApplied},
	{"runWritten", runWritten}, {"runKept", runKept}, {"runCut", runCut},
	{"reasonPaused", reasonPaused}, {"reasonDeleted", reasonDeleted}, {"reasonManualKeyTaken", reasonManualKeyTaken},
	{"reasonCatchupDropped", reasonCatchupDropped},
	{"commitHeaderArgs", commitHeaderArgs}, {"commitPlanArgs", commitPlanArgs}, {"commitRunArgs", commitRunArgs},
	{"upsertHeaderArgs", upsertHeaderArgs}, {"alarmCreateHeaderArgs", alarmCreateHeaderArgs},
	{"sfPauseAfter", sfPauseAfter}, {"sfFailStreak", sfFailStreak}, {"sfFailErr", sfFailErr}, {"sfPausedWhy", sfPausedWhy},
	{"sfPausedNote", sfPausedNote}, {"sfPausedAt", sfPausedAt}, {"sfReplay", sfReplay}, {"pausedManual", pausedManual},
	{"pausedFailures", pausedFailures}, {"segAutoPaused", segAutoPaused}, {"srcBackfill", srcBackfill},
	{"backfillNotFound", backfillNotFound}, {"backfillStale", backfillStale}, {"backfillPaused", backfillPaused},
	{"replayKept", replayKept}, {"replayForgotten", replayForgotten},
	{"runTaken", runTaken}, {"runBeforeHistory", runBeforeHistory}, {"runOverlapped", runOverlapped}, {"runQueued", runQueued}, {"backfillHeaderKeys", backfillHeaderKeys},
	{"backfillRunKeys", backfillRunKeys}, {"backfillHeaderArgs", backfillHeaderArgs}, {"backfillRunArgs", backfillRunArgs},
}
