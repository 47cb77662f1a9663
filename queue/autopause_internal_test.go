package queue

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
)

// A schedule without a failure streak decodes without an allocation (a
// launcher decodes one per run it starts), and one with a streak reads it.
func TestDecodePauseStateAllocatesNothingWithoutAStreak(t *testing.T) {
	var rec model.ScheduleRecord
	h := map[string]string{}
	require.Zero(t, testing.AllocsPerRun(100, func() { decodePauseState(&rec, h) }))
	require.Zero(t, rec.ConsecutiveFailures)
	decodePauseState(&rec, map[string]string{sfFailStreak: "3", sfFailErr: "executor answered 500"})
	require.Equal(t, 3, rec.ConsecutiveFailures)
	require.Equal(t, "executor answered 500", rec.LastError)
	decodePauseState(&rec, h)
	require.Zero(t, rec.ConsecutiveFailures, "a streak ended since")
}
