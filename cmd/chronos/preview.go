package main

import (
	"context"
	"fmt"
	"time"

	"github.com/chronos-sched/chronos/api"
	"github.com/chronos-sched/chronos/model"
)

// PreviewCmd prints a cron expression in words, then its next fire times.
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
	fmt.Fprintln(env.Stdout, model.Explain(s))
	for _, t := range model.Preview(s, after, c.Count) {
		fmt.Fprintln(env.Stdout, t.UTC().Format(time.RFC3339))
	}
	return nil
}
