package main

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// ScheduleBackfillCmd is `chronos schedule backfill`.
type ScheduleBackfillCmd struct {
	ID string `arg:"" predictor:"schedule" help:"The schedule's id."`
	apiConn
	From    string `name:"from" required:"" help:"Start of the range, RFC 3339 (inclusive)."`
	To      string `name:"to" required:"" help:"End of the range, RFC 3339, in the past."`
	Overlap string `name:"overlap-policy" aliases:"overlap" enum:",allow,skip,queue" default:"" help:"overlap_policy of the backfill's runs: allow (the default: every run at once), skip (one run, none while another is in flight) or queue (every run, one after another, each when the schedule has none in flight)."`
	DryRun  bool   `name:"dry-run" help:"List what would run; create nothing."`
}

// backfillAnswer is the body of POST /schedules/:id/backfill, as this CLI
// reads it.
type backfillAnswer struct {
	ScheduleID string    `json:"schedule_id"`
	From       time.Time `json:"from"`
	To         time.Time `json:"to"`
	DryRun     bool      `json:"dry_run"`
	Created    int       `json:"created"`
	Runs       []struct {
		IdempotencyKey string     `json:"idempotency_key"`
		RunAt          time.Time  `json:"run_at"`
		Outcome        string     `json:"outcome"`
		FireAt         *time.Time `json:"fire_at"`
		Status         string     `json:"status"`
		Source         string     `json:"source"`
	} `json:"runs"`
}

// Run backfills the range.
func (c *ScheduleBackfillCmd) Run(ctx context.Context, env *Env) error {
	body := map[string]any{"from": c.From, "to": c.To}
	if c.Overlap != "" {
		body["overlap_policy"] = c.Overlap
	}
	if c.DryRun {
		body["dry_run"] = true
	}
	cl := c.client()
	var res backfillAnswer
	b, err := cl.callJSON(ctx, http.MethodPost, schedulePath(c.ID)+"/backfill", body, &res)
	if err != nil {
		return scheduleNotFound(withHint(err, http.StatusConflict,
			"A paused schedule is not backfilled: `chronos schedule resume %s` first (or resume --catchup replay).", c.ID), c.ID)
	}
	if c.json() {
		return writeJSON(env.Stdout, b)
	}
	zone := "UTC"
	if tz := scheduleZone(ctx, cl, c.ID); tz != "" {
		zone = tz
	}
	if len(res.Runs) > 0 {
		tw := newTable(env.Stdout)
		row(tw, "RUN AT", "OUTCOME", "RUNNABLE AT", "STATUS", "KEY")
		for _, r := range res.Runs {
			row(tw, localTime(&r.RunAt, zone), r.Outcome, localTime(r.FireAt, zone), dash(r.Status), shortKey(r.IdempotencyKey))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	queued := 0
	for _, r := range res.Runs {
		if r.Outcome == "queued" || r.Outcome == "would_queue" {
			queued++
		}
	}
	if res.DryRun {
		would := queued
		for _, r := range res.Runs {
			if r.Outcome == "would_create" {
				would++
			}
		}
		_, err = fmt.Fprintf(env.Stdout, "Dry run: %d of %d planned runs would be created%s.\n", would, len(res.Runs), queuedNote(queued, "would wait"))
		return err
	}
	_, err = fmt.Fprintf(env.Stdout, "%d of %d planned runs created%s.\n", res.Created, len(res.Runs), queuedNote(queued, "wait"))
	return err
}

// queuedNote says how many of the created runs wait for the run before
// them (overlap_policy queue): "" when none.
func queuedNote(n int, verb string) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", %d of them %s for the run before to end (overlap_policy queue)", n, verb)
}

// scheduleZone is the zone of schedule id, "" when it cannot be read.
func scheduleZone(ctx context.Context, cl *apiClient, id string) string {
	var s struct {
		Timezone string `json:"timezone"`
	}
	if _, err := cl.getJSON(ctx, schedulePath(id)+"?runs=0", &s); err != nil {
		return ""
	}
	return s.Timezone
}
