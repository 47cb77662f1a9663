package declarative

import (
	"fmt"
)

// The error taxonomy of the specification. Each type carries the
// specification's details as fields, returns the specification's message
// from Error, and names itself with Name, which is stable across versions.
// Match them with errors.As; causes are wrapped for errors.Is.

// RegistrationsNotArrayError is returned when Initialize gets a nil slice.
type RegistrationsNotArrayError struct{}

// Name returns "RegistrationsNotArrayError".
func (*RegistrationsNotArrayError) Name() string { return "RegistrationsNotArrayError" }

func (*RegistrationsNotArrayError) Error() string { return "Registrations must be an array" }

// RegistrationShapeError is returned when a registration lacks one of its
// four parts: Go's types fix the rest, so the part that can be wrong is a
// nil Callback.
type RegistrationShapeError struct {
	RegistrationIndex int
	Received          Registration
}

// Name returns "RegistrationShapeError".
func (*RegistrationShapeError) Name() string { return "RegistrationShapeError" }

func (*RegistrationShapeError) Error() string {
	return "Invalid registration shape: expected [string, string, function, Duration]"
}

// InvalidRegistrationError is returned when a registration's data is
// invalid beyond its shape, such as an empty name.
type InvalidRegistrationError struct {
	Field  string
	Value  any
	Reason string
}

// Name returns "InvalidRegistrationError".
func (*InvalidRegistrationError) Name() string { return "InvalidRegistrationError" }

func (e *InvalidRegistrationError) Error() string {
	return fmt.Sprintf("Invalid registration: %s %s", e.Field, e.Reason)
}

// ScheduleDuplicateTaskError is returned when two registrations share a
// name.
type ScheduleDuplicateTaskError struct {
	TaskName string
}

// Name returns "ScheduleDuplicateTaskError".
func (*ScheduleDuplicateTaskError) Name() string { return "ScheduleDuplicateTaskError" }

func (e *ScheduleDuplicateTaskError) Error() string {
	return fmt.Sprintf("Task with name %q is already scheduled", e.TaskName)
}

// SchedulerAlreadyActiveError is returned by Initialize while the
// scheduler is initializing or running.
type SchedulerAlreadyActiveError struct {
	CurrentState string // "initializing" or "running"
}

// Name returns "SchedulerAlreadyActiveError".
func (*SchedulerAlreadyActiveError) Name() string { return "SchedulerAlreadyActiveError" }

func (e *SchedulerAlreadyActiveError) Error() string {
	return "Cannot initialize scheduler: scheduler is already " + e.CurrentState
}

// CronExpressionInvalidError is returned when a registration's cron
// expression is invalid. Its cause is the parser's
// *InvalidCronExpressionError.
type CronExpressionInvalidError struct {
	Expression string
	Field      string
	Reason     string
	Cause      error
}

// Name returns "CronExpressionInvalidError".
func (*CronExpressionInvalidError) Name() string { return "CronExpressionInvalidError" }

func (e *CronExpressionInvalidError) Error() string {
	return cronMessage(e.Expression, e.Field, e.Reason)
}

// Unwrap returns the parser's error.
func (e *CronExpressionInvalidError) Unwrap() error { return e.Cause }

// NegativeRetryDelayError is returned when a registration's RetryDelay is
// negative.
type NegativeRetryDelayError struct {
	RetryDelayMs int64
}

// Name returns "NegativeRetryDelayError".
func (*NegativeRetryDelayError) Name() string { return "NegativeRetryDelayError" }

func (*NegativeRetryDelayError) Error() string { return "Retry delay must be non-negative" }

// InvalidCronExpressionError is the cron parser's error. When one field is
// at fault its cause is a *FieldParseError.
type InvalidCronExpressionError struct {
	Expression string
	Field      string // "expression" when the expression as a whole is wrong
	Reason     string
	Cause      error
}

// Name returns "InvalidCronExpressionError".
func (*InvalidCronExpressionError) Name() string { return "InvalidCronExpressionError" }

func (e *InvalidCronExpressionError) Error() string {
	return cronMessage(e.Expression, e.Field, e.Reason)
}

// Unwrap returns the field's error, if any.
func (e *InvalidCronExpressionError) Unwrap() error { return e.Cause }

