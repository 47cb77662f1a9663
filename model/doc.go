// Package model holds chronos's shared types, their validation and the
// fire-time engine: when does a schedule fire next.
//
// It is the floor of the module: pure functions of their inputs, importing
// only the standard library and robfig/cron (as a parser). It has no clock
// of its own; "now" and "after" are always passed in.
//
// # Schedules
//
// Every kind of schedule is a [Schedule]: Next(after) returns the first fire
// time strictly after after, in UTC and in whole seconds, or the zero Time
// when there is none. The kinds are
//
//   - [CronSchedule], from [ParseCron]: a cron expression in the standard
//     dialect (robfig/cron's grammar: 5 or 6 fields, names, steps,
//     descriptors) or the strict posix dialect, evaluated in an IANA zone;
//   - [Every]: a fixed interval counted from an anchor, so it never drifts
//     ("@every 1h" in the standard dialect);
//   - [Once]: a single instant, from [ResolveOnce];
//   - [Window]: any schedule restricted to a start and end.
//
// [Preview] lists upcoming fire times of any of them.
//
// # Time zones and DST
//
// A cron expression matches an instant when that instant's wall clock in
// the schedule's zone matches every field. So a local time that a DST change
// skips never fires, and a local time that happens twice (when clocks fall
// back) fires twice, at two distinct UTC instants. This holds in every
// zone, including 30-minute DST (Australia/Lord_Howe), DST changes at
// midnight (America/Havana, America/Santiago, Atlantic/Azores) and days a
// zone skipped entirely (Pacific/Apia, 2011-12-30). robfig/cron's own Next
// gets some of these wrong and is not used; see [CronSchedule.Next] for
// the algorithm. Zones come from [LoadZone]; the IANA database is embedded
// so a bare container resolves them.
//
// # Policies
//
// Every decision of the overlap and catch-up policies is made here, in
// policy.go: [AtPlan] when a scheduler finds a run due, [AtLaunch] when a
// launcher would start it, [AtRelease] when the run a "queue" schedule
// waits for leaves flight, and [MissedBefore] for when a run counts as
// missed. The scheduler, the launcher and queue's Lua scripts (which
// mirror [EndedRun.Ran]) find the situation and carry out the outcome.
//
// # Runs
//
// [IdempotencyKey] names one planned run of a schedule, and [JitterOffset]
// derives that run's deterministic jitter from the key, so a retried tick
// computes the same key and the same fire time.
package model
