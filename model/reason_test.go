package model

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseRunReason(t *testing.T) {
	t.Parallel()
	for _, r := range RunReasons() {
		got, err := ParseRunReason(string(r))
		require.NoError(t, err)
		require.Equal(t, r, got)
	}
	require.Len(t, RunReasons(), 14)
	require.Equal(t, RunSkipped, ReasonDSTSkipped.Status())
	require.Equal(t, RunFailed, ReasonRunTimeout.Status())
	_, err := ParseRunReason("nope")
	require.ErrorContains(t, err, `unknown reason "nope"`)
	require.ErrorContains(t, err, "overlap")
	require.ErrorContains(t, err, "workflow_missing")
	_, err = ParseRunReason("")
	require.Error(t, err)
}
