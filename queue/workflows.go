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
	n, err := putWorkflowScript.Run(ctx, s.rdb, []string{workflowKey(id, version), workflowsKey}, dag, s.cfg.WorkflowMaxVersions).Int64()
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
	n, err := deleteWorkflowScript.Run(ctx, s.rdb, []string{workflowKey(id, version), workflowsKey}).Int()
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
