package queuetest

import (
	"syscall"
	"unsafe"
)

// ProcAttrDiesWithTest makes the kernel kill a process a test starts
// when the test binary exits. A lent node's life ends no other way, and a
// binary that panics on -timeout runs no cleanup, which left redis-servers
// and chronos processes running, holding ports and files, after the test.
// Pdeathsig fires when the thread that started the process exits; the Go
// runtime ends a thread only when a goroutine locked to it ends, which
// queuetest's callers do not do.
func ProcAttrDiesWithTest() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// exitedNoReap reports whether child pid has exited, leaving it to be
// reaped by whoever waits for it (waitid with WNOWAIT).
func exitedNoReap(pid int) bool {
	const pPID, wNOWAIT = 1, 0x1000000
	var info [128]byte // siginfo_t; si_pid is at offset 16 on 64-bit Linux
	_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info[0])),
		syscall.WEXITED|syscall.WNOHANG|wNOWAIT, 0, 0)
	if errno != 0 {
		return errno == syscall.ECHILD
	}
	return *(*int32)(unsafe.Pointer(&info[16])) != 0
}
