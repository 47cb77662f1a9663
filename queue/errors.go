package queue

import "errors"

var (
	// ErrNotFound: no such schedule, run or workflow.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the request contradicts recorded state (e.g. a second
	// final status for a run).
	ErrConflict = errors.New("conflict")
	// ErrInvalidCursor: a list cursor that no page returned.
	ErrInvalidCursor = errors.New("invalid cursor (pass next_cursor of the previous page)")
)
