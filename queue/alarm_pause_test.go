package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
)

func TestPauseAlarm(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupAlarms(t, nil)
	got, _, err := b.store.CreateAlarm(ctx, b.cronAlarm(t, ownerA, "0 9 * * *"))
	require.NoError(t, err)
	id := got.ID

	t.Run("another owner's alarm is not found", func(t *testing.T) {
		_, err := b.store.PauseAlarm(ctx, ownerB, id, true)
		require.ErrorIs(t, err, queue.ErrNotFound)
		_, err = b.store.PauseAlarm(ctx, ownerA, "no-such-alarm", true)
		require.ErrorIs(t, err, queue.ErrNotFound)
	})

	t.Run("paused stays active and resumes at its next time after now", func(t *testing.T) {
		rec, err := b.store.PauseAlarm(ctx, ownerA, id, true)
		require.NoError(t, err)
		require.True(t, rec.Paused)
		require.Equal(t, model.AlarmActive, rec.Alarm.Status)
		again, err := b.store.PauseAlarm(ctx, ownerA, id, true)
		require.NoError(t, err)
		require.True(t, again.Paused)

		b.clock.Advance(72 * time.Hour)
		rec, err = b.store.PauseAlarm(ctx, ownerA, id, false)
		require.NoError(t, err)
		require.False(t, rec.Paused)
		require.NotNil(t, rec.NextRunAt)
		require.True(t, rec.NextRunAt.After(b.clock.Now()), "the paused days are not caught up")
	})

	t.Run("a cancelled alarm does not resume", func(t *testing.T) {
		_, err := b.store.CancelAlarm(ctx, ownerA, id)
		require.NoError(t, err)
		rec, err := b.store.PauseAlarm(ctx, ownerA, id, false)
		require.NoError(t, err)
		require.Equal(t, model.AlarmCancelled, rec.Alarm.Status)
		require.True(t, rec.Paused)
	})
}
