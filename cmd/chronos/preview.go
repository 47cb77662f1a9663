package main

import (
	"context"
	"fmt"
	"time"

	"github.com/chronos-sched/chronos/api"
	"github.com/chronos-sched/chronos/model"
)

// PreviewCmd prints a cron expression in words, then its next fire times
// in UTC and in the zone, with DST notes: a local time that happens twice,
// and the local times clocks skipped.
type PreviewCmd struct {
	Cron    string `name:"cron" required:"" help:"Cron expression, e.g. \"0 9 * * 1-5\"."`
	TZ      string `name:"tz" help:"IANA time zone (default UTC)."`
	After   string `name:"after" help:"RFC 3339 instant to start after (default now)."`
	Count   int    `name:"count" default:"5" help:"How many fire times (1-100)."`
	Dialect string `name:"dialect" default:"standard" enum:"standard,posix" help:"Cron grammar."`
	DST     string `name:"dst-policy" help:"DST policy, e.g. \"shift\", \"first\", \"shift,last\" (default skip,both)."`
}

// Run prints the fire times.
func (c *PreviewCmd) Run(_ context.Context, env *Env) error {
	after := time.Now()
	if c.After != "" {
		t, err := api.ParseTime("--after", c.After)
		if err != nil {
			return err
		}
		after = t
	}
	if c.Count < 1 || c.Count > api.PreviewCountMax {
		return fmt.Errorf("--count must be between 1 and %d, got %d", api.PreviewCountMax, c.Count)
	}
	policy, err := model.ParseDSTPolicy("--dst-policy", c.DST)
	if err != nil {
		return err
	}
	s, err := model.ParseCron(c.Cron, c.TZ, model.Dialect(c.Dialect), after)
	if err != nil {
		return err
	}
	if cs, ok := s.(*model.CronSchedule); ok {
		s = cs.WithDST(policy)
	}
	loc, err := model.LoadZone(c.TZ)
	if err != nil {
		return err
	}
	// The UTC instant stays the first column, for scripts that cut it.
	fmt.Fprintln(env.Stdout, model.Explain(s))
	p := model.PreviewDST(s, loc, after, c.Count)
	for _, t := range p.Times {
		line := t.At.UTC().Format(time.RFC3339) + "  " + t.Local.Format(time.RFC3339)
		switch {
		case t.DST == model.DSTShifted:
			line += "  shifted: local times clocks skipped just before fire here"
		case t.DST == model.DSTRepeated && policy.FallBack != "":
			line += "  repeated: this local time happens twice and fires once (" + string(policy.FallBack) + ")"
		case t.DST == model.DSTRepeated:
			line += "  repeated: this local time happens twice and fires at both"
		}
		fmt.Fprintln(env.Stdout, line)
	}
	for _, sk := range p.Skipped {
		why := "clocks sprang forward over it"
		if sk.Reason == model.SkipReasonDSTOverlap {
			why = "this local time happens twice and fires at its other instant"
		}
		fmt.Fprintf(env.Stdout, "skipped %s  %s: %s\n", sk.Local, sk.Reason, why)
	}
	return nil
}
