// Package declarative runs periodic tasks declared in Go code, to the
// letter of chronos's declarative scheduler specification, with their
// state in Redis so that restarts lose nothing and every process of a
// program agrees on who runs what.
//
//	s, err := declarative.New(declarative.Options{Redis: rdb})
//	err = s.Initialize(ctx, []declarative.Registration{
//		{Name: "nightly-report", Cron: "0 2 * * *", Callback: report, RetryDelay: time.Minute},
//	})
//	defer s.Stop(ctx)
//
// # Time
//
// Expressions are strict POSIX cron (five numeric fields separated by
// spaces or tabs; no steps, names, macros or Quartz tokens), evaluated at
// minute granularity in the host's local zone (Options.Location to
// choose another) on the host's clock (Options.Clock). A local minute a
// DST jump skips never runs; one that happens twice runs twice.
//
// A task runs at most once after downtime however many occurrences it
// missed. On its first start (no persisted state) a task runs at once only
// if the current minute matches; after that it continues from its
// persisted servedUntil, lastAttemptAt, lastSuccessAt and
// pendingRetryUntil.
//
// # States
//
//	scheduler: Uninitialized → Initializing → Running → Stopping → Stopped
//	                               └── (failure) → Uninitialized
//	task:      AwaitingRun → Running → AwaitingRun      (success)
//	                               └→ AwaitingRetry    (failure; retry after RetryDelay,
//	                                                    or the next occurrence preempts it)
//	polling:   Inactive → Active → Stopping → Inactive
//
// Every transition's event (see EventType) goes to Options.OnEvent and to
// Options.Logger.
//
// # Redis and many processes
//
// A task's state is the hash {namespace}:task:<name>; {namespace}:meta
// holds the scheduler identifier made by the namespace's first
// initialization. Every process that initializes the same namespace shares
// the tasks: a Lua script decides atomically which process starts each due
// occurrence (once, across all of them) and gives it the task's lease, so a
// task never runs twice at once. The holder renews the lease every third of
// Options.LeaseTTL while the callback runs and releases it with the
// outcome. If the holder dies, the lease lapses and another process (or
// the restarted one) runs the task again: the run was orphaned. Lease
// deadlines are read on each process's clock, so the hosts' clocks must
// agree to well within LeaseTTL (NTP does); a clock that runs ahead by
// more would take over runs that are still alive.
//
// Initialize classifies each registration against the persisted state:
// new (no state: created), preserved (same name, expression and retry
// delay: untouched), overridden (configuration replaced, history kept) or
// orphaned (a lapsed lease: restarted at once). The writes are applied in
// MULTI/EXEC batches and undone if any batch fails.
//
// One timer serves all tasks: the loop sleeps until the earliest due
// minute, then claims every task due then in batches of 1000 per script
// call, and starts the claimed callbacks.
//
// # Errors
//
// Errors are the specification's taxonomy, each a type with the
// specification's details as fields and a stable Name; match them with
// errors.As. Persisted state that cannot be read back is one of the
// TaskTryDeserializeError family, returned by Initialize; delete the key
// it names to start that task afresh.
package declarative
