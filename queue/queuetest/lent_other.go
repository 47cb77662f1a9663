//go:build !linux

package queuetest

import "syscall"

// ProcAttrDiesWithTest: outside Linux a process a test starts outlives a
// test binary that exits without killing it (see lent_linux.go).
func ProcAttrDiesWithTest() *syscall.SysProcAttr { return nil }

// exitedNoReap: outside Linux a lent node counts as running until Kill.
func exitedNoReap(int) bool { return false }
