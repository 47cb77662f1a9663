package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// WaitReplicasMax bounds Config.WaitReplicas.
	WaitReplicasMax = 16
	// WaitTimeoutDefault is how long a commit waits for its replicas
	// when Config.WaitReplicas is set.
	WaitTimeoutDefault = 500 * time.Millisecond
)

// ErrNotReplicated is the error of a commit that Redis ran but fewer than
// Config.WaitReplicas replicas acknowledged within Config.WaitTimeout: the
// commit stands on the master and is lost if that master fails before its
// replicas catch up.
var ErrNotReplicated = errors.New("commit not acknowledged by the replicas in time")

// runCommit runs commit.lua with keys and args. With Config.WaitReplicas
// it sends WAIT after the script, on the script's own connection (WAIT
// waits for the writes of the connection it is sent on), to the master of
// the script's slot, and returns ErrNotReplicated (with the script's
// reply) when too few replicas acknowledged in time.
func (s *Store) runCommit(ctx context.Context, keys []string, args ...any) (*redis.Cmd, error) {
	n := s.cfg.WaitReplicas
	if n == 0 {
		cmd := commitScript.Run(ctx, s.rdb, keys, args...)
		return cmd, cmd.Err()
	}
	node := s.rdb
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		m, err := cc.MasterForKey(ctx, keys[0])
		if err != nil {
			return nil, fmt.Errorf("the master of %s: %w", keys[0], err)
		}
		node = m
	}
	var (
		run  *redis.Cmd
		wait *redis.Cmd
	)
	send := func(eval bool) error {
		_, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
			if eval {
				run = commitScript.Eval(ctx, p, keys, args...)
			} else {
				run = commitScript.EvalSha(ctx, p, keys, args...)
			}
			wait = p.Do(ctx, "wait", n, s.cfg.WaitTimeout.Milliseconds())
			return nil
		})
		return err
	}
	err := send(false)
	if run != nil && run.Err() != nil && strings.HasPrefix(run.Err().Error(), "NOSCRIPT") {
		err = send(true)
	}
	if run == nil {
		return nil, err
	}
	if run.Err() != nil {
		return run, run.Err()
	}
	got, err := wait.Int64()
	if err != nil {
		return run, fmt.Errorf("%w: WAIT: %v", ErrNotReplicated, err)
	}
	if got < int64(n) {
		return run, fmt.Errorf("%w: %d of %d replicas within %s", ErrNotReplicated, got, n, s.cfg.WaitTimeout)
	}
	return run, nil
}
