package queue

import (
	"context"
)

// WatchReleased calls released with the shard and id of each schedule a
// status report made due at once, until ctx ends; it returns then.
//
// That is a "queue" schedule whose run in flight ended while the next run
// waited behind it, already due (status.lua publishes it on the shard's
// channel, chronos:{sNN}:released). A scheduler holding the shard plans it
// at once rather than at its next tick: a backlog of held runs, one per
// tick, would never shrink for a schedule firing about as often as it
// ticks.
//
// The messages are a hint, never the record: the due set says what is
// due. One lost while the subscription reconnects (Redis restarted or
// failed over) only leaves its schedule to the shard's next tick. So a
// Redis that cannot be reached is not an error here; the subscription
// keeps trying. released must not block: it runs on the subscription's
// goroutine.
func (s *Store) WatchReleased(ctx context.Context, released func(shard int, id string)) {
	shards := make(map[string]int, s.cfg.Shards)
	channels := make([]string, 0, s.cfg.Shards)
	for sh := range s.cfg.Shards {
		shards[releasedChannel(sh)] = sh
		channels = append(channels, releasedChannel(sh))
	}
	// Every shard, whichever this replica holds now: shards move between
	// replicas, and a subscription per shard held would miss the messages
	// published while it is being made. A message is a few bytes, and a
	// release is one run ending.
	ps := s.rdb.Subscribe(ctx, channels...)
	msgs := ps.Channel()
	defer func() {
		_ = ps.Close()
		for range msgs { // until the subscription's goroutine has ended
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-msgs:
			if !ok {
				return
			}
			if sh, ok := shards[m.Channel]; ok {
				released(sh, m.Payload)
			}
		}
	}
}
