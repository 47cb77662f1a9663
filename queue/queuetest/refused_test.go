package queuetest_test

import (
	"net"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/queue/queuetest"
)

// Nothing listens on RefusedAddr, and nothing can start to.
func TestRefusedAddrRefuses(t *testing.T) {
	t.Parallel()
	addr := queuetest.RefusedAddr(t)
	_, err := net.Dial("tcp", addr)
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	_, err = net.Listen("tcp", addr)
	require.ErrorIs(t, err, syscall.EADDRINUSE)
}
