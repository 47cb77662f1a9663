package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/chronos-sched/chronos/api"
)

// AlarmCmd is `chronos alarm`: an agent's alarms, as the agent (its
// token's sub, or --owner minted with the API's key).
type AlarmCmd struct {
	Add    AlarmAddCmd    `cmd:"" help:"Set an alarm: once (--in or --at), on a cron expression (--cron) or at an interval (--every) (POST /v1/alarms)."`
	List   AlarmListCmd   `cmd:"" help:"List the agent's alarms, newest first (GET /v1/alarms)."`
	Cancel AlarmCancelCmd `cmd:"" help:"Cancel an alarm: its queued wakes are never delivered (DELETE /v1/alarms/:id)."`
}

// alarmConn is what every alarm command takes: the API, the owner and the
// output.
type alarmConn struct {
	ClientOpts
	OwnerOpts
	OutputOpts
}

// client returns a client with the owner's token.
func (c alarmConn) client() (*apiClient, error) {
	tok, err := c.token(c.ClientOpts)
	if err != nil {
		return nil, err
	}
	return newAPIClient(c.URL, tok), nil
}

// AlarmAddCmd is `chronos alarm add`.
type AlarmAddCmd struct {
	alarmConn
	In           time.Duration `name:"in" help:"Once, this long from now (whole seconds), e.g. 10m."`
	At           string        `name:"at" help:"Once, at this RFC 3339 time."`
	Cron         string        `name:"cron" help:"On this cron expression, e.g. \"0 9 * * 1-5\", in --tz."`
	Every        time.Duration `name:"every" help:"At this interval (whole seconds), e.g. 1h."`
	TZ           string        `name:"tz" help:"The IANA zone of --cron (default UTC)."`
	DST          string        `name:"dst-policy" placeholder:"SPRING,FALL" help:"dst_policy of --cron: shift, last, shift,first... (as schedule upsert's)."`
	Label        string        `name:"label" help:"A one-line name for lists."`
	Message      string        `name:"message" short:"m" help:"wake_message: what the wake tells the agent."`
	Payload      string        `name:"payload" help:"A JSON value handed back in the wake, byte for byte."`
	Conversation string        `name:"conversation" help:"conversation_id the wake belongs to."`
	Key          string        `name:"idempotency-key" help:"Setting the same key again returns the first alarm instead of a second."`
	MaxFailures  int           `name:"max-failures" help:"Failed wake deliveries before a once alarm fails (1-25; the API's default otherwise)."`
}

// Run sets the alarm.
func (c *AlarmAddCmd) Run(ctx context.Context, env *Env) error {
	body := map[string]any{}
	kinds := 0
	if c.In != 0 {
		kinds++
		n, err := wholeSeconds("--in", c.In)
		if err != nil {
			return err
		}
		body["kind"], body["delay_seconds"] = "once", n
	}
	if c.At != "" {
		kinds++
		body["kind"], body["fire_at"] = "once", c.At
	}
	if c.Cron != "" {
		kinds++
		body["kind"], body["cron_expr"] = "cron", c.Cron
	}
	if c.Every != 0 {
		kinds++
		n, err := wholeSeconds("--every", c.Every)
		if err != nil {
			return err
		}
		body["kind"], body["every_seconds"] = "every", n
	}
	if kinds != 1 {
		return usageErrorf("give one of --in, --at, --cron and --every")
	}
	for field, v := range map[string]string{"timezone": c.TZ, "label": c.Label, "wake_message": c.Message,
		"conversation_id": c.Conversation, "idempotency_key": c.Key} {
		if v != "" {
			body[field] = v
		}
	}
	if c.Payload != "" {
		if !json.Valid([]byte(c.Payload)) {
			return usageErrorf("--payload must be JSON, e.g. '{\"build\": 42}'")
		}
		body["payload"] = json.RawMessage(c.Payload)
	}
	if c.DST != "" {
		p, err := dstPolicyFlag(c.DST)
		if err != nil {
			return err
		}
		body["dst_policy"] = p
	}
	if c.MaxFailures != 0 {
		body["max_failures"] = c.MaxFailures
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	var a struct {
		api.AlarmView
		Deduped bool `json:"deduped"`
	}
	b, err := cl.callJSON(ctx, http.MethodPost, "/v1/alarms", body, &a)
	if err != nil {
		return err
	}
	if c.json() {
		return writeJSON(env.Stdout, b)
	}
	what := "set"
	if a.Deduped {
		what = "already set (same --idempotency-key)"
	}
	line := fmt.Sprintf("Alarm %s %s: %s", a.ID, what, alarmTiming(a.AlarmView))
	if a.NextFireAt != nil {
		line += ", next " + localTime(a.NextFireAt, a.Timezone)
	}
	_, err = fmt.Fprintln(env.Stdout, line)
	return err
}

// alarmTiming says when an alarm fires, in a table cell.
func alarmTiming(a api.AlarmView) string {
	switch a.Kind {
	case "cron":
		return "cron " + a.CronExpr
	case "every":
		return "every " + seconds(a.EverySeconds)
	}
	if a.FireAt != nil {
		return "once at " + utcTime(*a.FireAt)
	}
	return a.Kind
}

// AlarmListCmd is `chronos alarm list`.
type AlarmListCmd struct {
	alarmConn
	Status string `name:"status" enum:",active,fired,cancelled,failed" default:"" help:"Only alarms of this status."`
	Limit  int    `name:"limit" help:"Most alarms to list (default: all, up to the API's maximum)."`
}

// Run lists the alarms.
func (c *AlarmListCmd) Run(ctx context.Context, env *Env) error {
	q := url.Values{}
	if c.Status != "" {
		q.Set("status", c.Status)
	}
	if c.Limit != 0 {
		q.Set("limit", strconv.Itoa(c.Limit))
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	var list api.AlarmList
	path := "/v1/alarms"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	b, err := cl.getJSON(ctx, path, &list)
	if err != nil {
		return err
	}
	if c.json() {
		return writeJSON(env.Stdout, b)
	}
	if len(list.Alarms) == 0 {
		fmt.Fprintln(env.Stderr, "No alarms. `chronos alarm add --in 10m --message ...` sets one.")
		return nil
	}
	tw := newTable(env.Stdout)
	row(tw, "ID", "STATUS", "TIMING", "ZONE", "NEXT", "FAILURES", "LABEL")
	for _, a := range list.Alarms {
		status := a.Status
		if a.Paused {
			status += " (paused)"
		}
		row(tw, a.ID, status, alarmTiming(a), dash(a.Timezone), localTime(a.NextFireAt, a.Timezone),
			fmt.Sprintf("%d/%d", a.FailureCount, a.MaxFailures), dash(oneLine(a.Label, 60)))
	}
	return tw.Flush()
}

// AlarmCancelCmd is `chronos alarm cancel`.
type AlarmCancelCmd struct {
	ID string `arg:"" predictor:"alarm" help:"The alarm's id."`
	alarmConn
}

// Run cancels the alarm.
func (c *AlarmCancelCmd) Run(ctx context.Context, env *Env) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	var a api.AlarmView
	b, err := cl.callJSON(ctx, http.MethodDelete, "/v1/alarms/"+url.PathEscape(c.ID), nil, &a)
	if err != nil {
		return withHint(err, http.StatusNotFound, "No alarm %q of this agent: `chronos alarm list` lists its ids.", c.ID)
	}
	if c.json() {
		return writeJSON(env.Stdout, b)
	}
	_, err = fmt.Fprintf(env.Stdout, "Alarm %s is %s.\n", a.ID, a.Status)
	return err
}
