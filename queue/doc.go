// Package queue owns everything chronos keeps in Redis: the key layout, the
// Lua scripts, the schedule store, run records, run task payloads, shard
// leases and the shared clock. asynq's own Redis layout, which the store
// writes run tasks in, is package asynqwire's.
//
// # Layout
//
// Schedules are sharded by a hash of their id (ShardOf). All keys of one
// shard share the hash tag "{sNN}":
//
//	chronos:{s07}:due            ZSET  schedule id -> act time (ms); +inf when paused, held or retired
//	chronos:{s07}:sched:<id>     HASH  the definition, then its state: tk, ver, next, paused, inflight, held, rel, rs (schema.go)
//	chronos:{s07}:runs:<id>      ZSET  idempotency key -> run_at (ms), the last N runs
//	chronos:{s07}:run:<key>      HASH  one run record: sid, at, fire, st, rid, enq, cr, up, err, src, att, retry, req (schema.go)
//	chronos:{s07}:alarms:<did>   ZSET  an owner's alarm ids -> created at (ms); the owner's shard (ShardOf the DID), as its alarms'
//	chronos:{s07}:alarmkeys:<did> HASH an owner's idempotency key -> alarm id (alarm_create.lua)
//	chronos:{s07}:alarmsactive:<did> SET an owner's alarms created active and not cancelled since (the active limit)
//	chronos:{s07}:deleted:<id>   STRING the nonce of the call that deleted the schedule, for a minute (delete.lua)
//	chronos:{s07}:manual:<key>   STRING a manual run's mark on its key, as long as its record (manual_run.lua; manualmarks.go); in its schedule's shard when it names one
//	chronos:{s07}:inflight       ZSET  schedule id -> deadline (ms) of its in-flight run
//	chronos:{s07}:vers           STRING the shard's definition version counter (upsert.lua): ver never repeats, even for an id re-created
//	chronos:{s07}:lease          STRING redsync lock of the shard
//	chronos:{s07}:released       Pub/Sub channel, not a key: ids of schedules a status report made due at once (WatchReleased)
//	chronos:wf:{<id>}:<version>  STRING workflow DAG JSON
//	chronos:workflows            SET   the keys of the stored workflow versions (their count is capped)
//	chronos:meta                 HASH  shards (fixed when the first process starts)
//	chronos:{schedulers}         ZSET  scheduler replica id -> last heartbeat (ms)
//	chronos:{schedulers}:held    HASH  scheduler replica id -> shards it holds
//	chronos:{launchers}          ZSET  launcher replica id -> last heartbeat (ms)
//	chronos:{launchers}:skew     HASH  launcher replica id -> its host clock's skew against Redis (ms)
//	asynq:{s07}chronos}:...      asynq's own keys for the shard's run queue "s07}chronos" (ShardQueue): tag s07
//	asynq:{chronos}:...          the single run queue of earlier versions, drained by launchers
//
// # Scripts
//
// Each script in lua/ heads its file with its contract (KEYS, ARGV,
// output). schema.go names every hash field, key segment, stored value
// and script answer once; the scripts use the same names, which
// loadScript declares before each one, and TestScriptsSpellNoField keeps
// literals out. Code several scripts need is a library loadScript puts
// before them: run_record.lua creates and ends run records and says
// whether a key is taken, unhold.lua and release.lua end holds and
// in-flight runs, settle.lua settles the runs of a schedule paused or
// deleted that no launcher has taken, alarm_lifecycle.lua moves an
// alarm's state with its runs' ends and failed deliveries. No script reads Redis's clock: now is
// an argument.
//
// Keys, so that Redis Cluster can route each script to one slot and
// refuse nothing:
//
//   - Every key a script reads or writes comes in KEYS, all of one
//     shard's hash tag; none is built inside Lua. A channel (PUBLISH) is
//     not a key and comes in ARGV whole.
//   - Where the keys depend on what Redis holds (a run's schedule, a
//     schedule's run in flight, an alarm's owner, the alarm an owner's
//     idempotency key names, a run history, the due page), the Go caller
//     reads that first and passes both the keys and what it read.
//   - The script reads it again and, when it changed, writes nothing and
//     says so: statusRetry, alarmCreateStale, pauseStale, deleteStale,
//     upsertStale (the caller reads again and calls again, a bounded
//     number of times), or it leaves that item to its next call
//     (expire_inflight.lua). So the check and the writes stay one atomic
//     step.
//   - A read that needs no snapshot is pipelines, not a script (an
//     alarm's view, loadAlarms); one that needs a snapshot of native
//     reads only is a MULTI/EXEC (the due page, ReadDue).
//   - queuetest.KeyGuard holds the rule in the tests: every test client
//     runs the scripts with redis.call checked against KEYS, so a key
//     built in Lua fails a test even in the right slot, where a cluster
//     would let it through.
//
// status.lua publishes the id of a schedule it made due at once, a
// "queue" schedule's held run whose time has come, on the shard's
// released channel. The scheduler holding the shard plans it then rather
// than at its next tick (WatchReleased), so a held backlog drains as fast
// as its runs end. The message is only a hint: the due set says what is
// due, and a lost message leaves the schedule to the next tick.
//
// A schedule's act time is its next fire time minus the lookahead for the
// "allow" overlap policy (so its task can be enqueued ahead with ProcessAt),
// and the next fire time itself for "skip" and "queue", whose overlap
// decision must be made when the run is due.
//
// # A schedule's phases
//
// A schedule moves between these phases; the fields of its hash and its
// score in the due set say which it is in, and the script named on each
// edge is the only one that moves it along that edge:
//
//	          upsert.lua creates it
//	                  │
//	                  ▼
//	┌──────────────────────────────────┐
//	│ Idle                             │◄─────────────────────────────┐
//	│ score = act time of next         │                              │
//	└────────────────┬─────────────────┘                              │
//	                 │ commit.lua enqueues a "skip" or "queue" run    │
//	                 ▼                                                │
//	┌──────────────────────────────────┐ status.lua (a final status)  │
//	│ In flight                        │ or expire_inflight.lua (the  │
//	│ inflight = the run's key         ├─deadline), via release.lua───┤
//	└────────────────┬─────────────────┘                              │
//	                 │ commit.lua: a "queue" run is due behind it     │
//	                 ▼                                                │
//	┌──────────────────────────────────┐ the same, via unhold.lua:    │
//	│ Held                             │ the run did not run, or next │
//	│ held = 1, score = +inf           ├─is not due yet───────────────┤
//	└────────────────┬─────────────────┘                              │
//	                 │ the same: the run ran and next is due already  │
//	                 │ (status.lua also publishes it: WatchReleased)  │
//	                 ▼                                                │
//	┌──────────────────────────────────┐ commit.lua plans next (maybe │
//	│ Released                         │ in flight again) and clears  │
//	│ rel = 1: due however late        ├─rel──────────────────────────┘
//	└──────────────────────────────────┘
//
// "skip" runs due while one is in flight are recorded SKIPPED by
// commit.lua, which leaves the schedule in flight; "allow" runs never
// enter it.
//
// And from any phase:
//
//   - pause.lua pauses (paused = 1, score +inf) and resumes: next becomes
//     the next fire time after now, rs = now, rel is cleared. A run in
//     flight that a launcher has taken stays in flight; one held stays
//     held until it ends, then release.lua only clears held.
//   - pause.lua, pausing, settles the runs no launcher has taken
//     (settle.lua): ENQUEUED, no failed executor attempt, the task
//     pending or scheduled. One for a time after now is removed, record,
//     task and history entry; one due is recorded SKIPPED with the
//     reason. The run in flight so settled is released (release.lua:
//     inflight and held cleared), so resume plans with nothing in flight.
//   - A removed run's time is planned afresh if resume comes before it.
//     Removal, not SKIPPED: commit.lua keeps the record of a run planned
//     again, so a SKIPPED one would skip a time the resumed schedule
//     plans.
//   - upsert.lua changing the overlap policy away from "queue" ends a
//     hold (unhold.lua): a next already due waited, and is released; the
//     run stays in flight. A new timing replaces next and clears rel.
//   - commit.lua retires a schedule with no fire time left: next is
//     removed, score +inf. An upsert with a new timing brings it back.
//   - commit.lua also cuts a plan short when the run it would put in
//     flight has ended already: the schedule is released at that run's
//     time (rel = 1, due at once).
//   - delete.lua removes the hash and its due and in-flight members,
//     settles the runs no launcher has taken as pause.lua does, and the
//     other run records expire after the retention.
//
// inflight, held and rel stay three fields rather than one phase field:
// the phases overlap (held implies in flight, a paused schedule keeps its
// run in flight and its hold), and inflight carries the run's key.
//
// # Exactly one enqueue per planned run
//
// A scheduler plans in Go (cron math) and commits in one script per page
// (lua/commit.lua): for each schedule the script compares its next time,
// in-flight run and definition version with what the plan was computed
// from, and only then creates
// the run records, writes the asynq tasks (TaskID = idempotency key) and
// advances the schedule — atomically. A second replica that planned from
// the same state finds the comparison false and writes nothing; a crash
// before the script leaves nothing to repair, and the next tick plans the
// same runs again.
//
// Most pages do not run the script (Store.TickDue): a chunk of 32
// schedules is read under WATCH and, when its plans are plain (see
// TickDue), written by native commands in one MULTI/EXEC, which Redis
// runs only if no schedule read and no run's record changed since. WATCH
// is then the comparison; the writes are the script's, without its Lua.
// Anything else, or an EXEC that WATCH aborted, goes to the script.
//
// Tasks are written in asynq's own Redis layout (package asynqwire, whose
// Lua library enqueue_task the commit and manual run scripts put before
// them) rather than through asynq's Client: that makes the task part of
// the atomic commit and turns one round trip per run into one per page.
// The script touches the queue's keys and the shard's keys together, which
// standalone Redis and Sentinel allow; Redis Cluster will need one asynq
// queue per shard sharing its hash tag. Store.Tasks is the run queue.
package queue
