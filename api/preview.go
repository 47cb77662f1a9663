package api

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/chronos-sched/chronos/model"
)

const (
	// PreviewCountDefault is how many fire times GET /v1/preview lists
	// when count is omitted.
	PreviewCountDefault = 5
	// PreviewCountMax bounds count.
	PreviewCountMax = 100
)

// PreviewResponse is the body of GET /v1/preview.
type PreviewResponse struct {
	// FireTimes are RFC 3339 instants in UTC, whole seconds, ascending.
	FireTimes []string `json:"fire_times"`
	// Explain is the expression in words, such as "At 09:00, Monday
	// through Friday, in America/New_York".
	Explain string `json:"explain"`
}

// preview lists the next fire times of a cron expression:
// GET /v1/preview?cron_expr=&timezone=&after=&count=&dialect=.
func (s *server) preview(c echo.Context) error {
	expr := c.QueryParam("cron_expr")
	if expr == "" {
		return fieldError("cron_expr", "is required")
	}
	tz := c.QueryParam("timezone")
	if _, err := model.LoadZone(tz); err != nil {
		return fieldError("timezone", "%s", err.Error())
	}
	dialect, err := parseDialect(c.QueryParam("dialect"))
	if err != nil {
		return err
	}
	after := s.store.Clock().Now().UTC()
	if a := c.QueryParam("after"); a != "" {
		if after, err = ParseTime("after", a); err != nil {
			return err
		}
	}
	count, err := queryInt(c, "count", PreviewCountDefault, 1, PreviewCountMax)
	if err != nil {
		return err
	}
	sched, err := model.ParseCron(expr, tz, dialect, after)
	if err != nil {
		return fieldError("cron_expr", "%s", err.Error())
	}
	times := model.Preview(sched, after, count)
	out := PreviewResponse{FireTimes: make([]string, len(times)), Explain: model.Explain(sched)}
	for i, t := range times {
		out.FireTimes[i] = t.UTC().Truncate(time.Second).Format(time.RFC3339)
	}
	return c.JSON(http.StatusOK, out)
}

// parseDialect checks a dialect name; "" is standard.
func parseDialect(d string) (model.Dialect, error) {
	switch v := model.Dialect(d); v {
	case "", model.DialectStandard:
		return model.DialectStandard, nil
	case model.DialectPosix:
		return v, nil
	}
	return "", fieldError("dialect", "unknown dialect %q (want standard or posix)", d)
}
