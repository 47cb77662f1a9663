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
	s, err := model.ParseCron(c.Cron, c.TZ, model.Dialect(c.Dialect), after)
	if err != nil {
		return err
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
		if t.DST == model.DSTRepeated {
			line += "  repeated: this local time happens twice and fires at both"
		}
		fmt.Fprintln(env.Stdout, line)
	}
	for _, sk := range p.Skipped {
		fmt.Fprintf(env.Stdout, "skipped %s  %s: clocks sprang forward over it\n", sk.Local, sk.Reason)
	}
	return nil
}
