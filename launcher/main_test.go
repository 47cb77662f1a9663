package launcher

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).reaper"))
}

// stopAtCleanup stops l when the test ends.
func stopAtCleanup(t *testing.T, l *Launcher) {
	t.Helper()
	t.Cleanup(func() { require.NoError(t, l.Stop(context.Background())) })
}
