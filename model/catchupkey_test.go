package model

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A catch-up's drop record has a key of its own: never the key of the
// run it stands at, of a DST gap's record or of a manual run.
func TestCatchupDroppedKey(t *testing.T) {
	t.Parallel()
	last := time.Date(2026, 3, 2, 15, 0, 0, 0, time.UTC)
	k := CatchupDroppedKey("s1", last)
	require.Len(t, k, 64)
	require.Equal(t, k, CatchupDroppedKey("s1", last.Add(500*time.Millisecond)), "whole seconds")
	require.NotEqual(t, k, CatchupDroppedKey("s2", last))
	require.NotEqual(t, k, CatchupDroppedKey("s1", last.Add(time.Second)))
	require.NotEqual(t, k, IdempotencyKey("s1", last), "never the run's key")
	require.NotEqual(t, k, DSTSkippedKey("s1", last))
	require.NotEqual(t, k, ManualRunKey("s1", "", last))
}
