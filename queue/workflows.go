package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// PutWorkflow stores the DAG of a workflow version, replacing any before.
func (s *Store) PutWorkflow(ctx context.Context, id, version string, dag []byte) error {
	if err := s.rdb.Set(ctx, workflowKey(id, version), dag, 0).Err(); err != nil {
		return fmt.Errorf("store workflow %s version %s: %w", id, version, err)
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
