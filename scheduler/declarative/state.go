package declarative

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// The fields of a task's Redis hash. Timestamps are Unix milliseconds in
// decimal.
const (
	fieldName         = "name"              // the task's name, equal to the key's suffix
	fieldCron         = "cron"              // the registered expression
	fieldRetryDelay   = "retryDelayMs"      // the registered retry delay
	fieldConfiguredBy = "schedulerId"       // the scheduler identifier that wrote the configuration
	fieldServed       = "servedUntil"       // every occurrence up to this minute has been started
	fieldAttempt      = "lastAttemptAt"     // the latest start of the callback
	fieldSuccess      = "lastSuccessAt"     // the latest successful end
	fieldFailure      = "lastFailureAt"     // the latest failed end
	fieldRetry        = "pendingRetryUntil" // set while AwaitingRetry
	fieldLeaseHolder  = "leaseHolder"       // the process instance running the callback
	fieldLeaseUntil   = "leaseUntil"        // when the lease lapses unless renewed
)

// taskState is a task's persisted state. Zero times mean "never" or "not
// set".
type taskState struct {
	Name         string
	Cron         string
	RetryDelay   time.Duration
	ConfiguredBy string
	ServedUntil  time.Time
	LastAttempt  time.Time
	LastSuccess  time.Time
	LastFailure  time.Time
	RetryUntil   time.Time
	LeaseHolder  string
	LeaseUntil   time.Time
}

// decodeState reads a task's hash back. It never panics: a missing,
// mistyped or impossible field is one of the TaskTryDeserializeError
// family, naming the field.
func decodeState(name string, h map[string]string) (*taskState, error) {
	if len(h) == 0 {
		return nil, &TaskInvalidStructureError{Value: h, Message: fmt.Sprintf("Invalid task state structure: task %q has an empty record", name)}
	}
	st := &taskState{}
	var err error
	str := func(f string, required bool) string {
		v, ok := h[f]
		if !ok && required && err == nil {
			err = &TaskMissingFieldError{Field: f}
		}
		return v
	}
	st.Name = str(fieldName, true)
	st.Cron = str(fieldCron, true)
	if _, ok := h[fieldRetryDelay]; !ok && err == nil {
		err = &TaskMissingFieldError{Field: fieldRetryDelay}
	}
	if err != nil {
		return nil, err
	}
	if st.Name != name {
		return nil, &TaskInvalidStructureError{Value: h, Message: fmt.Sprintf("Invalid task state structure: record of task %q is stored under %q", st.Name, name)}
	}
	if st.Cron == "" {
		return nil, &TaskInvalidValueError{Field: fieldCron, Value: st.Cron, Reason: "must not be empty"}
	}
	ms, err := decodeInt(h, fieldRetryDelay)
	if err != nil {
		return nil, err
	}
	st.RetryDelay = time.Duration(ms) * time.Millisecond
	st.ConfiguredBy = h[fieldConfiguredBy]
	st.LeaseHolder = h[fieldLeaseHolder]
	for _, f := range []struct {
		name string
		dst  *time.Time
	}{
		{fieldServed, &st.ServedUntil}, {fieldAttempt, &st.LastAttempt}, {fieldSuccess, &st.LastSuccess},
		{fieldFailure, &st.LastFailure}, {fieldRetry, &st.RetryUntil}, {fieldLeaseUntil, &st.LeaseUntil},
	} {
		if _, ok := h[f.name]; !ok {
			continue
		}
		ms, err := decodeInt(h, f.name)
		if err != nil {
			return nil, err
		}
		*f.dst = time.UnixMilli(ms)
	}
	if (st.LeaseHolder == "") != st.LeaseUntil.IsZero() {
		return nil, &TaskInvalidStructureError{Value: h, Message: fmt.Sprintf("Invalid task state structure: task %q has only one of %s and %s", name, fieldLeaseHolder, fieldLeaseUntil)}
	}
	return st, nil
}

// decodeInt reads a non-negative decimal integer field.
func decodeInt(h map[string]string, f string) (int64, error) {
	v := h[f]
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return 0, &TaskInvalidValueError{Field: f, Value: v, Reason: "out of range"}
		}
		actual := "string"
		if _, ferr := strconv.ParseFloat(v, 64); ferr == nil {
			actual = "number"
		}
		return 0, &TaskInvalidTypeError{Field: f, Value: v, ExpectedType: "integer", ActualType: actual}
	}
	if n < 0 {
		return 0, &TaskInvalidValueError{Field: f, Value: n, Reason: "must be non-negative"}
	}
	return n, nil
}
