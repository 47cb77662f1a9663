package launcher

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// An idle launcher used to cost Redis about 1,000 commands a second with
// 16 shards: its lane read the length of every run queue's pending list
// every PollInterval (17 LLEN, 20 times a second), and its forwarder ran
// one script per queue for the scheduled set and one for the retries
// every ForwardInterval (34 scripts, 10 times a second).
//
// The watch does both jobs' looking in one pipeline of plain reads per
// interval: per queue the LLEN of its pending list and a ZCOUNT of the
// due part of its scheduled set and of its retries. Forwarding scripts
// run only when a set has something due, and the lane, which stops
// polling on its own a second after its last task (laneWarm), is woken
// when a pending list holds tasks or tasks were forwarded.
//
// While the watch finds nothing the interval doubles from
// ForwardInterval up to idleWatchMax; anything found, or a lane that took
// tasks within laneWarm, brings it back. So a run that becomes runnable
// while the launchers idle starts at most idleWatchMax plus one take
// later (the idle scenario of scripts/bench measures it).

// idleWatchMax bounds the watch's interval while the queues stay empty:
// the most a run that arrives then waits before a launcher looks.
const idleWatchMax = 250 * time.Millisecond

// laneWarm is how long after its last task the lane keeps polling every
// PollInterval on its own: a burst's tasks come in over a few ticks.
const laneWarm = time.Second

// laneIdlePoll is how often an idle lane still looks on its own, in case
// a wake was lost (the watch failed, say): not the path runs take.
const laneIdlePoll = 2 * time.Second

// watchResult says what the watch saw.
type watchResult struct {
	pending   bool // a pending list holds tasks
	scheduled bool // a scheduled set has a task due by the shared clock
	retries   bool // a retry set has a task due by this host's clock
}

func (w watchResult) any() bool { return w.pending || w.scheduled || w.retries }

// watch reads, in one pipeline, whether any run queue has pending tasks,
// tasks enqueued ahead due at now (the shared clock, as Forward) or
// retries due at hostNow (this host's clock, as ForwardRetries). The
// scores are Unix seconds, compared as the forward script compares them.
func (l *Launcher) watch(ctx context.Context, now, hostNow time.Time) (watchResult, error) {
	qs := l.store.Tasks().Queues()
	cmds := make([]*redis.IntCmd, 0, 3*len(qs))
	due, retryDue := strconv.FormatInt(now.Unix(), 10), strconv.FormatInt(hostNow.Unix(), 10)
	_, err := l.store.Redis().Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, q := range qs {
			k := q.Keys()
			cmds = append(cmds, p.LLen(ctx, k.Pending()), p.ZCount(ctx, k.Scheduled(), "-inf", due),
				p.ZCount(ctx, k.Retry(), "-inf", retryDue))
		}
		return nil
	})
	if err != nil {
		return watchResult{}, err
	}
	var w watchResult
	for i := 0; i < len(cmds); i += 3 {
		w.pending = w.pending || cmds[i].Val() > 0
		w.scheduled = w.scheduled || cmds[i+1].Val() > 0
		w.retries = w.retries || cmds[i+2].Val() > 0
	}
	return w, nil
}
