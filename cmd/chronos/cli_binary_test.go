package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/queue/queuetest"
)

// The built binary ends with the exit status of docs/cli.md, its error on
// stderr and nothing on stdout, and answers a shell's completion request.
func TestCLIBinaryExitStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the chronos binary; runs without -short")
	}
	t.Parallel()
	b := setupCLI(t)
	bin, err := queuetest.BuildChronos(context.Background(), t.TempDir())
	require.NoError(t, err)
	closed := "http://" + queuetest.RefusedAddr(t)

	run := func(env []string, args ...string) (stdout, stderr string, code int) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "CHRONOS_URL=" + b.base}, env...)
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return out.String(), errOut.String(), exit.ExitCode()
		}
		require.NoError(t, err)
		return out.String(), errOut.String(), 0
	}
	admin := []string{"CHRONOS_TOKEN=" + b.admin}
	for _, tc := range []struct {
		env  []string
		args []string
		code int
		says string
	}{
		{admin, []string{"schedule", "list"}, ExitOK, ""},
		{admin, []string{"schedule", "list", "--colour"}, ExitUsage, "chronos: unknown flag --colour"},
		{admin, []string{"schedule", "get", "nope"}, ExitNotFound, "chronos: GET /schedules/nope?runs=10: chronos answered 404"},
		{admin, []string{"schedule", "upsert", "--id", "x", "--cron", "* * * * *"}, ExitUsage, "chronos answered 400"},
		{nil, []string{"schedule", "list"}, ExitAuth, "chronos answered 401"},
		{[]string{"CHRONOS_URL=" + closed}, []string{"schedule", "list"}, ExitUnavailable, "Is it running there?"},
	} {
		stdout, stderr, code := run(tc.env, tc.args...)
		require.Equal(t, tc.code, code, "%v: %s", tc.args, stderr)
		if tc.code != ExitOK {
			require.Empty(t, stdout, "%v", tc.args)
			require.Contains(t, stderr, tc.says, "%v", tc.args)
		}
	}
	stdout, stderr, code := run([]string{"COMP_LINE=chronos schedule re"})
	require.Equal(t, ExitOK, code, stderr)
	require.ElementsMatch(t, []string{"resume"}, strings.Fields(stdout))
}
