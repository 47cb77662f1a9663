package queue

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// commitTrimScan is how many kept runs a history's trim steps over, at
// most (trim_history.lua).
const commitTrimScan = 20

// trimHistories trims the histories of shard's schedules that a commit
// found longer than Config.RunHistory, each by up to the
// runs its plan added plus one, at least commitTrimScan. It reads each
// history's size and oldest runs, then trims in one script that gets
// their keys in KEYS and checks each history is the size it read.
func (s *Store) trimHistories(ctx context.Context, shard int, added map[string]int) error {
	type read struct {
		id         string
		want       int
		size       *redis.IntCmd
		candidates *redis.StringSliceCmd
	}
	reads := make([]read, 0, len(added))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for id, n := range added {
			want := max(commitTrimScan, n+1)
			hkey := historyKey(shard, id)
			reads = append(reads, read{id: id, want: want, size: p.ZCard(ctx, hkey),
				candidates: p.ZRange(ctx, hkey, 0, int64(want+commitTrimScan-1))})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read histories to trim in shard %d: %w", shard, err)
	}
	tpfx := s.queue(shard).Keys().TaskPrefix()
	keys := make([]string, 0, 2*len(reads))
	args := []any{commitTrimScan, 0}
	n := 0
	for _, r := range reads {
		c := min(int(r.size.Val())-s.cfg.RunHistory, len(r.candidates.Val()))
		if c <= 0 {
			continue
		}
		n++
		keys = append(keys, scheduleKey(shard, r.id), historyKey(shard, r.id))
		args = append(args, r.size.Val(), r.want, c)
		for _, k := range r.candidates.Val()[:c] {
			keys = append(keys, runKey(shard, k), tpfx+k)
			args = append(args, k)
		}
	}
	if n == 0 {
		return nil
	}
	args[1] = n
	if err := trimHistoryScript.Run(ctx, s.rdb, keys, args...).Err(); err != nil {
		return fmt.Errorf("trim histories in shard %d: %w", shard, err)
	}
	return nil
}
