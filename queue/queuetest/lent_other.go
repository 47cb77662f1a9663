//go:build !linux

package queuetest

import "syscall"

// lentProcAttr: outside Linux a lent node outlives a test binary that
// exits without killing it (see lent_linux.go).
func lentProcAttr() *syscall.SysProcAttr { return nil }

// exitedNoReap: outside Linux a lent node counts as running until Kill.
func exitedNoReap(int) bool { return false }
