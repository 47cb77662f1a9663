package declarative

import (
	"errors"
	"time"

	"github.com/chronos-sched/chronos/model"
)

// parseCron parses a registration's expression in the posix dialect and
// turns the engine's errors into the specification's: a grammar error is an
// *InvalidCronExpressionError (caused by a *FieldParseError when one field
// is at fault), an expression no date satisfies a *CronCalculationError.
func parseCron(expr string, loc *time.Location, now time.Time) (*model.CronSchedule, error) {
	c, err := model.ParsePosix(expr, loc)
	if err == nil {
		return c, nil
	}
	var pe *model.PosixError
	if !errors.As(err, &pe) {
		return nil, &CronCalculationError{Expression: expr, CurrentTime: now.Format(time.RFC3339), Cause: err}
	}
	ice := &InvalidCronExpressionError{Expression: expr, Field: pe.Field, Reason: pe.Reason}
	if pe.Field != "expression" {
		ice.Cause = &FieldParseError{FieldValue: pe.Value, FieldName: pe.Field, Reason: pe.Reason}
	}
	return nil, ice
}

// matches reports whether minute m (a whole minute) is an occurrence.
func matches(c *model.CronSchedule, m time.Time) bool {
	return c.Next(m.Add(-time.Second)).Equal(m)
}