// cronMessage is the specification's wording for both cron errors:
// `Invalid cron expression "<expr>": <field> field <reason>`.
func cronMessage(expr, field, reason string) string {
	return fmt.Sprintf("Invalid cron expression %q: %s field %s", expr, field, reason)
}

// FieldParseError is one cron field that fails to parse.
type FieldParseError struct {
	FieldValue string
	FieldName  string
	Reason     string
}

// Name returns "FieldParseError".
func (*FieldParseError) Name() string { return "FieldParseError" }

func (e *FieldParseError) Error() string {
	return fmt.Sprintf("Invalid %s field %q: %s", e.FieldName, e.FieldValue, e.Reason)
}

// CronCalculationError is returned when an expression has no next
// occurrence (such as "0 0 31 2 *", which no date satisfies).
type CronCalculationError struct {
	Expression  string
	CurrentTime string // RFC 3339
	Cause       error
}

// Name returns "CronCalculationError".
func (*CronCalculationError) Name() string { return "CronCalculationError" }

func (e *CronCalculationError) Error() string {
	return "Failed to calculate next occurrence: " + e.Cause.Error()
}

// Unwrap returns the cause.
func (e *CronCalculationError) Unwrap() error { return e.Cause }

// TaskTryDeserializeError is the base of the errors for persisted task
// state that cannot be read back. Each of TaskMissingFieldError,
// TaskInvalidTypeError, TaskInvalidValueError and TaskInvalidStructureError
// unwraps to one, so errors.As with a *TaskTryDeserializeError matches them
// all.
type TaskTryDeserializeError struct {
	Field        string
	Value        any
	ExpectedType string
	Message      string
}

// Name returns "TaskTryDeserializeError".
func (*TaskTryDeserializeError) Name() string { return "TaskTryDeserializeError" }

func (e *TaskTryDeserializeError) Error() string { return e.Message }

// TaskMissingFieldError is a required field absent from persisted state.
type TaskMissingFieldError struct {
	Field string
}

// Name returns "TaskMissingFieldError".
func (*TaskMissingFieldError) Name() string { return "TaskMissingFieldError" }

func (e *TaskMissingFieldError) Error() string { return "Missing required field: " + e.Field }

// Unwrap returns the base error with the same details.
func (e *TaskMissingFieldError) Unwrap() error {
	return &TaskTryDeserializeError{Field: e.Field, Message: e.Error()}
}

// TaskInvalidTypeError is a persisted field of the wrong type.
type TaskInvalidTypeError struct {
	Field        string
	Value        any
	ExpectedType string
	ActualType   string
}

// Name returns "TaskInvalidTypeError".
func (*TaskInvalidTypeError) Name() string { return "TaskInvalidTypeError" }

func (e *TaskInvalidTypeError) Error() string {
	return fmt.Sprintf("Invalid type for field '%s': expected %s, got %s", e.Field, e.ExpectedType, e.ActualType)
}

// Unwrap returns the base error with the same details.
func (e *TaskInvalidTypeError) Unwrap() error {
	return &TaskTryDeserializeError{Field: e.Field, Value: e.Value, ExpectedType: e.ExpectedType, Message: e.Error()}
}

// TaskInvalidValueError is a persisted field of the right type with a
// value that cannot be, such as a negative retry delay.
type TaskInvalidValueError struct {
	Field  string
	Value  any
	Reason string
}

// Name returns "TaskInvalidValueError".
func (*TaskInvalidValueError) Name() string { return "TaskInvalidValueError" }

func (e *TaskInvalidValueError) Error() string {
	return fmt.Sprintf("Invalid value for field '%s': %s", e.Field, e.Reason)
}

// Unwrap returns the base error with the same details.
func (e *TaskInvalidValueError) Unwrap() error {
	return &TaskTryDeserializeError{Field: e.Field, Value: e.Value, Message: e.Error()}
}

// TaskInvalidStructureError is persisted state that is not a task record
// at all (a Redis key of another type, a record of another task).
type TaskInvalidStructureError struct {
	Value   any
	Message string
}

// Name returns "TaskInvalidStructureError".
func (*TaskInvalidStructureError) Name() string { return "TaskInvalidStructureError" }

func (e *TaskInvalidStructureError) Error() string { return e.Message }

// Unwrap returns the base error with the same details.
func (e *TaskInvalidStructureError) Unwrap() error {
	return &TaskTryDeserializeError{Value: e.Value, Message: e.Error()}
}
