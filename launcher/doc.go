// Package launcher carries runs out: its lane takes run tasks off the
// asynq queues of every shard (lane.go), checks that each run is still
// wanted, loads its workflow's DAG, calls the Executor with the
// idempotency key, and reports the run's status back to its record (which
// releases the schedule's overlap hold). The run of an alarm (target
// wake) loads no DAG: the Waker delivers the alarm's wake to WAKE_URL,
// signed, and a delivered wake is the run's SUCCESS (wake.go;
// docs/wake.md).
//
// A launcher runs no asynq server: it does what one does for a queue
// itself, in asynq's layout (queue/asynqwire), with every key of every
// script in KEYS, so that each script touches one slot of a Redis Cluster
// and the key guard of the tests covers it. The lane takes, leases and
// finishes tasks; forwardLoop makes due runs and retries pending;
// recoverLoop recovers the tasks of launchers that died (recover.go);
// completedLoop deletes completed tasks past their retention; serversLoop
// lists the launcher in asynqmon (servers.go). asynqmon's "Cancel", which
// signals asynq servers, reaches no launcher.
//
// Execution is at least once: a launcher that dies mid-run leaves its
// tasks to the other launchers' recovery, which retries them, and the
// executor receives the same idempotency key again to deduplicate. A task
// archived before its run recorded an end (the last attempt's launcher
// died) fails its run (archived.go).
package launcher
