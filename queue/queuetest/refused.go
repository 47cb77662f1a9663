package queuetest

import (
	"fmt"
	"syscall"
	"testing"
)

// RefusedAddr returns a loopback address where nothing listens, for the
// test's whole life: connections to it are refused. A port that was free
// when a listener closed is not that: another test's server may listen
// on it a moment later. This one stays bound (without SO_REUSEADDR, so no
// listener can take it) by a socket that never listens, closed in
// t.Cleanup.
func RefusedAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatalf("socket: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("bind 127.0.0.1:0: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("getsockname: %v", err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}
