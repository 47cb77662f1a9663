package main

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPreviewCommandDSTPolicy: chronos preview --dst-policy moves the fire
// times as the schedule would fire and says why.
func TestPreviewCommandDSTPolicy(t *testing.T) {
	t.Parallel()
	run := func(args ...string) string {
		var out bytes.Buffer
		err := execute(context.Background(), append([]string{"preview", "--tz", "America/New_York", "--count", "2"}, args...),
			&Env{Stdout: &out, Stderr: io.Discard})
		require.NoError(t, err)
		return out.String()
	}
	require.Equal(t, "At 02:30, in America/New_York\n"+
		"2026-03-08T07:00:00Z  2026-03-08T03:00:00-04:00  shifted: local times clocks skipped just before fire here\n"+
		"2026-03-09T06:30:00Z  2026-03-09T02:30:00-04:00\n",
		run("--cron", "30 2 * * *", "--after", "2026-03-07T12:00:00Z", "--dst-policy", "shift"))
	require.Equal(t, "At 01:30, in America/New_York\n"+
		"2026-11-01T06:30:00Z  2026-11-01T01:30:00-05:00  repeated: this local time happens twice and fires once (last)\n"+
		"2026-11-02T06:30:00Z  2026-11-02T01:30:00-05:00\n"+
		"skipped 2026-11-01T01:30:00-04:00  dst_overlap: this local time happens twice and fires at its other instant\n",
		run("--cron", "30 1 * * *", "--after", "2026-10-31T12:00:00Z", "--dst-policy", "last"))

	err := execute(context.Background(), []string{"preview", "--cron", "0 2 * * *", "--dst-policy", "sideways"},
		&Env{Stdout: io.Discard, Stderr: io.Discard})
	require.ErrorContains(t, err, `--dst-policy: unknown value "sideways"`)
}
