package queue

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"
)

var (
	// ErrNotFound: no such schedule, run or workflow.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the request contradicts recorded state (e.g. a second
	// final status for a run).
	ErrConflict = errors.New("conflict")
	// ErrTooLarge: a value over its size limit (a workflow DAG over
	// Config.WorkflowMaxBytes).
	ErrTooLarge = errors.New("too large")
	// ErrQuota: storing more would pass a quota (Config.WorkflowMaxVersions).
	ErrQuota = errors.New("quota exceeded")
	// ErrInvalidCursor: a list cursor that no page returned.
	ErrInvalidCursor = errors.New("invalid cursor (pass next_cursor of the previous page)")
	// ErrInvalidManualRun: a manual run that names a schedule with a key
	// that is not that schedule's run's (ManualRun.ScheduleID).
	ErrInvalidManualRun = errors.New("invalid manual run")
)

// IsFull reports whether err is Redis refusing a write because it is full:
// used memory is over maxmemory and the policy is noeviction. Nothing of
// the refused command or script was written; the write can be retried
// once memory is freed (or maxmemory raised).
func IsFull(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "OOM ")
}

// IsUnavailable reports whether err is Redis not answering: the
// connection failed or timed out, the pool had no connection in time, or
// the server is loading, failing over or read-only. Such a call may be
// retried later. A caller's own cancellation is not unavailability.
func IsUnavailable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var re redis.Error
	if errors.As(err, &re) {
		for _, p := range []string{"LOADING ", "MASTERDOWN ", "READONLY ", "CLUSTERDOWN ", "TRYAGAIN ", "BUSY "} {
			if strings.HasPrefix(re.Error(), p) {
				return true
			}
		}
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, redis.ErrClosed) ||
		errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
