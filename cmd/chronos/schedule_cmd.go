package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/chronos-sched/chronos/api"
	"github.com/chronos-sched/chronos/model"
)

// ScheduleCmd is `chronos schedule`: the registrar's API for people.
type ScheduleCmd struct {
	List     ScheduleListCmd     `cmd:"" help:"List schedules: id, state, timing, zone, workflow and next run (GET /schedules)."`
	Get      ScheduleGetCmd      `cmd:"" help:"Show a schedule: its timing in words, its next fire times in its zone with DST notes, its last and recent runs (GET /schedules/:id)."`
	Upsert   ScheduleUpsertCmd   `cmd:"" help:"Create or update a schedule from flags, a JSON file, or both (POST /schedules/upsert)."`
	Pause    SchedulePauseCmd    `cmd:"" help:"Pause a schedule: it fires no more until resumed (POST /schedules/pause)."`
	Resume   ScheduleResumeCmd   `cmd:"" help:"Resume a paused schedule from its next fire time after now (POST /schedules/pause with paused false)."`
	Delete   ScheduleDeleteCmd   `cmd:"" help:"Delete a schedule; its runs stay readable by key for 7 days (DELETE /schedules/:id)."`
	Runs     ScheduleRunsCmd     `cmd:"" help:"List a schedule's runs whose time has come, newest first, or --upcoming (GET /schedules/:id/runs)."`
	Trigger  ScheduleTriggerCmd  `cmd:"" help:"Start a run of a schedule's workflow now, outside its timetable (POST /run-launcher/start)."`
	Backfill ScheduleBackfillCmd `cmd:"" help:"Run the planned runs of a past range, with their normal idempotency keys (POST /schedules/:id/backfill)."`
}

// scheduleNotFound is the hint of a 404 for schedule id.
func scheduleNotFound(err error, id string) error {
	return withHint(err, http.StatusNotFound, "No schedule %q: `chronos schedule list` lists the ids.", id)
}

// schedulePath is /schedules/<id>, escaped.
func schedulePath(id string) string { return "/schedules/" + url.PathEscape(id) }

// ScheduleListCmd is `chronos schedule list`.
type ScheduleListCmd struct {
	apiConn
	Limit  int    `name:"limit" default:"50" help:"Schedules per page (1-500)."`
	Cursor string `name:"cursor" help:"Start at this page: the next_cursor of the page before."`
	All    bool   `name:"all" help:"Follow next_cursor to the last page (with -o json, one document with every schedule)."`
}

