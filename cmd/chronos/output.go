package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/chronos-sched/chronos/model"
)

// Output formats of the API commands.
const (
	outputTable = "table"
	outputJSON  = "json"
)

// OutputOpts choose how an API command prints its answer.
type OutputOpts struct {
	Output string `name:"output" short:"o" env:"CHRONOS_OUTPUT" default:"table" enum:"table,json" help:"table: for people (tables, local times); json: the API's JSON answer, one document, for scripts."`
}

// json reports whether the answer is printed as the API's JSON.
func (o OutputOpts) json() bool { return o.Output == outputJSON }

// apiConn is what every schedule and workflow command takes: where the API
// is, and how to print.
type apiConn struct {
	ClientOpts
	OutputOpts
}

func (c apiConn) client() *apiClient { return newAPIClient(c.URL, c.Token) }

// writeJSON prints an API answer as it came, ending with a newline.
func writeJSON(w io.Writer, b []byte) error {
	b = []byte(strings.TrimRight(string(b), "\n"))
	_, err := fmt.Fprintf(w, "%s\n", b)
	return err
}

// encodeJSON prints v as one JSON document (for answers the CLI builds,
// such as a delete's, whose API answer has no body).
func encodeJSON(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

// newTable returns a tabwriter for aligned columns; Flush prints it.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// row writes one tab-separated row; empty cells at its end are left
// out, so no line ends in spaces.
func row(tw io.Writer, cols ...string) {
	for len(cols) > 1 && cols[len(cols)-1] == "" {
		cols = cols[:len(cols)-1]
	}
	fmt.Fprintln(tw, strings.Join(cols, "\t"))
}

// localLayout is how times are shown to people: the weekday, the wall
// clock and the zone's abbreviation.
const localLayout = "Mon 2006-01-02 15:04:05 MST"

// zoneOf loads zone, UTC when it is empty or unknown here.
func zoneOf(zone string) *time.Location {
	loc, err := model.LoadZone(zone)
	if err != nil {
		return time.UTC
	}
	return loc
}

// localTime shows t in zone; "-" for nil.
func localTime(t *time.Time, zone string) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.In(zoneOf(zone)).Format(localLayout)
}

// utcTime shows t as RFC 3339 in UTC.
func utcTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// seconds shows a number of seconds as a short duration: 90 is "1m30s",
// 3600 is "1h".
func seconds(s int64) string {
	d := (time.Duration(s) * time.Second).String()
	if strings.HasSuffix(d, "m0s") {
		d = strings.TrimSuffix(d, "0s")
	}
	if strings.HasSuffix(d, "h0m") {
		d = strings.TrimSuffix(d, "0m")
	}
	return d
}

// dash is s, or "-" when empty (a table cell must not be empty).
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine cuts s to its first line and at most n runes, for a table cell.
func oneLine(s string, n int) string {
	s, _, cut := strings.Cut(s, "\n")
	if r := []rune(s); len(r) > n {
		s, cut = string(r[:n]), true
	}
	if cut {
		s += "…"
	}
	return s
}

// shortKey shows the first 12 hex digits of an idempotency key, enough
// to tell runs apart; -o json has the whole key.
func shortKey(k string) string {
	if len(k) > 12 {
		return k[:12]
	}
	return k
}
