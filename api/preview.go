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
	// Times are FireTimes again, each with its wall clock in the zone and
	// a note where a DST change touches it.
	Times []PreviewTime `json:"times"`
	// Skipped are the local times the expression matches that clocks
	// skipped between after and the last fire time, earliest first, at
	// most count of them.
	Skipped []PreviewSkipped `json:"skipped"`
}

// PreviewTime is one fire time of GET /v1/preview.
type PreviewTime struct {
	// At is the RFC 3339 instant in UTC, as in fire_times.
	At string `json:"at"`
	// Local is At in the zone, RFC 3339 with the zone's offset.
	Local string `json:"local"`
	// DST is "shifted" when the schedule's dst_policy spring_forward
	// "shift" carried local times a gap skipped to this instant, the
	// first after the gap; "repeated" when Local's wall clock happens
	// twice, on the night clocks fall back (both instants fire unless
	// dst_policy fall_back is "first" or "last"). Omitted otherwise.
	DST model.DSTNote `json:"dst,omitempty"`
}

// PreviewSkipped is a local time the expression matches that did not
// fire.
type PreviewSkipped struct {
	// Local is the wall clock: with no offset for a time clocks skipped
	// (it never happened), RFC 3339 with its offset for the instant of a
	// repeated time that fall_back "first" or "last" left out.
	Local string `json:"local"`
	// Reason is "dst_gap" (clocks sprang forward over it, under
	// spring_forward "skip") or "dst_overlap" (its other instant fired).
	Reason string `json:"reason"`
}

// preview lists the next fire times of a cron expression:
// GET /v1/preview?cron_expr=&timezone=&after=&count=&dialect=&dst_policy=.
// dst_policy takes the compact form: "shift", "first", "shift,last".
func (s *server) preview(c echo.Context) error {
	expr := c.QueryParam("cron_expr")
	if expr == "" {
		return fieldError("cron_expr", "is required")
	}
	tz := c.QueryParam("timezone")
	loc, err := model.LoadZone(tz)
	if err != nil {
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
	policy, err := queryDSTPolicy(c)
	if err != nil {
		return err
	}
	sched, err := model.ParseCron(expr, tz, dialect, after)
	if err != nil {
		return fieldError("cron_expr", "%s", err.Error())
	}
	if cs, ok := sched.(*model.CronSchedule); ok {
		sched = cs.WithDST(policy)
	} else if !policy.IsDefault() {
		return fieldError("dst_policy", "only a cron expression evaluated on the wall clock takes one: @every fires on instants that no clock change moves")
	}
	p := model.PreviewDST(sched, loc, after, count)
	out := PreviewResponse{FireTimes: make([]string, len(p.Times)), Explain: model.Explain(sched)}
	out.Times, out.Skipped = previewNotes(p)
	for i, t := range out.Times {
		out.FireTimes[i] = t.At
	}
	return c.JSON(http.StatusOK, out)
}

// previewNotes renders a DST preview as the API shows it; both slices are
// never nil, so they encode as arrays.
func previewNotes(p model.DSTPreview) ([]PreviewTime, []PreviewSkipped) {
	times := make([]PreviewTime, len(p.Times))
	for i, t := range p.Times {
		times[i] = PreviewTime{At: t.At.UTC().Truncate(time.Second).Format(time.RFC3339), Local: t.Local.Format(time.RFC3339), DST: t.DST}
	}
	skipped := make([]PreviewSkipped, len(p.Skipped))
	for i, sk := range p.Skipped {
		skipped[i] = PreviewSkipped{Local: sk.Local, Reason: sk.Reason}
	}
	return times, skipped
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