// Run lists the schedules.
func (c *ScheduleListCmd) Run(ctx context.Context, env *Env) error {
	cl := c.client()
	var all api.ScheduleList
	var raw []byte
	cursor := c.Cursor
	for {
		q := url.Values{"limit": {strconv.Itoa(c.Limit)}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page api.ScheduleList
		b, err := cl.getJSON(ctx, "/schedules?"+q.Encode(), &page)
		if err != nil {
			return err
		}
		raw = b
		all.Schedules = append(all.Schedules, page.Schedules...)
		all.NextCursor = page.NextCursor
		if !c.All || page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	if c.json() {
		if c.All {
			return encodeJSON(env.Stdout, all)
		}
		return writeJSON(env.Stdout, raw)
	}
	if len(all.Schedules) == 0 {
		fmt.Fprintln(env.Stderr, "No schedules. `chronos schedule upsert --help` says how to create one.")
		return nil
	}
	tw := newTable(env.Stdout)
	row(tw, "ID", "STATE", "TIMING", "ZONE", "WORKFLOW", "NEXT RUN")
	for _, s := range all.Schedules {
		row(tw, s.ID, s.State, timing(s.ScheduleRecord), s.Timezone, s.WorkflowID+"@"+string(s.Version),
			localTime(s.NextRunAt, s.Timezone))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if all.NextCursor != "" {
		fmt.Fprintf(env.Stderr, "More schedules: --cursor %s for the next page, or --all.\n", all.NextCursor)
	}
	return nil
}

// timing says when a schedule fires, in a table cell.
func timing(r *model.ScheduleRecord) string {
	switch r.Kind {
	case model.KindEvery:
		return "every " + seconds(r.EverySeconds)
	case model.KindOnce:
		if r.FireAt != nil {
			return "once at " + utcTime(*r.FireAt)
		}
		return "once"
	}
	if r.Dialect == model.DialectPosix {
		return "cron " + r.CronExpr + " (posix)"
	}
	return "cron " + r.CronExpr
}

// ScheduleGetCmd is `chronos schedule get`.
type ScheduleGetCmd struct {
	ID string `arg:"" predictor:"schedule" help:"The schedule's id."`
	apiConn
	Runs int `name:"runs" default:"10" help:"Recent runs to show (0-100)."`
}

// scheduleExtras are fields of GET /schedules/:id that this CLI shows
// when the API has them, read apart from api.ScheduleDetail so the CLI
// does not depend on them.
type scheduleExtras struct {
	DSTPolicy *struct {
		SpringForward string `json:"spring_forward"`
		FallBack      string `json:"fall_back"`
	} `json:"dst_policy"`
	PauseAfterFailures int        `json:"pause_after_failures"`
	PausedReason       string     `json:"paused_reason"`
	PausedAt           *time.Time `json:"paused_at"`
	PausedNote         string     `json:"paused_note"`
	LastError          string     `json:"last_error"`
}

// Run shows the schedule.
func (c *ScheduleGetCmd) Run(ctx context.Context, env *Env) error {
	var d api.ScheduleDetail
	b, err := c.client().getJSON(ctx, schedulePath(c.ID)+"?runs="+strconv.Itoa(c.Runs), &d)
	if err != nil {
		return scheduleNotFound(err, c.ID)
	}
	if c.json() {
		return writeJSON(env.Stdout, b)
	}
	var x scheduleExtras
	_ = json.Unmarshal(b, &x) // the same body, decoded above
	return printSchedule(env.Stdout, &d, x)
}

// printSchedule writes a schedule for people.
func printSchedule(w io.Writer, d *api.ScheduleDetail, x scheduleExtras) error {
	r := d.ScheduleRecord
	zone := r.Timezone
	// Labels in a fixed width, so a line the API adds (a DST policy, an
	// auto-pause) moves no other.
	tw := labelWriter{w}
	row(tw, "Schedule:", r.ID)
	row(tw, "State:", d.State)
	row(tw, "Workflow:", fmt.Sprintf("%s version %s, for user %s", r.WorkflowID, r.Version, r.UserID))
	row(tw, "Timing:", timing(r)+", zone "+zone)
	if d.Explain != "" {
		row(tw, "Explained:", d.Explain)
	}
	if p := x.DSTPolicy; p != nil {
		row(tw, "DST policy:", fmt.Sprintf("spring forward %s, fall back %s", dash(p.SpringForward), dash(p.FallBack)))
	}
	row(tw, "Policies:", fmt.Sprintf("overlap %s, catch-up %s, jitter %dms", r.OverlapPolicy, r.CatchupPolicy, r.JitterMs))
	if x.PauseAfterFailures > 0 {
		row(tw, "Auto-pause:", fmt.Sprintf("after %d consecutive failed runs", x.PauseAfterFailures))
	}
	if r.StartAt != nil || r.EndAt != nil {
		row(tw, "Window:", fmt.Sprintf("from %s to %s", localTime(r.StartAt, zone), localTime(r.EndAt, zone)))
	}
	if d.State == api.StatePaused {
		p := "yes"
		if x.PausedReason != "" {
			p = x.PausedReason
		}
		if x.PausedAt != nil {
			p += ", since " + localTime(x.PausedAt, zone)
		}
		if x.PausedNote != "" {
			p += ": " + x.PausedNote
		}
		row(tw, "Paused:", p)
		if x.LastError != "" {
			row(tw, "Last error:", oneLine(x.LastError, 200))
		}
	}
	if r.NextRunAt != nil {
		row(tw, "Next run:", localTime(r.NextRunAt, zone)+"  ("+utcTime(*r.NextRunAt)+")")
	}
	if l := d.LastRun; l != nil {
		last := fmt.Sprintf("%s  %s", localTime(&l.RunAt, zone), l.Status)
		if l.Error != "" {
			last += ": " + oneLine(l.Error, 200)
		} else if l.LastError != "" {
			last += fmt.Sprintf(" (%d failed attempts, last: %s)", l.Attempts, oneLine(l.LastError, 200))
		}
		row(tw, "Last run:", last)
	}
	if len(d.PreviewTimes) > 0 {
		fmt.Fprintf(w, "\nNext fire times in %s:\n", zone)
		tw := newTable(w)
		for _, t := range d.PreviewTimes {
			row(tw, "  "+previewLocal(t.Local, zone), t.At, dstNote(string(t.DST)))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(d.PreviewSkipped) > 0 {
		fmt.Fprintln(w, "\nLocal times that do not fire:")
		for _, s := range d.PreviewSkipped {
			fmt.Fprintf(w, "  %s  %s\n", skippedLocal(s.Local, zone), skipReason(s.Reason))
		}
	}
	if len(d.RecentRuns) > 0 {
		fmt.Fprintln(w, "\nRecent runs:")
		if err := printRuns(w, d.RecentRuns, zone, "  "); err != nil {
			return err
		}
	}
	return nil
}

// labelWriter writes rows of a label and a value, the value at column 13.
type labelWriter struct{ w io.Writer }

func (l labelWriter) Write(p []byte) (int, error) {
	label, value, _ := strings.Cut(string(p), "\t")
	_, err := fmt.Fprintf(l.w, "%-11s %s", label, value)
	return len(p), err
}

// previewLocal shows a preview's local time (RFC 3339 with the zone's
// offset) with its weekday and the zone's abbreviation.
func previewLocal(local, zone string) string {
	t, err := time.Parse(time.RFC3339, local)
	if err != nil {
		return local
	}
	return t.In(zoneOf(zone)).Format(localLayout)
}

// skippedLocal shows a local time that did not fire: a wall clock
// without offset (a gap's), or RFC 3339 (the left-out instant of a
// repeated time).
func skippedLocal(local, zone string) string {
	if t, err := time.Parse(model.LocalLayout, local); err == nil {
		return t.Format("Mon 2006-01-02 15:04:05")
	}
	return previewLocal(local, zone)
}

// dstNote explains a preview's DST note.
func dstNote(n string) string {
	switch n {
	case "":
		return ""
	case "repeated":
		return "repeated: clocks fall back, this local time happens twice"
	case "shifted":
		return "shifted: clocks sprang forward over the planned time; fires at the first instant after the gap"
	case "skipped":
		return "skipped: clocks sprang forward over it"
	}
	return n
}

// skipReason explains why a local time did not fire.
func skipReason(r string) string {
	switch r {
	case model.SkipReasonDSTGap:
		return "dst_gap: clocks spring forward over it"
	case "dst_overlap":
		return "dst_overlap: this local time happens twice, and fires at its other instant (dst_policy fall_back)"
	}
	return r
}

// printRuns writes a table of runs, times in zone.
func printRuns(w io.Writer, runs []*model.Run, zone, indent string) error {
	tw := newTable(w)
	row(tw, indent+"RUN AT", "STATUS", "REASON", "SOURCE", "ATTEMPTS", "KEY", "ERROR")
	for _, r := range runs {
		msg := r.Error
		if msg == "" {
			msg = r.LastError
		}
		row(tw, indent+localTime(&r.RunAt, zone), string(r.Status), dash(string(r.Reason)), dash(string(r.Source)),
			strconv.Itoa(r.Attempts), shortKey(r.IdempotencyKey), dash(oneLine(msg, 80)))
	}
	return tw.Flush()
}

// ScheduleUpsertCmd is `chronos schedule upsert`.
type ScheduleUpsertCmd struct {
	apiConn
	File     string        `name:"file" short:"f" help:"A JSON body of POST /schedules/upsert; - reads stdin. Flags set fields over it." predictor:"file"`
	ID       string        `name:"id" help:"schedule_id. Name it, so running the command again updates the schedule instead of creating another."`
	Workflow string        `name:"workflow" help:"workflow_id: the workflow that runs."`
	Version  string        `name:"version" help:"The workflow's version."`
	User     string        `name:"user" help:"user_id: on whose behalf it runs."`
	Cron     string        `name:"cron" help:"cron_expr, e.g. \"0 9 * * 1-5\" (6 fields: seconds first). Kind cron."`
	TZ       string        `name:"tz" help:"timezone: the IANA zone the expression reads its wall clock in (default UTC)."`
	Dialect  string        `name:"dialect" enum:",standard,posix" default:"" help:"The cron grammar: standard (default) or posix."`
	Every    time.Duration `name:"every" help:"Kind every: fire at this interval (whole seconds), e.g. 90s or 1h."`
	At       string        `name:"at" help:"Kind once: fire at this RFC 3339 time."`
	In       time.Duration `name:"in" help:"Kind once: fire this long from now (whole seconds), e.g. 10m."`
	StartAt  string        `name:"start-at" help:"No fire time before this RFC 3339 time."`
	EndAt    string        `name:"end-at" help:"No fire time after this RFC 3339 time."`
	Jitter   time.Duration `name:"jitter" help:"jitter_ms: each run moves by a fixed offset within plus or minus this."`
	Overlap  string        `name:"overlap" enum:",skip,queue,allow" default:"" help:"overlap_policy: skip, queue or allow (the API's default: skip)."`
	Catchup  string        `name:"catchup" enum:",none,latest,fire_immediately,spread" default:"" help:"catchup_policy: none, latest, fire_immediately or spread (the API's default: none)."`
	DST      string        `name:"dst-policy" placeholder:"SPRING,FALL" help:"dst_policy of a cron schedule: spring forward skip (default) or shift, fall back both (default), first or last; one or both, e.g. shift or shift,last."`
	PauseN   *int          `name:"pause-after-failures" placeholder:"N" help:"pause_after_failures: pause the schedule after N consecutive failed runs; 0 never."`
	Paused   *bool         `name:"paused" negatable:"" help:"--paused creates or keeps it paused, --no-paused active; without either an operator's pause is kept."`
	Set      []string      `name:"set" sep:"none" placeholder:"FIELD=VALUE" help:"Any other field of the body, e.g. --set dst_policy=shift; VALUE is read as JSON, or else as a string. Repeatable."`
	Key      string        `name:"idempotency-key" help:"Idempotency-Key header: a retried upsert without --id with the same key creates one schedule."`
}

// body builds the upsert's JSON body: the file's object, then the flags.
func (c *ScheduleUpsertCmd) body() (map[string]any, error) {
	body := map[string]any{}
	if c.File != "" {
		var b []byte
		var err error
		if c.File == "-" {
			b, err = io.ReadAll(os.Stdin)
		} else {
			b, err = os.ReadFile(c.File)
		}
		if err != nil {
			return nil, usageErrorf("--file: %w", err)
		}
		if err := json.Unmarshal(b, &body); err != nil || body == nil {
			return nil, usageErrorf("--file %s: not a JSON object (the body of POST /schedules/upsert): %v", c.File, err)
		}
	}
	set := func(field string, v any) { body[field] = v }
	setStr := func(field, v string) {
		if v != "" {
			set(field, v)
		}
	}
	setStr("schedule_id", c.ID)
	setStr("workflow_id", c.Workflow)
	setStr("version", c.Version)
	setStr("user_id", c.User)
	setStr("timezone", c.TZ)
	setStr("dialect", c.Dialect)
	setStr("start_at", c.StartAt)
	setStr("end_at", c.EndAt)
	setStr("overlap_policy", c.Overlap)
	setStr("catchup_policy", c.Catchup)
	kinds := 0
	if c.Cron != "" {
		kinds++
		set("kind", string(model.KindCron))
		set("cron_expr", c.Cron)
	}
	if c.Every != 0 {
		kinds++
		n, err := wholeSeconds("--every", c.Every)
		if err != nil {
			return nil, err
		}
		set("kind", string(model.KindEvery))
		set("every_seconds", n)
	}
	if c.At != "" {
		kinds++
		set("kind", string(model.KindOnce))
		set("fire_at", c.At)
	}
	if c.In != 0 {
		kinds++
		n, err := wholeSeconds("--in", c.In)
		if err != nil {
			return nil, err
		}
		set("kind", string(model.KindOnce))
		set("delay_seconds", n)
	}
	if kinds > 1 {
		return nil, usageErrorf("give one timing: --cron, --every, --at or --in")
	}
	if c.Jitter != 0 {
		set("jitter_ms", c.Jitter.Milliseconds())
	}
	if c.Paused != nil {
		set("paused", *c.Paused)
	}
	if c.PauseN != nil {
		set("pause_after_failures", *c.PauseN)
	}
	if c.DST != "" {
		p, err := dstPolicyFlag(c.DST)
		if err != nil {
			return nil, err
		}
		set("dst_policy", p)
	}
	for _, kv := range c.Set {
		field, value, ok := strings.Cut(kv, "=")
		if !ok || field == "" {
			return nil, usageErrorf("--set %q: want FIELD=VALUE", kv)
		}
		var v any
		if json.Unmarshal([]byte(value), &v) != nil {
			v = value
		}
		set(field, v)
	}
	return body, nil
}

// dstPolicyFlag reads --dst-policy's compact form ("shift", "last",
// "shift,first") into the body's dst_policy object.
func dstPolicyFlag(v string) (map[string]string, error) {
	p := map[string]string{}
	for _, w := range strings.Split(v, ",") {
		member := ""
		switch w = strings.TrimSpace(w); w {
		case "skip", "shift":
			member = "spring_forward"
		case "both", "first", "last":
			member = "fall_back"
		default:
			return nil, usageErrorf("--dst-policy %q: %q is none of skip, shift (spring forward) and both, first, last (fall back)", v, w)
		}
		if _, dup := p[member]; dup {
			return nil, usageErrorf("--dst-policy %q: two choices for %s", v, member)
		}
		p[member] = w
	}
	return p, nil
}

// wholeSeconds converts a duration flag the API takes in seconds.
func wholeSeconds(flag string, d time.Duration) (int64, error) {
	if d <= 0 || d%time.Second != 0 {
		return 0, usageErrorf("%s %s: must be a positive whole number of seconds", flag, d)
	}
	return int64(d / time.Second), nil
}

// Run upserts the schedule.
func (c *ScheduleUpsertCmd) Run(ctx context.Context, env *Env) error {
	body, err := c.body()
	if err != nil {
		return err
	}
	if len(body) == 0 {
		return usageErrorf("nothing to upsert: give --file, or flags such as --id, --workflow, --version, --user and --cron")
	}
	in, err := json.Marshal(body)
	if err != nil {
		return err
	}
	var hdr http.Header
	if c.Key != "" {
		hdr = http.Header{"Idempotency-Key": {c.Key}}
	}
	b, err := c.client().send(ctx, http.MethodPost, "/schedules/upsert", in, hdr)
	if err != nil {
		return err
	}
	var res api.UpsertResponse
	if err := json.Unmarshal(b, &res); err != nil {
		return fmt.Errorf("POST /schedules/upsert: %w", err)
	}
	for _, w := range res.Warnings {
		fmt.Fprintln(env.Stderr, "warning:", w)
	}
	if c.json() {
		return writeJSON(env.Stdout, b)
	}
	what := "updated"
	switch {
	case res.Created:
		what = "created"
	case !res.Changed:
		what = "unchanged"
	}
	line := fmt.Sprintf("Schedule %s %s: %s", res.ScheduleID, what, res.State)
	if res.NextRunAt != nil {
		tz, _ := body["timezone"].(string)
		line += ", next run " + localTime(res.NextRunAt, tz)
	}
	_, err = fmt.Fprintln(env.Stdout, line)
	return err
}

// SchedulePauseCmd is `chronos schedule pause`.
type SchedulePauseCmd struct {
	ID string `arg:"" predictor:"schedule" help:"The schedule's id."`
	apiConn
	Note string `name:"note" help:"Why it is paused, kept with the schedule (an API that predates notes refuses it)."`
}

// Run pauses the schedule.
func (c *SchedulePauseCmd) Run(ctx context.Context, env *Env) error {
	body := map[string]any{"schedule_id": c.ID, "paused": true}
	if c.Note != "" {
		body["note"] = c.Note
	}
	return setPaused(ctx, env, c.apiConn, c.ID, body)
}

// ScheduleResumeCmd is `chronos schedule resume`.
type ScheduleResumeCmd struct {
	ID string `arg:"" predictor:"schedule" help:"The schedule's id."`
	apiConn
	Catchup string `name:"catchup" enum:",skip,replay" default:"" help:"What was missed while paused: skip it, or replay it (bounded like a backfill). Default: the API's (skip)."`
}

// Run resumes the schedule.
func (c *ScheduleResumeCmd) Run(ctx context.Context, env *Env) error {
	body := map[string]any{"schedule_id": c.ID, "paused": false}
	if c.Catchup != "" {
		body["catchup"] = c.Catchup
	}
	return setPaused(ctx, env, c.apiConn, c.ID, body)
}

// setPaused posts a pause or resume and prints the schedule's state.
func setPaused(ctx context.Context, env *Env, c apiConn, id string, body map[string]any) error {
	var v struct {
		api.ScheduleView
		// Replayed counts the runs a resume with catchup replay created.
		Replayed *int `json:"replayed"`
	}
	b, err := c.client().callJSON(ctx, http.MethodPost, "/schedules/pause", body, &v)
	if err != nil {
		return scheduleNotFound(err, id)
	}
	if c.json() {
		return writeJSON(env.Stdout, b)
	}
	line := fmt.Sprintf("Schedule %s is %s", v.ID, v.State)
	if v.NextRunAt != nil {
		line += ", next run " + localTime(v.NextRunAt, v.Timezone)
	}
	if v.Replayed != nil {
		line += fmt.Sprintf("; %d runs missed while paused replayed", *v.Replayed)
	}
	_, err = fmt.Fprintln(env.Stdout, line)
	return err
}

// ScheduleDeleteCmd is `chronos schedule delete`.
type ScheduleDeleteCmd struct {
	ID string `arg:"" predictor:"schedule" help:"The schedule's id."`
	apiConn
}

// Run deletes the schedule.
func (c *ScheduleDeleteCmd) Run(ctx context.Context, env *Env) error {
	if _, err := c.client().do(ctx, http.MethodDelete, schedulePath(c.ID), nil); err != nil {
		return scheduleNotFound(err, c.ID)
	}
	if c.json() {
		return encodeJSON(env.Stdout, map[string]any{"schedule_id": c.ID, "deleted": true})
	}
	_, err := fmt.Fprintf(env.Stdout, "Schedule %s deleted; its runs stay readable by key for 7 days.\n", c.ID)
	return err
}

// ScheduleRunsCmd is `chronos schedule runs`.
type ScheduleRunsCmd struct {
	ID string `arg:"" predictor:"schedule" help:"The schedule's id."`
	apiConn
	Limit    int    `name:"limit" default:"20" help:"Most runs to list (1-1000)."`
	Status   string `name:"status" enum:",ENQUEUED,STARTED,SUCCESS,FAILED,SKIPPED" default:"" help:"Only runs of this status."`
	Reason   string `name:"reason" help:"Only runs of this reason (why a run was SKIPPED or FAILED: overlap, paused, retries_exhausted, ...; an API that predates reasons refuses it)."`
	Upcoming bool   `name:"upcoming" help:"The runs queued ahead of their time instead, soonest first."`
}

// Run lists the runs.
func (c *ScheduleRunsCmd) Run(ctx context.Context, env *Env) error {
	q := url.Values{"limit": {strconv.Itoa(c.Limit)}}
	if c.Status != "" {
		q.Set("status", c.Status)
	}
	if c.Reason != "" {
		q.Set("reason", c.Reason)
	}
	if c.Upcoming {
		q.Set("upcoming", "true")
	}
	cl := c.client()
	var list api.RunList
	b, err := cl.getJSON(ctx, schedulePath(c.ID)+"/runs?"+q.Encode(), &list)
	if err != nil {
		return scheduleNotFound(err, c.ID)
	}
	if c.json() {
		return writeJSON(env.Stdout, b)
	}
	if len(list.Runs) == 0 {
		fmt.Fprintf(env.Stderr, "No runs of %s match.\n", c.ID)
		return nil
	}
	// Times in the schedule's zone, as `get` shows them.
	var s api.ScheduleView
	if _, err := cl.getJSON(ctx, schedulePath(c.ID)+"?runs=0", &s); err != nil {
		return scheduleNotFound(err, c.ID)
	}
	return printRuns(env.Stdout, list.Runs, s.Timezone, "")
}

// ScheduleTriggerCmd is `chronos schedule trigger`.
type ScheduleTriggerCmd struct {
	ID string `arg:"" predictor:"schedule" help:"The schedule whose workflow, version and user the run takes."`
	apiConn
	At  string `name:"at" help:"scheduled_for: the RFC 3339 time the run is for (default now, to the second)."`
	Key string `name:"idempotency-key" help:"The run's idempotency key (default: one per workflow version and second, so repeating the command within the second starts nothing new)."`
}

// Run starts the run.
func (c *ScheduleTriggerCmd) Run(ctx context.Context, env *Env) error {
	cl := c.client()
	var s api.ScheduleView
	if _, err := cl.getJSON(ctx, schedulePath(c.ID)+"?runs=0", &s); err != nil {
		return scheduleNotFound(err, c.ID)
	}
	if s.Target == model.TargetWake {
		return usageErrorf("%s is an agent's alarm, which wakes its agent rather than running a workflow: nothing to trigger", c.ID)
	}
	at := c.At
	if at == "" {
		at = utcTime(time.Now().Truncate(time.Second))
	}
	body := map[string]any{"workflow_id": s.WorkflowID, "version": string(s.Version), "user_id": s.UserID, "scheduled_for": at}
	if c.Key != "" {
		body["idempotency_key"] = c.Key
	}
	var res api.ManualStartResponse
	b, err := cl.callJSON(ctx, http.MethodPost, "/run-launcher/start", body, &res)
	if err != nil {
		return err
	}
	if c.json() {
		return writeJSON(env.Stdout, b)
	}
	if res.Run == nil {
		return errors.New("POST /run-launcher/start: the answer has no run")
	}
	what := "Started"
	if !res.Started {
		what = "Already started earlier:"
	}
	_, err = fmt.Fprintf(env.Stdout, "%s run %s of %s version %s for %s: %s\n", what, res.Run.IdempotencyKey,
		s.WorkflowID, s.Version, localTime(&res.Run.RunAt, s.Timezone), res.Run.Status)
	return err
}
