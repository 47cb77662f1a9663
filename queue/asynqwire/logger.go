package asynqwire

import (
	"fmt"
	"log/slog"
	"os"
)

// Logger adapts a slog.Logger to asynq's Logger interface, so asynq's
// own messages land in the same structured log. They carry
// library=asynq: the logger given usually has a component already (a
// second component key would make a JSON line with a duplicate key).
type Logger struct{ L *slog.Logger }

// Debug logs at debug level.
func (a Logger) Debug(args ...any) { a.L.Debug(fmt.Sprint(args...), "library", "asynq") }

// Info logs at info level.
func (a Logger) Info(args ...any) { a.L.Info(fmt.Sprint(args...), "library", "asynq") }

// Warn logs at warn level.
func (a Logger) Warn(args ...any) { a.L.Warn(fmt.Sprint(args...), "library", "asynq") }

// Error logs at error level.
func (a Logger) Error(args ...any) { a.L.Error(fmt.Sprint(args...), "library", "asynq") }

// Fatal logs at error level and exits, as asynq expects.
func (a Logger) Fatal(args ...any) {
	a.L.Error(fmt.Sprint(args...), "library", "asynq", "fatal", true)
	os.Exit(1)
}
