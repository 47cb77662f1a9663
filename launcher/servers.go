package launcher

import (
	"context"
	"os"
	"strings"
	"time"

	"github.com/chronos-sched/chronos/queue/asynqwire"
)

// asynqmon's Servers tab listed each launcher while it ran an asynq
// server, whose heartbeater wrote the server's state. The launcher
// writes the same state itself (asynqwire.WriteServer): plain commands,
// each key in a slot of its own, no script; its workers are the tasks
// its lane holds.

// serversInterval is how often a launcher writes its state for
// asynqmon, and serversTTL how long the state outlives the last write:
// asynq's heartbeater's interval, and twice it.
const (
	serversInterval = 5 * time.Second
	serversTTL      = 2 * serversInterval
)

// server is how asynqmon shows this launcher: the host, pid and id of
// its skew heartbeat (l.id is "host:pid:random").
func (l *Launcher) server(started time.Time) *asynqwire.Server {
	host, _ := os.Hostname()
	id := l.id
	if i := strings.LastIndexByte(id, ':'); i >= 0 {
		id = id[i+1:]
	}
	queues := map[string]int{}
	for _, name := range l.store.Tasks().Names() {
		queues[name] = 1
	}
	return &asynqwire.Server{Host: host, PID: os.Getpid(), ID: id, Concurrency: l.cfg.Concurrency, Queues: queues, Started: started}
}

// serversLoop writes the launcher's state every serversInterval until
// ctx ends, then removes it.
func (l *Launcher) serversLoop(ctx context.Context) {
	srv := l.server(time.Now())
	seen := map[*asynqwire.Task]time.Time{} // when a held task was first seen
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			clearCtx, cancel := detached(ctx)
			if err := asynqwire.ClearServer(clearCtx, l.store.Redis(), srv); err != nil {
				l.logger.WarnContext(ctx, "removing this launcher from asynqmon's servers failed; it expires", "err", err)
			}
			cancel()
			return
		case <-t.C:
		}
		workers := l.lane.workers(seen)
		if err := asynqwire.WriteServer(ctx, l.store.Redis(), srv, workers, serversTTL); err != nil && ctx.Err() == nil {
			l.logger.WarnContext(ctx, "writing this launcher's state for asynqmon failed; retrying", "err", err)
		}
		t.Reset(serversInterval)
	}
}

// workers are the tasks the lane holds, started when seen first says
// (tasks seen for the first time are added to it, tasks no longer held
// leave it).
func (ln *lane) workers(seen map[*asynqwire.Task]time.Time) []asynqwire.Worker {
	now := time.Now()
	ln.mu.Lock()
	out := make([]asynqwire.Worker, 0, len(ln.held))
	for t := range ln.held {
		at, ok := seen[t]
		if !ok {
			at = now
			seen[t] = at
		}
		out = append(out, asynqwire.Worker{Task: t, Started: at})
	}
	for t := range seen {
		if !ln.held[t] {
			delete(seen, t)
		}
	}
	ln.mu.Unlock()
	return out
}
