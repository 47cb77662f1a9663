package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// PutWorkflow stores the DAG of a workflow version, replacing any before.
// A DAG over Config.WorkflowMaxBytes is refused (ErrTooLarge), and so is
// a new version once Config.WorkflowMaxVersions are stored (ErrQuota);
// replacing a stored version is always allowed.
func (s *Store) PutWorkflow(ctx context.Context, id, version string, dag []byte) error {
	if len(dag) > s.cfg.WorkflowMaxBytes {
		return fmt.Errorf("workflow %s version %s: DAG of %d bytes, over the %d a version may hold: %w",
			id, version, len(dag), s.cfg.WorkflowMaxBytes, ErrTooLarge)
	}
	var n int64
	var err error
	if isCluster(s.rdb) {
		n, err = s.putWorkflowApart(ctx, workflowKey(id, version), dag)
	} else {
		n, err = putWorkflowScript.Run(ctx, s.rdb, []string{workflowKey(id, version), workflowsKey}, dag, s.cfg.WorkflowMaxVersions).Int64()
	}
	if err != nil {
		return fmt.Errorf("store workflow %s version %s: %w", id, version, err)
	}
	if n < 0 {
		return fmt.Errorf("workflow %s version %s: %d versions are stored, the most allowed: delete some first: %w",
			id, version, -n, ErrQuota)
	}
	return nil
}

// DeleteWorkflow removes a workflow version. Runs of it fail from then on
// (the executor finds no DAG). It only frees memory, so it works on a
// full Redis too.
func (s *Store) DeleteWorkflow(ctx context.Context, id, version string) error {
	var n int
	var err error
	if isCluster(s.rdb) {
		// The version and the set are in two slots: two commands.
		if err = s.rdb.SRem(ctx, workflowsKey, workflowKey(id, version)).Err(); err == nil {
			var d int64
			d, err = s.rdb.Del(ctx, workflowKey(id, version)).Result()
			n = int(d)
		}
	} else {
		n, err = deleteWorkflowScript.Run(ctx, s.rdb, []string{workflowKey(id, version), workflowsKey}).Int()
	}
	if err != nil {
		return fmt.Errorf("delete workflow %s version %s: %w", id, version, err)
	}
	if n == 0 {
		return fmt.Errorf("workflow %s version %s: %w", id, version, ErrNotFound)
	}
	return nil
}

// GetWorkflow loads the DAG of a workflow version.
func (s *Store) GetWorkflow(ctx context.Context, id, version string) ([]byte, error) {
	b, err := s.rdb.Get(ctx, workflowKey(id, version)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("workflow %s version %s: %w", id, version, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("load workflow %s version %s: %w", id, version, err)
	}
	return b, nil
}

// isCluster says whether rdb is a Redis Cluster client.
func isCluster(rdb redis.UniversalClient) bool {
	_, ok := rdb.(*redis.ClusterClient)
	return ok
}

// putWorkflowApart is put_workflow.lua for a Redis Cluster, where a
// version's key (its workflow's slot) and the set of versions (another)
// cannot be written by one script: it checks the quota, then writes, so
// puts of new versions at the same moment may pass the quota by their
// number. It returns what the script returns.
func (s *Store) putWorkflowApart(ctx context.Context, key string, dag []byte) (int64, error) {
	var exists, count *redis.IntCmd
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		exists, count = p.Exists(ctx, key), p.SCard(ctx, workflowsKey)
		return nil
	}); err != nil {
		return 0, err
	}
	n := count.Val()
	if exists.Val() == 0 && n >= int64(s.cfg.WorkflowMaxVersions) {
		return -n, nil
	}
	if err := s.rdb.Set(ctx, key, dag, 0).Err(); err != nil {
		return 0, err
	}
	added, err := s.rdb.SAdd(ctx, workflowsKey, key).Result()
	return n + added, err
}
