// Package launcher carries runs out: it is an asynq server whose handler
// checks that a run is still wanted, loads its workflow's DAG, calls the
// Executor with the idempotency key, and reports the run's status back to
// its record (which releases the schedule's overlap hold). The run of an
// alarm (target wake) loads no DAG: the Waker delivers the alarm's wake
// to WAKE_URL, signed, and a delivered wake is the run's SUCCESS
// (wake.go; docs/wake.md).
//
// Execution is at least once: a launcher that dies mid-run leaves the task
// to asynq's retry, and the executor receives the same idempotency key
// again to deduplicate. A task asynq archives before the handler recorded
// an end (the last attempt's launcher died) fails its run (archived.go).
package launcher
