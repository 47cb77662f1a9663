// Package scheduler is the ticker: it shares the due-set shards among
// scheduler replicas with leases, and for each shard it holds, every tick it
// reads the schedules whose act time has come, expands their due run times
// (zone and DST aware, through model), applies the overlap, catch-up and
// jitter policies, commits the plan atomically and hands the runs to asynq.
//
// # Shard ownership
//
//	           heartbeat: live replicas N, fair share ceil(SHARDS/N)
//	free shard ──TryAcquire──▶ held ──Extend every TTL/3──▶ held
//	                             │                            │
//	        share exceeded ──────┤     extend refused, or     │
//	        Stop ────────────────┤     Redis unreachable past │
//	                             │     the lease's expiry ────┘
//	                             ▼
//	                  released / lost: the shard loop stops
//
// A replica acts on a shard only while its lease has more than the safety
// margin left (the shard loop skips its ticks otherwise). It does not rely on that for correctness: two holders that
// overlap plan from the same state, the commit (a script, or a
// transaction under WATCH) applies one plan, and
// asynq rejects a second task with the same TaskID (see package queue).
//
// # Ticks
//
// A shard loop ticks on each boundary of TICK_MS on the shared clock,
// a couple of milliseconds after it, so a run due on a whole second is
// planned at once. It also ticks when woken: a status report ended a
// "queue" schedule's run in flight while the next run, already due,
// waited behind it (queue.Store.WatchReleased). Planned at the next
// boundary instead, a held backlog would drain one run per tick, and a
// schedule firing about as often as it ticks would never catch up. A
// wake tick is an ordinary tick: it plans whatever is due, and the
// commit keeps it from planning a run twice.
package scheduler
