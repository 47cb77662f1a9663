package launcher

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A lane holds ahead as many tasks as its slots start within
// takeAheadMaxCall, by the time its runs hold their slots: takeAhead
// Concurrencies for calls that short or before any call, fewer as calls
// grow, none past takeAheadMaxCall.
func TestLaneHoldsAheadWhatItsSlotsStartSoon(t *testing.T) {
	t.Parallel()
	const n = 10
	ln := newLane(&Launcher{cfg: Config{Concurrency: n}})
	require.Equal(t, (1+takeAhead)*n, cap(ln.holds))
	require.Equal(t, cap(ln.holds), cap(ln.finishing), "a finishing place per hold")
	for _, c := range []struct {
		call time.Duration
		want int
	}{
		{0, (1 + takeAhead) * n},
		{20 * time.Microsecond, (1 + takeAhead) * n},
		{takeAheadMaxCall / takeAhead, (1 + takeAhead) * n},
		{takeAheadMaxCall/takeAhead + time.Microsecond, takeAhead * n},
		{takeAheadMaxCall / 2, 3 * n},
		{takeAheadMaxCall, 2 * n},
		{takeAheadMaxCall + time.Microsecond, n},
		{time.Second, n},
	} {
		ln.callTime.Store(int64(c.call))
		require.Equal(t, c.want, ln.holdLimit(), "calls of %s", c.call)
	}
}
