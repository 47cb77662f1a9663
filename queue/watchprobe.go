package queue

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// The compare-and-sets made without Lua (TickDue's fast path, a forward's
// transaction) trust WATCH: Redis runs a transaction only if no other
// connection wrote a watched key since it was watched. miniredis, which
// chronos dev and unit tests embed, does not honour that for every
// write: a ZREM that leaves members in a sorted set and an HDEL that
// leaves fields in a hash leave the key's watch as it was. Two
// forwarders then both push a task they read (ZREM of the same id by
// each), and a transaction that removes by rank removes a task another
// forwarder did not move. NewStore asks the server (watchSeesWrites), and
// where WATCH misses writes every compare-and-set goes through the
// scripts, which Redis and miniredis run whole.

// watchSeesWrites says whether rdb's server aborts a transaction when
// another connection removed a member of a sorted set it watches. It
// writes one short-lived key of its own.
func watchSeesWrites(ctx context.Context, rdb redis.UniversalClient) (bool, error) {
	key := keyPrefix + "probe:watch:" + rand.Text()
	if _, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAdd(ctx, key, redis.Z{Member: "a"}, redis.Z{Member: "b"})
		p.Expire(ctx, key, time.Minute) // left behind only by a crash
		return nil
	}); err != nil {
		return false, fmt.Errorf("probe WATCH (Redis's compare-and-set): %w", err)
	}
	defer rdb.Del(context.WithoutCancel(ctx), key)
	err := rdb.Watch(ctx, func(tx *redis.Tx) error {
		if err := rdb.ZRem(ctx, key, "a").Err(); err != nil {
			return err
		}
		_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.ZAdd(ctx, key, redis.Z{Member: "c"})
			return nil
		})
		return err
	}, key)
	switch {
	case errors.Is(err, redis.TxFailedErr):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("probe WATCH (Redis's compare-and-set): %w", err)
	}
	return false, nil
}
